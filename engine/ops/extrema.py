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


# --- unique, count_nonzero ------------------------------------------------------------------------


def _unique_not_implemented(name: str):  # type: ignore[no-untyped-def]
    """derivatives.yaml's ``self: not_implemented("<name>")`` of the unique family."""

    def formula(grad: Tensor) -> Tensor:
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")

    return formula


def _unique_along(a: Array, dim: int | None, consecutive: bool) -> tuple[Array, Array, Array]:
    """Distinct values (or slices along ``dim``), the inverse indices and the counts."""
    if dim is None:
        a = a.reshape(-1)
        d = 0
    else:
        d = _wrap_dim(dim, a.ndim)
    moved = np.moveaxis(a, d, 0).reshape(a.shape[d], -1)
    if consecutive:
        n = moved.shape[0]
        starts = [0] + [i for i in range(1, n) if not np.array_equal(moved[i], moved[i - 1])]
        counts = np.diff([*starts, n])
        inverse = np.repeat(np.arange(len(starts)), counts)
        values = np.take(a, starts, axis=d)
    else:
        _, first, inverse, counts = np.unique(
            moved, axis=0, return_index=True, return_inverse=True, return_counts=True
        )
        values = np.take(a, first, axis=d)
    return values, inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


@op(
    derivatives={"self": _unique_not_implemented("_unique")},
    node="UniqueBackward0",
    dtypes="keep",
    outputs=("result0", "result1"),
    differentiable_outputs=(True, False),
    method=False,
)
def _unique(self: Tensor, sorted: bool = True, return_inverse: bool = False) -> tuple[Array, Array]:  # noqa: A002
    values, inverse, _ = _unique_along(np.asarray(self), None, False)
    return values, inverse.reshape(self.shape) if return_inverse else np.zeros(0, np.int64)


@op(
    derivatives={"self": _unique_not_implemented("unique_dim")},
    node="UniqueDimBackward0",
    dtypes="keep",
    outputs=("result0", "result1", "result2"),
    differentiable_outputs=(True, False, False),
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((Lit([[3, 1], [2, 2], [3, 1]]), 0)),
        SampleInput((Lit([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0]], "float64"), 1, True, True, True)),
    ],
)
def unique_dim(
    self: Tensor,
    dim: int,
    sorted: bool = True,  # noqa: A002
    return_inverse: bool = False,
    return_counts: bool = False,
) -> tuple[Array, Array, Array]:
    """``torch._VF.unique_dim``: the distinct slices along ``dim`` (inverse and counts always)."""
    return _unique_along(np.asarray(self), dim, False)


@op(
    derivatives={"self": _unique_not_implemented("unique_consecutive")},
    node="UniqueConsecutiveBackward0",
    name="unique_consecutive.default",
    dtypes="keep",
    outputs=("result0", "result1", "result2"),
    differentiable_outputs=(True, False, False),
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((Lit([3.0, 3.0, 1.0, 3.0], "float64"), True, True)),
        SampleInput((Lit([[3, 1], [3, 1], [2, 2]]), False, True, 0), note="dim"),
    ],
)
def _unique_consecutive(
    self: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> tuple[Array, Array, Array]:
    values, inverse, counts = _unique_along(np.asarray(self), dim, True)
    if dim is not None:  # torch's unique_dim_consecutive fills both, asked for or not
        return values, inverse, counts
    inverse = inverse.reshape(self.shape)
    return (
        values,
        inverse if return_inverse else np.zeros(0, np.int64),
        counts if return_counts else np.zeros(0, np.int64),
    )


def _unique_result(
    values: Tensor, inverse: Tensor, counts: Tensor, return_inverse: bool, return_counts: bool
) -> Any:
    if return_inverse and return_counts:
        return values, inverse, counts
    if return_inverse:
        return values, inverse
    if return_counts:
        return values, counts
    return values


@composite(
    samples=lambda: [
        SampleInput((Lit([3.0, 1.0, 1.0, 3.0, 2.0], "float64"),)),
        SampleInput(
            (Lit([[3, 1], [3, 1], [2, 2]]),), {"return_inverse": True, "return_counts": True, "dim": 0}
        ),
    ],
)
def unique_consecutive(
    self: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> Any:
    """``torch.unique_consecutive``: collapse runs of equal values (or slices along ``dim``)."""
    values, inverse, counts = _unique_consecutive(self, return_inverse, return_counts, dim)
    return _unique_result(values, inverse, counts, return_inverse, return_counts)


@op(
    derivatives={"self": _unique_not_implemented("_unique2")},
    node="Unique2Backward0",
    dtypes="keep",
    outputs=("result0", "result1", "result2"),
    differentiable_outputs=(True, False, False),
    method=False,
)
def _unique2(
    self: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,  # noqa: A002
) -> tuple[Array, Array, Array]:
    """PyTorch's CPU ``_unique2``: the distinct values (sorted, whatever ``sorted`` says, as
    torch's CPU kernel for a flattened input returns them), the index of each input element
    among them and their counts; the last two are empty unless asked for."""
    values, inverse, counts = np.unique(np.asarray(self), return_inverse=True, return_counts=True)
    inverse = inverse.reshape(self.shape).astype(np.int64) if return_inverse else np.zeros(0, np.int64)
    counts = counts.astype(np.int64) if return_counts else np.zeros(0, np.int64)
    return values, inverse, counts


@composite(
    method=True,
    samples=lambda: [
        SampleInput((Lit([3.0, 1.0, 3.0, 2.0], "float64"),)),
        SampleInput((Lit([[3, 1], [3, 2]]),), {"return_inverse": True, "return_counts": True}),
        SampleInput((Lit([3.0, 1.0, 3.0], "float64"),), {"sorted": False, "return_counts": True}),
        SampleInput((Lit([[3, 1], [2, 2], [3, 1]]),), {"return_inverse": True, "dim": 0}, note="dim"),
    ],
)
def unique(
    self: Tensor,
    sorted: bool = True,  # noqa: A002
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    """``torch.unique``: the values (``_unique2``, or ``unique_dim`` along ``dim``), then the
    inverse indices and the counts if asked for."""
    if dim is not None:
        values, inverse, counts = unique_dim(self, dim, sorted, return_inverse, return_counts)
    else:
        values, inverse, counts = _unique2(self, sorted, return_inverse, return_counts)
    return _unique_result(values, inverse, counts, return_inverse, return_counts)


@op(
    dtypes="keep",
    samples=lambda: [
        SampleInput((Lit([[1.0, 0.0], [2.0, 0.0]], "float64"),)),
        SampleInput((Lit([[1.0, 0.0], [2.0, 0.0]], "float64"), 0)),
        SampleInput((Lit([[1.0, 0.0], [2.0, 0.0]], "float64"), (0, 1))),
    ],
)
def count_nonzero(self: Tensor, dim: int | Sequence[int] | None = None) -> Array:
    dims = (
        None
        if dim is None
        else tuple(_wrap_dim(d, self.ndim) for d in ([dim] if isinstance(dim, int) else dim))
    )
    return np.asarray(np.count_nonzero(self, axis=dims), dtype=np.int64)
