"""Pointwise ops: arithmetic, unary math, activations, comparisons, and their in-place twins.

Formulas follow PyTorch's ``tools/autograd/derivatives.yaml`` (the ``.conj()`` calls are
there for complex inputs, where PyTorch's gradient is the conjugate Wirtinger derivative). They
never reduce a broadcast gradient themselves: the engine sums it to the input's shape (see
``validate_outputs`` in engine/autograd/engine.py).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from engine import _dtype
from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import composite, inplace_variant, op
from engine.ops._samples import Lit, SampleInput, T
from engine.ops.complex import handle_r_to_c

Array = np.ndarray
_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_array(a: Array) -> Array:
    # frompyfunc returns a Python float for a 0-dim input and object arrays otherwise.
    return np.asarray(_erf(a), dtype=a.dtype)


def infer_size(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``shapes`` (PyTorch's ``infer_size``, folded left to right), with
    PyTorch's error instead of NumPy's."""
    if all(s == shapes[0] for s in shapes[1:]):  # nothing to broadcast: the common case, made fast
        return tuple(shapes[0])
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
    return [*_binary_real(low, high), *_binary_complex(low, high)]


def _binary_real(low: float = -2.0, high: float = 2.0) -> list[SampleInput]:
    return [
        SampleInput((T((2, 3), low, high), T((2, 3), low, high))),
        SampleInput((T((2, 3), low, high), T((3,), low, high)), note="broadcast"),
        SampleInput((T((2, 1), low, high), T((1, 3), low, high)), note="broadcast both"),
        SampleInput((T((2, 3), low, high), T((2, 3), low, high, grad=False)), note="self only"),
        SampleInput((T((2, 3), low, high, grad=False), T((2, 3), low, high)), note="other only"),
        SampleInput((T((2, 3), low, high), 1.5), note="python scalar"),
    ]


def _binary_complex(low: float = -2.0, high: float = 2.0) -> list[SampleInput]:
    """Complex operands, alone and mixed with real ones (the real one gets a real gradient)."""
    c, r = functools.partial(T.complex, low=low, high=high), functools.partial(T, low=low, high=high)
    return [
        SampleInput((c(2, 3), c(2, 3)), note="complex"),
        SampleInput((c(2, 3), r((3,))), note="complex real"),
        SampleInput((r((2, 1)), c(1, 3)), note="real complex"),
        SampleInput((c(2, 3), c(3, grad=False)), note="complex self only"),
        SampleInput((r((2, 3)), 1.5 - 0.5j), note="real python complex"),
        SampleInput((c(2, 3), 1.5), note="complex python scalar"),
    ]


def _unary_complex(low: float = -2.0, high: float = 2.0) -> list[SampleInput]:
    return [
        SampleInput((T.complex(2, 3, low=low, high=high),), note="complex"),
        SampleInput((T.complex(low=low, high=high),), note="complex 0-dim"),
    ]


def _unary_all(
    low: float = -2.0, high: float = 2.0, clow: float = -2.0, chigh: float = 2.0
) -> list[SampleInput]:
    return [*_unary(low, high), *_unary_complex(clow, chigh)]


# --- arithmetic ------------------------------------------------------------------------------


def _maybe_multiply(t: Tensor, s: complex) -> Tensor:
    return t if s == 1 else t * s


def _check_alpha(self: Array, alpha: complex) -> None:
    if isinstance(alpha, complex) and not np.iscomplexobj(self):
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")


def _alpha_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3), T.of(2, 3)), {"alpha": 2.0}),
        SampleInput((T.complex(2, 3), T.of(2, 3)), {"alpha": 2.0 - 1.0j}, note="complex alpha"),
        SampleInput((T.of(2, 3), T.of(2, 3)), {"alpha": 1j}, note="complex alpha real inputs"),
    ]


@op(
    derivatives={
        "self": lambda grad, self_scalar_type: handle_r_to_c(self_scalar_type, grad),
        "other": lambda grad, alpha, other_scalar_type: handle_r_to_c(
            other_scalar_type, _maybe_multiply(grad, _conj_scalar(alpha))
        ),
    },
    samples=lambda: [*_binary(), *_alpha_samples()],
)
def add(self: Tensor, other: Tensor, alpha: complex = 1) -> Array:
    infer_size(self.shape, other.shape)
    _check_alpha(self, alpha)
    return self + other if alpha == 1 else self + alpha * other


