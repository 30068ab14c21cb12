"""Reductions: sum, mean, var/std, prod, cumsum, all/any (max/min: extrema.py; softmax: softmax.py).

Formulas follow ``derivatives.yaml`` and the helpers of ``FunctionsManual.cpp`` they call
(``sum_backward``, ``var_backward``, ``evenly_distribute_backward`` ...), written with engine ops so
that their own graph gives double backward.
"""

from __future__ import annotations

import builtins
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _dtype
from engine._C import _tls
from engine._factories import zeros_like
from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import _scalar_type_name, composite, op
from engine.ops._samples import Lit, SampleInput, T
from engine.ops.pointwise import where

Array = np.ndarray
Dims = int | Sequence[int] | None


# --- dims -----------------------------------------------------------------------------------------


def _dims(dim: Dims, ndim: int) -> tuple[int, ...]:
    """Normalise a ``dim`` argument; ``None`` or ``[]`` means every dimension."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0:
        return tuple(range(ndim))
    wrapped = [_wrap_dim(d, ndim) for d in dim]
    for d in wrapped:
        if wrapped.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    # A 0-dim tensor accepts dim 0 / -1, which reduces nothing.
    return tuple(sorted(set(wrapped))) if ndim else ()


def _all_reduce(dim: Dims) -> bool:
    return dim is None or (not isinstance(dim, int) and len(dim) == 0)


def _safe_size(sizes: Sequence[int], dim: Dims) -> int:
    if not sizes:
        return 1
    return math.prod(sizes[d] for d in _dims(dim, len(sizes)))


def _unsqueeze_multiple(t: Tensor, dim: Dims, ndim: int) -> Tensor:
    """Put back the dims a ``keepdim=False`` reduction removed (PyTorch's unsqueeze_multiple)."""
    for d in _dims(dim, ndim):
        t = t.unsqueeze(d)
    return t


def _np_dtype(dtype: Any, default: np.dtype) -> np.dtype:
    return default if dtype is None else dtype._np


def _integral_to_long(a: Array, dtype: Any) -> Any:
    """``sum``/``prod``/``cumsum`` of bool or integers accumulate in int64 unless told otherwise."""
    if dtype is None and (a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer)):
        return _dtype.int64
    return dtype


def _check_nonempty(name: str, a: Array, dims: tuple[int, ...]) -> None:
    for d in dims:
        if a.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


# --- sum, mean ------------------------------------------------------------------------------------


def _sum_backward(grad: Tensor, self_sym_sizes: tuple[int, ...], dim: Dims, keepdim: bool) -> Tensor:
    if not keepdim and self_sym_sizes and not _all_reduce(dim):
        return _unsqueeze_multiple(grad, dim, len(self_sym_sizes)).expand(self_sym_sizes)
    return grad.expand(self_sym_sizes)


@op(
    derivatives={"self": lambda grad, self_sym_sizes: grad.expand(self_sym_sizes)},
    name="sum.default",
    node="SumBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(),)),
        SampleInput((T.complex(2, 3),), note="complex"),
    ],
)
def sum_default(self: Tensor, dtype: Any = None) -> Array:
    return np.asarray(np.sum(self, dtype=_np_dtype(dtype, self.dtype)))


@op(
    derivatives={"self": _sum_backward},
    name="sum.dim_IntList",
    node="SumBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), [1])),
        SampleInput((T.of(2, 3, 4), [0, 2], True)),
        SampleInput((T.of(2, 3), [-1], True)),
        SampleInput((T.of(2, 3), [1, -1]), note="repeated dim"),
        SampleInput((T.complex(2, 3), [1]), note="complex"),
    ],
)
def sum_dim_IntList(self: Tensor, dim: Dims, keepdim: bool = False, dtype: Any = None) -> Array:  # noqa: N802
    out = np.sum(self, axis=_dims(dim, self.ndim), keepdims=keepdim, dtype=_np_dtype(dtype, self.dtype))
    return np.asarray(out)


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), 0)),
        SampleInput((T.complex(2, 3), 0), note="complex"),
        SampleInput(
            (T.complex(2, 3),), {"dtype": _dtype.complex64}, note="complex to complex64", gradcheck=False
        ),
    ]
)
def sum(self: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A001
    dtype = _integral_to_long(self._data, dtype)
    if dim is None and not keepdim:
        return sum_default(self, dtype=dtype)
    return sum_dim_IntList(self, dim, keepdim, dtype=dtype)


def _check_mean_dtype(a: Array, dtype: Any) -> None:
    d = _dtype.from_numpy(a.dtype) if dtype is None else dtype
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {_scalar_type_name(d)}"
        )


