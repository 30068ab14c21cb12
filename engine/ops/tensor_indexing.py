"""``Tensor.__getitem__`` and ``__setitem__``: Python indices as PyTorch turns them into ops.

``torch/csrc/autograd/python_variable_indexing.cpp`` and ``ATen/TensorIndexing.h``: basic indices
become view ops applied left to right (an int is a ``select``, a slice a ``slice`` - even ``:`` is
recorded -, None an ``unsqueeze``), tensors and lists are collected by dimension and handed to one
``index`` (read) or ``index_put_`` (write) at the end. So ``x[0, 1:]`` is SliceBackward0 over
SelectBackward0, and ``x[0] = y`` is a ``copy_`` into a view, which gives ``x`` a CopySlices.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _dtype
from engine._tensor import Tensor
from engine.ops.indexing import index_put_, index_Tensor
from engine.ops.shape import alias, select, slice_, unsqueeze

__all__ = ["getitem", "setitem"]

_SEQUENCE_WARNING = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed in "
    "pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted as "
    "tensor index, x[torch.tensor(seq)], which will result either in an error or a different result"
)
_PY_SSIZE_T_MAX = 2**63 - 1


def _is_int(obj: object) -> bool:
    return isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_))


def _is_sequence(obj: object) -> bool:
    return isinstance(obj, (list, tuple, str, np.ndarray))


def _wrap_tuple(index: Any) -> tuple[Any, ...]:
    """``treatSequenceAsTuple``: NumPy's heuristic for a list that holds slices or sequences."""
    if isinstance(index, tuple):
        return index
    if isinstance(index, (Tensor, np.ndarray)) or not _is_sequence(index) or len(index) >= 32:
        return (index,)
    for obj in index:
        if isinstance(obj, (Tensor, slice)) or _is_sequence(obj) or obj is None or obj is Ellipsis:
            warnings.warn(_SEQUENCE_WARNING, UserWarning, stacklevel=4)
            return tuple(index)
    return (index,)


def _count_specified_dims(index: tuple[Any, ...]) -> int:
    count = 0
    for obj in index:
        if isinstance(obj, Tensor):
            count += obj.ndim if obj.dtype in (_dtype.bool_, _dtype.uint8) else 1
        elif obj is not None and obj is not Ellipsis and obj is not True and obj is not False:
            count += 1
    return count


def _apply_select(t: Tensor, dim: int, index: int, real_dim: int) -> Tensor:
    if t.ndim == 0:
        if index == 0:
            raise IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
                "C++ to convert a 0-dim tensor to a number"
            )
        raise IndexError(f"index {index} is out of bounds for dimension {real_dim} with size 0")
    size = t.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {real_dim} with size {size}")
    return select(t, dim, index)


