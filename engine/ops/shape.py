"""Shape ops. Most are views: their kernel returns a NumPy view of the input's memory, and the
dispatcher makes the result a differentiable view that shares its base's version counter (see
Note [View + in-place] in engine/autograd/_views.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided as _np_as_strided

from engine import _dtype
from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import composite, inplace_variant, op
from engine.ops._samples import SampleInput, T

Array = np.ndarray
TensorList = list[Tensor]


def _sizes(size: Any) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(s) for s in size)


def _infer_size(shape: Sequence[int], numel: int) -> tuple[int, ...]:
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if neg:
        if known == 0 or numel % known != 0:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _try_view(a: Array, shape: tuple[int, ...]) -> Array | None:
    v = a.view()
    try:
        v.shape = shape
    except AttributeError:
        return None
    return v


# --- view / reshape ----------------------------------------------------------------------------


@op(
    derivatives={"self": lambda grad, self_sym_sizes: grad.reshape(self_sym_sizes)},
    view="view",
    dtypes="keep",
    method=True,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), (3, 2))),
        SampleInput((T.of(2, 3), (-1,))),
        SampleInput((T.complex(2, 3), (3, 2)), note="complex"),
    ],
)
def view(self: Tensor, size: Sequence[int]) -> Array:
    shape = _infer_size(_sizes(size), self.size)
    v = _try_view(self, shape)
    if v is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    return v


@op(
    derivatives={"self": lambda grad, self_sym_sizes: grad.reshape(self_sym_sizes)},
    dtypes="keep",
    node="UnsafeViewBackward0",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 3), (3, 2)))],
)
def _unsafe_view(self: Tensor, size: Sequence[int]) -> Array:
    return self.reshape(_infer_size(_sizes(size), self.size))


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3), (3, 2))),
        SampleInput((T.of(2, 3), (6,))),
        SampleInput((T.complex(2, 3), (6,)), note="complex"),
    ]
)
def reshape(self: Tensor, *shape: Any) -> Tensor:
    size = _infer_size(_sizes(shape), self.numel())
    if self.is_contiguous():
        return view(self, size)
    aliased = _try_view(self._data, size)
    if aliased is not None:
        stride = tuple(s // aliased.itemsize for s in aliased.strides)
        return _reshape_alias(self, size, stride)
    # Not expressible as a view: copy, then reinterpret the copy (PyTorch's _unsafe_view).
    return _unsafe_view(clone(self, memory_format="contiguous"), size)


@op(
    derivatives={"self": lambda grad, self_sym_sizes: grad.reshape(self_sym_sizes)},
    view="view",
    dtypes="keep",
    node="ReshapeAliasBackward0",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 3), (3, 2), (2, 1)))],
)
def _reshape_alias(self: Tensor, size: Sequence[int], stride: Sequence[int]) -> Array:
    """A reshape of a non-contiguous tensor that is still expressible as a view."""
    v = _try_view(self, tuple(size))
    if v is None:
        raise RuntimeError(f"_reshape_alias: size {list(size)} is not a view of the input")
    return v


@composite()
def view_as(self: Tensor, other: Tensor) -> Tensor:
    return view(self, tuple(other.shape))


@composite()
def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return reshape(self, tuple(other.shape))


@composite(samples=lambda: [SampleInput((T.of(2, 3, 2),)), SampleInput((T.of(2, 3, 2), 1))])
def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0:
        return reshape(self, (1,))
    start, end = _wrap_dim(start_dim, self.ndim), _wrap_dim(end_dim, self.ndim)
    if start == end:
        return self
    shape = tuple(self.shape)
    return reshape(self, (*shape[:start], -1, *shape[end + 1 :]))


@op(
    derivatives={"self": lambda grad: grad},
    dtypes="keep",
    samples=lambda: [SampleInput((T.of(2, 3),)), SampleInput((T.complex(2, 3),), note="complex")],
)
def clone(self: Tensor, memory_format: Any = None) -> Array:
    return np.array(self, copy=True, order="C")


@composite()
def contiguous(self: Tensor, memory_format: Any = None) -> Tensor:
    if self.is_contiguous():
        return self
    return clone(self, memory_format="contiguous")


# --- dimension shuffles ----------------------------------------------------------------------


def _unsqueeze_to(grad: Tensor, sizes: tuple[int, ...]) -> Tensor:
    return grad.reshape(sizes)


@op(
    derivatives={"self": lambda grad, self_sym_sizes: _unsqueeze_to(grad, self_sym_sizes)},
    view="view",
    dtypes="keep",
    node="SqueezeBackward0",
    method=False,
    function=False,
    name="squeeze.default",
    samples=lambda: [SampleInput((T.of(2, 1, 3),))],
)
def _squeeze(self: Tensor) -> Array:
    return np.squeeze(self)


@op(
    derivatives={"self": lambda grad, self_sym_sizes: _unsqueeze_to(grad, self_sym_sizes)},
    view="view",
    dtypes="keep",
    node="SqueezeBackward1",
    name="squeeze.dim",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 1, 3), 1)), SampleInput((T.of(2, 1, 3), 0))],
)
def squeeze_dim(self: Tensor, dim: int) -> Array:
    d = _wrap_dim(dim, self.ndim)
    return np.squeeze(self, d) if self.ndim and self.shape[d] == 1 else self.view()


@op(
    derivatives={"self": lambda grad, self_sym_sizes: _unsqueeze_to(grad, self_sym_sizes)},
    view="view",
    dtypes="keep",
    node="SqueezeBackward2",
    name="squeeze.dims",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 1, 1), (1, 2)))],
)
def squeeze_dims(self: Tensor, dim: Sequence[int]) -> Array:
    dims = tuple(d for d in (_wrap_dim(x, self.ndim) for x in dim) if self.shape[d] == 1)
    return np.squeeze(self, dims) if dims else self.view()


@composite(samples=lambda: [SampleInput((T.of(2, 1, 3),)), SampleInput((T.of(2, 1, 3), 1))])
def squeeze(self: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    if dim is None:
        return _squeeze(self)
    if isinstance(dim, (tuple, list)):
        return squeeze_dims(self, tuple(dim))
    return squeeze_dim(self, dim)


@op(
    derivatives={"self": lambda grad, dim: grad.squeeze(dim)},
    view="view",
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3), 0)),
        SampleInput((T.of(2, 3), -1)),
        SampleInput((T.complex(2, 3), 1), note="complex"),
    ],
)
def unsqueeze(self: Tensor, dim: int) -> Array:
    return np.expand_dims(self, _wrap_dim(dim, self.ndim + 1))


def _inverse_permutation(dims: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return tuple(inv)


@op(
    derivatives={
        "self": lambda grad, dims: grad.permute(_inverse_permutation([d % len(dims) for d in dims]))
    },
    view="view",
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3, 4), (2, 0, 1))),
        SampleInput((T.complex(2, 3, 4), (2, 0, 1)), note="complex"),
    ],
)
def permute(self: Tensor, dims: Sequence[int]) -> Array:
    if len(dims) != self.ndim:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {self.ndim} is not "
            f"equal to len(dims) = {len(dims)}"
        )
    return np.transpose(self, tuple(_wrap_dim(d, self.ndim) for d in dims))


@op(
    derivatives={"self": lambda grad, dim0, dim1: grad.transpose(dim0, dim1)},
    view="view",
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3, 4), 0, 2)),
        SampleInput((T.of(2, 3), -1, -2)),
        SampleInput((T.complex(2, 3), 0, 1), note="complex"),
    ],
)
def transpose(self: Tensor, dim0: int, dim1: int) -> Array:
    return np.swapaxes(self, _wrap_dim(dim0, self.ndim), _wrap_dim(dim1, self.ndim))


@op(
    derivatives={"self": lambda grad: grad.t()},
    view="view",
    dtypes="keep",
    node="TBackward0",
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(3),)),
        SampleInput((T.complex(2, 3),), note="complex"),
    ],
)
def t(self: Tensor) -> Array:
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.T


@op(
    derivatives={"self": lambda grad, self_sym_sizes: grad.sum_to_size(self_sym_sizes)},
    view="view",
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3), (4, 2, 3))),
        SampleInput((T.of(2, 1), (2, 3))),
        SampleInput((T.complex(2, 1), (3, 2, 4)), note="complex"),
    ],
)
def expand(self: Tensor, size: Sequence[int]) -> Array:
    # Writable, like torch's (np.broadcast_to's result is read-only): an in-place op on it, or on a
    # view of it, reaches _run_kernel, which refuses to write where elements share memory.
    out = np.broadcast_to(self, _expanded_shape(self, size))
    return _np_as_strided(self, shape=out.shape, strides=out.strides)


def _expanded_shape(a: Array, size: Sequence[int]) -> tuple[int, ...]:
    """The shape ``a`` expands to (``-1`` keeps a size), with PyTorch's errors. ``addmm`` and
    ``baddbmm`` check their added input with it too."""
    shape = [int(s) for s in size]
    lead = len(shape) - a.ndim
    if lead < 0:
        sizes = ", ".join(str(n) for n in a.shape)
        raise RuntimeError(
            f"expand(engine.{_dtype.from_numpy(a.dtype)._legacy_name}{{[{sizes}]}}, size={shape}): the "
            f"number of sizes provided ({len(shape)}) must be greater or equal to the number of dimensions "
            f"in the tensor ({a.ndim})"
        )
    for i, s in enumerate(shape):
        if s == -1:
            if i < lead:
                raise RuntimeError(
                    "The expanded size of the tensor (-1) isn't allowed in a leading, "
                    "non-existing dimension 0"
                )
            shape[i] = a.shape[i - lead]
    for i in range(a.ndim):
        if a.shape[i] != shape[i + lead] and a.shape[i] != 1:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[i + lead]}) must match the existing "
                f"size ({a.shape[i]}) at non-singleton dimension {i + lead}.  Target sizes: "
                f"{shape}.  Tensor sizes: {list(a.shape)}"
            )
    return tuple(shape)


@composite()
def expand_as(self: Tensor, other: Tensor) -> Tensor:
    return expand(self, tuple(other.shape))


@composite()
def sum_to_size(self: Tensor, *size: Any) -> Tensor:
    """Sum ``self`` down to a shape it was broadcast from (PyTorch's ``at::sum_to``)."""
    shape = _sizes(size)
    if tuple(self.shape) == shape:
        return self
    lead = self.ndim - len(shape)
    dims = list(range(lead))
    dims += [lead + i for i, s in enumerate(shape) if s == 1 and self.shape[lead + i] != 1]
    out = self.sum(dims, keepdim=True) if dims else self
    return out.view(shape) if lead else out


# --- select / slice / as_strided ---------------------------------------------------------------


@op(
    derivatives={"grad": lambda grad, dim, index: grad.select(dim, index)},
    dtypes="keep",
    method=False,
    function=False,
)
def select_backward(grad: Tensor, input_sizes: Sequence[int], dim: int, index: int) -> Array:
    out = np.zeros(tuple(input_sizes), grad.dtype)
    idx: list[Any] = [slice(None)] * len(input_sizes)
    idx[dim] = index
    out[tuple(idx)] = grad
    return out


@op(
    derivatives={
        "self": lambda grad, self_sym_sizes, dim, index: select_backward(grad, self_sym_sizes, dim, index)
    },
    view="view",
    dtypes="keep",
    name="select",
    samples=lambda: [
        SampleInput((T.of(2, 3), 1, 0)),
        SampleInput((T.of(2, 3), 0, -1)),
        SampleInput((T.complex(2, 3), 1, 2), note="complex"),
    ],
)
def select(self: Tensor, dim: int, index: int) -> Array:
    d = _wrap_dim(dim, self.ndim)
    size = self.shape[d]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    return _select_view(self, d, index)


@op(
    derivatives={"grad": lambda grad, dim, start, end, step: grad.slice(dim, start, end, step)},
    dtypes="keep",
    method=False,
    function=False,
)
def slice_backward(
    grad: Tensor, input_sizes: Sequence[int], dim: int, start: int, end: int, step: int
) -> Array:
    out = np.zeros(tuple(input_sizes), grad.dtype)
    idx: list[Any] = [slice(None)] * len(input_sizes)
    idx[dim] = slice(start, end, step)
    out[tuple(idx)] = grad
    return out


@op(
    derivatives={
        "self": lambda grad, self_sym_sizes, dim, start, end, step: slice_backward(
            grad, self_sym_sizes, dim, start, end, step
        )
    },
    view="view",
    dtypes="keep",
    name="slice",
    function=False,
    samples=lambda: [
        SampleInput((T.of(4, 3), 0, 1, 3, 1)),
        SampleInput((T.of(4, 3), 1, 0, 3, 2)),
        SampleInput((T.complex(4, 3), 0, 1, 4, 2), note="complex"),
    ],
)
def slice_(
    self: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> Array:
    if self.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    if step <= 0:
        raise ValueError("step must be greater than zero")
    d = _wrap_dim(dim, self.ndim)
    idx: list[Any] = [slice(None)] * self.ndim
    idx[d] = slice(start, end, step)
    return self[tuple(idx)]


@composite(samples=lambda: [SampleInput((T.of(4, 3), 0, 1, 2))])
def narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor:
    d = _wrap_dim(dim, self.ndim)
    if start < 0:
        start += self.shape[d]
    return slice_(self, d, start, start + length, 1)


@op(
    derivatives={
        "grad": lambda grad, size, stride, storage_offset: grad.as_strided(size, stride, storage_offset)
    },
    dtypes="keep",
    method=False,
    function=False,
)
def _as_strided_scatter_add(
    grad: Tensor,
    base_sizes: Sequence[int],
    size: Sequence[int],
    stride: Sequence[int],
    storage_offset: int,
) -> Array:
    out = np.zeros(int(np.prod(base_sizes)), grad.dtype)
    index = np.full(tuple(size), storage_offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[d] = n
        index = index + (np.arange(n) * s).reshape(shape)
    np.add.at(out, index.ravel(), np.asarray(grad).ravel())
    return out.reshape(tuple(base_sizes))


@op(
    derivatives={
        "self": lambda grad, self_sym_sizes, size, stride, storage_offset: _as_strided_scatter_add(
            grad, self_sym_sizes, size, stride, storage_offset
        )
    },
    view="view",
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 4), (2, 2), (4, 1), 1)),
        SampleInput((T.complex(3, 4), (2, 2), (1, 4), 2), note="complex"),
        SampleInput((T.of(3, 4), (2, 2), (1, 4), 10), note="out of bounds"),
    ],
)
def as_strided(self: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int = 0) -> Array:
    """A view of ``self``'s elements (counted from its first element, row-major) with the
    given sizes and strides. The engine regenerates view grad_fns with it."""
    flat = self.reshape(-1) if self.flags.c_contiguous else np.ascontiguousarray(self).reshape(-1)
    item = flat.itemsize
    if any(s < 0 for s in stride):
        raise RuntimeError(
            f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}"
        )
    # NumPy's as_strided does not check bounds: reading past the array would read (and a later
    # in-place op write) memory that is not the tensor's.
    needed = (
        0 if 0 in size else storage_offset + 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    )
    if needed > flat.size:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {storage_offset}, and "
            f"itemsize {item} requiring a storage size of {needed * item} are out of bounds for storage of "
            f"size {flat.size * item}"
        )
    return _np_as_strided(
        flat[storage_offset:] if storage_offset < flat.size else flat[flat.size :],
        shape=tuple(size),
        strides=tuple(s * item for s in stride),
    )


