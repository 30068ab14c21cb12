"""Softmax, log_softmax and logsumexp: the reductions that normalise exponentials.

``softmax`` and ``log_softmax`` are PyTorch's ``_softmax`` / ``_log_softmax`` ops behind a router that
applies ``dtype``; their backward is an op of its own (``_softmax_backward_data``), whose row in
derivatives.yaml gives double backward (``SoftmaxBackwardDataBackward0``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine import _dtype
from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import _scalar_type_name, composite, op
from engine.ops._samples import SampleInput, T
from engine.ops.reduction import Dims, _dims, _unsqueeze_multiple

Array = np.ndarray


# --- logsumexp ------------------------------------------------------------------------------------


def _logsumexp_backward(grad: Tensor, self: Tensor, result: Tensor, dim: Dims, keepdim: bool) -> Tensor:
    if not keepdim and self.ndim != 0:
        grad = _unsqueeze_multiple(grad, dim, self.ndim)
        result = _unsqueeze_multiple(result, dim, self.ndim)
    return grad * (self - result).exp().conj()


@op(
    derivatives={"self": _logsumexp_backward},
    dtypes="float",
    samples=lambda: [
        SampleInput((T.of(2, 3), [1])),
        SampleInput((T.of(2, 3, 4), [0, 2], True)),
        SampleInput((T((2, 3), 300.0, 400.0), [1]), note="large"),
        SampleInput((T.complex(2, 3), [1]), note="complex"),
        SampleInput((T.complex(2, 3, low=300.0, high=400.0), [0, 1]), note="complex large"),
    ],
)
def logsumexp(self: Tensor, dim: Dims, keepdim: bool = False) -> Array:
    dims = _dims(dim, self.ndim)
    if not dims:  # a 0-dim tensor: log(exp(x)) is x
        return self.copy()
    if self.size == 0:
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(self), axis=dims, keepdims=keepdim))
    # The real parts' max, as PyTorch: a complex result keeps its imaginary part in (-pi, pi].
    maxes = np.max(np.real(self), axis=dims, keepdims=True)
    maxes = np.where(np.isinf(maxes), 0, maxes)  # all -inf (or an inf) must not give inf - inf
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(self - maxes), axis=dims, keepdims=True)) + maxes
    return out if keepdim else out.squeeze(dims)


# --- softmax, log_softmax -------------------------------------------------------------------------


def _check_softmax_dtype(name: str, a: Array, d: int) -> None:
    if not np.issubdtype(a.dtype, np.floating):
        kind = "lastdim_kernel_impl" if d == a.ndim - 1 or a.ndim == 0 else "kernel_impl"
        raise NotImplementedError(f"\"{name}_{kind}\" not implemented for '{_scalar_type_name(a.dtype)}'")


def _softmax_double_backward(grad: Tensor, grad_output: Tensor, dim: int, output: Tensor) -> Tensor:
    return (
        grad_output * grad
        - (output * grad_output).sum(dim, True) * grad
        - grad_output * (output * grad).sum(dim, True)
    )


@op(
    derivatives={
        "grad_output": lambda grad, output, dim, input_dtype: _softmax_backward_data(
            grad, output, dim, input_dtype
        ),
        "output": _softmax_double_backward,
    },
    method=False,
    function=False,
)
def _softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int, input_dtype: Any) -> Array:
    axis = dim if output.ndim else None
    return output * (grad_output - np.sum(grad_output * output, axis=axis, keepdims=True))


@op(
    derivatives={
        "grad_output": lambda grad, output, dim: grad - (grad * output.exp()).sum(dim, True),
        "output": lambda grad, grad_output, dim, output: -grad_output.sum(dim, True) * output.exp() * grad,
    },
    method=False,
    function=False,
)
def _log_softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int, input_dtype: Any) -> Array:
    axis = dim if output.ndim else None
    return grad_output - np.exp(output) * np.sum(grad_output, axis=axis, keepdims=True)


def _softmax_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3), 1, False)),
        SampleInput((T.of(2, 3, 4), 0, False)),
        SampleInput((T((2, 3), -50.0, 50.0), -1, False), note="wide range"),
        SampleInput((T.of(), 0, False)),
    ]


@op(
    derivatives={
        "self": lambda grad, result, dim, self_scalar_type: _softmax_backward_data(
            grad, result, dim, self_scalar_type
        )
    },
    dtypes="keep",
    method=False,
    function=False,
    samples=_softmax_samples,
)
def _softmax(self: Tensor, dim: int, half_to_float: bool) -> Array:
    d = _wrap_dim(dim, self.ndim)
    _check_softmax_dtype("softmax", self, d)
    if self.ndim == 0:
        return np.ones_like(self)
    e = np.exp(self - np.max(self, axis=d, keepdims=True))
    return e / np.sum(e, axis=d, keepdims=True)


@op(
    derivatives={
        "self": lambda grad, result, dim, self_scalar_type: _log_softmax_backward_data(
            grad, result, dim, self_scalar_type
        )
    },
    dtypes="keep",
    method=False,
    function=False,
    samples=_softmax_samples,
)
def _log_softmax(self: Tensor, dim: int, half_to_float: bool) -> Array:
    d = _wrap_dim(dim, self.ndim)
    _check_softmax_dtype("log_softmax", self, d)
    if self.ndim == 0:
        return np.zeros_like(self)
    shifted = self - np.max(self, axis=d, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=d, keepdims=True))


def _softmax_router_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3), 1)),
        SampleInput((T((2, 3), dtype="float32"), 0), {"dtype": _dtype.float64}),
        SampleInput((T.of(2, 3), -1, None)),
    ]


@composite(samples=_softmax_router_samples)
def softmax(self: Tensor, dim: int, dtype: Any = None) -> Tensor:
    converted = self.to(dtype) if dtype is not None else self
    return _softmax(converted, dim, False)


@composite(samples=_softmax_router_samples)
def log_softmax(self: Tensor, dim: int, dtype: Any = None) -> Tensor:
    converted = self.to(dtype) if dtype is not None else self
    return _log_softmax(converted, dim, False)