@op(
    derivatives={
        "self": lambda grad, self_scalar_type: handle_r_to_c(self_scalar_type, grad),
        "other": lambda grad, alpha, other_scalar_type: handle_r_to_c(
            other_scalar_type, _maybe_multiply(-grad, _conj_scalar(alpha))
        ),
    },
    samples=lambda: [*_binary(), *_alpha_samples()],
)
def sub(self: Tensor, other: Tensor, alpha: complex = 1) -> Array:
    infer_size(self.shape, other.shape)
    _check_alpha(self, alpha)
    return self - other if alpha == 1 else self - alpha * other


def _conj_scalar(s: complex) -> complex:
    return s.conjugate() if isinstance(s, complex) else s


@op(
    derivatives={
        "self": lambda grad, other, self_scalar_type: handle_r_to_c(self_scalar_type, grad * other.conj()),
        "other": lambda grad, self, other_scalar_type: handle_r_to_c(other_scalar_type, grad * self.conj()),
    },
    samples=_binary,
)
def mul(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    return self * other


@op(
    derivatives={
        "self": lambda grad, other, self_scalar_type: handle_r_to_c(self_scalar_type, grad / other.conj()),
        "other": lambda grad, self, other: handle_r_to_c(
            other.dtype, -grad * ((self / other) / other).conj()
        ),
    },
    dtypes="float",
    samples=lambda: _binary(0.5, 2.0),
)
def div(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    return self / other


@op(
    derivatives={
        "self": lambda grad, alpha, self_scalar_type: handle_r_to_c(
            self_scalar_type, _maybe_multiply(-grad, _conj_scalar(alpha))
        )
    },
    name="rsub.Scalar",
    node="RsubBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), 2.0)),
        SampleInput((T.complex(2, 3), 2.0 - 1j), note="complex"),
        SampleInput((T.of(2, 3), 2.0 - 1j), note="real tensor complex scalar"),
    ],
)
def rsub_Scalar(self: Tensor, other: complex, alpha: complex = 1) -> Array:  # noqa: N802
    """``other - alpha * self`` for a Python number ``other`` (``2 - x``)."""
    # The numbers take part in type promotion: ``1j - x`` is complex.
    out = _dtype.result_type([Tensor._make(self), other, alpha])
    return (other - alpha * self.astype(out._np)).astype(out._np)


@op(derivatives={"self": lambda grad: -grad}, samples=_unary_all)
def neg(self: Tensor) -> Array:
    return -self


@op(
    derivatives={"self": lambda grad, result: -grad * (result * result).conj()},
    dtypes="float",
    samples=lambda: _unary_all(0.5, 2.0, 0.5, 2.0),
)
def reciprocal(self: Tensor) -> Array:
    return 1.0 / self


# --- unary math ------------------------------------------------------------------------------


@op(derivatives={"self": lambda grad, self: grad * self.sgn()}, dtypes="keep", samples=_unary_all)
def abs(self: Tensor) -> Array:  # noqa: A001 - PyTorch's name
    return np.abs(self)  # real for a complex input


@op(
    derivatives={"self": lambda grad: zeros_like(grad)},
    samples=lambda: [*_unary(), SampleInput((T.complex(2, 3),), note="complex")],
)
def sign(self: Tensor) -> Array:
    if np.iscomplexobj(self):
        raise NotImplementedError(
            "Unlike NumPy, engine.sign is not intended to support complex numbers. Please use "
            "engine.sgn instead."
        )
    return np.sign(self)


def _sgn_backward(self: Tensor, grad: Tensor, result: Tensor) -> Tensor:
    if not self.is_complex():
        # PyTorch returns an efficient zero tensor here: zeros that do not require grad.
        return zeros_like(grad)
    abs_ = self.abs()
    return ((grad - (result * result) * grad.conj()) / (2.0 * abs_)).masked_fill_(abs_ == 0.0, 0.0)


@op(
    derivatives={"self": lambda grad, self, result: _sgn_backward(self, grad, result)},
    samples=lambda: [
        *_unary_all(),
        SampleInput((Lit([0j, 1 + 1j, -2j], "complex128", grad=True),), note="zero", gradcheck=False),
    ],
)
def sgn(self: Tensor) -> Array:
    if np.iscomplexobj(self):
        mag = np.abs(self)
        return np.where(mag == 0, 0, self / np.where(mag == 0, 1, mag))
    return np.sign(self)


@op(derivatives={"self": lambda grad, result: grad * result.conj()}, dtypes="float", samples=_unary_all)
def exp(self: Tensor) -> Array:
    return np.exp(self)


@op(
    derivatives={"self": lambda grad, self: grad / self.conj()},
    dtypes="float",
    samples=lambda: _unary_all(0.5, 3.0),
)
def log(self: Tensor) -> Array:
    return np.log(self)


@op(
    derivatives={"self": lambda grad, self: grad / (self + 1).conj()},
    dtypes="float",
    node="Log1PBackward0",
    samples=lambda: _unary_all(0.0, 3.0),
)
def log1p(self: Tensor) -> Array:
    return np.log1p(self)


@op(
    derivatives={"self": lambda grad, result: grad / (2 * result.conj())},
    dtypes="float",
    samples=lambda: _unary_all(0.5, 3.0),
)
def sqrt(self: Tensor) -> Array:
    return np.sqrt(self)


@op(
    derivatives={"self": lambda grad, result: -0.5 * grad * result.pow(3).conj()},
    dtypes="float",
    samples=lambda: _unary_all(0.5, 3.0),
)
def rsqrt(self: Tensor) -> Array:
    return 1.0 / np.sqrt(self)


@op(derivatives={"self": lambda grad, self: grad * self.cos().conj()}, dtypes="float", samples=_unary_all)
def sin(self: Tensor) -> Array:
    return np.sin(self)


@op(derivatives={"self": lambda grad, self: grad * -self.sin().conj()}, dtypes="float", samples=_unary_all)
def cos(self: Tensor) -> Array:
    return np.cos(self)


@op(
    derivatives={"self": lambda grad, result: grad * (1 + result.pow(2)).conj()},
    dtypes="float",
    samples=lambda: _unary_all(-1.2, 1.2, -1.0, 1.0),
)
def tan(self: Tensor) -> Array:
    return np.tan(self)


@op(
    derivatives={"self": lambda grad, result: grad * (1 - result * result).conj()},
    dtypes="float",
    samples=_unary_all,
)
def tanh(self: Tensor) -> Array:
    return np.tanh(self)


@op(
    derivatives={"self": lambda grad, result: grad * (result * (1 - result)).conj()},
    dtypes="float",
    samples=_unary_all,
)
def sigmoid(self: Tensor) -> Array:
    # Split by sign so that exp never overflows.
    out = np.empty_like(self)
    pos = np.real(self) >= 0
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
    # aten::maximum takes no Python scalar.
    samples=lambda: [*_binary_real()[:-1], SampleInput((T.complex(2, 3), T.of(2, 3)), note="complex")],
)
def maximum(self: Tensor, other: Tensor) -> Array:
    if np.iscomplexobj(self):
        raise RuntimeError("maximum not implemented for complex tensors.")
    infer_size(self.shape, other.shape)
    return np.maximum(self, other)


