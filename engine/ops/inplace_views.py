"""In-place view ops: ``t_``, ``transpose_`` (``swapdims_``, ``swapaxes_``), ``squeeze_``,
``unsqueeze_`` and ``as_strided_`` (native_functions.yaml's ``inplace_view`` tag).

Note [In-place view ops]
~~~~~~~~~~~~~~~~~~~~~~~~
They change a tensor's sizes and strides, never its values, and return the tensor itself. As an
in-place op, each first runs ``check_inplace`` (a leaf requiring grad, or a view made in no_grad
mode, by a multi-output op or inside a custom Function, is refused with torch's message) and
bumps the version counter. As a view op, its node (``TBackward1``, ``AsStridedBackward1``...)
becomes the tensor's grad_fn on top of the previous one with ``set_history``, not
``rebase_history``: the base of a view is untouched, and the view keeps its base and creation
meta. Under no_grad no node is made: a view's grad_fn is then rebuilt from its base
(``AsStridedBackward0``) the next time it is read, since its version moved.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine._tensor import Tensor
from engine.ops._dispatch import composite, op
from engine.ops.shape import _as_strided_scatter_add, _wrap_dim, as_strided

Array = np.ndarray


def _reshape_to(grad: Tensor, sizes: tuple[int, ...]) -> Tensor:
    # PyTorch's unsqueeze_to: put back the size-1 dimensions squeeze_ removed.
    return grad.reshape(sizes)


@op(
    derivatives={"self": lambda grad, dim0, dim1: grad.transpose(dim0, dim1)},
    view="inplace",
    inplace=True,
    dtypes="keep",
    node="TransposeBackward1",
    function=False,
)
def transpose_(self: Tensor, dim0: int, dim1: int) -> Array:
    return np.swapaxes(self, _wrap_dim(dim0, self.ndim), _wrap_dim(dim1, self.ndim))


@op(
    derivatives={"self": lambda grad: grad.t()},
    view="inplace",
    inplace=True,
    dtypes="keep",
    node="TBackward1",
    function=False,
)
def t_(self: Tensor) -> Array:
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self.T


@composite(function=False)
def swapdims_(self: Tensor, dim0: int, dim1: int) -> Tensor:
    return transpose_(self, dim0, dim1)


@composite(function=False)
def swapaxes_(self: Tensor, axis0: int, axis1: int) -> Tensor:
    return transpose_(self, axis0, axis1)


@op(
    derivatives={"self": lambda grad, dim: grad.squeeze(dim)},
    view="inplace",
    inplace=True,
    dtypes="keep",
    node="UnsqueezeBackward1",
    function=False,
)
def unsqueeze_(self: Tensor, dim: int) -> Array:
    return np.expand_dims(self, _wrap_dim(dim, self.ndim + 1))


@op(
    derivatives={"self": lambda grad, self_sym_sizes: _reshape_to(grad, self_sym_sizes)},
    view="inplace",
    inplace=True,
    dtypes="keep",
    node="SqueezeBackward3",
    name="squeeze_.default",
    method=False,
    function=False,
)
def _squeeze_(self: Tensor) -> Array:
    return np.squeeze(self)


@op(
    derivatives={"self": lambda grad, dim, self_sym_sizes: _reshape_to(grad, self_sym_sizes)},
    view="inplace",
    inplace=True,
    dtypes="keep",
    node="SqueezeBackward4",
    name="squeeze_.dim",
    method=False,
    function=False,
)
def squeeze__dim(self: Tensor, dim: int) -> Array:
    d = _wrap_dim(dim, self.ndim)
    return np.squeeze(self, d) if self.ndim and self.shape[d] == 1 else self.view()


@op(
    derivatives={"self": lambda grad, dim, self_sym_sizes: _reshape_to(grad, self_sym_sizes)},
    view="inplace",
    inplace=True,
    dtypes="keep",
    node="SqueezeBackward5",
    name="squeeze_.dims",
    method=False,
    function=False,
)
def squeeze__dims(self: Tensor, dim: Sequence[int]) -> Array:
    dims = tuple(d for d in (_wrap_dim(x, self.ndim) for x in dim) if self.shape[d] == 1)
    return np.squeeze(self, dims) if dims else self.view()


@composite(function=False)
def squeeze_(self: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    if dim is None:
        return _squeeze_(self)
    if isinstance(dim, (tuple, list)):
        return squeeze__dims(self, tuple(dim))
    return squeeze__dim(self, dim)


@op(
    derivatives={
        "self": lambda grad, self_sym_sizes, size, stride, storage_offset: _as_strided_scatter_add(
            grad, self_sym_sizes, size, stride, 0 if storage_offset is None else storage_offset
        )
    },
    view="inplace",
    inplace=True,
    dtypes="keep",
    node="AsStridedBackward1",
)
def as_strided_(
    self: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> Array:
    """``as_strided`` in place. Like the engine's ``as_strided``, sizes, strides and offset count
    ``self``'s elements from its first one, row-major, so ``self`` must be contiguous."""
    if not self.flags.c_contiguous:
        raise NotImplementedError(
            "engine: as_strided_ on a non-contiguous tensor is not supported (the engine's strides "
            "count the elements of a contiguous tensor, not of its storage)"
        )
    offset = 0 if storage_offset is None else storage_offset
    return as_strided.kernel(self, tuple(size), tuple(stride), offset)  # type: ignore[no-any-return]