@op(
    derivatives={
        "self": lambda grad, self_sym_sizes, self_sym_numel: grad.expand(self_sym_sizes) / self_sym_numel
    },
    name="mean.default",
    node="MeanBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(),)),
        SampleInput((T.complex(2, 3),), note="complex"),
    ],
)
def mean_default(self: Tensor, *, dtype: Any = None) -> Array:
    _check_mean_dtype(self, dtype)
    return np.asarray(np.mean(self.astype(_np_dtype(dtype, self.dtype))))


def _mean_backward(
    grad: Tensor, self_sym_sizes: tuple[int, ...], dim: Dims, self_sym_numel: int, keepdim: bool
) -> Tensor:
    n = self_sym_numel if _all_reduce(dim) else _safe_size(self_sym_sizes, dim)
    return _sum_backward(grad, self_sym_sizes, dim, keepdim) / n


@op(
    derivatives={"self": _mean_backward},
    name="mean.dim",
    node="MeanBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), [1])),
        SampleInput((T.of(2, 3, 4), [0, 2], True)),
        SampleInput((T.of(2, 3), None)),
        SampleInput((T.of(2, 3), [])),
        SampleInput((T.complex(2, 3, 4), [0, 2], True), note="complex"),
    ],
)
def mean_dim(self: Tensor, dim: Dims, keepdim: bool = False, *, dtype: Any = None) -> Array:
    _check_mean_dtype(self, dtype)
    a = self.astype(_np_dtype(dtype, self.dtype))
    return np.asarray(np.mean(a, axis=_dims(dim, self.ndim), keepdims=keepdim))


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), 1, True)),
        SampleInput((T.complex(2, 3), 1), note="complex"),
    ]
)
def mean(self: Tensor, dim: Dims = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    if dim is None and not keepdim:
        return mean_default(self, dtype=dtype)
    return mean_dim(self, dim, keepdim, dtype=dtype)


# --- var, std -------------------------------------------------------------------------------------


def _var_kernel(name: str, a: Array, dim: Dims, correction: float | None, keepdim: bool) -> Array:
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating)):
        raise RuntimeError("std and var only support floating point and complex dtypes")
    c = 1 if correction is None else correction
    dims = _dims(dim, a.ndim)
    n = _safe_size(a.shape, dims)
    if n - c <= 0:
        warnings.warn(
            f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
            "reduction factor (input numel divided by output numel).",
            UserWarning,
            stacklevel=4,
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        dev = a - np.mean(a, axis=dims, keepdims=True)
        out = np.sum((dev * np.conj(dev)).real, axis=dims, keepdims=keepdim) / builtins.max(n - c, 0)
    return np.asarray(out)


def _var_backward(grad: Tensor, self: Tensor, dim: Dims, correction: float | None, keepdim: bool) -> Tensor:
    c = 1 if correction is None else correction
    if self.ndim == 0 or dim is None:
        dof = self.numel() - c
        if dof <= 0:
            return grad * where(self == self.mean(), math.nan, math.inf)
        return (2.0 / dof) * grad * (self - self.mean())
    if not keepdim and self.ndim > 1:
        grad = _unsqueeze_multiple(grad, dim, self.ndim)
    rnumel = _safe_size(tuple(self.shape), dim)
    return (2.0 / (rnumel - c)) * grad * (self - self.mean(dim, True))


def _std_backward(
    result: Tensor, grad: Tensor, self: Tensor, dim: Dims, correction: float | None, keepdim: bool
) -> Tensor:
    # PyTorch: (grad / (result * 2)).masked_fill_(result == 0, 0)
    grad_var = (grad / (result * 2)).where(result != 0, 0.0)
    return _var_backward(grad_var, self, dim, correction, keepdim)


def _var_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), [1]), {"correction": 0}),
        SampleInput((T.of(2, 3, 4), [0, 2]), {"keepdim": True}),
        SampleInput((T.of(5), [0])),
        SampleInput((T.of(2, 3), None), {"correction": 2, "keepdim": True}),
    ]


