"""Reductions: sum, mean, var/std, max/min, amax/amin, prod, cumsum, logsumexp, softmax."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import composite, op
from engine.ops._samples import SampleInput, T

Array = np.ndarray


def _dims(dim: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Normalise a ``dim`` argument; ``None`` or ``[]`` means every dimension."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        return (_wrap_dim(dim, ndim),)
    if len(dim) == 0:
        return tuple(range(ndim))
    return tuple(sorted(_wrap_dim(d, ndim) for d in dim))


def _unsqueeze_dims(grad: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    if keepdim:
        return grad
    for d in dims:
        grad = grad.unsqueeze(d)
    return grad


def _sum_backward(grad: Tensor, self_sym_sizes: tuple[int, ...], dim: Any, keepdim: bool) -> Tensor:
    dims = _dims(dim, len(self_sym_sizes))
    if len(self_sym_sizes) == 0:
        return grad.expand(self_sym_sizes)
    return _unsqueeze_dims(grad, dims, keepdim).expand(self_sym_sizes)


@op(
    derivatives={"self": lambda grad, self_sym_sizes: grad.expand(self_sym_sizes)},
    name="sum.default",
    node="SumBackward0",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 3),)), SampleInput((T.of(),))],
)
def sum_default(self: Tensor, dtype: Any = None) -> Array:
    out = np.sum(self)
    return np.asarray(out, dtype=self.dtype if dtype is None else dtype._np)


@op(
    derivatives={"self": _sum_backward},
    name="sum.dim_IntList",
    node="SumBackward1",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), 1)),
        SampleInput((T.of(2, 3, 4), (0, 2), True)),
        SampleInput((T.of(2, 3), -1, True)),
    ],
)
def sum_dim_IntList(self: Tensor, dim: Any, keepdim: bool = False, dtype: Any = None) -> Array:  # noqa: N802
    out = np.sum(self, axis=_dims(dim, self.ndim), keepdims=keepdim)
    return np.asarray(out, dtype=self.dtype if dtype is None else dtype._np)


@composite(samples=lambda: [SampleInput((T.of(2, 3),)), SampleInput((T.of(2, 3), 0))])
def sum(self: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A001
    if self.dtype.name in ("bool", "int32", "uint8") and dtype is None:
        from engine import _dtype

        dtype = _dtype.int64
    if dim is None:
        return sum_default(self, dtype=dtype)
    return sum_dim_IntList(self, dim, keepdim, dtype=dtype)