# --- helpers shared with engine/ops/join.py -------------------------------------------------------


def _select_view(a: Array, d: int, i: int) -> Array:
    idx: list[Any] = [slice(None)] * a.ndim
    idx[d] = i
    # The trailing Ellipsis keeps a 0-dim result a view: ``a[0]`` of a 1-D array is a copy (a
    # NumPy scalar), so writing into ``x[0]`` in place would not reach ``x``.
    return a[(*idx, Ellipsis)]


# --- aliases and copies -------------------------------------------------------------------------


@op(
    derivatives={"self": lambda grad: grad},
    view="view",
    dtypes="keep",
    samples=lambda: [SampleInput((T.of(2, 3),))],
)
def alias(self: Tensor) -> Array:
    return self.view()


@op(view="alias", dtypes="keep", samples=lambda: [SampleInput((T.of(2, 3),))])
def detach(self: Tensor) -> Array:
    return self.view()


@composite()
def detach_(self: Tensor) -> Tensor:
    """Make ``self`` a leaf that does not require grad (in place)."""
    if self._view is not None:
        raise RuntimeError(
            "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
            "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
            "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
            "refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution."
        )
    self._grad_fn = None
    self._requires_grad = False
    self._output_nr = 0
    return self


# --- tril / triu, diagonal, trace ---------------------------------------------------------------