@op(
    derivatives={"self": _var_backward},
    name="var.correction",
    node="VarBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=_var_samples,
)
def var_correction(
    self: Tensor, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> Array:
    return _var_kernel("var", self, dim, correction, keepdim)


@op(
    derivatives={"self": _std_backward},
    name="std.correction",
    node="StdBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=_var_samples,
)
def std_correction(
    self: Tensor, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> Array:
    return np.sqrt(_var_kernel("std", self, dim, correction, keepdim))


def _correction(dim: Any, unbiased: bool | None, correction: float | None) -> tuple[Any, float | None]:
    """``var(x, unbiased)``, ``var(x, dim, unbiased, keepdim)`` and ``var(x, dim, correction=)``
    are one aten op, ``var.correction``."""
    if isinstance(dim, bool):  # var(x, False): the bool is ``unbiased``
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None:
            raise TypeError("var() received an invalid combination of arguments: unbiased and correction")
        correction = 1 if unbiased else 0
    return dim, correction


def _var_router_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), False)),
        SampleInput((T.of(2, 3), 1, False, True)),
        SampleInput((T.of(2, 3), 1), {"correction": 0}),
    ]


@composite(samples=_var_router_samples)
def var(
    self: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Tensor:
    dim, correction = _correction(dim, unbiased, correction)
    return var_correction(self, dim, correction=correction, keepdim=keepdim)


@composite(samples=_var_router_samples)
def std(
    self: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Tensor:
    dim, correction = _correction(dim, unbiased, correction)
    return std_correction(self, dim, correction=correction, keepdim=keepdim)


# --- prod -----------------------------------------------------------------------------------------


def _prod_safe_zeros_backward(grad: Tensor, inp: Tensor, dim: int) -> Tensor:
    """The product of all the *other* elements along ``dim``, without dividing by zero.

    PyTorch multiplies exclusive cumulative products taken from both ends; here the
    ``n x n`` table of "every element but the i-th" (ones on the diagonal) is multiplied out, which
    is the same function and stays differentiable with the engine's own ops."""
    if inp.numel() == 0:
        return grad.expand_as(inp)
    n = inp.shape[dim]
    if n == 1:
        return grad
    sizes = list(inp.shape)
    table = inp.unsqueeze(dim).expand([*sizes[:dim], n, *sizes[dim:]])
    off_diagonal = ~np.eye(n, dtype=bool).reshape((n, n) + (1,) * (inp.ndim - dim - 1))
    others = table.where(Tensor._make(off_diagonal), 1.0).prod(dim + 1)
    return grad * others.conj()


def _prod_backward(grad: Tensor, self: Tensor, result: Tensor) -> Tensor:
    if self.ndim == 0:
        return grad
    zeros = int(np.count_nonzero(self._data == 0))
    if zeros == 0:
        return grad * (result / self).conj()
    if not _tls.grad_enabled and zeros > 1:
        return zeros_like(self)
    return _prod_safe_zeros_backward(grad, self.contiguous().view(-1), 0).view_as(self)


def _prod_dim_backward(grad: Tensor, self: Tensor, result: Tensor, dim: int, keepdim: bool) -> Tensor:
    if self.ndim == 0:
        return grad
    d = _wrap_dim(dim, self.ndim)
    if not keepdim:
        grad, result = grad.unsqueeze(d), result.unsqueeze(d)
    if not np.any(self._data == 0):
        return grad * (result / self).conj()
    return _prod_safe_zeros_backward(grad, self, d)


_WITH_ZEROS = [[1.5, 0.0, -2.0], [0.0, 0.0, 3.0]]


@op(
    derivatives={"self": lambda grad, self, result: _prod_backward(grad, self.to(grad.dtype), result)},
    name="prod.default",
    node="ProdBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(),)),
        SampleInput((Lit([[1.5, 0.0, -2.0], [0.5, 1.0, 3.0]], "float64", grad=True),), note="one zero"),
        SampleInput((Lit(_WITH_ZEROS, "float64", grad=True),), note="zeros"),
        SampleInput((T.complex(2, 3),), note="complex"),
        SampleInput(
            (Lit([[1 + 1j, 0j, 2 - 1j], [0.5j, 1.0, -1 + 2j]], "complex128", grad=True),), note="complex zero"
        ),
    ],
)
def prod_default(self: Tensor, *, dtype: Any = None) -> Array:
    return np.asarray(np.prod(self, dtype=_np_dtype(dtype, self.dtype)))


@op(
    derivatives={
        "self": lambda grad, self, result, dim, keepdim: _prod_dim_backward(
            grad, self.to(grad.dtype), result, dim, keepdim
        )
    },
    name="prod.dim_int",
    node="ProdBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), 1)),
        SampleInput((T.of(2, 3, 4), 0, True)),
        SampleInput((Lit(_WITH_ZEROS, "float64", grad=True), 1), note="zeros"),
        SampleInput((Lit(_WITH_ZEROS, "float64", grad=True), 0, True), note="zeros keepdim"),
        SampleInput((T.complex(2, 3), 1), note="complex"),
        SampleInput(
            (Lit([[1 + 1j, 0j, 2 - 1j], [0j, 1.0, 0j]], "complex128", grad=True), 1), note="complex zeros"
        ),
    ],
)
def prod_dim_int(self: Tensor, dim: int, keepdim: bool = False, *, dtype: Any = None) -> Array:
    d = _wrap_dim(dim, self.ndim)
    if self.ndim == 0:
        return self.astype(_np_dtype(dtype, self.dtype))
    return np.asarray(np.prod(self, axis=d, keepdims=keepdim, dtype=_np_dtype(dtype, self.dtype)))


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), 1, True)),
        SampleInput((T.complex(2, 3),), note="complex"),
    ]
)
def prod(self: Tensor, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    dtype = _integral_to_long(self._data, dtype)
    if dim is None:
        return prod_default(self, dtype=dtype)
    return prod_dim_int(self, dim, keepdim, dtype=dtype)


# --- cumsum ---------------------------------------------------------------------------------------


def _cumsum_backward(grad: Tensor, dim: int) -> Tensor:
    if grad.numel() <= 1 or grad.shape[dim] == 1:
        return grad
    # PyTorch's reversed_cumsum: grad.flip(dim).cumsum(dim).flip(dim) without the copies.
    cumsum_ = grad.cumsum(dim)
    return cumsum_.narrow(dim, -1, 1) - cumsum_ + grad


@op(
    derivatives={
        "self": lambda grad, dim, self_scalar_type: _cumsum_backward(grad.to(self_scalar_type), dim)
    },
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3), 1)),
        SampleInput((T.of(2, 3), 0)),
        SampleInput((T.of(4), -1)),
        SampleInput((T.of(), 0)),
        SampleInput((T.complex(2, 3), 1), note="complex"),
        SampleInput((T.complex(), 0), note="complex 0-dim"),
    ],
)
def cumsum(self: Tensor, dim: int, *, dtype: Any = None) -> Array:
    d = _wrap_dim(dim, self.ndim)
    dtype = _integral_to_long(self, dtype)
    if self.ndim == 0:
        return self.astype(_np_dtype(dtype, self.dtype))
    return np.cumsum(self, axis=d, dtype=_np_dtype(dtype, self.dtype))


