"""Indexing ops: ``index``/``index_put``, masked_fill/select/scatter, gather/scatter, index_select/add.

Every backward here is itself made of ops of this module (``index`` -> ``_index_put_impl_`` with
accumulate, ``gather`` -> ``scatter_add_``, ``index_select`` -> ``index_add_``), as in PyTorch's
FunctionsManual.cpp, so that double backward builds the same graph. ``Tensor.__getitem__`` and
``__setitem__`` (``getitem``/``setitem`` below) translate Python indices into these ops and the view
ops of engine/ops/shape.py exactly as ``torch/csrc/autograd/python_variable_indexing.cpp`` does.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _dtype
from engine._factories import zeros
from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import _scalar_type_name, composite, inplace_variant, op
from engine.ops._samples import Lit, SampleInput, T
from engine.ops.pointwise import infer_size
from engine.ops.shape import alias, cat, select, slice_, unsqueeze

Array = np.ndarray
OptionalTensorList = list[Tensor | None]  # PyTorch's Tensor?[]: see Op in engine/ops/_dispatch.py

_INDEX_DTYPES = (np.int64, np.int32, np.uint8, np.bool_)


def _type_name(a: Array) -> str:
    return _scalar_type_name(_dtype.from_numpy(a.dtype))


def _maybe_multiply(t: Tensor, s: float) -> Tensor:
    return t if s == 1 else t * s


# --- index / index_put -------------------------------------------------------------------------


def _advanced_index(a: Array, indices: Sequence[Array | None]) -> tuple[Any, ...]:
    """``Tensor?[]`` indices as a NumPy index: None -> ``:``, masks -> their nonzero() positions
    (PyTorch expands them the same way, which is what makes their semantics match NumPy's)."""
    out: list[Any] = []
    dim = 0
    for idx in indices:
        if idx is None:
            out.append(slice(None))
            dim += 1
            continue
        if idx.dtype.type not in _INDEX_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if idx.dtype.type in (np.uint8, np.bool_):
            if idx.dtype.type is np.uint8:
                warnings.warn(
                    "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
                    "instead.",
                    UserWarning,
                    stacklevel=4,
                )
            for j in range(idx.ndim):
                if dim + j >= a.ndim or idx.shape[j] != a.shape[dim + j]:
                    raise IndexError(
                        f"The shape of the mask {list(idx.shape)} at index {j} does not match the shape "
                        f"of the indexed tensor {list(a.shape)} at index {dim + j}"
                    )
            out.extend(np.nonzero(idx.astype(bool)))
            dim += idx.ndim
            continue
        if dim >= a.ndim:
            raise IndexError(f"too many indices for tensor of dimension {a.ndim} (got {len(indices)})")
        size = a.shape[dim]
        bad = (idx >= size) | (idx < -size)
        if bad.any():
            raise IndexError(f"index {idx[bad].flat[0]} is out of bounds for dimension {dim} with size {size}")
        out.append(idx.astype(np.int64, copy=False))
        dim += 1
    if dim > a.ndim:
        raise IndexError(f"too many indices for tensor of dimension {a.ndim} (got {len(indices)})")
    arrays = [x for x in out if not isinstance(x, slice)]
    try:
        np.broadcast_shapes(*(x.shape for x in arrays))
    except ValueError:
        shapes = ", ".join(str(list(x.shape)) for x in arrays)
        raise IndexError(
            f"shape mismatch: indexing tensors could not be broadcast together with shapes {shapes}"
        ) from None
    return tuple(out)


def _index_backward(grad: Tensor, self_sym_sizes: tuple[int, ...], self_options: Any,
                    indices: Sequence[Tensor | None]) -> Tensor:
    return _index_put_impl_(zeros(self_sym_sizes, dtype=self_options), indices, grad, True, True)


@op(
    derivatives={"self": _index_backward},
    name="index.Tensor",
    node="IndexBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(3, 4), [Lit([0, 2, 2])])),
        SampleInput((T.of(3, 4), [None, Lit([[0, 1], [3, 3]])]), note="None"),
        SampleInput((T.of(3, 4), [T.mask(3, 4)]), note="mask"),
        SampleInput((T.of(3, 4, 2), [Lit([0, 1]), None, Lit([1, 0])]), note="apart"),
        SampleInput((T.of(3, 4), [Lit([5])]), note="out of bounds"),
    ],
)
def index_Tensor(self: Tensor, indices: OptionalTensorList) -> Array:  # noqa: N802
    return self[_advanced_index(self, indices)]