def _check_matrix(name: str, a: Array) -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


def _tri_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(3, 4),)),
        SampleInput((T.of(3, 4), 1)),
        SampleInput((T.of(2, 4, 3), -1)),
        SampleInput((T.complex(3, 3),), note="complex"),
        SampleInput((T.of(3),), note="1-D"),
    ]


@op(derivatives={"self": lambda grad, diagonal: grad.tril(diagonal)}, dtypes="keep", samples=_tri_samples)
def tril(self: Tensor, diagonal: int = 0) -> Array:
    _check_matrix("tril", self)
    return np.tril(self, diagonal)


@op(derivatives={"self": lambda grad, diagonal: grad.triu(diagonal)}, dtypes="keep", samples=_tri_samples)
def triu(self: Tensor, diagonal: int = 0) -> Array:
    _check_matrix("triu", self)
    return np.triu(self, diagonal)


def _diagonal_view(a: Array, offset: int, dim1: int, dim2: int) -> Array:
    """The diagonal of ``a`` over ``dim1``/``dim2`` as a writable NumPy view (``np.diagonal``'s is
    read-only), appended as the last dimension, as ``torch.diagonal`` does."""
    d1, d2 = _wrap_dim(dim1, a.ndim), _wrap_dim(dim2, a.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if offset >= 0:
        n, start = max(min(a.shape[d1], a.shape[d2] - offset), 0), (0, offset)
    else:
        n, start = max(min(a.shape[d1] + offset, a.shape[d2]), 0), (-offset, 0)
    keep = [i for i in range(a.ndim) if i not in (d1, d2)]
    base = a
    if n > 0:
        idx: list[Any] = [slice(None)] * a.ndim
        idx[d1], idx[d2] = slice(start[0], None), slice(start[1], None)
        base = a[tuple(idx)]
    shape = (*(a.shape[i] for i in keep), n)
    strides = (*(a.strides[i] for i in keep), a.strides[d1] + a.strides[d2])
    return _np_as_strided(base, shape=shape, strides=strides)


@op(
    derivatives={"grad": lambda grad, offset, dim1, dim2: grad.diagonal(offset, dim1, dim2)},
    dtypes="keep",
    method=False,
    function=False,
)
def diagonal_backward(grad: Tensor, input_sizes: Sequence[int], offset: int, dim1: int, dim2: int) -> Array:
    out = np.zeros(tuple(input_sizes), grad.dtype)
    _diagonal_view(out, offset, dim1, dim2)[...] = grad
    return out


@op(
    derivatives={
        "self": lambda grad, self_sym_sizes, offset, dim1, dim2: diagonal_backward(
            grad, self_sym_sizes, offset, dim1, dim2
        )
    },
    view="view",
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 4),)),
        SampleInput((T.of(3, 4), 1)),
        SampleInput((T.of(3, 4), -2)),
        SampleInput((T.of(2, 3, 4), 0, 2, 0)),
        SampleInput((T.of(2, 3, 4),), {"offset": -1, "dim1": -1, "dim2": 1}),
        SampleInput((T.of(3, 4), 5), note="empty"),
        SampleInput((T.complex(3, 3),), note="complex"),
        SampleInput((T.of(3, 4), 0, 1, -1), note="identical dims"),
    ],
)
def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Array:
    return _diagonal_view(self, offset, dim1, dim2)


def _trace_backward(grad: Tensor, sizes: tuple[int, ...]) -> Tensor:
    # PyTorch's trace_backward: zeros with ``grad`` on the diagonal.
    return grad.expand(sizes).where(Tensor._make(np.eye(*sizes, dtype=bool)), 0.0)


@op(
    derivatives={"self": lambda grad, self_sym_sizes: _trace_backward(grad, self_sym_sizes)},
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3, 3),)),
        SampleInput((T.of(3, 4),)),
        SampleInput((T.index(3, 3, high=5),), note="int64"),
        SampleInput((T.complex(2, 2),), note="complex"),
        SampleInput((T.of(2, 2, 2),), note="3-D"),
    ],
)
def trace(self: Tensor) -> Array:
    if self.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.ndim}")
    if self.dtype == np.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    dtype = np.int64 if np.issubdtype(self.dtype, np.integer) else self.dtype
    return np.asarray(np.trace(self, dtype=dtype))


tril_ = inplace_variant(tril)
triu_ = inplace_variant(triu)
