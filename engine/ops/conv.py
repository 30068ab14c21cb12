"""Convolution: ``convolution`` and its backward op ``convolution_backward``, ``constant_pad_nd``,
and the ``conv1d`` / ``conv2d`` composites that reach them.

As on PyTorch's CPU path, ``conv1d`` and ``conv2d`` are C++ composites (a missing batch dim is
added with ``unsqueeze(0)`` and removed with ``squeeze(0)``; ``padding='same'`` with an even
effective kernel pads the input first with ``constant_pad_nd``) over one primitive,
``convolution``, whose node is ``ConvolutionBackward0`` saving ``input`` and ``weight``. Its
formulas call the op ``convolution_backward``; that op's formulas (PyTorch's
``_convolution_double_backward``) are written with ``convolution`` and ``convolution_backward``
themselves, so double backward records ``ConvolutionBackwardBackward0`` and is differentiable
again. The kernels use NumPy strided windows (im2col without the copy) and ``tensordot``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine._tensor import Tensor
from engine.ops._dispatch import composite, op
from engine.ops._samples import SampleInput, T

Array = np.ndarray


# --- kernels ------------------------------------------------------------------------------------


def _expand(values: int | Sequence[int], n: int) -> list[int]:
    """An int or a 1-element list broadcast to ``n`` spatial dims (ATen's ``expand_param_if_needed``)."""
    if isinstance(values, int):
        return [values] * n
    values = [int(v) for v in values]
    return values * n if len(values) == 1 else values


def _windows(x: Array, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int]) -> Array:
    """A read-only view ``(N, C, *out, *kernel)`` of the windows of a padded ``(N, C, *S)`` array."""
    n_sp = len(kernel)
    out = [(x.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(n_sp)]
    s = x.strides
    return np.lib.stride_tricks.as_strided(
        x,
        (*x.shape[:2], *out, *kernel),
        (
            *s[:2],
            *(s[2 + i] * stride[i] for i in range(n_sp)),
            *(s[2 + i] * dilation[i] for i in range(n_sp)),
        ),
        writeable=False,
    )


def _pad(x: Array, padding: Sequence[int]) -> Array:
    return np.pad(x, [(0, 0), (0, 0), *((p, p) for p in padding)]) if any(padding) else x


def _conv_forward(
    x: Array,
    w: Array,
    b: Array | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Array:
    n_sp = w.ndim - 2
    win = _windows(_pad(x, padding), w.shape[2:], stride, dilation)
    cg, og = w.shape[1], w.shape[0] // groups
    k_axes = list(range(2 + n_sp, 2 + 2 * n_sp))
    outs = []
    for g in range(groups):
        o = np.tensordot(
            win[:, g * cg : (g + 1) * cg],
            w[g * og : (g + 1) * og],
            axes=([1, *k_axes], [1, *range(2, 2 + n_sp)]),
        )
        outs.append(np.moveaxis(o, -1, 1))  # (N, *out, og) -> (N, og, *out)
    out = np.concatenate(outs, axis=1) if groups > 1 else outs[0]
    if b is not None:
        out = out + b.reshape(1, -1, *([1] * n_sp))
    return np.ascontiguousarray(out, dtype=np.result_type(x, w))


def _conv_grad_input(
    go: Array,
    x_shape: Sequence[int],
    w: Array,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Array:
    """The transposed convolution: each kernel tap scatters ``go @ w[..., tap]`` back into the
    padded input, then the padding is cut off."""
    n_sp = w.ndim - 2
    cg, og = w.shape[1], w.shape[0] // groups
    out_sp = go.shape[2:]
    gxp = np.zeros(
        (x_shape[0], x_shape[1], *(x_shape[2 + i] + 2 * padding[i] for i in range(n_sp))), go.dtype
    )
    for g in range(groups):
        # (N, *out, cg, *kernel): every tap's contribution at once.
        cols = np.tensordot(go[:, g * og : (g + 1) * og], w[g * og : (g + 1) * og], axes=([1], [0]))
        for tap in np.ndindex(*w.shape[2:]):
            sl = tuple(
                slice(tap[i] * dilation[i], tap[i] * dilation[i] + stride[i] * (out_sp[i] - 1) + 1, stride[i])
                for i in range(n_sp)
            )
            contrib = np.moveaxis(cols[(Ellipsis, *tap)], -1, 1)
            gxp[(slice(None), slice(g * cg, (g + 1) * cg), *sl)] += contrib
    crop = tuple(slice(padding[i], padding[i] + x_shape[2 + i]) for i in range(n_sp))
    return np.ascontiguousarray(gxp[(slice(None), slice(None), *crop)])


def _conv_grad_weight(
    go: Array,
    x: Array,
    w_shape: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Array:
    n_sp = len(w_shape) - 2
    win = _windows(_pad(x, padding), w_shape[2:], stride, dilation)
    cg, og = w_shape[1], w_shape[0] // groups
    axes = [0, *range(2, 2 + n_sp)]
    parts = [
        np.tensordot(go[:, g * og : (g + 1) * og], win[:, g * cg : (g + 1) * cg], axes=(axes, axes))
        for g in range(groups)
    ]
    return np.concatenate(parts, axis=0) if groups > 1 else parts[0]


def _check_convolution(
    input: Array,
    weight: Array,
    bias: Array | None,
    stride: Sequence[int],
    padding: Sequence[int],  # noqa: A002
    dilation: Sequence[int],
    groups: int,
) -> None:
    """ATen's ``check_shape_forward`` and the argument checks of ``_convolution``, in its order."""
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    k = weight.ndim
    if input.ndim != k:
        raise RuntimeError(
            f"Expected {k}-dimensional input for {k}-dimensional weight {list(weight.shape)}, but got "
            f"{input.ndim}-dimensional input of size {list(input.shape)} instead"
        )
    if weight.shape[0] % groups != 0:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got "
            f"weight of size [{list(weight.shape)}] instead"
        )
    if input.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(input.shape)} "
            f"to have {weight.shape[1] * groups} channels, but got {input.shape[1]} channels instead"
        )
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(
            f"Given weight of size {list(weight.shape)}, expected bias to be 1-dimensional with "
            f"{weight.shape[0]} elements, but got bias of size {list(bias.shape)} instead"
        )
    padded = [input.shape[2 + i] + 2 * padding[i] for i in range(k - 2)]
    kernel = [dilation[i] * (weight.shape[2 + i] - 1) + 1 for i in range(k - 2)]
    if any(p < kk for p, kk in zip(padded, kernel, strict=True)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual input size"
        )


def _no_transposed(transposed: bool) -> None:
    if transposed:
        raise NotImplementedError("engine: transposed convolution is not supported")


# --- convolution --------------------------------------------------------------------------------


def _conv_grads(which: int) -> Any:
    # PyTorch's one formula for ``input, weight, bias`` returns the three gradients of one
    # convolution_backward call; the engine asks for one per input (and both input and weight are
    # saved whichever of the three requires grad, as in PyTorch).
    def formula(
        grad: Tensor,
        input: Tensor,  # noqa: A002
        weight: Tensor,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
        transposed: bool,
        output_padding: Sequence[int],
        groups: int,
    ) -> Tensor:
        mask = [i == which for i in range(3)]
        return convolution_backward(  # type: ignore[no-any-return]
            grad,
            input,
            weight,
            [weight.size(0)],
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            mask,
        )[which]

    return formula


def _conv_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3, 5, 5), T.of(4, 3, 3, 3), T.of(4), [1, 1], [0, 0], [1, 1], False, [0, 0], 1)),
        SampleInput(
            (T.of(1, 4, 6, 5), T.of(4, 2, 2, 3), None, [2, 1], [1, 2], [1, 2], False, [0, 0], 2),
            note="stride padding dilation groups",
        ),
        SampleInput((T.of(2, 2, 7), T.of(3, 2, 3), T.of(3), [2], [1], [2], False, [0], 1), note="1d"),
        SampleInput(
            (
                T.of(1, 2, 4, 4),
                T((3, 2, 3, 3), grad=False),
                T.of(3),
                [1, 1],
                [1, 1],
                [1, 1],
                False,
                [0, 0],
                1,
            ),
            note="frozen weight",
        ),
        SampleInput(
            (T((1, 2, 4, 4), grad=False), T.of(2, 2, 2, 2), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
            note="constant input",
        ),
    ]


