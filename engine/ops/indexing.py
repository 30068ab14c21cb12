"""Indexing ops: ``index``/``index_put``, masked_fill/select/scatter, gather/scatter, index_select/add.

Every backward here is itself made of ops of this module (``index`` -> ``_index_put_impl_`` with
accumulate, ``gather`` -> ``scatter_add_``, ``index_select`` -> ``index_add_``), as in PyTorch's
FunctionsManual.cpp, so that double backward builds the same graph. ``Tensor.__getitem__`` and
``__setitem__`` (engine/ops/tensor_indexing.py) translate Python indices into these ops and the view
ops of engine/ops/shape.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine._factories import zeros
from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import _scalar_type_name, composite, inplace_variant, op
from engine.ops._samples import Lit, SampleInput, T
from engine.ops.pointwise import _maybe_multiply, infer_size

Array = np.ndarray
OptionalTensorList = list[Tensor | None]  # PyTorch's Tensor?[]: see Op in engine/ops/_dispatch.py

_INDEX_DTYPES = (np.int64, np.int32, np.uint8, np.bool_)


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
            raise IndexError(
                f"index {idx[bad].flat[0]} is out of bounds for dimension {dim} with size {size}"
            )
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


def _index_backward(
    grad: Tensor, self_sym_sizes: tuple[int, ...], self_options: Any, indices: Sequence[Tensor | None]
) -> Tensor:
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
        SampleInput((T.complex(3, 4), [None, Lit([[0, 1], [3, 3]])]), note="complex"),
        SampleInput((T.complex(3, 4), [T.mask(3, 4)]), note="complex mask"),
    ],
)
def index_Tensor(self: Tensor, indices: OptionalTensorList) -> Array:  # noqa: N802
    return self[_advanced_index(self, indices)]


def _index_put_into(out: Array, indices: Sequence[Array | None], values: Array, accumulate: bool) -> Array:
    if values.dtype != out.dtype:
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{_scalar_type_name(out.dtype)} for the destination and {_scalar_type_name(values.dtype)} "
            "for the source."
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


def _index_put_self_backward(
    grad: Tensor,
    accumulate: bool,
    indices: Sequence[Tensor | None],
    values_sym_sizes: tuple[int, ...],
    values_options: Any,
) -> Tensor:
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
        SampleInput((T.complex(3, 4), [Lit([0, 0, 2])], T.complex(4), True), note="complex accumulate"),
        SampleInput((T.complex(3, 4), [None, Lit([1, 3])], T.complex(3, 1)), note="complex"),
        SampleInput((T.complex(3, 4), [Lit([0])], T.of(4)), note="complex real values"),
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
def _index_put_impl_(
    self: Tensor, indices: OptionalTensorList, values: Tensor, accumulate: bool = False, unsafe: bool = False
) -> Array:
    return _index_put_into(self, indices, values, accumulate)


# --- masked_fill / masked_select / masked_scatter -----------------------------------------------


def _check_bool_mask(mask: Array, what: str) -> None:
    if mask.dtype != np.bool_:
        raise RuntimeError(f"{what} only supports boolean masks, but got mask with dtype {mask.dtype.name}")


_C_TYPES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int", "uint8": "uint8_t"}


def _masked_fill(self: Array, mask: Array, value: Any) -> Array:
    _check_bool_mask(mask, "masked_fill_")
    shape = infer_size(self.shape, mask.shape)
    fill = np.asarray(value)
    if np.iscomplexobj(fill) and not np.iscomplexobj(self):
        name = _C_TYPES.get(self.dtype.name, self.dtype.name)
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    fill = fill.astype(self.dtype)
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
        SampleInput((T.complex(2, 3), T.mask(2, 3), 1.5 - 2j), note="complex"),
        SampleInput((T.complex(2, 3), T.mask(3), -1.0), note="complex real value"),
        SampleInput((T.of(2, 3), T.mask(2, 3), 1j), note="complex value into real"),
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
        SampleInput((T.complex(2, 3), T.mask(2, 3), T.complex()), note="complex"),
        SampleInput((T.complex(2, 3), T.mask(2, 3), T((), grad=False)), note="complex real value"),
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


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3), T.mask(2, 3), 0.5)),
        SampleInput((T.of(2, 3), T.mask(3), T.of())),
        SampleInput((T.complex(2, 3), T.mask(3), 2j), note="complex"),
    ]
)
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


@op(
    derivatives={
        "grad_output": lambda grad, grad_output_sym_sizes, grad_output_options, mask: masked_scatter(
            zeros(grad_output_sym_sizes, dtype=grad_output_options), mask, grad
        )
    },
    dtypes="keep",
    method=False,
    function=False,
)
def masked_scatter_backward(grad_output: Tensor, mask: Tensor, sizes: Sequence[int]) -> Array:
    """The gradient of masked_scatter's source: the masked gradient in order, zero-padded to the
    source's size."""
    selected = np.broadcast_to(grad_output, infer_size(grad_output.shape, mask.shape))[mask]
    out = np.zeros(int(np.prod(sizes)), dtype=grad_output.dtype)
    n = min(out.size, selected.size)
    out[:n] = selected[:n]
    return out.reshape(tuple(sizes))


@op(
    derivatives={
        "self": lambda grad, mask: masked_fill_Scalar(grad, mask, 0),
        "source": lambda grad, mask, source_sym_sizes: masked_scatter_backward(grad, mask, source_sym_sizes),
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
            f"{_scalar_type_name(self.dtype)} and {_scalar_type_name(source.dtype)}"
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


def _scatter_gather_index(
    self: Array, dim: int, index: Array, src: Array | None, what: str
) -> tuple[Any, ...]:
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
    grid: list[Array] = list(np.indices(index.shape, sparse=True))
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
def scatter(
    self: Tensor, dim: int, index: Tensor, src: Tensor | float | None = None, *, value: float | None = None
) -> Tensor:
    if isinstance(src, Tensor):
        return scatter_src(self, dim, index, src)
    return scatter_value(self, dim, index, value if src is None else src)


@composite(function=False)
def scatter_(
    self: Tensor, dim: int, index: Tensor, src: Tensor | float | None = None, *, value: float | None = None
) -> Tensor:
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
            f"index_add_(): self ({_scalar_type_name(self.dtype)}) and source "
            f"({_scalar_type_name(source.dtype)}) must have the same scalar type"
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
