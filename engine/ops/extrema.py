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