def _apply_slice(t: Tensor, dim: int, s: slice) -> Tensor:
    step = 1 if s.step is None else operator.index(s.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    start = (0 if step > 0 else _PY_SSIZE_T_MAX) if s.start is None else operator.index(s.start)
    stop = (
        (_PY_SSIZE_T_MAX if step > 0 else -_PY_SSIZE_T_MAX - 1) if s.stop is None else operator.index(s.stop)
    )
    return slice_(t, dim, start, stop, step)


def _bool_index(value: bool) -> Tensor:
    """``x[True]`` indexes a new leading dim of size 1 with [0], ``x[False]`` with []."""
    return Tensor._make(np.zeros(1 if value else 0, dtype=np.int64))


def _sequence_to_tensor(seq: Any) -> Tensor:
    """A list used as an index: bool (or uint8) values stay masks, anything else becomes int64."""

    def values(obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return obj._data.tolist()
        if isinstance(obj, str):
            raise TypeError("new(): invalid data type 'str'")
        if isinstance(obj, (list, tuple)):
            return [values(o) for o in obj]
        return obj

    a = np.asarray(values(seq))
    if a.dtype not in (np.bool_, np.uint8):
        a = a.astype(np.int64)
    return Tensor._make(a)


def _apply_slicing(self: Tensor, index: tuple[Any, ...]) -> tuple[Tensor, list[Tensor | None]]:
    """The basic indices applied as views; the tensor indices collected for ``index``/``index_put_``."""
    specified = _count_specified_dims(index)
    if specified > self.ndim:
        raise IndexError(f"too many indices for tensor of dimension {self.ndim}")
    result = self
    out: list[Tensor | None] = []
    dim = 0

    def record(t: Tensor) -> None:
        nonlocal dim
        out.extend([None] * (dim + 1 - len(out)))
        out[dim] = t
        dim += 1

    for real_dim, obj in enumerate(index):
        if obj is True or obj is False:
            result = unsqueeze(result, dim)
            record(_bool_index(obj))
        elif _is_int(obj):
            result = _apply_select(result, dim, int(obj), real_dim)
        elif isinstance(obj, slice):
            result = _apply_slice(result, dim, obj)
            dim += 1
        elif obj is Ellipsis:
            dim += self.ndim - specified
        elif obj is None:
            result = unsqueeze(result, dim)
            dim += 1
        elif isinstance(obj, Tensor):
            if obj.ndim == 0 and obj.dtype in (_dtype.bool_, _dtype.uint8):
                result = unsqueeze(result, dim)
                record(_bool_index(bool(obj.item())))
            elif obj.ndim == 0 and obj.dtype in (_dtype.int64, _dtype.int32):
                result = _apply_select(result, dim, int(obj.item()), real_dim)
            else:
                record(obj)
        elif _is_sequence(obj):
            record(_sequence_to_tensor(obj))
        else:
            try:
                i = operator.index(obj)
            except TypeError:
                raise IndexError(
                    "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                    f"valid indices (got {type(obj).__name__})"
                ) from None
            result = _apply_select(result, dim, i, real_dim)
    return result, out


def getitem(self: Tensor, index: Any) -> Tensor:
    """``self[index]`` as PyTorch records it (``THPVariable_getitem``)."""
    if index is None:
        return unsqueeze(self, 0)
    if index is Ellipsis:
        return alias(self)
    if _is_int(index):
        return _apply_select(self, 0, int(index), 0)
    if isinstance(index, slice):
        return _apply_slice(self, 0, index)
    if index is True or index is False:
        return index_Tensor(unsqueeze(self, 0), [_bool_index(index)])
    sliced, tensor_indices = _apply_slicing(self, _wrap_tuple(index))
    if not tensor_indices:
        # x[...] or x[()] still returns a new tensor object: an alias.
        return alias(sliced) if sliced is self else sliced
    return index_Tensor(sliced, tensor_indices)


def _value_to_tensor(self: Tensor, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float, complex, np.number)):
        return Tensor._make(np.array(value).astype(self.dtype._np))
    raise TypeError(f"can't assign a {type(value).__name__} to a engine.{self.dtype._legacy_name}")


def _strip_leading_ones(shape: Sequence[int]) -> tuple[int, ...]:
    """``slicePrefix1sSize``: a value of shape (1, 1, 3) is written as one of shape (3,)."""
    shape = tuple(shape)
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return shape[i:]


def _copy_to(dst: Tensor, src: Tensor) -> None:
    if tuple(dst.shape) == tuple(src.shape):
        dst.copy_(src)
    elif src.ndim == 0:
        dst.fill_(src)
    else:
        view = src.view(_strip_leading_ones(src.shape))
        if tuple(view.shape) != tuple(dst.shape):
            view = view.expand(tuple(dst.shape))
        dst.copy_(view)


def setitem(self: Tensor, index: Any, value: Any) -> None:
    """``self[index] = value`` as PyTorch records it (``THPVariable_setitem``): basic indices write
    through a view (``copy_``, or ``fill_`` for a 0-dim value), so the base gets ``CopySlices``;
    tensor indices write with ``index_put_``."""
    v = _value_to_tensor(self, value)
    if index is False:
        return
    if index is Ellipsis:
        _copy_to(self, v)
    elif index is None or index is True:
        _copy_to(unsqueeze(self, 0), v)
    elif _is_int(index):
        _copy_to(_apply_select(self, 0, int(index), 0), v)
    elif isinstance(index, slice):
        _copy_to(_apply_slice(self, 0, index), v)
    else:
        sliced, tensor_indices = _apply_slicing(self, _wrap_tuple(index))
        if not tensor_indices:
            _copy_to(sliced, v)
            return
        sizes = _strip_leading_ones(v.shape)
        index_put_(sliced, tensor_indices, v.view(sizes) if sizes != tuple(v.shape) else v)
