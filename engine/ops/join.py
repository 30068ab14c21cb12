"""Splitting and joining: split, chunk, unbind (several views of one tensor, one node), cat, stack,
repeat."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _dtype
from engine._factories import zeros
from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import composite, op
from engine.ops._samples import SampleInput, T
from engine.ops.complex import handle_r_to_c
from engine.ops.shape import _select_view

Array = np.ndarray
TensorList = list[Tensor]


# --- several outputs ----------------------------------------------------------------------------


def _split_with_sizes_backward(
    grads: list[Tensor | None], split_sizes: Sequence[int], dim: int, self_sym_sizes: tuple[int, ...]
) -> Tensor:
    """The pieces' gradients joined back, zeros for the pieces that got none (PyTorch's
    ``split_with_sizes_backward``; ``split_backward`` computes the sizes, then calls it)."""
    d = _wrap_dim(dim, len(self_sym_sizes))
    dtype = next(g for g in grads if g is not None).dtype
    parts = []
    for g, n in zip(grads, split_sizes, strict=True):
        if g is None:
            shape = list(self_sym_sizes)
            shape[d] = n
            g = zeros(shape, dtype=dtype)
        parts.append(g)
    return cat(parts, d)


def _split_sizes(length: int, split_size: int) -> list[int]:
    if split_size == 0 and length == 0:
        return [0]
    n = max(1, -(-length // split_size))
    return [min(split_size, length - i * split_size) for i in range(n)]


@op(
    derivatives={
        "self": lambda grads, self_sym_sizes, split_size, dim: _split_with_sizes_backward(
            grads, _split_sizes(self_sym_sizes[dim], split_size), dim, self_sym_sizes
        )
    },
    view="multi",
    dtypes="keep",
    name="split.Tensor",
    node="SplitBackward0",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(5, 3), 2, 0)), SampleInput((T.complex(5, 3), 2, 1), note="complex")],
)
def split_Tensor(self: Tensor, split_size: int, dim: int = 0) -> tuple[Array, ...]:  # noqa: N802
    d = _wrap_dim(dim, self.ndim)
    sizes = _split_sizes(self.shape[d], split_size)
    return _split_views(self, sizes, d)


def _split_views(a: Array, sizes: Sequence[int], d: int) -> tuple[Array, ...]:
    outs = []
    start = 0
    for n in sizes:
        idx: list[Any] = [slice(None)] * a.ndim
        idx[d] = slice(start, start + n)
        outs.append(a[tuple(idx)])
        start += n
    return tuple(outs)


@op(
    derivatives={"self": _split_with_sizes_backward},
    view="multi",
    dtypes="keep",
    samples=lambda: [SampleInput((T.of(5, 3), [2, 3], 0))],
)
def split_with_sizes(self: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Array, ...]:
    d = _wrap_dim(dim, self.ndim)
    if sum(split_sizes) != self.shape[d]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {self.shape[d]} (input "
            f"tensor's size at dimension {d}), but got split_sizes={list(split_sizes)}"
        )
    return _split_views(self, split_sizes, d)


@composite(samples=lambda: [SampleInput((T.of(5, 3), 2)), SampleInput((T.of(5, 3), [1, 4]))])
def split(self: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    if isinstance(split_size_or_sections, int):
        return split_Tensor(self, split_size_or_sections, dim)
    return split_with_sizes(self, list(split_size_or_sections), dim)


@composite(samples=lambda: [SampleInput((T.of(5, 3), 2)), SampleInput((T.of(6, 3), 3))])
def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    d = _wrap_dim(dim, self.ndim)
    size = -(-self.shape[d] // chunks)
    return split_Tensor(self, size, d)


def _unbind_backward(grads: list[Tensor | None], self_sym_sizes: tuple[int, ...], dim: int) -> Tensor:
    """The slices' gradients stacked, zeros for the slices that got none (``unbind_backward``)."""
    d = _wrap_dim(dim, len(self_sym_sizes))
    dtype = next(g for g in grads if g is not None).dtype
    shape = self_sym_sizes[:d] + self_sym_sizes[d + 1 :]
    return stack([zeros(shape, dtype=dtype) if g is None else g for g in grads], dim)