def _index_put_into(out: Array, indices: Sequence[Array | None], values: Array, accumulate: bool) -> Array:
    if values.dtype != out.dtype:
        raise RuntimeError(
            f"Index put requires the source and destination dtypes match, got {_type_name(out)} for the "
            f"destination and {_type_name(values)} for the source."
        )
    idx = _advanced_index(out, indices)
    target = out[idx].shape
    try:
        ok = np.broadcast_shapes(values.shape, target) == target
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(
            f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to indexing "
            f"result of shape {list(target)}"
        )
    if accumulate:
        np.add.at(out, idx, values)
    else:
        out[idx] = values
    return out


def _index_put_self_backward(grad: Tensor, accumulate: bool, indices: Sequence[Tensor | None],
                             values_sym_sizes: tuple[int, ...], values_options: Any) -> Tensor:
    if accumulate:
        return grad
    # PyTorch saves only the size and dtype of values for this zeros_like(values).
    return index_put(grad, indices, zeros(values_sym_sizes, dtype=values_options), False)


_INDEX_PUT_DERIVATIVES = {
    "self": _index_put_self_backward,
    "values": lambda grad, indices: index_Tensor(grad, indices),
}


@op(
    derivatives=_INDEX_PUT_DERIVATIVES,
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 4), [Lit([0, 2])], T.of(2, 4))),
        SampleInput((T.of(3, 4), [Lit([0, 0, 2])], T.of(4), True), note="accumulate"),
        SampleInput((T.of(3, 4, grad=False), [None, Lit([1, 3])], T.of(3, 1)), note="values only"),
        SampleInput((T.of(3, 4), [T.mask(3, 4)], T.of()), note="mask"),
        SampleInput((T.of(3, 4), [Lit([0])], T.of(2)), note="shape mismatch"),
    ],
)
def index_put(self: Tensor, indices: OptionalTensorList, values: Tensor, accumulate: bool = False) -> Array:
    return _index_put_into(self.copy(), indices, values, accumulate)


index_put_ = inplace_variant(index_put)


@op(
    derivatives=_INDEX_PUT_DERIVATIVES,
    node="IndexPutImplBackward0",
    dtypes="keep",
    inplace=True,
    method=False,
)
def _index_put_impl_(self: Tensor, indices: OptionalTensorList, values: Tensor, accumulate: bool = False,
                     unsafe: bool = False) -> Array:
    return _index_put_into(self, indices, values, accumulate)


# --- masked_fill / masked_select / masked_scatter -----------------------------------------------


def _check_bool_mask(mask: Array, what: str) -> None:
    if mask.dtype != np.bool_:
        raise RuntimeError(f"{what} only supports boolean masks, but got mask with dtype {mask.dtype.name}")


def _masked_fill(self: Array, mask: Array, value: Any) -> Array:
    _check_bool_mask(mask, "masked_fill_")
    shape = infer_size(self.shape, mask.shape)
    fill = np.asarray(value).astype(self.dtype)
    return np.where(np.broadcast_to(mask, shape), fill, np.broadcast_to(self, shape))


@op(
    derivatives={"self": lambda grad, mask: masked_fill_Scalar(grad, mask, 0)},
    name="masked_fill.Scalar",
    node="MaskedFillBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), T.mask(2, 3), 1.5)),
        SampleInput((T.of(2, 3), T.mask(3), -1.0), note="broadcast mask"),
        SampleInput((T.of(3), T.mask(2, 3), 2.0), note="broadcast self"),
    ],
)
def masked_fill_Scalar(self: Tensor, mask: Tensor, value: float) -> Array:  # noqa: N802
    return _masked_fill(self, mask, value)


