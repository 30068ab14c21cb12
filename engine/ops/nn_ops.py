"""Neural-network ops: layer norm, embedding, dropout, and the ``.Scalar`` arithmetic overloads
that ATen's C++ composites call (the losses are in loss.py).

As in ATen, layer norm and embedding are primitives with their own backward *op*
(``native_layer_norm_backward``, ``embedding_dense_backward``): the node's formula calls that
op, and that op has formulas of its own, so double backward records
``NativeLayerNormBackwardBackward0`` like PyTorch. Dropout is not a primitive on the CPU: PyTorch
multiplies by a random mask (``MulBackward0``), and so does the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _dtype
from engine._tensor import Tensor
from engine.ops._dispatch import composite, inplace_variant, op
from engine.ops._samples import Lit, SampleInput, T
from engine.ops.activation import silu
from engine.ops.complex import handle_r_to_c
from engine.ops.pointwise import _conj_scalar

Array = np.ndarray


# --- layer norm ---------------------------------------------------------------------------------


def _norm_axes(ndim: int, normalized_shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(range(ndim - len(normalized_shape), ndim))


def _check_layer_norm(
    input: Array,
    normalized_shape: Sequence[int],
    weight: Array | None,
    bias: Array | None,  # noqa: A002
) -> None:
    shape = list(normalized_shape)
    if not shape:
        raise RuntimeError(
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
            f"element, but got normalized_shape = {shape}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and list(t.shape) != shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                f"{list(t.shape)} and normalized_shape = {shape}"
            )
    if input.ndim < len(shape) or list(input.shape[input.ndim - len(shape) :]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={shape}, expected input with shape [*, {', '.join(map(str, shape))}], "
            f"but got input of size{list(input.shape)}"
        )


def _layer_norm_grads(
    grad: Tensor,
    input: Tensor,  # noqa: A002
    normalized_shape: Sequence[int],
    result1: Tensor,
    result2: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    which: int,
) -> Tensor | None:
    # PyTorch's one formula for ``input, weight, bias`` computes the three gradients in a single
    # native_layer_norm_backward call; the engine asks for one gradient per input.
    mask = [i == which for i in range(3)]
    return native_layer_norm_backward(grad, input, normalized_shape, result1, result2, weight, bias, mask)[
        which
    ]  # type: ignore[no-any-return]


@op(
    derivatives={
        "input": lambda grad, input, normalized_shape, result1, result2, weight, bias: _layer_norm_grads(  # noqa: A006
            grad, input, normalized_shape, result1, result2, weight, bias, 0
        ),
        "weight": lambda grad, input, normalized_shape, result1, result2, weight, bias: _layer_norm_grads(  # noqa: A006
            grad, input, normalized_shape, result1, result2, weight, bias, 1
        ),
        "bias": lambda grad, input, normalized_shape, result1, result2, weight, bias: _layer_norm_grads(  # noqa: A006
            grad, input, normalized_shape, result1, result2, weight, bias, 2
        ),
    },
    outputs=("result0", "result1", "result2"),
    # mean and rstd are outputs without a gradient: the formula only reads ``grad``.
    differentiable_outputs=(True, False, False),
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), (3,), T.of(3), T.of(3), 1e-5)),
        SampleInput((T.of(2, 3, 4), (3, 4), T.of(3, 4), T.of(3, 4), 1e-5), note="2-d normalized shape"),
        SampleInput((T.of(4, 5), (5,), None, None, 1e-5), note="no affine"),
        SampleInput((T.of(2, 3), (3,), T.of(3), None, 1e-3), note="no bias"),
        SampleInput((T.of(2, 3), (3,), T((3,), grad=False), T.of(3), 1e-5), note="frozen weight"),
        SampleInput((T.of(3, 2), (2,), T.of(2), T.of(2), 1e-5), note="two features"),
    ],
)
def native_layer_norm(
    input: Tensor,  # noqa: A002 - PyTorch's parameter name
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    bias: Tensor | None,
    eps: float,
) -> tuple[Array, Array, Array]:
    _check_layer_norm(input, normalized_shape, weight, bias)
    axes = _norm_axes(input.ndim, normalized_shape)
    mean = input.mean(axis=axes, keepdims=True)
    centered = input - mean
    rstd = 1.0 / np.sqrt((centered * centered).mean(axis=axes, keepdims=True) + eps)
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def _layer_norm_double_backward(
    input: Tensor,  # noqa: A002
    weight: Tensor | None,
    ggI: Tensor | None,  # noqa: N803 - the names of PyTorch's layer_norm_double_backward
    ggG: Tensor | None,  # noqa: N803
    ggB: Tensor | None,  # noqa: N803
    gO: Tensor,  # noqa: N803
    mean: Tensor,
    rstd: Tensor,
    normalized_shape: Sequence[int],
    which: str,
) -> Tensor | None:
    """One of the three gradients of ``native_layer_norm_backward`` (PyTorch's
    ``layer_norm_double_backward``), written with differentiable ops.

    With x̂ = (x - mean) * rstd, g = gO * weight and E[.] the mean over the normalized dims,
    the first backward is ``gI = rstd * P(g)`` where ``P(v) = v - E[v] - x̂ E[v x̂]`` (P is
    self-adjoint), ``gW = Σ gO x̂`` and ``gB = Σ gO``. mean and rstd are saved constants, but
    they depend on x: ``d rstd / dx = -rstd² x̂ / N`` and x̂ moves through ``rstd * P``; the
    formulas below differentiate through both.
    """
    axes = _norm_axes(input.ndim, normalized_shape)
    batch_axes = tuple(range(input.ndim - len(normalized_shape)))
    n = math.prod(normalized_shape)

    def e(v: Tensor) -> Tensor:
        return v.sum(axes, keepdim=True) / n

    def p(v: Tensor) -> Tensor:
        return v - e(v) - xhat * e(v * xhat)

    xhat = (input - mean) * rstd
    g = gO * weight if weight is not None else gO
    if which == "grad_out":
        out: Tensor | None = None
        if ggI is not None:
            out = rstd * p(ggI) * weight if weight is not None else rstd * p(ggI)
        if ggG is not None:
            out = ggG * xhat if out is None else out + ggG * xhat
        if ggB is not None:
            out = ggB.expand(tuple(gO.shape)) if out is None else out + ggB
        return out
    if which == "weight":
        if ggI is None:
            return None
        per_row = gO * rstd * p(ggI)
        return per_row.sum(batch_axes) if batch_axes else per_row
    # which == "input"
    w: Tensor | None = None
    if ggI is not None:
        w = -rstd * (ggI * e(g * xhat) + g * e(ggI * xhat))
    if ggG is not None:
        w = ggG * gO if w is None else w + ggG * gO
    if w is None:
        return None
    gI = rstd * p(w)  # noqa: N806
    if ggI is not None:
        s = e(ggI * g) - e(ggI) * e(g) - e(ggI * xhat) * e(g * xhat)
        gI = gI - rstd * rstd * xhat * s  # noqa: N806
    return gI


def _lnbb(which: str) -> Any:
    return lambda grads, input, weight, grad_out, mean, rstd, normalized_shape: _layer_norm_double_backward(  # noqa: A006
        input, weight, grads[0], grads[1], grads[2], grad_out, mean, rstd, normalized_shape, which
    )


@op(
    derivatives={
        "grad_out": _lnbb("grad_out"),
        "input": _lnbb("input"),
        "weight": _lnbb("weight"),
        # The gradients do not depend on bias.
        "bias": lambda: None,
    },
    outputs=("result0", "result1", "result2"),
    method=False,
    function=False,
)
def native_layer_norm_backward(
    grad_out: Tensor,
    input: Tensor,  # noqa: A002
    normalized_shape: Sequence[int],
    mean: Tensor,
    rstd: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    output_mask: Sequence[bool],
) -> tuple[Array, Array, Array]:
    axes = _norm_axes(input.ndim, normalized_shape)
    batch_axes = tuple(range(input.ndim - len(normalized_shape)))
    xhat = (input - mean) * rstd
    g = grad_out * weight if weight is not None else grad_out
    d_input = rstd * (g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True))
    # Without weight or bias there is nothing to differentiate: zeros keep the result a tensor.
    shape = tuple(normalized_shape)
    d_weight = (grad_out * xhat).sum(axis=batch_axes) if weight is not None else np.zeros(shape, input.dtype)
    d_bias = grad_out.sum(axis=batch_axes) if bias is not None else np.zeros(shape, input.dtype)
    return d_input, np.asarray(d_weight), np.asarray(d_bias)


@composite(
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), (3,), T.of(3), T.of(3))),
        SampleInput((T.of(2, 3), [3]), note="no affine"),
    ],
)
def layer_norm(
    input: Tensor,  # noqa: A002
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Tensor:
    """``torch.layer_norm``: the first output of ``native_layer_norm``."""
    return native_layer_norm(input, list(normalized_shape), weight, bias, eps)[0]  # type: ignore[no-any-return]


# --- embedding ----------------------------------------------------------------------------------


def _check_indices(indices: Array, fn: str) -> None:
    if indices.dtype not in (np.int64, np.int32):
        name = _dtype.from_numpy(indices.dtype)._legacy_name
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
            f"Int; but got engine.{name} instead (while checking arguments for {fn})"
        )


@op(
    derivatives={
        "weight": lambda grad, indices, weight_sym_argsize_0, padding_idx, scale_grad_by_freq, sparse: (
            _embedding_backward(grad, indices, weight_sym_argsize_0, padding_idx, scale_grad_by_freq, sparse)
        )
    },
    dtypes="keep",
    method=False,
    samples=lambda: [
        SampleInput((T.of(6, 3), Lit([[0, 2], [5, 0]]))),
        SampleInput((T.of(6, 3), Lit([1, 1, 4]), 1), note="padding_idx", gradcheck=False),
        SampleInput((T.of(5, 2), Lit([3, 3, 0, 3]), -1, True), note="scale_grad_by_freq", gradcheck=False),
        SampleInput((T.of(4, 2), Lit(2)), note="0-d indices"),
    ],
)
def embedding(
    weight: Tensor,
    indices: Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Array:
    _check_indices(indices, "embedding")
    if indices.size > 0 and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")
    # take() copies even for 0-d indices (plain indexing would return a view of weight).
    return np.take(weight, indices, axis=0)


def _embedding_backward(
    grad: Tensor, indices: Tensor, num_weights: int, padding_idx: int, scale_grad_by_freq: bool, sparse: bool
) -> Tensor:
    if sparse:
        raise RuntimeError(
            "engine has no sparse tensors: embedding(..., sparse=True) cannot be differentiated"
        )
    return embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq)  # type: ignore[no-any-return]


def _embedding_dense_double_backward(grad: Tensor, indices: Tensor, padding_idx: int) -> Tensor:
    # Rows for padding_idx got no gradient in the first backward, so they pass none on. The
    # frequency scaling is not repeated here, as in PyTorch.
    out: Tensor = embedding(grad, indices)
    if padding_idx >= 0:
        out = out * (indices != padding_idx).unsqueeze(-1)
    return out


@op(
    derivatives={
        "grad_output": lambda grad, indices, padding_idx: _embedding_dense_double_backward(
            grad, indices, padding_idx
        )
    },
    dtypes="keep",
    method=False,
    function=False,
)
def embedding_dense_backward(
    grad_output: Tensor, indices: Tensor, num_weights: int, padding_idx: int, scale_grad_by_freq: bool
) -> Array:
    flat = indices.reshape(-1)
    rows = grad_output.reshape(flat.size, -1)
    if scale_grad_by_freq:
        counts = np.bincount(flat, minlength=num_weights)
        rows = rows / counts[flat][:, None]
    if padding_idx >= 0:
        keep = flat != padding_idx
        flat, rows = flat[keep], rows[keep]
    out = np.zeros((num_weights, rows.shape[1]), dtype=grad_output.dtype)
    np.add.at(out, flat, rows)
    return out


# --- Scalar overloads ---------------------------------------------------------------------------
# C++ composites such as cross_entropy compute ``(1 - label_smoothing) * loss`` with a C++ double,
# which calls the ``.Scalar`` overloads (MulBackward1, DivBackward1, AddBackward1), not
# ``mul.Tensor`` with a wrapped number as Python's ``x * 2.0`` does.


def _scalar_result(self: Array, scalar: complex, value: Array) -> Array:
    """``value``, computed from ``self`` and the Python number ``scalar``, in PyTorch's result dtype
    (``result_type``: the number decides the category, e.g. int tensor * 2.5 is float, never the width)."""
    return np.asarray(value).astype(_dtype.result_type([Tensor._make(self), scalar])._np, copy=False)


def _scalar_samples(*scalars: complex) -> list[SampleInput]:
    return [
        *(SampleInput((T.of(2, 3), s)) for s in scalars),
        SampleInput((T.complex(2, 3), 1.5 - 2j), note="complex"),
        SampleInput((T.complex(2, 3), 2.5), note="complex tensor real scalar"),
        SampleInput((T.of(2, 3), 0.5 + 1j), note="real tensor complex scalar"),
    ]


@op(
    derivatives={
        "self": lambda grad, other, self_scalar_type: handle_r_to_c(
            self_scalar_type, grad * _conj_scalar(other)
        )
    },
    name="mul.Scalar",
    node="MulBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: _scalar_samples(2.5, 3),
)
def mul_Scalar(self: Tensor, other: float) -> Array:  # noqa: N802 - aten overload name
    return _scalar_result(self, other, self * other)


@op(
    derivatives={
        "self": lambda grad, other, self_scalar_type: handle_r_to_c(
            self_scalar_type, grad / _conj_scalar(other)
        )
    },
    name="div.Scalar",
    node="DivBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: _scalar_samples(2.5, 4),
)
def div_Scalar(self: Tensor, other: complex) -> Array:  # noqa: N802
    # A true division: integers divided by an integer give the default float dtype.
    return _scalar_result(self, other if isinstance(other, complex) else float(other), self / other)


@op(
    derivatives={"self": lambda grad, self_scalar_type: handle_r_to_c(self_scalar_type, grad)},
    name="add.Scalar",
    node="AddBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [*_scalar_samples(2.5), SampleInput((T.of(2, 3), 1, 2))],
)
def add_Scalar(self: Tensor, other: float, alpha: float = 1) -> Array:  # noqa: N802
    # The number's category decides the dtype (True stays bool); a float alpha, which torch refuses
    # for an integral tensor, has always made the engine's result float.
    scalar = alpha * other if isinstance(alpha, float) else other
    return _scalar_result(self, scalar, self + alpha * other)


# --- dropout ------------------------------------------------------------------------------------


def _dropout_noise(input: Tensor, p: float) -> Tensor:  # noqa: A002
    """ATen's ``empty_like(input).bernoulli_(1 - p).div_(1 - p)``, drawn from the engine's global
    generator (so ``fork_rng`` and checkpoint's RNG replay see it)."""
    from engine.random import default_generator

    keep = default_generator._np.random(tuple(input.shape)) < (1 - p)
    return Tensor._make((keep / (1 - p)).astype(input.dtype._np))


@composite(method=False)
def dropout(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``torch.dropout``. On the CPU it is not a primitive: the input is multiplied by a scaled
    random mask, so the graph records ``MulBackward0`` saving the mask."""
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        return input * Tensor._make(np.zeros((), input.dtype._np))
    return input * _dropout_noise(input, p)


@composite(method=False)
def dropout_(input: Tensor, p: float, train: bool) -> Tensor:  # noqa: A002
    """``torch.dropout_``: the same, multiplying in place."""
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(Tensor._make(np.zeros((), input.dtype._np)))
    return input.mul_(_dropout_noise(input, p))


# F.silu(x, inplace=True).
silu_ = inplace_variant(silu)


# --- one_hot ------------------------------------------------------------------------------------


@op(
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((Lit([1, 0, 3]),)),
        SampleInput((Lit([[1, 0], [2, 2]]), 4), note="num_classes"),
        SampleInput((Lit([1, 5]), 3), note="too small"),
        SampleInput((Lit([-1, 2]),), note="negative"),
        SampleInput((Lit([1.0, 2.0], "float64"),), note="float"),
        SampleInput((Lit([], "int64"),), note="empty"),
        SampleInput((Lit([], "int64"), 3), note="empty num_classes"),
    ],
)
def one_hot(self: Tensor, num_classes: int = -1) -> Array:
    """ATen's ``one_hot`` (a composite of ``zeros`` and ``scatter_``; an int64 result, no grad)."""
    if self.dtype != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if self.size == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return np.zeros((*self.shape, num_classes), np.int64)
    if self.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(self.max()) + 1
    elif num_classes <= self.max():
        raise RuntimeError("Class values must be smaller than num_classes.")
    return (self[..., None] == np.arange(num_classes)).astype(np.int64)