# --- all, any -------------------------------------------------------------------------------------


def _logical_reduction(fn: Any, a: Array, dim: Dims, keepdim: bool) -> Array:
    out = np.asarray(fn(a, axis=_dims(dim, a.ndim), keepdims=keepdim))
    return out.astype(np.uint8) if a.dtype == np.uint8 else out


def _logical_ops(name: str, fn: Any) -> Any:
    def default(self: Tensor) -> Array:
        return _logical_reduction(fn, self, None, False)

    def one_dim(self: Tensor, dim: int, keepdim: bool = False) -> Array:
        return _logical_reduction(fn, self, dim, keepdim)

    def dims(self: Tensor, dim: Sequence[int] | None = None, keepdim: bool = False) -> Array:
        return _logical_reduction(fn, self, dim, keepdim)

    entries = []
    overloads: list[tuple[str, Any, list[SampleInput]]] = [
        ("default", default, [SampleInput((T.mask(2, 3),)), SampleInput((T.of(2, 3),))]),
        ("dim", one_dim, [SampleInput((T.mask(2, 3), 1)), SampleInput((T.mask(2, 3), 0, True))]),
        ("dims", dims, [SampleInput((T.mask(2, 3, 2), [0, 2])), SampleInput((T.mask(2, 3), None, True))]),
    ]
    for overload, kernel, samples in overloads:
        kernel.__name__ = f"{name}_{overload}"
        entries.append(
            op(
                dtypes="keep",
                name=f"{name}.{overload}",
                method=False,
                function=False,
                samples=lambda s=samples: s,  # type: ignore[misc]
            )(kernel)
        )
    default_op, dim_op, dims_op = entries

    def router(self: Tensor, dim: Dims = None, keepdim: bool = False) -> Tensor:
        if dim is None and not keepdim:
            return default_op(self)
        if isinstance(dim, int):
            return dim_op(self, dim, keepdim)
        return dims_op(self, dim, keepdim)

    router.__name__ = name
    router_samples = lambda: [  # noqa: E731
        SampleInput((T.mask(2, 3),)),
        SampleInput((T.mask(2, 3), 1)),
        SampleInput((T.mask(2, 3), (0, 1), True)),
        SampleInput((T.index(2, 3, high=2),), {"keepdim": True}),
    ]
    return (*entries, composite(samples=router_samples)(router))