@op(
    derivatives={
        "self": lambda grad, mask: masked_fill_Scalar(grad, mask, 0),
        "value": lambda grad, mask: masked_select(grad, mask).sum(),
    },
    name="masked_fill.Tensor",
    node="MaskedFillBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), T.mask(2, 3), T.of())),
        SampleInput((T.of(2, 3, grad=False), T.mask(3), T.of()), note="value only"),
        SampleInput((T.of(2, 3), T.mask(2, 3), T.of(1)), note="1-dim value"),
    ],
)
def masked_fill_Tensor(self: Tensor, mask: Tensor, value: Tensor) -> Array:  # noqa: N802
    if value.ndim != 0:
        raise RuntimeError(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.ndim} dimension(s)."
        )
    return _masked_fill(self, mask, value)


masked_fill_Scalar_ = inplace_variant(masked_fill_Scalar, "masked_fill_.Scalar")
masked_fill_Tensor_ = inplace_variant(masked_fill_Tensor, "masked_fill_.Tensor")


@composite(samples=lambda: [SampleInput((T.of(2, 3), T.mask(2, 3), 0.5)), SampleInput((T.of(2, 3), T.mask(3), T.of()))])
def masked_fill(self: Tensor, mask: Tensor, value: Tensor | float) -> Tensor:
    if isinstance(value, Tensor):
        return masked_fill_Tensor(self, mask, value)
    return masked_fill_Scalar(self, mask, value)


@composite(function=False)
def masked_fill_(self: Tensor, mask: Tensor, value: Tensor | float) -> Tensor:
    if isinstance(value, Tensor):
        return masked_fill_Tensor_(self, mask, value)
    return masked_fill_Scalar_(self, mask, value)


def _masked_select_backward(grad: Tensor, self: Tensor, mask: Tensor) -> Tensor:
    shape = infer_size(tuple(self.shape), tuple(mask.shape))
    return zeros(shape, dtype=grad.dtype).masked_scatter_(mask, grad)


@op(
    derivatives={"self": _masked_select_backward},
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3), T.mask(2, 3))),
        SampleInput((T.of(3), T.mask(2, 3)), note="broadcast"),
        SampleInput((T.of(2, 3), Lit([1, 0, 1])), note="long mask"),
    ],
)
def masked_select(self: Tensor, mask: Tensor) -> Array:
    if mask.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = infer_size(self.shape, mask.shape)
    return np.broadcast_to(self, shape)[np.broadcast_to(mask, shape)]


def _masked_scatter_backward(grad: Tensor, mask: Tensor, sizes: tuple[int, ...]) -> Tensor:
    selected = masked_select(grad, mask)
    missing = int(np.prod(sizes)) - selected.numel()
    if missing > 0:
        selected = cat([selected, zeros(missing, dtype=grad.dtype)], 0)
    return selected.view(sizes)


@op(
    derivatives={
        "self": lambda grad, mask: masked_fill_Scalar(grad, mask, 0),
        "source": lambda grad, mask, source_sym_sizes: _masked_scatter_backward(grad, mask, source_sym_sizes),
    },
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3), T.mask(2, 3), T.of(6))),
        SampleInput((T.of(3), T.mask(2, 3), T.of(2, 4)), note="broadcast self"),
    ],
)
def masked_scatter(self: Tensor, mask: Tensor, source: Tensor) -> Array:
    _check_bool_mask(mask, "masked_scatter_")
    if self.dtype != source.dtype:
        raise RuntimeError(
            "masked_scatter: expected self and source to have same dtypes but got"
            f"{_type_name(self)} and {_type_name(source)}"
        )
    shape = infer_size(self.shape, mask.shape)
    out = np.array(np.broadcast_to(self, shape))
    m = np.broadcast_to(mask, shape)
    n = int(m.sum())
    if source.size < n:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out[m] = source.reshape(-1)[:n]
    return out


masked_scatter_ = inplace_variant(masked_scatter)


# --- gather / scatter --------------------------------------------------------------------------