@op(
    derivatives={"self": _unbind_backward},
    view="multi",
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 2), 0)),
        SampleInput((T.of(3, 2), 1)),
        SampleInput((T.complex(3, 2), 1), note="complex"),
    ],
)
def unbind(self: Tensor, dim: int = 0) -> tuple[Array, ...]:
    d = _wrap_dim(dim, self.ndim)
    return tuple(_select_view(self, d, i) for i in range(self.shape[d]))


# --- joining -----------------------------------------------------------------------------------


def _cat_backward(
    grad: Tensor, tensors_sym_sizes: list[tuple[int, ...]], tensors_scalar_type: list[_dtype.dtype], dim: int
) -> list[Tensor]:
    d = _wrap_dim(dim, grad.ndim)
    out = []
    start = 0
    for sizes, scalar_type in zip(tensors_sym_sizes, tensors_scalar_type, strict=True):
        if len(sizes) == 1 and sizes[0] == 0:  # legacy: empty 1-D tensors are skipped by cat
            out.append(zeros(sizes, dtype=grad.dtype))
            continue
        # A real input joined with complex ones gets the real part of its slice.
        out.append(handle_r_to_c(scalar_type, grad.narrow(d, start, sizes[d])))
        start += sizes[d]
    return out


def _stack_backward(grad: Tensor, dim: int, tensors_scalar_type: list[_dtype.dtype]) -> list[Tensor]:
    # PyTorch's stack_tensors_backward selects each slice (it does not unbind).
    d = _wrap_dim(dim, grad.ndim)
    return [handle_r_to_c(st, grad.select(d, i)) for i, st in enumerate(tensors_scalar_type)]


@op(
    derivatives={"tensors": _cat_backward},
    samples=lambda: [
        SampleInput(([T.of(2, 3), T.of(1, 3)], 0)),
        SampleInput(([T.of(2, 3), T.of(2, 2)], 1)),
        SampleInput(([T.complex(2, 3), T.complex(1, 3)], 0), note="complex"),
        SampleInput(([T.of(2, 3), T.complex(2, 2), T.of(2, 1, grad=False)], 1), note="real and complex"),
    ],
    method=False,
)
def cat(tensors: TensorList, dim: int = 0) -> Array:
    arrays = [a for a in tensors if not (a.ndim == 1 and a.shape[0] == 0)]
    if not arrays:
        return np.concatenate(tensors)
    return np.concatenate(arrays, axis=_wrap_dim(dim, arrays[0].ndim))


@op(
    derivatives={"tensors": _stack_backward},
    samples=lambda: [
        SampleInput(([T.of(2, 3), T.of(2, 3)],)),
        SampleInput(([T.of(2, 3), T.of(2, 3)], 2)),
        SampleInput(([T.complex(2, 3), T.complex(2, 3)], 1), note="complex"),
        SampleInput(([T.complex(2, 3), T.of(2, 3)], -1), note="real and complex"),
    ],
    method=False,
)
def stack(tensors: TensorList, dim: int = 0) -> Array:
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    return np.stack(tensors, axis=_wrap_dim(dim, tensors[0].ndim + 1))


def _repeat_backward(grad: Tensor, repeats: Sequence[int], self_sym_sizes: tuple[int, ...]) -> Tensor:
    lead = len(repeats) - len(self_sym_sizes)
    sizes = (1,) * lead + tuple(self_sym_sizes)
    # Split every repeated dim into (repeat, size) and sum over the repeat axes.
    shape: list[int] = []
    for r, s in zip(repeats, sizes, strict=True):
        shape += [r, s]
    g = grad.reshape(shape)
    g = g.sum(tuple(range(0, 2 * len(sizes), 2)))
    return g.reshape(self_sym_sizes)


@op(
    derivatives={"self": _repeat_backward},
    dtypes="keep",
    samples=lambda: [SampleInput((T.of(2, 3), (2, 1))), SampleInput((T.of(2, 3), (2, 1, 2)))],
)
def repeat(self: Tensor, repeats: Sequence[int]) -> Array:
    reps = tuple(int(r) for r in repeats)
    if len(reps) < self.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    return np.tile(self, reps)
