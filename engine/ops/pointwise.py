"""Pointwise ops: arithmetic, unary math, activations, comparisons, and their in-place twins.

Formulas follow PyTorch's ``tools/autograd/derivatives.yaml`` (the ``.conj()`` calls are
there for complex inputs, where PyTorch's gradient is the conjugate Wirtinger derivative). They
never reduce a broadcast gradient themselves: the engine sums it to the input's shape (see
``validate_outputs`` in engine/autograd/engine.py).
"""

from __future__ import annotations

import math

import numpy as np

from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import composite, inplace_variant, op
from engine.ops._samples import SampleInput, T

Array = np.ndarray
_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_array(a: Array) -> Array:
    # frompyfunc returns a Python float for a 0-dim input and object arrays otherwise.
    return np.asarray(_erf(a), dtype=a.dtype)


def infer_size(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``shapes`` (PyTorch's ``infer_size``, folded left to right), with
    PyTorch's error instead of NumPy's."""
    out: tuple[int, ...] = ()
    for i, b in enumerate(shapes):
        a = out if i else b
        n = max(len(a), len(b))
        dims = [0] * n
        for d in reversed(range(n)):  # from the last dim, so the error names the rightmost mismatch
            sa = a[d - n + len(a)] if d - n + len(a) >= 0 else 1
            sb = b[d - n + len(b)] if d - n + len(b) >= 0 else 1
            if sa != sb and sa != 1 and sb != 1:
                raise RuntimeError(
                    f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at non-singleton "
                    f"dimension {d}"
                )
            dims[d] = sb if sa == 1 else sa
        out = tuple(dims)
    return out


def _unary(low: float = -2.0, high: float = 2.0) -> list[SampleInput]:
    return [SampleInput((T((2, 3), low, high),)), SampleInput((T((), low, high),), note="0-dim")]


def _binary(low: float = -2.0, high: float = 2.0) -> list[SampleInput]:
    return [
        SampleInput((T((2, 3), low, high), T((2, 3), low, high))),
        SampleInput((T((2, 3), low, high), T((3,), low, high)), note="broadcast"),
        SampleInput((T((2, 1), low, high), T((1, 3), low, high)), note="broadcast both"),
        SampleInput((T((2, 3), low, high), T((2, 3), low, high, grad=False)), note="self only"),
        SampleInput((T((2, 3), low, high, grad=False), T((2, 3), low, high)), note="other only"),
        SampleInput((T((2, 3), low, high), 1.5), note="python scalar"),
    ]


# --- arithmetic ------------------------------------------------------------------------------


@op(
    derivatives={"self": lambda grad: grad, "other": lambda grad, alpha: grad * alpha},
    samples=lambda: [*_binary(), SampleInput((T.of(2, 3), T.of(2, 3)), {"alpha": 2.0})],
)
def add(self: Tensor, other: Tensor, alpha: float = 1) -> Array:
    infer_size(self.shape, other.shape)
    return self + other if alpha == 1 else self + alpha * other


@op(
    derivatives={"self": lambda grad: grad, "other": lambda grad, alpha: -grad * alpha},
    samples=lambda: [*_binary(), SampleInput((T.of(2, 3), T.of(2, 3)), {"alpha": 2.0})],
)
def sub(self: Tensor, other: Tensor, alpha: float = 1) -> Array:
    infer_size(self.shape, other.shape)
    return self - other if alpha == 1 else self - alpha * other


@op(
    derivatives={
        "self": lambda grad, other: grad * other.conj(),
        "other": lambda grad, self: grad * self.conj(),
    },
    samples=_binary,
)
def mul(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    return self * other


@op(
    derivatives={
        "self": lambda grad, other: grad / other.conj(),
        "other": lambda grad, self, other: -grad * ((self / other) / other).conj(),
    },
    dtypes="float",
    samples=lambda: _binary(0.5, 2.0),
)
def div(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    return self / other


@op(
    derivatives={"self": lambda grad, alpha: -grad * alpha},
    name="rsub.Scalar",
    node="RsubBackward1",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 3), 2.0))],
)
def rsub_Scalar(self: Tensor, other: float, alpha: float = 1) -> Array:  # noqa: N802
    """``other - alpha * self`` for a Python number ``other`` (``2 - x``)."""
    return other - alpha * self


@op(derivatives={"self": lambda grad: -grad}, samples=_unary)
def neg(self: Tensor) -> Array:
    return -self


@op(
    derivatives={"self": lambda grad, exponent, self: _pow_backward(grad, self, exponent)},
    name="pow.Tensor_Scalar",
    node="PowBackward0",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T((2, 3), 0.5, 2.0), 3)),
        SampleInput((T((2, 3), 0.5, 2.0), 0.5)),
        SampleInput((T((2, 3), 0.5, 2.0), 0)),
    ],
)
def pow_Tensor_Scalar(self: Tensor, exponent: float) -> Array:  # noqa: N802 - aten overload name
    return np.power(self, exponent)


def _pow_backward(grad: Tensor, self: Tensor, exponent: float) -> Tensor:
    if exponent == 0.0:
        return zeros_like(grad)
    return grad * (exponent * self.pow(exponent - 1)).conj()


def _pow_backward_self(grad: Tensor, self: Tensor, exponent: Tensor) -> Tensor:
    return where(exponent == 0.0, 0.0, grad * (exponent * self.pow(exponent - 1)).conj())


def _pow_backward_exponent(grad: Tensor, self: Tensor, exponent: Tensor, result: Tensor) -> Tensor:
    # 0 ** e for e >= 0 is 0 or 1 whatever e is near there: PyTorch defines its gradient as 0.
    cond = (self == 0.0).logical_and(exponent >= 0.0)
    return grad * where(cond, 0.0, (result * self.log()).conj())


@op(
    derivatives={
        "self": lambda grad, self, exponent: _pow_backward_self(grad, self, exponent),
        "exponent": lambda grad, self, exponent, result: _pow_backward_exponent(grad, self, exponent, result),
    },
    name="pow.Tensor_Tensor",
    node="PowBackward1",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T((2, 3), 0.5, 2.0), T((2, 3), -1.0, 2.0))),
        SampleInput((T((2, 3), 0.5, 2.0), T((3,), -1.0, 2.0))),
    ],
)
def pow_Tensor_Tensor(self: Tensor, exponent: Tensor) -> Array:  # noqa: N802
    infer_size(self.shape, exponent.shape)
    return np.power(self, exponent)


@op(
    derivatives={
        "exponent": lambda grad, self, exponent, result: (
            grad * (result * math.log(self)).conj()
            if self != 0
            else grad * where(exponent >= 0.0, 0.0, (result * -math.inf).conj())
        )
    },
    name="pow.Scalar",
    node="PowBackward2",
    dtypes="float",
    method=False,
    function=False,
    samples=lambda: [SampleInput((2.0, T((2, 3))))],
)
def pow_Scalar(self: float, exponent: Tensor) -> Array:  # noqa: N802
    return np.power(float(self), exponent)


@op(
    derivatives={"self": lambda grad, result: -grad * (result * result).conj()},
    dtypes="float",
    samples=lambda: _unary(0.5, 2.0),
)
def reciprocal(self: Tensor) -> Array:
    return 1.0 / self


# --- unary math ------------------------------------------------------------------------------


@op(derivatives={"self": lambda grad, self: grad * self.sgn()}, samples=_unary)
def abs(self: Tensor) -> Array:  # noqa: A001 - PyTorch's name
    return np.abs(self)


@op(derivatives={"self": lambda grad: zeros_like(grad)}, samples=_unary)
def sign(self: Tensor) -> Array:
    return np.sign(self)


def _sgn_backward(self: Tensor, grad: Tensor, result: Tensor) -> Tensor:
    if not self.is_complex():
        # PyTorch returns an efficient zero tensor here: zeros that do not require grad.
        return zeros_like(grad)
    abs_ = self.abs()
    return ((grad - (result * result) * grad.conj()) / (2.0 * abs_)).masked_fill_(abs_ == 0.0, 0.0)


@op(derivatives={"self": lambda grad, self, result: _sgn_backward(self, grad, result)}, samples=_unary)
def sgn(self: Tensor) -> Array:
    if np.iscomplexobj(self):
        mag = np.abs(self)
        return np.where(mag == 0, 0, self / np.where(mag == 0, 1, mag))
    return np.sign(self)


@op(derivatives={"self": lambda grad, result: grad * result.conj()}, dtypes="float", samples=_unary)
def exp(self: Tensor) -> Array:
    return np.exp(self)


@op(
    derivatives={"self": lambda grad, self: grad / self.conj()},
    dtypes="float",
    samples=lambda: _unary(0.5, 3.0),
)
def log(self: Tensor) -> Array:
    return np.log(self)


@op(
    derivatives={"self": lambda grad, self: grad / (self + 1).conj()},
    dtypes="float",
    node="Log1PBackward0",
    samples=lambda: _unary(0.0, 3.0),
)
def log1p(self: Tensor) -> Array:
    return np.log1p(self)


@op(
    derivatives={"self": lambda grad, result: grad / (2 * result.conj())},
    dtypes="float",
    samples=lambda: _unary(0.5, 3.0),
)
def sqrt(self: Tensor) -> Array:
    return np.sqrt(self)


@op(
    derivatives={"self": lambda grad, result: -0.5 * grad * result.pow(3).conj()},
    dtypes="float",
    samples=lambda: _unary(0.5, 3.0),
)
def rsqrt(self: Tensor) -> Array:
    return 1.0 / np.sqrt(self)


@op(derivatives={"self": lambda grad, self: grad * self.cos().conj()}, dtypes="float", samples=_unary)
def sin(self: Tensor) -> Array:
    return np.sin(self)


@op(derivatives={"self": lambda grad, self: grad * -self.sin().conj()}, dtypes="float", samples=_unary)
def cos(self: Tensor) -> Array:
    return np.cos(self)


@op(
    derivatives={"self": lambda grad, result: grad * (1 + result.pow(2)).conj()},
    dtypes="float",
    samples=lambda: _unary(-1.2, 1.2),
)
def tan(self: Tensor) -> Array:
    return np.tan(self)


@op(
    derivatives={"self": lambda grad, result: grad * (1 - result * result).conj()},
    dtypes="float",
    samples=_unary,
)
def tanh(self: Tensor) -> Array:
    return np.tanh(self)


@op(
    derivatives={"self": lambda grad, result: grad * (result * (1 - result)).conj()},
    dtypes="float",
    samples=_unary,
)
def sigmoid(self: Tensor) -> Array:
    # Split by sign so that exp never overflows.
    out = np.empty_like(self)
    pos = self >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-self[pos]))
    e = np.exp(self[~pos])
    out[~pos] = e / (1.0 + e)
    return out


# --- clamp, maximum, minimum, where ------------------------------------------------------------


def _clamp_backward(grad: Tensor, self: Tensor, min: float | None, max: float | None) -> Tensor:  # noqa: A002
    if min is None:
        return grad * (self <= max)
    if max is None:
        return grad * (self >= min)
    return grad * ((self >= min) & (self <= max))


@op(
    derivatives={"self": _clamp_backward},
    name="clamp.default",
    node="ClampBackward1",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), -0.5, 0.5)),
        SampleInput((T.of(2, 3),), {"min": -0.5}),
        SampleInput((T.of(2, 3),), {"max": 0.5}),
    ],
)
def clamp_default(self: Tensor, min: float | None = None, max: float | None = None) -> Array:  # noqa: A002
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    return np.clip(self, min, max)


@op(
    derivatives={
        "self": lambda grad, self, min, max: grad * ((self >= min) & (self <= max)),  # noqa: A002
        "min": lambda grad, self, min: grad * (self < min),  # noqa: A002
        "max": lambda grad, self, max: grad * (self > max),  # noqa: A002
    },
    name="clamp.Tensor",
    node="ClampBackward0",
    method=False,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 3), T((2, 3), -2, -0.5), T((2, 3), 0.5, 2)))],
)
def clamp_Tensor(self: Tensor, min: Tensor, max: Tensor) -> Array:  # noqa: A002, N802
    infer_size(self.shape, min.shape, max.shape)
    return np.minimum(np.maximum(self, min), max)


def _max_min_grad(grad: Tensor, self: Tensor, other: Tensor, zero_where: Tensor) -> Tensor:
    # Ties split the gradient evenly between self and other.
    return where(self == other, grad / 2, grad).masked_fill_(zero_where, 0)


@op(
    derivatives={
        "self": lambda grad, self, other: _max_min_grad(grad, self, other, self < other),
        "other": lambda grad, self, other: _max_min_grad(grad, self, other, self > other),
    },
    samples=lambda: _binary()[:-1],  # aten::maximum takes no Python scalar
)
def maximum(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    return np.maximum(self, other)


@op(
    derivatives={
        "self": lambda grad, self, other: _max_min_grad(grad, self, other, self > other),
        "other": lambda grad, self, other: _max_min_grad(grad, self, other, self < other),
    },
    samples=lambda: _binary()[:-1],
)
def minimum(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    return np.minimum(self, other)


@op(
    derivatives={
        "self": lambda grad, condition: grad.where(condition, 0.0),
        "other": lambda grad, condition: zeros_like(grad).where(condition, grad),
    },
    name="where",
    node="WhereBackward0",
    method=False,
    samples=lambda: [
        SampleInput((T.mask(2, 3), T.of(2, 3), T.of(2, 3))),
        SampleInput((T.mask(2, 3), T.of(3), T.of(2, 1))),
    ],
)
def where(condition: Tensor, self: Tensor, other: Tensor) -> Array:
    infer_size(condition.shape, self.shape, other.shape)
    return np.where(condition.astype(bool), self, other)


# --- comparisons and logic (no gradient) -----------------------------------------------------


def _cmp(name: str, fn: np.ufunc) -> None:
    def kernel(self: Tensor, other: Tensor) -> Array:
        infer_size(self.shape, other.shape)
        return fn(self, other)

    kernel.__name__ = name
    globals()[name] = op(dtypes="bool", samples=lambda: [SampleInput((T.of(2, 3), T.of(2, 3)))])(kernel)


for _name, _fn in (
    ("eq", np.equal),
    ("ne", np.not_equal),
    ("lt", np.less),
    ("le", np.less_equal),
    ("gt", np.greater),
    ("ge", np.greater_equal),
    ("logical_and", np.logical_and),
    ("logical_or", np.logical_or),
    ("logical_xor", np.logical_xor),
):
    _cmp(_name, _fn)


@op(dtypes="keep", samples=lambda: [SampleInput((T.mask(2, 3),))])
def logical_not(self: Tensor) -> Array:
    return np.logical_not(self)


@op(dtypes="promote", samples=lambda: [SampleInput((T.mask(2, 3), T.mask(2, 3)))])
def bitwise_and(self: Tensor, other: Tensor) -> Array:
    return np.bitwise_and(self, other)


@op(dtypes="promote", samples=lambda: [SampleInput((T.mask(2, 3), T.mask(2, 3)))])
def bitwise_or(self: Tensor, other: Tensor) -> Array:
    return np.bitwise_or(self, other)


@op(dtypes="keep", samples=lambda: [SampleInput((T.of(2, 3),))])
def isnan(self: Tensor) -> Array:
    return np.isnan(self)


# --- in-place twins --------------------------------------------------------------------------

add_ = inplace_variant(add)
sub_ = inplace_variant(sub)
mul_ = inplace_variant(mul)
div_ = inplace_variant(div)
pow_Tensor_Scalar_ = inplace_variant(pow_Tensor_Scalar, "pow_.Scalar")
pow_Tensor_Tensor_ = inplace_variant(pow_Tensor_Tensor, "pow_.Tensor")


# --- routers: one Python name, several aten overloads ---------------------------------------


@composite(
    samples=lambda: [SampleInput((T((2, 3), 0.5, 2.0), 2)), SampleInput((T((2, 3), 0.5, 2.0), T((2, 3))))]
)
def pow(self: Tensor | float, exponent: Tensor | float) -> Tensor:  # noqa: A001
    if not isinstance(self, Tensor):
        return pow_Scalar(self, exponent)
    if isinstance(exponent, Tensor):
        return pow_Tensor_Tensor(self, exponent)
    return pow_Tensor_Scalar(self, exponent)


@composite(function=False)
def pow_(self: Tensor, exponent: Tensor | float) -> Tensor:
    if isinstance(exponent, Tensor):
        return pow_Tensor_Tensor_(self, exponent)
    return pow_Tensor_Scalar_(self, exponent)


@composite(samples=lambda: [SampleInput((T.of(2, 3), -0.5, 0.5))])
def clamp(self: Tensor, min: Tensor | float | None = None, max: Tensor | float | None = None) -> Tensor:  # noqa: A002
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return clamp_Tensor(self, min, max)
    return clamp_default(self, min, max)


@composite(function=False)
def clamp_(self: Tensor, min: Tensor | float | None = None, max: Tensor | float | None = None) -> Tensor:  # noqa: A002
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return clamp_Tensor_(self, min, max)
    return clamp_default_(self, min, max)


@composite(function=True, method=False)
def rsub(self: Tensor, other: float, alpha: float = 1) -> Tensor:
    return rsub_Scalar(self, other, alpha)


exp_ = inplace_variant(exp)
sigmoid_ = inplace_variant(sigmoid)
tanh_ = inplace_variant(tanh)
clamp_default_ = inplace_variant(clamp_default, "clamp_.default")
clamp_Tensor_ = inplace_variant(clamp_Tensor, "clamp_.Tensor")
neg_ = inplace_variant(neg)
sin_ = inplace_variant(sin)
cos_ = inplace_variant(cos)
sqrt_ = inplace_variant(sqrt)
log_ = inplace_variant(log)
abs_ = inplace_variant(abs)


# --- complex conjugation ------------------------------------------------------------------------


@op(
    derivatives={"self": lambda grad: grad.conj()},
    name="_conj",
    node="ConjBackward0",
    dtypes="keep",
    method=False,
    function=False,
)
def _conj(self: Tensor) -> Array:
    return np.conj(self)


@composite()
def conj(self: Tensor) -> Tensor:
    """The complex conjugate; a real tensor is returned as is (no op, no node), as in PyTorch."""
    return _conj(self) if self.is_complex() else self
