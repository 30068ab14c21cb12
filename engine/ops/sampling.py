"""Random sampling: ``multinomial`` and the in-place fills ``uniform_``, ``normal_``, ``bernoulli_``,
``exponential_``, ``random_``.

They draw from the engine's generator (``engine.random``: the global one, or ``generator=``), so
``engine.manual_seed`` makes them repeatable; the numbers differ from torch's, whose generator is
another algorithm (see docs/engine.md). The fills are in-place ops with PyTorch's nodes
(``UniformBackward0`` ...), whose gradient for ``self`` is zero: the old values do not matter.
Their samples use arguments whose result is certain (``uniform_(1, 1)``, ``bernoulli_(1)``), so
that the tests can compare them with torch's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from engine import _dtype
from engine._factories import zeros, zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import _scalar_type_name, composite, op
from engine.ops._samples import Lit, SampleInput, T
from engine.random import Generator, _gen

Array = np.ndarray


def _num(v: float) -> str:
    """A number as PyTorch's C++ messages print it (``2``, ``0.5``)."""
    return f"{v:g}"


def _with_param_named(name: str, stand_in: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a kernel a parameter PyTorch's schema names with a Python keyword (``from``).

    The kernel is written with ``stand_in`` (``from_``); the op table reads parameter names from
    the signature, so the signature says ``name``, and the call maps it back."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = []
        for p in inspect.signature(fn).parameters.values():
            if p.name == stand_in:
                p = p.replace()
                p._name = name  # type: ignore[attr-defined]  # a keyword: Parameter() refuses it
            params.append(p)

        def kernel(**kwargs: Any) -> Any:
            kwargs[stand_in] = kwargs.pop(name)
            return fn(**kwargs)

        kernel.__name__ = fn.__name__
        kernel.__doc__ = fn.__doc__
        kernel.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return kernel

    return decorate


def _zero_self(grad: Tensor) -> Tensor:
    return zeros_like(grad)


# --- multinomial ------------------------------------------------------------------------------


def _check_multinomial(a: Any, num_samples: int, replacement: bool) -> None:
    if not 0 < a.ndim <= 2:
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not np.issubdtype(a.dtype, np.floating):
        raise RuntimeError(
            "multinomial only supports floating-point dtypes for input, got: "
            f"{_scalar_type_name(_dtype.from_numpy(a.dtype))}"
        )
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > a.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")


@op(
    dtypes="keep",
    samples=lambda: [
        SampleInput((Lit([0.0, 0.0, 2.0, 0.0], "float64"), 1), note="one category"),
        SampleInput((Lit([[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]], "float64"), 4, True), note="rows, replacement"),
        SampleInput((Lit([[0.0, 0.5], [0.25, 0.0]], "float32"), 1), note="float32"),
        SampleInput((Lit([1.0, 1.0, 1.0], "float64"), 4), note="too many without replacement"),
        SampleInput((Lit([1.0, -1.0], "float64"), 1), note="negative"),
        SampleInput((Lit([0.0, 0.0], "float64"), 1), note="zero sum"),
        SampleInput((Lit([[[1.0]]], "float64"), 1), note="3-D"),
        SampleInput((Lit([1, 2]), 1), note="int64"),
        SampleInput((Lit([1.0, 2.0], "float64"), 0), note="no samples"),
    ],
)
def multinomial(
    self: Tensor, num_samples: int, replacement: bool = False, *, generator: Generator | None = None
) -> Array:
    """``num_samples`` category indices per row, drawn with probabilities proportional to the row.

    Without replacement (or for one sample) this is PyTorch's algorithm: the indices of the
    ``num_samples`` largest ``p / q`` with ``q ~ Exp(1)``; with replacement, inverse-CDF sampling."""
    _check_multinomial(self, num_samples, replacement)
    rows = np.atleast_2d(self).astype(np.float64)
    rng = _gen(generator)
    if not replacement or num_samples == 1:
        if not (np.all(rows < np.inf) and np.all(rows >= 0)):  # NaN fails both
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if np.any(rows.sum(axis=1) == 0):
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        keys = rows / rng.exponential(1.0, rows.shape)
        out = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    else:
        if np.any(rows < 0):
            raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
        if not np.all(np.isfinite(rows)):
            raise RuntimeError(
                "invalid multinomial distribution (encountering probability entry = infinity or NaN)"
            )
        total = rows.sum(axis=1, keepdims=True)
        if np.any(total <= 0):
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        cdf = np.cumsum(rows / total, axis=1)
        u = rng.random((rows.shape[0], num_samples))
        out = np.stack([np.searchsorted(c, r, side="right") for c, r in zip(cdf, u, strict=True)])
        out = np.minimum(out, rows.shape[1] - 1)
    out = out.astype(np.int64)
    return out[0] if self.ndim == 1 else out


# --- in-place fills ---------------------------------------------------------------------------


def _fill_samples(*args: Any, **kwargs: Any) -> Callable[[], list[SampleInput]]:
    return lambda: [
        SampleInput((T.of(2, 3, grad=False), *args), kwargs),
        SampleInput((T((2, 3), dtype="float32", grad=False), *args), kwargs, note="float32"),
    ]


@op(
    derivatives={"self": _zero_self},
    node="UniformBackward0",
    inplace=True,
    function=False,
    samples=lambda: [
        *_fill_samples(1.5, 1.5)(),
        SampleInput((T.of(2, 3, grad=False), 2.0, 1.0), note="from > to"),
    ],
)
@_with_param_named("from", "from_")
def uniform_(self: Tensor, from_: float = 0, to: float = 1, *, generator: Generator | None = None) -> Array:
    """Fill with U(from, to)."""
    if from_ > to:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={_num(from_)} > to={_num(to)}"
        )
    return _gen(generator).uniform(from_, to, self.shape)