all_default, all_dim, all_dims, all = _logical_ops("all", np.all)  # noqa: A001
any_default, any_dim, any_dims, any = _logical_ops("any", np.any)  # noqa: A001


# --- var_mean, std_mean ---------------------------------------------------------------------------


def _var_mean_kernel(
    name: str, a: Array, dim: Dims, correction: float | None, keepdim: bool
) -> tuple[Array, Array]:
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating)):
        raise RuntimeError(f"{name} only support floating point and complex dtypes")
    var_ = _var_kernel(name, a, dim, correction, keepdim)
    mean_ = np.asarray(np.mean(a, axis=_dims(dim, a.ndim), keepdims=keepdim))
    return (np.sqrt(var_) if name == "std_mean" else var_), mean_


def _var_mean_backward(
    grads: list[Tensor | None], self: Tensor, dim: Dims, correction: float | None, keepdim: bool
) -> Tensor:
    gvar, gmean = grads
    gself = None if gvar is None else _var_backward(gvar, self, dim, correction, keepdim)
    return _add_mean_backward(gself, gmean, self, dim, keepdim)


def _std_mean_backward(
    grads: list[Tensor | None],
    self: Tensor,
    result0: Tensor,
    dim: Dims,
    correction: float | None,
    keepdim: bool,
) -> Tensor:
    gstd, gmean = grads
    gself = None if gstd is None else _std_backward(result0, gstd, self, dim, correction, keepdim)
    return _add_mean_backward(gself, gmean, self, dim, keepdim)


def _add_mean_backward(
    gself: Tensor | None, gmean: Tensor | None, self: Tensor, dim: Dims, keepdim: bool
) -> Tensor:
    if gmean is None:
        assert gself is not None
        return gself
    # PyTorch: mean_backward(gmean, self.sym_sizes(), dim.value_or({}), self.sym_numel(), keepdim)
    aux = _mean_backward(gmean, tuple(self.shape), [] if dim is None else dim, self.numel(), keepdim)
    return aux if gself is None else gself + aux


def _var_mean_samples() -> list[SampleInput]:
    return [
        *_var_samples(),
        SampleInput((T.complex(2, 3), [1]), note="complex"),
        SampleInput((T.index(2, 3, high=4),), note="int64"),
    ]


@op(
    derivatives={"self": _var_mean_backward},
    name="var_mean.correction",
    node="VarMeanBackward0",
    dtypes="keep",
    outputs=("result0", "result1"),
    method=False,
    function=False,
    samples=_var_mean_samples,
)
def var_mean_correction(
    self: Tensor, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> tuple[Array, Array]:
    return _var_mean_kernel("var_mean", self, dim, correction, keepdim)


@op(
    derivatives={"self": _std_mean_backward},
    name="std_mean.correction",
    node="StdMeanBackward0",
    dtypes="keep",
    outputs=("result0", "result1"),
    method=False,
    function=False,
    samples=_var_mean_samples,
)
def std_mean_correction(
    self: Tensor, dim: Dims = None, *, correction: float | None = None, keepdim: bool = False
) -> tuple[Array, Array]:
    return _var_mean_kernel("std_mean", self, dim, correction, keepdim)


@composite(method=False, samples=_var_router_samples)
def var_mean(
    self: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` in one pass; the arguments are ``var``'s."""
    dim, correction = _correction(dim, unbiased, correction)
    return var_mean_correction(self, dim, correction=correction, keepdim=keepdim)  # type: ignore[no-any-return]


@composite(method=False, samples=_var_router_samples)
def std_mean(
    self: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` in one pass; the arguments are ``std``'s."""
    dim, correction = _correction(dim, unbiased, correction)
    return std_mean_correction(self, dim, correction=correction, keepdim=keepdim)  # type: ignore[no-any-return]
