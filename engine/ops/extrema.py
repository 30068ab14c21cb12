"""max, min, amax, amin, argmax, argmin: the reductions that select elements.

``max(x)`` and ``amax`` share their gradient evenly among ties; ``max(x, dim)`` returns the
indices it selected (``torch.return_types.max``) and its gradient goes to exactly those elements.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import composite, op
from engine.ops._samples import Lit, SampleInput, T
from engine.ops.pointwise import maximum, minimum
from engine.ops.reduction import _check_nonempty, _dims

Array = np.ndarray


# --- max, min -------------------------------------------------------------------------------------


def _return_type(name: str, fields: Sequence[str]) -> type:
    """``torch.return_types.max`` and friends: a tuple whose items also have names."""
    base = namedtuple(name, fields)  # type: ignore[misc]

    def __repr__(self: Any) -> str:  # noqa: N807
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self, strict=True))
        return f"engine.return_types.{name}(\n{body})"

    return type(name, (base,), {"__repr__": __repr__, "__module__": "engine.return_types", "__slots__": ()})


return_types_max = _return_type("max", ("values", "indices"))
return_types_min = _return_type("min", ("values", "indices"))


def _evenly_distribute_backward(grad: Tensor, self: Tensor, result: Tensor) -> Tensor:
    # Ties share the gradient equally; a NaN result sends it to the NaNs.
    mask = self.isnan() if bool(result.isnan()) else self == result
    return (grad / mask.sum()).expand(tuple(self.shape)).where(mask, 0.0)


def _full_extremum(name: str, fn: Any, a: Array) -> Array:
    if a.size == 0:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
    return np.asarray(fn(a))


def _value_selecting_reduction_backward(
    grad: Tensor, dim: int, indices: Tensor, self_sym_sizes: tuple[int, ...], keepdim: bool
) -> Tensor:
    """``zeros(sizes).scatter_(dim, indices, grad)``: the gradient goes to the selected elements."""
    if not self_sym_sizes:
        return grad
    d = _wrap_dim(dim, len(self_sym_sizes))
    index = indices._data if keepdim else np.expand_dims(indices._data, d)
    if not keepdim:
        grad = grad.unsqueeze(d)
    shape = [1] * len(self_sym_sizes)
    shape[d] = self_sym_sizes[d]
    selected = Tensor._make(np.arange(self_sym_sizes[d]).reshape(shape) == index)
    return grad.expand(self_sym_sizes).where(selected, 0.0)


def _select_dim(name: str, arg: Any, a: Array, dim: int, keepdim: bool) -> tuple[Array, Array]:
    d = _wrap_dim(dim, a.ndim)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    _check_nonempty(name, a, (d,))
    idx = np.expand_dims(arg(a, axis=d), d)
    values = np.take_along_axis(a, idx, axis=d)
    if not keepdim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return values, idx.astype(np.int64)


def _extremum_ops(name: str, reduce: Any, arg: Any, pairwise: Any, rtype: type) -> Any:
    def full(self: Tensor) -> Array:
        return _full_extremum(name, reduce, self)

    def along(self: Tensor, dim: int, keepdim: bool = False) -> tuple[Array, Array]:
        return _select_dim(name, arg, self, dim, keepdim)

    full.__name__, along.__name__ = f"{name}_default", f"{name}_dim"
    full_op = op(
        derivatives={"self": _evenly_distribute_backward},
        name=f"{name}.default",
        node=f"{name.capitalize()}Backward1",
        dtypes="keep",
        method=False,
        function=False,
        samples=lambda: [
            SampleInput((T.of(2, 3),)),
            SampleInput((T.of(),)),
            SampleInput(
                (Lit([[1.0, 3.0, 3.0], [0.5, 3.0, 2.0]], "float64", grad=True),), note="ties", gradcheck=False
            ),
        ],
    )(full)
    dim_op = op(
        derivatives={"self": _value_selecting_reduction_backward},
        name=f"{name}.dim",
        node=f"{name.capitalize()}Backward0",
        dtypes="keep",
        outputs=("values", "indices"),
        differentiable_outputs=(True, False),
        method=False,
        function=False,
        samples=lambda: [
            SampleInput((T.of(2, 3), 1)),
            SampleInput((T.of(2, 3, 4), 0, True)),
            SampleInput((T.of(2, 3), -1, True)),
            SampleInput((T.of(), 0)),
        ],
    )(along)

    def router(self: Tensor, dim: Any = None, keepdim: bool = False, *, other: Tensor | None = None) -> Any:
        if other is not None or isinstance(dim, Tensor):
            return pairwise(self, dim if other is None else other)
        if dim is None:
            return full_op(self)
        return rtype(*dim_op(self, dim, keepdim))

    router.__name__ = name
    router.__doc__ = (
        f"``{name}(x)``: the {name}imum; ``{name}(x, dim, keepdim=False)``: (values, indices) along "
        f"``dim``; ``{name}(x, other)``: ``{name}imum``."
    )
    samples = lambda: [  # noqa: E731
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), 1)),
        SampleInput((T.of(2, 3),), {"dim": 0, "keepdim": True}),
        SampleInput((T.of(2, 3), T.of(2, 3))),
    ]
    return full_op, dim_op, composite(samples=samples)(router)


max_default, max_dim, max = _extremum_ops("max", np.max, np.argmax, maximum, return_types_max)  # noqa: A001
min_default, min_dim, min = _extremum_ops("min", np.min, np.argmin, minimum, return_types_min)  # noqa: A001


# --- amax, amin, argmax, argmin -------------------------------------------------------------------


def _restore_reduced_dims(t: Tensor, dim: Sequence[int], keepdim: bool) -> Tensor:
    """``unsqueeze_multiple`` as one reshape, as ``amax``'s formula does it."""
    if keepdim:
        return t
    total = t.ndim + len(dim)
    shape = [0] * total
    for d in dim:
        shape[d % total] = 1
    j = 0
    for s in t.shape:
        while shape[j] > 0:
            j += 1
        shape[j] = s
        j += 1
    return t.reshape(shape)