@op(
    derivatives={"self": _zero_self},
    node="NormalBackward0",
    inplace=True,
    function=False,
    samples=lambda: [
        *_fill_samples(0.5, 0.0)(),
        SampleInput((T.of(2, 3, grad=False), 0.0, -1.0), note="std < 0"),
    ],
)
def normal_(self: Tensor, mean: float = 0, std: float = 1, *, generator: Generator | None = None) -> Array:
    """Fill with N(mean, std²)."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_num(std)}")
    return _gen(generator).normal(mean, std, self.shape)


@op(
    derivatives={"self": _zero_self},
    node="ExponentialBackward0",
    inplace=True,
    function=False,
    samples=lambda: [
        *_fill_samples(float("inf"))(),
        SampleInput((T.of(2, 3, grad=False), 0.0), note="lambd 0"),
    ],
)
def exponential_(self: Tensor, lambd: float = 1, *, generator: Generator | None = None) -> Array:
    """Fill with Exp(lambd): density ``lambd * exp(-lambd * x)``."""
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_num(lambd)}")
    return _gen(generator).exponential(1.0, self.shape) / lambd


def _bernoulli(a: Any, p: Any, generator: Generator | None) -> Array:
    return _gen(generator).random(a.shape) < p


@op(
    derivatives={"self": _zero_self},
    name="bernoulli_.float",
    node="BernoulliBackward2",
    inplace=True,
    function=False,
    samples=lambda: [
        *_fill_samples(1.0)(),
        SampleInput((T.of(2, 3, grad=False), 0.0), note="p 0"),
        SampleInput((T.of(2, 3, grad=False), 2.0), note="p > 1"),
    ],
)
def bernoulli__float(self: Tensor, p: float = 0.5, *, generator: Generator | None = None) -> Array:
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_num(p)}")
    return _bernoulli(self, p, generator)


@op(
    derivatives={
        "self": _zero_self,
        "p": lambda grad, p_sym_sizes, p_scalar_type: zeros(p_sym_sizes, dtype=p_scalar_type),
    },
    name="bernoulli_.Tensor",
    node="BernoulliBackward1",
    inplace=True,
    function=False,
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3, grad=False), Lit([1.0, 0.0, 1.0], "float64"))),
        SampleInput((T.of(2, 3, grad=False), Lit([1.0, 0.0, 2.0], "float64")), note="p > 1"),
    ],
)
def bernoulli__Tensor(self: Tensor, p: Tensor, *, generator: Generator | None = None) -> Array:  # noqa: N802
    if not np.all((p >= 0) & (p <= 1)):
        raise RuntimeError("bernoulli tensor's p must be in [0, 1]")
    return _bernoulli(self, np.broadcast_to(p, self.shape), generator)


@op(
    derivatives={"self": _zero_self},
    node="BernoulliBackward0",
    dtypes="keep",
    samples=lambda: [
        SampleInput((Lit([1.0, 0.0, 1.0], "float64", grad=True),), gradcheck=False),  # p at the bounds
        SampleInput((Lit([[0.0, 1.0]], "float32"),), note="float32"),
        SampleInput((Lit([1, 0]),), note="int64"),
        SampleInput((Lit([2.0], "float64"),), note="p > 1"),
    ],
)
def bernoulli(self: Tensor, *, generator: Generator | None = None) -> Array:
    """``torch.bernoulli(input)``: 1 with the probability each element of ``self`` holds, else 0,
    in ``self``'s dtype. (The ``bernoulli(p)`` overload is not implemented.)"""
    a = np.asarray(self)  # the kernel gets the array
    if not np.issubdtype(a.dtype, np.floating):
        name = {np.dtype(np.int64): "Long", np.dtype(np.int32): "Int", np.dtype(np.bool_): "Bool"}.get(
            a.dtype, str(a.dtype)
        )
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{name}'")
    if not np.all((a >= 0) & (a <= 1)):
        raise RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
            "improved?  If so, please report an enhancement request to PyTorch.)"
        )
    return _bernoulli(a, a, generator).astype(a.dtype)


