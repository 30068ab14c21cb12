"""2-d pooling: ``max_pool2d_with_indices``, ``avg_pool2d`` and ``_adaptive_avg_pool2d``, each with
its backward op as in ATen, and the ``max_pool2d`` / ``adaptive_avg_pool2d`` composites.

The nodes are PyTorch's: ``MaxPool2DWithIndicesBackward0`` saves ``self`` and the indices
(``result1``), ``AvgPool2DBackward0`` and ``AdaptiveAvgPool2DBackward0`` save ``self``. The
backward ops have formulas of their own (derivatives.yaml's rows for ``*_backward``): the
gradient of max pooling's backward gathers at the indices, that of average pooling's backward
is average pooling again, and neither depends on ``self`` (zeros), so double backward builds
PyTorch's graph.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import composite, op
from engine.ops._samples import SampleInput, T

Array = np.ndarray


def _pair(name: str, what: str, values: int | Sequence[int], allow_empty: bool = False) -> list[int]:
    if isinstance(values, int):
        return [values, values]
    values = [int(v) for v in values]
    if allow_empty and not values:
        return []
    if len(values) not in (1, 2):
        raise RuntimeError(f"{name}: {what}")
    return values * 2 if len(values) == 1 else values


def _out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """ATen's ``pooling_output_shape``."""
    if s == 0:
        raise RuntimeError("stride should not be zero")
    if p < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
    if p > ((k - 1) * d + 1) // 2:
        raise RuntimeError(
            f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and "
            f"dilation={d}"
        )
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_geometry(
    x_shape: Sequence[int],
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    ceil_mode: bool,
) -> tuple[int, int]:
    oh = _out_size(x_shape[-2], kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
    ow = _out_size(x_shape[-1], kernel[1], stride[1], padding[1], dilation[1], ceil_mode)
    # ATen's pool2d_shape_check.
    if kernel[0] <= 0 or kernel[1] <= 0:
        raise RuntimeError(
            f"kernel size should be greater than zero, but got kH: {kernel[0]} kW: {kernel[1]}"
        )
    if stride[0] <= 0 or stride[1] <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dH: {stride[0]} dW: {stride[1]}")
    if dilation[0] <= 0 or dilation[1] <= 0:
        raise RuntimeError(
            f"dilation should be greater than zero, but got dilationH: {dilation[0]} dilationW: {dilation[1]}"
        )
    if len(x_shape) not in (3, 4) or any(n == 0 for n in x_shape[-3:]):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    if kernel[1] // 2 < padding[1] or kernel[0] // 2 < padding[0]:
        raise RuntimeError(
            "pad should be smaller than or equal to half of kernel size, but got padW = "
            f"{padding[1]}, padH = {padding[0]}, kW = {kernel[1]}, kH = {kernel[0]}"
        )
    if oh < 1 or ow < 1:
        c, h, w = x_shape[-3:]
        raise RuntimeError(
            f"Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{oh}x{ow}). "
            "Output size is too small"
        )
    return oh, ow


def _windows(
    x: Array, out: tuple[int, int], kernel: list[int], stride: list[int], dilation: list[int]
) -> Array:
    """A view ``(..., OH, OW, KH, KW)`` of a padded ``(..., H, W)`` array."""
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x,
        (*x.shape[:-2], *out, *kernel),
        (*s[:-2], s[-2] * stride[0], s[-1] * stride[1], s[-2] * dilation[0], s[-1] * dilation[1]),
        writeable=False,
    )


