"""Batch, instance and group normalization: ``native_batch_norm`` and ``native_group_norm``, and
the composites PyTorch builds on them (``batch_norm``, ``instance_norm``, ``group_norm``).

Note [Normalization formulas]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Each node is PyTorch's (``NativeBatchNormBackward0``, ``NativeGroupNormBackward0``) and saves
what it saves: the input, the weight, the running statistics, and the outputs ``result1`` /
``result2`` (mean and inverse standard deviation; empty in batch norm's eval mode). PyTorch's
formulas call ``native_batch_norm_backward``, whose own derivative is a hand-derived
``batchnorm_double_backward``. The engine writes the backward with tensor ops instead and, in
training mode, recomputes the statistics from the input inside the formula (``result1`` and
``result2`` are saved, as in torch, but the gradient of the gradient must see the mean and the
variance as functions of the input). First and second derivatives are torch's; the nodes of a
double-backward graph are the tensor ops', not ``NativeBatchNormBackwardBackward0``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine._tensor import Tensor
from engine.ops._dispatch import composite, op
from engine.ops._samples import SampleInput, T

Array = np.ndarray


# --- batch norm ---------------------------------------------------------------------------------


def _channel_shape(x: Any) -> list[int]:
    return [1, x.shape[1]] + [1] * (x.ndim - 2)


def _reduce_dims(x: Any) -> list[int]:
    return [0, *range(2, x.ndim)]


def _batch_norm_backward(
    which: str,
    grad: Tensor | None,
    input: Tensor,  # noqa: A002
    weight: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    eps: float,
) -> Tensor | None:
    """The gradient for ``input``, ``weight`` or ``bias``: see Note [Normalization formulas]."""
    if grad is None:
        return None
    dims, shape = _reduce_dims(input), _channel_shape(input)
    if training:
        mean = input.mean(dims, keepdim=True)
        invstd = (input.var(dims, unbiased=False, keepdim=True) + eps).rsqrt()
    else:
        assert running_mean is not None and running_var is not None
        mean = running_mean.reshape(shape)
        invstd = (running_var + eps).rsqrt().reshape(shape)
    x_hat = (input - mean) * invstd
    if which == "weight":
        return (grad * x_hat).sum(dims)
    if which == "bias":
        return grad.sum(dims)
    scale = invstd if weight is None else invstd * weight.reshape(shape)
    if not training:
        return grad * scale
    n = input.numel() // input.shape[1]
    sum_g = grad.sum(dims, keepdim=True)
    sum_gx = (grad * x_hat).sum(dims, keepdim=True)
    return (grad - sum_g / n - x_hat * (sum_gx / n)) * scale


def _bn_formula(which: str):  # type: ignore[no-untyped-def]
    def formula(
        grad: Tensor | None,
        input: Tensor,  # noqa: A002
        weight: Tensor | None,
        running_mean: Tensor | None,
        running_var: Tensor | None,
        result1: Tensor,
        result2: Tensor,
        training: bool,
        eps: float,
    ) -> Tensor | None:
        return _batch_norm_backward(which, grad, input, weight, running_mean, running_var, training, eps)

    return formula


def _bn_samples() -> list[SampleInput]:
    stats = (T.of(3, grad=False), T.of(3, low=0.5, high=2.0, grad=False))
    return [
        SampleInput((T.of(4, 3), T.of(3), T.of(3), None, None, True, 0.1, 1e-5)),
        SampleInput((T.of(4, 3, 5), T.of(3), T.of(3), *stats, True, 0.1, 1e-5), note="3-d running stats"),
        SampleInput((T.of(2, 3, 2, 2), T.of(3), T.of(3), *stats, False, 0.1, 1e-3), note="eval"),
        SampleInput((T.of(2, 3, 2, 2), None, None, None, None, True, 0.0, 1e-5), note="no affine"),
    ]


@op(
    derivatives={
        "input": _bn_formula("input"),
        "weight": _bn_formula("weight"),
        "bias": _bn_formula("bias"),
    },
    node="NativeBatchNormBackward0",
    dtypes="keep",
    outputs=("result0", "result1", "result2"),
    differentiable_outputs=(True, False, False),
    method=False,
    samples=_bn_samples,
)
def native_batch_norm(
    input: Tensor,  # noqa: A002
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Array, Array, Array]:
    """``(output, save_mean, save_invstd)``; in training mode the running statistics (when
    given) are updated in place, with the unbiased variance, as torch's CPU kernel does."""
    x = np.asarray(input)
    dims, shape = tuple(_reduce_dims(x)), _channel_shape(x)
    if training:
        mean = x.mean(axis=dims)
        var = x.var(axis=dims)
        invstd = (1.0 / np.sqrt(var + eps)).astype(x.dtype)
        if running_mean is not None:
            running_mean[...] = (1 - momentum) * running_mean + momentum * mean
        if running_var is not None:
            n = x.size // x.shape[1]
            running_var[...] = (1 - momentum) * running_var + momentum * var * n / max(n - 1, 1)
        save_mean, save_invstd = mean.astype(x.dtype), invstd
    else:
        mean = np.asarray(running_mean)
        invstd = 1.0 / np.sqrt(np.asarray(running_var) + eps)
        save_mean = save_invstd = np.zeros(0, x.dtype)
    out = (x - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        out = out * np.asarray(weight).reshape(shape)
    if bias is not None:
        out = out + np.asarray(bias).reshape(shape)
    return out.astype(x.dtype), save_mean, save_invstd


@composite(method=False)
def batch_norm(
    input: Tensor,  # noqa: A002
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = False,
) -> Tensor:
    """``torch.batch_norm``: ``native_batch_norm``'s output (its CPU path)."""
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("running_mean must be defined in evaluation mode")
    return native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[0]  # type: ignore[no-any-return]


@composite(method=False)
def instance_norm(
    input: Tensor,  # noqa: A002
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = False,
) -> Tensor:
    """``torch.instance_norm``, ATen's composite: batch norm of the input seen as one sample with
    ``N * C`` channels (weight, bias and running stats repeated N times), viewed back."""
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError(
            "Expected running_mean and running_var to be defined when use_input_stats is false"
        )
    b, c = input.shape[0], input.shape[1]
    shape = [1, b * c, *input.shape[2:]]

    def repeat(t: Tensor | None) -> Tensor | None:
        return None if t is None else t.repeat(b)

    running_mean_, running_var_ = repeat(running_mean), repeat(running_var)
    out = batch_norm(
        input.contiguous().view(shape),
        repeat(weight),
        repeat(bias),
        running_mean_,
        running_var_,
        use_input_stats,
        momentum,
        eps,
        cudnn_enabled,
    )
    from engine.autograd.grad_mode import no_grad

    with no_grad():  # torch writes through at::alias(running_mean): no graph, no version bump
        if running_mean is not None and running_mean_ is not None:
            running_mean._data[...] = running_mean_._data.reshape(b, c).mean(0)
        if running_var is not None and running_var_ is not None:
            running_var._data[...] = running_var_._data.reshape(b, c).mean(0)
    return out.view(input.shape)


# --- group norm ---------------------------------------------------------------------------------


def _group_norm_backward(
    which: str,
    grads: list[Tensor | None],
    input: Tensor,  # noqa: A002
    weight: Tensor | None,
    result1: Tensor,
    result2: Tensor,
    N: int,  # noqa: N803
    group: int,
) -> Tensor | None:
    """PyTorch's ``infinitely_differentiable_native_group_norm_backward``: the mean and rstd
    outputs are differentiable too, so their gradients (``grads[1]``, ``grads[2]``) reach the input."""
    grad, grad_mean, grad_rstd = grads
    x = input.reshape(N, group, -1)
    m = x.shape[-1]
    # The saved outputs, as torch uses them: unpacked, their grad_fn is this very node, so a
    # double backward flows back into it through grads[1] and grads[2].
    mean = result1.reshape(N, group, 1)
    rstd = result2.reshape(N, group, 1)
    xh = (x - mean) * rstd
    shape = _channel_shape(input)
    dims = _reduce_dims(input)
    if which != "input":
        if grad is None:
            return None
        return (grad * xh.reshape(input.shape)).sum(dims) if which == "weight" else grad.sum(dims)
    dx: Tensor | None = None
    if grad is not None:
        g = (grad if weight is None else grad * weight.reshape(shape)).reshape(N, group, -1)
        dx = (g - g.sum(-1, keepdim=True) / m - xh * ((g * xh).sum(-1, keepdim=True) / m)) * rstd
    if grad_mean is not None:
        term = (grad_mean.reshape(N, group, 1) / m).expand(N, group, m)
        dx = term if dx is None else dx + term
    if grad_rstd is not None:
        term = -grad_rstd.reshape(N, group, 1) * rstd * rstd * xh / m
        dx = term if dx is None else dx + term
    return None if dx is None else dx.reshape(input.shape)


def _gn_formula(which: str):  # type: ignore[no-untyped-def]
    def formula(
        grads: list[Tensor | None],
        input: Tensor,  # noqa: A002
        weight: Tensor | None,
        result1: Tensor,
        result2: Tensor,
        N: int,  # noqa: N803
        C: int,  # noqa: N803
        HxW: int,  # noqa: N803
        group: int,
        eps: float,
    ) -> Tensor | None:
        return _group_norm_backward(which, grads, input, weight, result1, result2, N, group)

    return formula


@op(
    derivatives={
        "input": _gn_formula("input"),
        "weight": _gn_formula("weight"),
        "bias": _gn_formula("bias"),
    },
    node="NativeGroupNormBackward0",
    dtypes="keep",
    outputs=("result0", "result1", "result2"),
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 4, 3), T.of(4), T.of(4), 2, 4, 3, 2, 1e-5)),
        SampleInput((T.of(2, 6, 2, 2), None, None, 2, 6, 4, 3, 1e-5), note="no affine"),
    ],
)
def native_group_norm(
    input: Tensor,  # noqa: A002
    weight: Tensor | None,
    bias: Tensor | None,
    N: int,  # noqa: N803
    C: int,  # noqa: N803
    HxW: int,  # noqa: N803
    group: int,
    eps: float,
) -> tuple[Array, Array, Array]:
    """``(output, mean, rstd)``, the statistics of shape ``(N, group)``."""
    x = np.asarray(input)
    g = x.reshape(N, group, -1)
    mean = g.mean(-1)
    rstd = (1.0 / np.sqrt(g.var(-1) + eps)).astype(x.dtype)
    out = ((g - mean[..., None]) * rstd[..., None]).reshape(x.shape)
    shape = _channel_shape(x)
    if weight is not None:
        out = out * np.asarray(weight).reshape(shape)
    if bias is not None:
        out = out + np.asarray(bias).reshape(shape)
    return out.astype(x.dtype), mean.astype(x.dtype), rstd


@composite(method=False)
def group_norm(
    input: Tensor,  # noqa: A002
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> Tensor:
    """``torch.group_norm``, ATen's composite over ``native_group_norm``."""
    n, c = input.shape[0], input.shape[1]
    if c % num_groups != 0:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{list(input.shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got "
                f"{name} of shape {list(t.shape)} and input of shape {list(input.shape)}"
            )
    hxw = input.numel() // (n * c) if n * c else 1
    return native_group_norm(input.contiguous(), weight, bias, n, c, hxw, num_groups, eps)[0]  # type: ignore[no-any-return]