@op(
    derivatives={"input": _conv_grads(0), "weight": _conv_grads(1), "bias": _conv_grads(2)},
    method=False,
    samples=_conv_samples,
)
def convolution(
    input: Tensor,  # noqa: A002 - PyTorch's parameter name
    weight: Tensor,
    bias: Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> Array:
    n_sp = weight.ndim - 2
    st, pad, dil = _expand(stride, n_sp), _expand(padding, n_sp), _expand(dilation, n_sp)
    _check_convolution(input, weight, bias, st, pad, dil, groups)
    _no_transposed(transposed)
    return _conv_forward(input, weight, bias, st, pad, dil, groups)


def _conv_double_backward(
    grads: Sequence[Tensor | None],
    grad_output: Tensor,
    input: Tensor,  # noqa: A002
    weight: Tensor,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
    which: str,
) -> Tensor | None:
    """PyTorch's ``_convolution_double_backward``: ggI, ggW, ggb are the gradients flowing into
    the three outputs of ``convolution_backward`` (grad_input, grad_weight, grad_bias)."""
    ggI, ggW, ggb = grads  # noqa: N806 - PyTorch's names
    args = (stride, padding, dilation, transposed, output_padding, groups)
    if which == "grad_output":
        out: Tensor | None = None
        if ggI is not None:
            out = convolution(ggI, weight, None, *args)
        if ggW is not None:
            t = convolution(input, ggW, None, *args)
            out = t if out is None else out + t
        if ggb is not None:
            t = ggb.reshape(1, -1, *([1] * (grad_output.dim() - 2))).expand(tuple(grad_output.shape))
            out = t if out is None else out + t
        return out
    if which == "weight":
        if ggI is None:
            return None
        return convolution_backward(grad_output, ggI, weight, None, *args, [False, True, False])[1]  # type: ignore[no-any-return]
    if ggW is None:
        return None
    return convolution_backward(grad_output, input, ggW, None, *args, [True, False, False])[0]  # type: ignore[no-any-return]


def _cdb(which: str) -> Any:
    def formula(
        grads: Sequence[Tensor | None],
        grad_output: Tensor,
        input: Tensor,  # noqa: A002
        weight: Tensor,
        stride: Sequence[int],
        padding: Sequence[int],
        dilation: Sequence[int],
        transposed: bool,
        output_padding: Sequence[int],
        groups: int,
    ) -> Tensor | None:
        return _conv_double_backward(
            grads,
            grad_output,
            input,
            weight,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            which,
        )

    return formula


@op(
    derivatives={"grad_output": _cdb("grad_output"), "input": _cdb("input"), "weight": _cdb("weight")},
    outputs=("result0", "result1", "result2"),
    method=False,
    function=False,
)
def convolution_backward(
    grad_output: Tensor,
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias_sizes: Sequence[int] | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
    output_mask: Sequence[bool],
) -> tuple[Array, Array, Array]:
    _no_transposed(transposed)
    n_sp = weight.ndim - 2
    st, pad, dil = _expand(stride, n_sp), _expand(padding, n_sp), _expand(dilation, n_sp)
    # Outputs not asked for are zeros (PyTorch leaves them undefined): nothing reads them.
    gi = (
        _conv_grad_input(grad_output, input.shape, weight, st, pad, dil, groups)
        if output_mask[0]
        else np.zeros_like(input)
    )
    gw = (
        _conv_grad_weight(grad_output, input, weight.shape, st, pad, dil, groups)
        if output_mask[1]
        else np.zeros_like(weight)
    )
    gb = (
        grad_output.sum(axis=(0, *range(2, grad_output.ndim)))
        if output_mask[2]
        else np.zeros(weight.shape[0], grad_output.dtype)
    )
    return gi, np.asarray(gw), np.asarray(gb)


# --- constant_pad_nd ----------------------------------------------------------------------------


@op(
    derivatives={"self": lambda grad, pad: constant_pad_nd(grad, [-p for p in pad])},
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 3, 4), [1, 2])),
        SampleInput((T.of(2, 3, 4), [0, 1, 2, 0], 1.5), note="two dims value"),
        SampleInput((T.of(3, 5), [-1, 2, 1, -1]), note="negative"),
    ],
)
def constant_pad_nd(self: Tensor, pad: Sequence[int], value: float = 0) -> Array:
    if len(pad) % 2:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) // 2 > self.ndim:
        raise RuntimeError(
            "Length of pad should be no more than twice the number of dimensions of the input. Pad length "
            f"is {len(pad)} while the input has {self.ndim} dimensions."
        )
    out = self
    widths = [(0, 0)] * self.ndim
    crops = [slice(None)] * self.ndim
    for i in range(len(pad) // 2):
        d = self.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        widths[d] = (max(lo, 0), max(hi, 0))
        crops[d] = slice(max(-lo, 0), self.shape[d] - max(-hi, 0))
    out = np.pad(out[tuple(crops)], widths, constant_values=value)
    return np.ascontiguousarray(out)


# --- conv1d, conv2d -----------------------------------------------------------------------------

_same_warned = False


def _batchify(input: Tensor, n_sp: int, name: str) -> tuple[Tensor, bool]:  # noqa: A002
    batched = input.dim() == n_sp + 2
    if input.dim() != n_sp + 1 and not batched:
        raise RuntimeError(
            f"Expected {n_sp + 1}D (unbatched) or {n_sp + 2}D (batched) input to {name}, but got input of "
            f"size: {list(input.shape)}"
        )
    return (input if batched else input.unsqueeze(0)), batched


def _convolution_same(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: list[int],
    dilation: list[int],
    groups: int,  # noqa: A002
) -> Tensor:
    """ATen's ``convolution_same``: symmetric padding when the effective kernel is odd, else pad
    the input's right/bottom by one with ``constant_pad_nd`` first."""
    global _same_warned
    n_sp = weight.dim() - 2
    if weight.dim() != input.dim():
        raise RuntimeError(
            f"Expected {weight.dim()}-dimensional input for {weight.dim()}-dimensional weight"
            f"{list(weight.shape)}, but got {input.dim()}-dimensional input of size {list(input.shape)} "
            "instead"
        )
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    dil = _expand(dilation, n_sp)
    left = [dil[i] * (weight.size(2 + i) - 1) // 2 for i in range(n_sp)]
    right = [dil[i] * (weight.size(2 + i) - 1) - left[i] for i in range(n_sp)]
    if left == right:
        return convolution(input, weight, bias, stride, left, dilation, False, [0] * n_sp, groups)  # type: ignore[no-any-return]
    if not _same_warned:
        _same_warned = True
        warnings.warn(
            "Using padding='same' with even kernel lengths and odd dilation may require a zero-padded copy "
            "of the input be created",
            UserWarning,
            stacklevel=4,
        )
    pad_nd = [0] * (2 * n_sp)
    for i in range(n_sp):
        pad_nd[2 * (n_sp - 1 - i) + 1] = right[i] - left[i]
    padded = constant_pad_nd(input, pad_nd, 0)
    return convolution(padded, weight, bias, stride, left, dilation, False, [0] * n_sp, groups)  # type: ignore[no-any-return]


def _conv_nd(
    n_sp: int,
    name: str,
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None,
    stride: int | Sequence[int],
    padding: str | int | Sequence[int],
    dilation: int | Sequence[int],
    groups: int,
) -> Tensor:
    batched_input, is_batched = _batchify(input, n_sp, name)
    st, dil = _expand(stride, n_sp), _expand(dilation, n_sp)
    if isinstance(padding, str):
        if padding == "valid":
            out = convolution(batched_input, weight, bias, st, [0] * n_sp, dil, False, [0] * n_sp, groups)
        elif padding == "same":
            out = _convolution_same(batched_input, weight, bias, st, dil, groups)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        out = convolution(
            batched_input, weight, bias, st, _expand(padding, n_sp), dil, False, [0] * n_sp, groups
        )
    return out if is_batched else out.squeeze(0)  # type: ignore[no-any-return]


@composite(
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 3, 7), T.of(4, 3, 3), T.of(4))),
        SampleInput((T.of(3, 7), T.of(4, 3, 3), None, 2, 1), note="unbatched stride padding"),
        SampleInput((T.of(1, 4, 8), T.of(6, 2, 3), T.of(6), 1, "same", 2, 2), note="same dilation groups"),
        SampleInput((T.of(1, 2, 6), T.of(3, 2, 4), None, 1, "valid"), note="valid"),
    ],
)
def conv1d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.conv1d``: ``convolution`` over a batch (an unbatched input gains and loses a batch dim)."""
    return _conv_nd(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


@composite(
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 3, 5, 5), T.of(4, 3, 3, 3), T.of(4))),
        SampleInput((T.of(3, 5, 6), T.of(2, 3, 2, 2), None, (2, 1), 1), note="unbatched"),
        SampleInput((T.of(1, 2, 5, 5), T.of(2, 2, 3, 3), T.of(2), 1, "same", (1, 2)), note="same"),
        SampleInput((T.of(1, 4, 5, 4), T.of(4, 1, 3, 2), None, 1, "valid", 1, 4), note="valid depthwise"),
    ],
)
def conv2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """``torch.conv2d``: ``convolution`` over a batch of images."""
    return _conv_nd(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)