def _pad_for(
    x: Array,
    out: tuple[int, int],
    kernel: list[int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    value: float,
) -> Array:
    """``x`` padded by ``padding`` on the top/left and enough on the bottom/right for every window
    (ceil_mode's last window may run past the padding)."""
    extra = [
        max(0, (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - x.shape[-2 + i] - padding[i])
        for i in range(2)
    ]
    widths = [(0, 0)] * (x.ndim - 2) + [(padding[0], extra[0]), (padding[1], extra[1])]
    return np.pad(x, widths, constant_values=value)


# --- max pooling --------------------------------------------------------------------------------


def _max_pool_args(
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
) -> tuple[list[int], list[int], list[int], list[int]]:
    k = _pair("max_pool2d", "kernel_size must either be a single int, or a tuple of two ints", kernel_size)
    s = _pair(
        "max_pool2d",
        "stride must either be omitted, a single int, or a tuple of two ints",
        stride,
        allow_empty=True,
    )
    p = _pair("max_pool2d", "padding must either be a single int, or a tuple of two ints", padding)
    d = _pair("max_pool2d", "dilation must be either a single int, or a tuple of two ints", dilation)
    return k, s or k, p, d


def _max_pool_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3, 5, 5), [2, 2])),
        SampleInput((T.of(1, 2, 6, 7), [3, 2], [2, 1], [1, 1], [1, 2]), note="stride padding dilation"),
        SampleInput((T.of(2, 5, 5), [2, 2], [2, 2], [0, 0], [1, 1], True), note="unbatched ceil_mode"),
        SampleInput((T.of(1, 1, 7, 6), 3, 2, 1, 1, True), note="ints ceil_mode padding"),
    ]


@op(
    derivatives={
        "self": lambda grad, self, kernel_size, stride, padding, dilation, ceil_mode, result1: (
            max_pool2d_with_indices_backward(
                grad, self, kernel_size, stride, padding, dilation, ceil_mode, result1
            )
        )
    },
    node="MaxPool2DWithIndicesBackward0",
    outputs=("result0", "result1"),
    differentiable_outputs=(True, False),
    dtypes="keep",
    method=False,
    function=False,
    samples=_max_pool_samples,
)
def max_pool2d_with_indices(
    self: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] = (),
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
) -> tuple[Array, Array]:
    k, s, p, d = _max_pool_args(kernel_size, stride, padding, dilation)
    oh, ow = _pool_geometry(self.shape, k, s, p, d, ceil_mode)
    win = _windows(_pad_for(self, (oh, ow), k, s, p, d, -np.inf), (oh, ow), k, s, d)
    flat = win.reshape(*win.shape[:-2], k[0] * k[1])
    # The first maximum of each window, as ATen's scan (``val > max || isnan(val)``) keeps it;
    # a NaN wins.
    nan = np.isnan(flat)
    tap = np.where(nan.any(-1), nan.argmax(-1), flat.argmax(-1))
    values = np.take_along_axis(flat, tap[..., None], -1)[..., 0]
    kh, kw = np.divmod(tap, k[1])
    ih = np.arange(oh)[:, None] * s[0] - p[0] + kh * d[0]
    iw = np.arange(ow)[None, :] * s[1] - p[1] + kw * d[1]
    indices = (ih * self.shape[-1] + iw).astype(np.int64)
    return np.ascontiguousarray(values), indices


@op(
    derivatives={
        # PyTorch's max_pool_double_backward: gather the gradient at the indices.
        "grad_output": lambda grad, indices: (
            grad.flatten(-2).gather(-1, indices.flatten(-2)).view_as(indices)
        ),
        "self": lambda grad: zeros_like(grad),
    },
    dtypes="keep",
    method=False,
    function=False,
)
def max_pool2d_with_indices_backward(
    grad_output: Tensor,
    self: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
    ceil_mode: bool,
    indices: Tensor,
) -> Array:
    planes = math.prod(self.shape[:-2])
    out = np.zeros((planes, self.shape[-2] * self.shape[-1]), grad_output.dtype)
    rows = np.repeat(np.arange(planes), indices.shape[-2] * indices.shape[-1])
    np.add.at(out, (rows, indices.reshape(-1)), grad_output.reshape(-1))
    return out.reshape(self.shape)