@composite(function=False)
def bernoulli_(self: Tensor, p: Tensor | float = 0.5, *, generator: Generator | None = None) -> Tensor:
    """Fill with 1 (probability ``p``) or 0."""
    if isinstance(p, Tensor):
        return bernoulli__Tensor(self, p, generator=generator)  # type: ignore[no-any-return]
    return bernoulli__float(self, p, generator=generator)  # type: ignore[no-any-return]


def _random_upper(d: Any) -> int:
    """One past the largest value ``random_()`` draws: every integer the dtype holds exactly."""
    if d == np.bool_:
        return 2
    if np.issubdtype(d, np.floating):
        return 2 ** np.finfo(d).nmant + 2  # 2**(mantissa bits + 1), inclusive
    return int(np.iinfo(d).max) + (1 if d == np.uint8 else 0)


def _random_fill(a: Any, low: int, high: int, generator: Generator | None) -> Array:
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return _gen(generator).integers(low, high, a.shape, dtype=np.int64, endpoint=False).astype(a.dtype)


@op(
    derivatives={"self": _zero_self},
    name="random_.from",
    node="RandomBackward0",
    inplace=True,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3, grad=False), 3, 4)),
        SampleInput((T.index(2, 3, high=5), -2, -1), note="int64"),
        SampleInput((T.of(2, 3, grad=False), 3, 3), note="empty range"),
    ],
)
@_with_param_named("from", "from_")
def random__from(self: Tensor, from_: int, to: int | None, *, generator: Generator | None = None) -> Array:
    return _random_fill(self, from_, _random_upper(self.dtype) if to is None else to, generator)


@op(
    derivatives={"self": _zero_self},
    name="random_.to",
    node="RandomBackward1",
    inplace=True,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3, grad=False), 1)),
        SampleInput((T.index(2, 3, high=5), 1), note="int64"),
    ],
)
def random__to(self: Tensor, to: int, *, generator: Generator | None = None) -> Array:
    return _random_fill(self, 0, to, generator)


@op(
    derivatives={"self": _zero_self},
    name="random_.default",
    node="RandomBackward2",
    inplace=True,
    function=False,
)
def random__default(self: Tensor, *, generator: Generator | None = None) -> Array:
    return _random_fill(self, 0, _random_upper(self.dtype), generator)


@composite(function=False)
def random_(
    self: Tensor, *args: int | None, generator: Generator | None = None, **kwargs: int | None
) -> Tensor:
    """``random_()``: integers in [0, 2**mantissa] (floats) or [0, max] (integers);
    ``random_(to)``: [0, to); ``random_(from, to)``: [from, to) (``to=None``: the dtype's top)."""
    if "from" in kwargs:
        args = (kwargs.pop("from"), *args)
    if "to" in kwargs:
        args = (*args, kwargs.pop("to"))
    if len(args) == 2:
        return random__from(self, args[0], args[1], generator=generator)  # type: ignore[no-any-return]
    if len(args) == 1:
        return random__to(self, args[0], generator=generator)  # type: ignore[no-any-return]
    return random__default(self, generator=generator)  # type: ignore[no-any-return]