@op(
    derivatives={
        "self": lambda grad, self, other: _max_min_grad(grad, self, other, self > other),
        "other": lambda grad, self, other: _max_min_grad(grad, self, other, self < other),
    },
    samples=lambda: [*_binary_real()[:-1], SampleInput((T.complex(2, 3), T.of(2, 3)), note="complex")],
)
def minimum(self: Tensor, other: Tensor) -> Array:
    if np.iscomplexobj(self):
        raise RuntimeError("minimum not implemented for complex tensors.")
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
        SampleInput((T.mask(2, 3), T.complex(2, 3), T.complex(3)), note="complex"),
        SampleInput((T.mask(2, 3), T.complex(2, 3), T.complex(2, 3, grad=False)), note="complex self only"),
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


# --- routers: one Python name, several aten overloads ---------------------------------------


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
sgn_ = inplace_variant(sgn)
tan_ = inplace_variant(tan)
reciprocal_ = inplace_variant(reciprocal)
rsqrt_ = inplace_variant(rsqrt)
log1p_ = inplace_variant(log1p)
_abs_ = inplace_variant(abs, "abs_.default")


@composite(function=False)
def abs_(self: Tensor) -> Tensor:
    # |z| is real: it cannot be written back into a complex tensor.
    if self.is_complex():
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return _abs_(self)