@composite(method=False, samples=_max_pool_samples)
def max_pool2d(
    self: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] = (),
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``torch.max_pool2d``: ATen runs ``max_pool2d_with_indices`` and drops the indices when the
    input requires grad (a kernel without indices otherwise, with the same values)."""
    return max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)[0]  # type: ignore[no-any-return]


# --- average pooling ----------------------------------------------------------------------------


def _avg_pool_args(
    kernel_size: int | Sequence[int], stride: int | Sequence[int], padding: int | Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    k = _pair("avg_pool2d", "kernel_size must either be a single int, or a tuple of two ints", kernel_size)
    s = _pair(
        "avg_pool2d",
        "stride must either be omitted, a single int, or a tuple of two ints",
        stride,
        allow_empty=True,
    )
    p = _pair("avg_pool2d", "padding must either be a single int, or a tuple of two ints", padding)
    return k, s or k, p


def _avg_divisors(
    h: int,
    w: int,
    out: tuple[int, int],
    k: list[int],
    s: list[int],
    p: list[int],
    count_include_pad: bool,
    divisor_override: int | None,
) -> Array:
    """ATen's divisor per output position: the override, the window clipped to the padded input,
    or the window clipped to the input (1 where a window holds nothing: its output is 0)."""

    def spans(n_out: int, size: int, kk: int, ss: int, pp: int) -> tuple[Array, Array]:
        start = np.arange(n_out) * ss - pp
        end = np.minimum(start + kk, size + pp)
        pool = end - start
        inside = np.minimum(end, size) - np.maximum(start, 0)
        return pool, inside

    pool_h, in_h = spans(out[0], h, k[0], s[0], p[0])
    pool_w, in_w = spans(out[1], w, k[1], s[1], p[1])
    empty = (in_h[:, None] <= 0) | (in_w[None, :] <= 0)
    if divisor_override is not None:
        div = np.full(out, float(divisor_override))
    elif count_include_pad:
        div = (pool_h[:, None] * pool_w[None, :]).astype(np.float64)
    else:
        div = (in_h[:, None] * in_w[None, :]).astype(np.float64)
    return np.where(empty, 1.0, div)


def _avg_pool_setup(
    self: Array,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> tuple[list[int], list[int], list[int], tuple[int, int], Array]:
    k, s, p = _avg_pool_args(kernel_size, stride, padding)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out = _pool_geometry(self.shape, k, s, p, [1, 1], ceil_mode)
    div = _avg_divisors(self.shape[-2], self.shape[-1], out, k, s, p, count_include_pad, divisor_override)
    return k, s, p, out, div


def _avg_pool2d_formula(
    grad: Tensor,
    self: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Tensor:
    return avg_pool2d_backward(  # type: ignore[no-any-return]
        grad, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def _avg_pool2d_backward_formula(
    grad: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Tensor:
    # The gradient of avg_pool2d_backward in grad_output is average pooling again.
    return avg_pool2d(grad, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)  # type: ignore[no-any-return]


def _avg_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3, 5, 5), [2, 2])),
        SampleInput((T.of(1, 2, 5, 6), [3, 2], [2, 1], [1, 1]), note="stride padding"),
        SampleInput((T.of(1, 2, 5, 6), [3, 3], [2, 2], [1, 1], True, False), note="ceil_mode exclude pad"),
        SampleInput(
            (T.of(2, 4, 4), [2, 3], [1, 2], [1, 1], False, True, 5), note="unbatched divisor_override"
        ),
        SampleInput((T.of(1, 1, 6, 6), 3, 2, 1, True), note="ceil_mode include pad"),
    ]


@op(
    derivatives={
        "self": _avg_pool2d_formula,
    },
    node="AvgPool2DBackward0",
    method=False,
    function=False,
    samples=_avg_samples,
)
def avg_pool2d(
    self: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] = (),
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Array:
    k, s, p, out, div = _avg_pool_setup(
        self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )
    win = _windows(_pad_for(self, out, k, s, p, [1, 1], 0.0), out, k, s, [1, 1])
    return np.ascontiguousarray((win.sum(axis=(-2, -1)) / div).astype(self.dtype))


@op(
    derivatives={
        "grad_output": _avg_pool2d_backward_formula,
        "self": lambda grad: zeros_like(grad),
    },
    method=False,
    function=False,
)
def avg_pool2d_backward(
    grad_output: Tensor,
    self: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Array:
    k, s, p, out, div = _avg_pool_setup(
        self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )
    g = grad_output / div
    padded = _pad_for(np.zeros_like(self), out, k, s, p, [1, 1], 0.0)
    for kh in range(k[0]):
        for kw in range(k[1]):
            padded[
                ..., kh : kh + s[0] * (out[0] - 1) + 1 : s[0], kw : kw + s[1] * (out[1] - 1) + 1 : s[1]
            ] += g
    h, w = self.shape[-2:]
    return np.ascontiguousarray(padded[..., p[0] : p[0] + h, p[1] : p[1] + w]).astype(self.dtype)


# --- adaptive average pooling -------------------------------------------------------------------


def _adaptive_bins(size: int, out: int) -> list[tuple[int, int]]:
    # ATen's start_index / end_index: floor(i * size / out), ceil((i + 1) * size / out).
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


@op(
    derivatives={"self": lambda grad, self: _adaptive_avg_pool2d_backward(grad, self)},
    node="AdaptiveAvgPool2DBackward0",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3, 5, 7), [2, 3])),
        SampleInput((T.of(3, 4, 4), [3, 1]), note="unbatched overlapping"),
        SampleInput((T.of(1, 2, 3, 3), [5, 4]), note="upsampling"),
    ],
)
def _adaptive_avg_pool2d(self: Tensor, output_size: Sequence[int]) -> Array:
    if self.ndim not in (3, 4) or any(n == 0 for n in self.shape[-2:]):
        raise RuntimeError(
            "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got " + str(list(self.shape))
        )
    oh, ow = (int(v) for v in output_size)
    out = np.empty((*self.shape[:-2], oh, ow), self.dtype)
    for i, (h0, h1) in enumerate(_adaptive_bins(self.shape[-2], oh)):
        for j, (w0, w1) in enumerate(_adaptive_bins(self.shape[-1], ow)):
            out[..., i, j] = self[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    return out


@op(
    derivatives={
        "grad_output": lambda grad, grad_output: _adaptive_avg_pool2d(grad, list(grad_output.shape[-2:])),
        "self": lambda grad: zeros_like(grad),
    },
    method=False,
    function=False,
)
def _adaptive_avg_pool2d_backward(grad_output: Tensor, self: Tensor) -> Array:
    out = np.zeros_like(self)
    oh, ow = grad_output.shape[-2:]
    for i, (h0, h1) in enumerate(_adaptive_bins(self.shape[-2], oh)):
        for j, (w0, w1) in enumerate(_adaptive_bins(self.shape[-1], ow)):
            area = (h1 - h0) * (w1 - w0)
            out[..., h0:h1, w0:w1] += (grad_output[..., i, j] / area)[..., None, None]
    return out


@composite(method=False, function=False)
def adaptive_avg_pool2d(self: Tensor, output_size: Sequence[int]) -> Tensor:
    """ATen's ``adaptive_avg_pool2d``: a 1x1 output is ``mean((-1, -2), keepdim=True)``
    (``MeanBackward1``), any other size ``_adaptive_avg_pool2d``."""
    if len(output_size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    if output_size[0] < 0 or output_size[1] < 0:
        raise RuntimeError(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received "
            f"{{{output_size[0]}, {output_size[1]}}}"
        )
    if output_size[0] == 1 and output_size[1] == 1:
        return self.mean([-1, -2], keepdim=True)  # type: ignore[no-any-return]
    return _adaptive_avg_pool2d(self, list(output_size))  # type: ignore[no-any-return]