def _scatter_gather_index(self: Array, dim: int, index: Array, src: Array | None, what: str) -> tuple[Any, ...]:
    """The NumPy index addressing ``self[..., index[i][j], ...]`` for every position of ``index``."""
    if index.dtype.type not in (np.int64, np.int32):
        raise RuntimeError(f"{what}(): Expected dtype int32/int64 for index")
    d = _wrap_dim(dim, self.ndim)
    if index.ndim != self.ndim and not (index.ndim <= 1 and self.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for i in range(index.ndim):
        if i != d and index.shape[i] > self.shape[i]:
            raise RuntimeError(
                f"Size does not match at dimension {i} expected index {list(index.shape)} to be no larger "
                f"than self {list(self.shape)} apart from dimension {d}"
            )
        if src is not None and index.shape[i] > src.shape[i]:
            raise RuntimeError(
                f"Size does not match at dimension {i} expected index {list(index.shape)} to be no larger "
                f"than src {list(src.shape)}"
            )
    size = self.shape[d] if self.ndim else 1
    bad = (index >= size) | (index < -size)
    if bad.any():
        raise RuntimeError(f"index {index[bad].flat[0]} is out of bounds for dimension {d} with size {size}")
    grid = list(np.indices(index.shape, sparse=True))
    if not grid:  # 0-dim
        return ()
    grid[d] = index.astype(np.int64, copy=False)
    return tuple(grid)


def _gather_backward(grad: Tensor, self: Tensor, dim: int, index: Tensor, sparse_grad: bool) -> Tensor:
    return zeros(tuple(self.shape), dtype=grad.dtype).scatter_add_(dim, index, grad)


@op(
    derivatives={"self": _gather_backward},
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 4), 1, Lit([[0, 1, 3], [2, 2, 0], [1, 0, 0]]))),
        SampleInput((T.of(3, 4), 0, T.index(2, 4, high=3))),
        SampleInput((T.of(3, 4), 1, Lit([[4]])), note="out of bounds"),
    ],
)
def gather(self: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Array:
    return self[_scatter_gather_index(self, dim, index, None, "gather")]


def _src_part(src: Array, index: Array) -> Array:
    return src[tuple(slice(0, n) for n in index.shape)]


def _check_same_dtype(self: Array, src: Array) -> None:
    if self.dtype != src.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")


@op(
    derivatives={
        "self": lambda grad, dim, index: scatter_value(grad, dim, index, 0),
        "src": lambda grad, dim, index: gather(grad, dim, index),
    },
    name="scatter.src",
    node="ScatterBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(3, 4), 0, Lit([[0, 1, 2, 0], [2, 0, 1, 1]]), T.of(2, 4))),
        # A src larger than index is allowed, but torch's backward then fails (src's gradient has
        # index's shape), so the sample keeps src out of the graph.
        SampleInput((T.of(3, 4), 1, Lit([[3, 0], [1, 2]]), T.of(3, 5, grad=False)), note="larger src"),
    ],
)
def scatter_src(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Array:
    _check_same_dtype(self, src)
    out = self.copy()
    out[_scatter_gather_index(self, dim, index, src, "scatter")] = _src_part(src, index)
    return out


@op(
    derivatives={"self": lambda grad, dim, index: scatter_value(grad, dim, index, 0)},
    name="scatter.value",
    node="ScatterBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(3, 4), 1, Lit([[0, 3], [1, 2], [2, 2]]), 1.5))],
)
def scatter_value(self: Tensor, dim: int, index: Tensor, value: float) -> Array:
    out = self.copy()
    out[_scatter_gather_index(self, dim, index, None, "scatter")] = value
    return out


scatter_src_ = inplace_variant(scatter_src, "scatter_.src")
scatter_value_ = inplace_variant(scatter_value, "scatter_.value")


@composite(samples=lambda: [SampleInput((T.of(3, 4), 0, Lit([[0, 1, 2, 0]]), T.of(1, 4)))])
def scatter(self: Tensor, dim: int, index: Tensor, src: Tensor | float | None = None, *,
            value: float | None = None) -> Tensor:
    if isinstance(src, Tensor):
        return scatter_src(self, dim, index, src)
    return scatter_value(self, dim, index, value if src is None else src)


@composite(function=False)
def scatter_(self: Tensor, dim: int, index: Tensor, src: Tensor | float | None = None, *,
             value: float | None = None) -> Tensor:
    if isinstance(src, Tensor):
        return scatter_src_(self, dim, index, src)
    return scatter_value_(self, dim, index, value if src is None else src)


@op(
    derivatives={"self": lambda grad: grad, "src": lambda grad, dim, index: gather(grad, dim, index)},
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 4), 0, T.index(2, 4, high=3), T.of(2, 4))),
        SampleInput((T.of(3, 4, grad=False), 1, T.index(3, 6, high=4), T.of(3, 6)), note="src only"),
    ],
)
def scatter_add(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Array:
    _check_same_dtype(self, src)
    out = self.copy()
    np.add.at(out, _scatter_gather_index(self, dim, index, src, "scatter"), _src_part(src, index))
    return out


scatter_add_ = inplace_variant(scatter_add)


# --- index_select / index_add ------------------------------------------------------------------


def _index_select_backward(grad: Tensor, self_sym_sizes: tuple[int, ...], dim: int, index: Tensor) -> Tensor:
    return zeros(self_sym_sizes, dtype=grad.dtype).index_add_(dim, index, grad)


@op(
    derivatives={"self": _index_select_backward},
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 4), 0, Lit([2, 0, 2]))),
        SampleInput((T.of(3, 4), -1, Lit([3, 1]))),
        SampleInput((T.of(3, 4), 0, Lit([3])), note="out of range"),
    ],
)
def index_select(self: Tensor, dim: int, index: Tensor) -> Array:
    if index.dtype.type not in (np.int64, np.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = _wrap_dim(dim, self.ndim)
    flat = index.reshape(-1)
    size = self.shape[d] if self.ndim else 1
    if ((flat >= size) | (flat < 0)).any():
        raise IndexError("index out of range in self")
    return np.take(self, flat, axis=d) if self.ndim else self.reshape(-1)[flat].reshape(index.shape)


def _index_add_source_backward(grad: Tensor, dim: int, index: Tensor, source: Tensor, alpha: float) -> Tensor:
    if source.ndim > 0:
        return _maybe_multiply(index_select(grad, dim, index).expand_as(source), alpha)
    return _maybe_multiply(index_select(grad, dim, index.squeeze(0)), alpha)


@op(
    derivatives={"self": lambda grad: grad, "source": _index_add_source_backward},
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 4), 0, Lit([2, 0, 2]), T.of(3, 4))),
        SampleInput((T.of(3, 4), 1, Lit([1, 1]), T.of(3, 2)), {"alpha": 2.0}, note="alpha"),
        SampleInput((T.of(3, 4), 0, Lit([0, 1]), T.of(1, 4)), note="count mismatch"),
    ],
)
def index_add(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1) -> Array:
    if self.dtype != source.dtype:
        raise RuntimeError(
            f"index_add_(): self ({_type_name(self)}) and source ({_type_name(source)}) must have the same "
            "scalar type"
        )
    d = _wrap_dim(dim, self.ndim)
    flat = index.reshape(-1)
    n = source.shape[d] if source.ndim else 1
    if flat.size != n:
        raise RuntimeError(
            f"index_add_(): Number of indices ({flat.size}) should be equal to source.size(dim): ({n}), "
            f"for dim: {d}"
        )
    size = self.shape[d] if self.ndim else 1
    bad = (flat >= size) | (flat < 0)
    if bad.any():
        raise RuntimeError(f"index {flat[bad][0]} is out of bounds for dimension {d} with size {size}")
    out = self.copy()
    idx: list[Any] = [slice(None)] * self.ndim
    idx[d] = flat
    np.add.at(out, tuple(idx), source if alpha == 1 else source * alpha)
    return out


index_add_ = inplace_variant(index_add)


# --- Tensor.__getitem__ / __setitem__ ----------------------------------------------------------
# python_variable_indexing.cpp: basic indices become view ops applied left to right (an int is a
# select, a slice a slice, None an unsqueeze; even ``:`` is recorded), tensors and lists are
# collected by dimension and handed to one ``index`` (read) or ``index_put_`` (write) at the end.

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
    stop = (_PY_SSIZE_T_MAX if step > 0 else -_PY_SSIZE_T_MAX - 1) if s.stop is None else operator.index(s.stop)
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