def _amax_backward(grad: Tensor, self: Tensor, result: Tensor, dim: Sequence[int], keepdim: bool) -> Tensor:
    # PyTorch's scale_grad_by_count(restore_reduced_dims(grad), restore_reduced_dims(result) == self, dim)
    dims = [dim] if isinstance(dim, int) else list(dim)
    mask = _restore_reduced_dims(result, dims, keepdim) == self
    return (_restore_reduced_dims(grad, dims, keepdim) / mask.sum(dims, True)) * mask


def _amax_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3), [1])),
        SampleInput((T.of(2, 3, 4), [0, 2], True)),
        SampleInput((T.of(2, 3),)),
        SampleInput(
            (Lit([[1.0, 3.0, 3.0], [0.5, 3.0, 2.0]], "float64", grad=True), [1]), note="ties", gradcheck=False
        ),
    ]


def _amax_kernel(name: str, fn: Any, a: Array, dim: Sequence[int], keepdim: bool) -> Array:
    dims = _dims(dim, a.ndim)
    _check_nonempty(name, a, dims)
    return np.asarray(fn(a, axis=dims, keepdims=keepdim))


@op(derivatives={"self": _amax_backward}, dtypes="keep", samples=_amax_samples)
def amax(self: Tensor, dim: Sequence[int] = (), keepdim: bool = False) -> Array:
    return _amax_kernel("amax", np.max, self, dim, keepdim)


@op(derivatives={"self": _amax_backward}, dtypes="keep", samples=_amax_samples)
def amin(self: Tensor, dim: Sequence[int] = (), keepdim: bool = False) -> Array:
    return _amax_kernel("amin", np.min, self, dim, keepdim)


def _arg_extremum(name: str, fn: Any, a: Array, dim: int | None, keepdim: bool) -> Array:
    if dim is None:
        if a.size == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        out = np.asarray(fn(a))
        return out.reshape((1,) * a.ndim) if keepdim else out
    d = _wrap_dim(dim, a.ndim)
    if a.ndim == 0:
        return np.zeros((), np.int64)
    _check_nonempty(name, a, (d,))
    return np.asarray(fn(a, axis=d, keepdims=keepdim))


def _arg_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), 1)),
        SampleInput((T.of(2, 3), 0, True)),
        SampleInput((T.of(2, 3),), {"keepdim": True}),
    ]


@op(dtypes="keep", samples=_arg_samples)
def argmax(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Array:
    return _arg_extremum("argmax", np.argmax, self, dim, keepdim).astype(np.int64)


@op(dtypes="keep", samples=_arg_samples)
def argmin(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Array:
    return _arg_extremum("argmin", np.argmin, self, dim, keepdim).astype(np.int64)


# --- sort, argsort, topk --------------------------------------------------------------------------

return_types_sort = _return_type("sort", ("values", "indices"))
return_types_topk = _return_type("topk", ("values", "indices"))


def _sorted_indices(a: Array, d: int, descending: bool) -> Array:
    """A stable sort's indices along ``d``; NaN is the largest value, as in PyTorch. Descending:
    sort the reversed array ascending and reverse the result, so ties keep their order."""
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    if not descending:
        return np.argsort(a, axis=d, kind="stable")
    n = a.shape[d]
    rev = np.argsort(np.flip(a, d), axis=d, kind="stable")
    return n - 1 - np.flip(rev, d)


def _value_selecting_backward_k(
    grad: Tensor, dim: int, indices: Tensor, self_sym_sizes: tuple[int, ...]
) -> Tensor:
    """PyTorch's value_selecting_reduction_backward with keepdim: ``zeros(sizes).scatter(dim,
    indices, grad)``, for ops selecting several elements per slice (sort, topk)."""
    from engine._factories import zeros

    if not self_sym_sizes:
        return grad
    return zeros(*self_sym_sizes, dtype=grad.dtype).scatter(dim, indices, grad)


def _sort(a: Array, dim: int, descending: bool) -> tuple[Array, Array]:
    d = _wrap_dim(dim, a.ndim)
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    idx = _sorted_indices(a, d, descending)
    return np.take_along_axis(a, idx, axis=d), idx.astype(np.int64)


_SORT_BACKWARD = {
    "self": lambda grad, dim, indices, self_sym_sizes: _value_selecting_backward_k(
        grad, dim, indices, self_sym_sizes
    )
}


@op(
    derivatives=_SORT_BACKWARD,
    name="sort.default",
    node="SortBackward0",
    dtypes="keep",
    outputs=("values", "indices"),
    differentiable_outputs=(True, False),
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(3, 4),)),
        SampleInput((T.of(3, 4), 0, True)),
        SampleInput((T.of(),)),
        SampleInput(
            (Lit([[1.0, float("nan"), -1.0, 2.0]], "float64", grad=True), 1, True),
            note="nan",
            gradcheck=False,
        ),
        SampleInput((T.index(3, 4, high=100),), note="int64"),
    ],
)
def sort_default(self: Tensor, dim: int = -1, descending: bool = False) -> tuple[Array, Array]:
    """PyTorch's unstable CPU sort may order ties any way; the engine's sort is always stable."""
    return _sort(self, dim, descending)


@op(
    derivatives=_SORT_BACKWARD,
    name="sort.stable",
    node="SortBackward1",
    dtypes="keep",
    outputs=("values", "indices"),
    differentiable_outputs=(True, False),
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(3, 4),), {"stable": True}),
        SampleInput(
            (Lit([[1.0, 3.0, 3.0, 2.0, 3.0, 1.0]], "float64", grad=True),),
            {"stable": True, "descending": True},
            note="ties",
            gradcheck=False,
        ),
        SampleInput((Lit([[True, False, True, False]], "bool"),), {"stable": True, "dim": 1}, note="bool"),
    ],
)
def sort_stable(
    self: Tensor, *, stable: bool | None, dim: int = -1, descending: bool = False
) -> tuple[Array, Array]:
    return _sort(self, dim, descending)


@composite(
    samples=lambda: [
        SampleInput((T.of(3, 4),)),
        SampleInput((T.of(3, 4), 0, True)),
        SampleInput((T.of(3, 4),), {"stable": True, "descending": True}),
    ]
)
def sort(
    self: Tensor, dim: int = -1, descending: bool = False, *, stable: bool | None = None
) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` sorted along ``dim`` (``engine.return_types.sort``)."""
    if stable is not None:
        return return_types_sort(*sort_stable(self, stable=stable, dim=dim, descending=descending))  # type: ignore[no-any-return]
    return return_types_sort(*sort_default(self, dim, descending))  # type: ignore[no-any-return]


@composite(
    samples=lambda: [
        SampleInput((T.of(3, 4),)),
        SampleInput((T.of(3, 4), 0, True)),
        SampleInput((T.of(3, 4),), {"stable": True}),
    ]
)
def argsort(self: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
    """The indices of ``sort``: PyTorch calls ``sort`` (``sort.stable`` when ``stable=True``)."""
    if stable:
        return sort(self, dim, descending, stable=True).indices  # type: ignore[no-any-return]
    return sort(self, dim, descending).indices  # type: ignore[no-any-return]


@op(
    derivatives=_SORT_BACKWARD,
    name="topk.default",
    node="TopkBackward0",
    dtypes="keep",
    outputs=("values", "indices"),
    differentiable_outputs=(True, False),
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(3, 5), 2)),
        SampleInput((T.of(3, 5), 2, 0)),
        SampleInput((T.of(3, 5), 3), {"largest": False}),
        SampleInput((T.of(3, 5), 0), note="k 0", gradcheck=False),
        SampleInput((T.of(), 1)),
        SampleInput((T.of(3, 5), 6), note="k too large"),
        SampleInput((T.index(3, 5, high=100), 2), note="int64"),
    ],
)
def topk_default(
    self: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002
) -> tuple[Array, Array]:
    """The ``k`` largest (or smallest) elements along ``dim``. Among equal values the engine takes
    the lowest indices first; PyTorch's order among ties depends on its selection algorithm."""
    d = _wrap_dim(dim, self.ndim)
    size = self.shape[d] if self.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    if self.ndim == 0:
        return self.copy(), np.zeros((), np.int64)
    idx = np.take(_sorted_indices(self, d, largest), np.arange(k), axis=d)
    return np.take_along_axis(self, idx, axis=d), idx.astype(np.int64)


@composite(
    samples=lambda: [
        SampleInput((T.of(3, 5), 2)),
        SampleInput((T.of(3, 5), 2, 0, False)),
        SampleInput((T.of(3, 5), 2), {"sorted": False}),
    ]
)
def topk(
    self: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002
) -> tuple[Tensor, Tensor]:
    """``(values, indices)`` of the ``k`` largest elements (``engine.return_types.topk``)."""
    return return_types_topk(*topk_default(self, k, dim, largest, sorted))  # type: ignore[no-any-return]
