"""Pointwise ops: arithmetic, unary math, activations, comparisons, and their in-place twins.

Formulas follow PyTorch's ``tools/autograd/derivatives.yaml`` (the ``.conj()`` calls are
there for complex inputs, where PyTorch's gradient is the conjugate Wirtinger derivative). They
never reduce a broadcast gradient themselves: the engine sums it to the input's shape (see
``validate_outputs`` in engine/autograd/engine.py).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from engine import _dtype
from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import _scalar_type_name, composite, inplace_variant, op
from engine.ops._samples import Lit, SampleInput, T
from engine.ops.complex import handle_r_to_c

Array = np.ndarray
_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_array(a: Array) -> Array:
    # frompyfunc returns a Python float for a 0-dim input and object arrays otherwise.
    return np.asarray(_erf(a), dtype=a.dtype)


# Note [Broadcast checks]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A binary kernel calls ``infer_size`` only for PyTorch's error on shapes that do not broadcast
# (NumPy's would differ); it ignores the answer. Two shapes can fail to broadcast only if they
# differ and neither is a 0-dim tensor's ``()`` (a Python number), so ``add``, ``sub``, ``mul``
# and ``div``, the chain's and every backward formula's ops, skip the call in the other cases:
# the same errors, one Python call fewer per op.


def infer_size(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``shapes`` (PyTorch's ``infer_size``, folded left to right), with
    PyTorch's error instead of NumPy's."""
    if len(shapes) == 2:  # the common cases, made fast: equal shapes, or one is a scalar's ()
        a, b = shapes
        if a == b or not b:
            return tuple(a)
        if not a:
            return tuple(b)
    elif all(s == shapes[0] for s in shapes[1:]):
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
    if self.shape != other.shape and self.ndim and other.ndim:  # Note [Broadcast checks]
        infer_size(self.shape, other.shape)
    if isinstance(alpha, complex):  # only a complex alpha can fail the check
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
    if self.shape != other.shape and self.ndim and other.ndim:  # Note [Broadcast checks]
        infer_size(self.shape, other.shape)
    _sub_check(self.dtype == np.bool_, other.dtype == np.bool_)
    _check_alpha(self, alpha)
    return self - other if alpha == 1 else self - alpha * other


def _sub_check(self_is_bool: bool, other_is_bool: bool) -> None:
    """PyTorch's sub_check (aten/src/ATen/native/BinaryOps.h): no subtraction with a bool."""
    if self_is_bool and other_is_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. "
            "Use the `^` or `logical_xor()` operator instead."
        )
    if self_is_bool or other_is_bool:
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. "
            "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )


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
    if self.shape != other.shape and self.ndim and other.ndim:  # Note [Broadcast checks]
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
    if self.shape != other.shape and self.ndim and other.ndim:  # Note [Broadcast checks]
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
    _sub_check(type(other) is bool, self.dtype == np.bool_)  # torch: sub(wrapped other, self)
    # The numbers take part in type promotion: ``1j - x`` is complex. With one tensor, of any
    # dimension, result_type([self, other, alpha]) is c10's combine_categories of self's dtype and
    # the numbers' own result: worked out here without wrapping the array as a tensor.
    d = _dtype._BY_NUMPY.get(self.dtype)
    if (
        d is not None
        and d._category == 2
        and not isinstance(other, complex)
        and not isinstance(alpha, complex)
    ):
        out = d  # a floating tensor and real numbers (the common ``1 - x``): the tensor's dtype
    else:
        out = _dtype._combine_categories(_dtype.from_numpy(self.dtype), _dtype.result_type([other, alpha]))
    x = self.astype(out._np, copy=False)  # a new array is made below in any case
    if not (type(alpha) is int and alpha == 1 and out._category == 2):  # a floating result
        x = alpha * x  # (1 * x is x for real floats: the common ``1 - x`` skips it)
    return (other - x).astype(out._np, copy=False)


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
            "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
            "torch.sgn instead."
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


# Note [Backward ops of tanh and sigmoid]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# derivatives.yaml gives tanh and sigmoid a backward *op* each (``tanh_backward(grad, result)``,
# ``sigmoid_backward(grad, result)``), one kernel with a row of its own, as it does relu's
# ``threshold_backward`` (engine/ops/activation.py). So here: TanhBackward0 runs one op, not the
# three of ``grad * (1 - result * result)`` (one ``op`` event in the trace instead of three, and
# 9 % off the engine time of bench/'s chain of small ops), and the gradient of a gradient builds
# PyTorch's ``TanhBackwardBackward0`` from that op's own formulas. The kernels compute what
# PyTorch's CPU kernels compute, in their order: ``a * (1 - b * b)`` and ``a * (1 - b) * b``,
# conjugating the factor for complex tensors, and for float16 in float32, rounded once at the end.
# The kernel layer has already cast both arrays to the promoted dtype, so ``output``'s dtype is
# theirs.


@op(
    derivatives={
        "grad_output": lambda grad, output: tanh_backward(grad, output.conj()),
        "output": lambda grad, grad_output, output: grad.conj() * (-2 * output.conj() * grad_output),
    },
    samples=lambda: _backward_samples(-0.9, 0.9),
    method=False,
    function=False,
)
def tanh_backward(grad_output: Tensor, output: Tensor) -> Array:
    if output.dtype == np.float16:  # in float32, rounded once
        a, b = grad_output.astype(np.float32), output.astype(np.float32)
        return (a * (1 - b * b)).astype(np.float16)
    if output.dtype.kind == "c":
        return grad_output * np.conj(1 - output * output)
    return grad_output * (1 - output * output)


@op(
    derivatives={
        "grad_output": lambda grad, output: sigmoid_backward(grad, output.conj()),
        "output": lambda grad, grad_output, output: grad.conj() * grad_output * (-2 * output.conj() + 1),
    },
    samples=lambda: _backward_samples(0.1, 0.9),
    method=False,
    function=False,
)
def sigmoid_backward(grad_output: Tensor, output: Tensor) -> Array:
    if output.dtype == np.float16:  # in float32, rounded once
        a, b = grad_output.astype(np.float32), output.astype(np.float32)
        return (a * (1 - b) * b).astype(np.float16)
    if output.dtype.kind == "c":
        return grad_output * np.conj((1 - output) * output)
    return grad_output * (1 - output) * output


def _backward_samples(low: float, high: float) -> list[SampleInput]:
    """A gradient and an output of tanh or sigmoid (``low``..``high``), real and complex."""
    return [
        SampleInput((T((2, 3)), T((2, 3), low, high))),
        SampleInput((T((2, 3)), T((2, 3), low, high, grad=False)), note="grad_output only"),
        SampleInput((T.complex(2, 3), T.complex(2, 3, low=low, high=high)), note="complex"),
    ]


@op(
    derivatives={"self": lambda grad, result: tanh_backward(grad, result)},
    dtypes="float",
    samples=_unary_all,
)
def tanh(self: Tensor) -> Array:
    return np.tanh(self)


@op(
    derivatives={"self": lambda grad, result: sigmoid_backward(grad, result)},
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


# --- atan2, floor division, remainder ---------------------------------------------------------


def _atan2_backward(grad: Tensor, self: Tensor, other: Tensor, which: int) -> Tensor:
    # PyTorch's atan2_backward: recip = (self * self + other * other).reciprocal().
    recip = (self * self + other * other).reciprocal()
    return grad * other * recip if which == 0 else grad * -self * recip


@op(
    derivatives={
        "self": lambda grad, self, other: _atan2_backward(grad, self, other, 0),
        "other": lambda grad, self, other: _atan2_backward(grad, self, other, 1),
    },
    dtypes="float",
    samples=lambda: [
        *_binary_real()[:-1],  # aten::atan2 takes no Python scalar
        SampleInput((T.index(2, 3, high=5), T.index(2, 3, high=5)), note="int64"),
        SampleInput((T.of(2, 3), T.of(2)), note="bad broadcast"),
    ],
)
def atan2(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    return np.arctan2(self, other)


def _derivative_not_implemented(name: str):  # type: ignore[no-untyped-def]
    """derivatives.yaml's ``not_implemented("name")`` formula: the node exists, its backward raises."""

    def formula(grad: Tensor) -> Tensor:
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")

    return formula


@op(
    derivatives={
        "self": _derivative_not_implemented("nextafter"),
        "other": _derivative_not_implemented("nextafter"),
    },
    # Backward raises in both (tests/engine/test_ops_out.py checks it): samples without grad.
    samples=lambda: [
        SampleInput((T.of(2, 3, grad=False), T.of(2, 3, grad=False))),
        SampleInput((T.of(2, 3, grad=False), T.of(3, grad=False)), note="broadcast"),
        SampleInput(
            (T((2, 3), dtype="float32", grad=False), T((2, 3), dtype="float32", grad=False)), note="float32"
        ),
        SampleInput((Lit([1, 2]), Lit([2, 1])), note="int64"),
    ],
)
def nextafter(self: Tensor, other: Tensor) -> Array:
    """The next floating-point value after ``self`` towards ``other`` (C's ``nextafter``)."""
    infer_size(self.shape, other.shape)
    kind = np.result_type(self, other)
    if not np.issubdtype(kind, np.floating):
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{_scalar_type_name(kind)}'")
    return np.nextafter(self, other)


def _not_implemented(name: str):  # type: ignore[no-untyped-def]
    """The formula of PyTorch's ``NotImplemented`` node: backward through it raises."""

    def formula(grad: Tensor) -> Tensor:
        raise RuntimeError(f"derivative for aten::{name} is not implemented")

    return formula


def _check_integer_division(name: str, self: Array, other: Array) -> None:
    kind = np.result_type(self, other)
    if kind == np.bool_:
        raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
    if np.issubdtype(kind, np.complexfloating):
        raise NotImplementedError(f"\"{name}\" not implemented for '{_complex_name(kind)}'")
    if np.issubdtype(kind, np.integer) and np.any(np.asarray(other) == 0):
        raise RuntimeError("ZeroDivisionError")


def _complex_name(d: np.dtype) -> str:
    return "ComplexFloat" if d == np.complex64 else "ComplexDouble"


def _int_division_samples() -> list[SampleInput]:
    no_grad = functools.partial(T, low=-5.0, high=5.0, grad=False)
    return [
        SampleInput((no_grad((2, 3)), no_grad((2, 3)))),
        SampleInput((no_grad((2, 3)), no_grad((3,))), note="broadcast"),
        SampleInput((no_grad((2, 3)), -1.5), note="python scalar"),
        SampleInput((Lit([5, -5, 5, -5, 7]), Lit([3, 3, -3, -3, 1])), note="int64"),
        SampleInput((Lit([5, -5]), Lit([0, 3])), note="int64 by zero"),
        SampleInput((Lit([True, False], "bool"), Lit([True, True], "bool")), note="bool"),
    ]


@op(
    derivatives={"self": _not_implemented("floor_divide"), "other": _not_implemented("floor_divide")},
    node="engine::autograd::NotImplemented",
    samples=_int_division_samples,
)
def floor_divide(self: Tensor, other: Tensor) -> Array:
    infer_size(self.shape, other.shape)
    _check_integer_division("div_floor_cpu", self, other)
    return np.floor_divide(self, other)


@op(
    derivatives={
        "self": lambda grad, other, rounding_mode, self_scalar_type: (
            grad * 0 if rounding_mode is not None else handle_r_to_c(self_scalar_type, grad / other.conj())
        ),
        "other": lambda grad, self, other, rounding_mode: (
            grad * 0 if rounding_mode is not None else -grad * ((self / other) / other).conj()
        ),
    },
    name="div.Tensor_mode",
    node="DivBackward2",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), T((2, 3), 0.5, 2.0)), {"rounding_mode": "floor"}),
        SampleInput((T.of(2, 3), T((3,), 0.5, 2.0)), {"rounding_mode": "trunc"}),
        SampleInput((T.of(2, 3), T((2, 3), 0.5, 2.0)), {"rounding_mode": None}),
    ],
)
def div_Tensor_mode(self: Tensor, other: Tensor, *, rounding_mode: str | None = None) -> Array:  # noqa: N802
    """``div(self, other, rounding_mode=)``: ``"floor"`` and ``"trunc"`` keep integer dtypes."""
    infer_size(self.shape, other.shape)
    out = _dtype.result_type([Tensor._make(self), Tensor._make(other)])
    if rounding_mode is None:
        if not (out.is_floating_point or out.is_complex):
            out = _dtype.get_default_dtype()
        return np.true_divide(self, other).astype(out._np)
    if rounding_mode == "floor":
        _check_integer_division("div_floor_cpu", self, other)
        return np.floor_divide(self, other).astype(out._np)
    if rounding_mode == "trunc":
        _check_integer_division("div_trunc_cpu", self, other)
        if out.is_floating_point:
            return np.trunc(np.true_divide(self, other)).astype(out._np)
        q = np.abs(self) // np.abs(other)
        return (np.sign(self) * np.sign(other) * q).astype(out._np)
    raise RuntimeError(
        f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
    )


def _remainder(self: Array, other: Any) -> Array:
    _check_integer_division("remainder_cpu", self, np.asarray(other))
    return np.remainder(self, other)


@op(
    derivatives={
        "self": lambda grad: grad,
        "other": lambda grad, self, other: -grad * div_Tensor_mode(self, other, rounding_mode="floor"),
    },
    name="remainder.Tensor",
    node="RemainderBackward1",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), T((2, 3), 0.5, 2.0))),
        SampleInput((T.of(2, 3), T((3,), -2.0, -0.5)), note="negative divisor"),
        SampleInput((T.of(2, 3, grad=False), T((2, 3), 0.5, 2.0)), note="other only"),
        SampleInput((Lit([5, -5, 5, -5]), Lit([3, 3, -3, -3])), note="int64"),
        SampleInput((Lit([5, -5]), Lit([0, 3])), note="int64 by zero"),
    ],
)
def remainder_Tensor(self: Tensor, other: Tensor) -> Array:  # noqa: N802
    infer_size(self.shape, other.shape)
    return _remainder(self, other)


@op(
    derivatives={"self": lambda grad: grad},
    name="remainder.Scalar",
    node="RemainderBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), 1.5)),
        SampleInput((T.of(2, 3), -0.7), note="negative divisor"),
        SampleInput((Lit([5, -5, 7]), 3), note="int64"),
        SampleInput((Lit([5, -5, 7]), 2.5), note="int64 by float"),
    ],
)
def remainder_Scalar(self: Tensor, other: float) -> Array:  # noqa: N802
    out = _dtype.result_type([Tensor._make(self), other])
    return _remainder(self.astype(out._np), other).astype(out._np)


@op(
    derivatives={"other": _not_implemented("remainder")},
    name="remainder.Scalar_Tensor",
    node="engine::autograd::NotImplemented",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((2.5, T((2, 3), 0.5, 2.0, grad=False))),
        SampleInput((7, Lit([3, -3, 2]))),
    ],
)
def remainder_Scalar_Tensor(self: float, other: Tensor) -> Array:  # noqa: N802
    out = _dtype.result_type([self, Tensor._make(other)])
    return _remainder(np.asarray(self, out._np), other.astype(out._np)).astype(out._np)


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3), T((2, 3), 0.5, 2.0))),
        SampleInput((T.of(2, 3), 1.5)),
        SampleInput((Lit([5, -5, 5, -5]), Lit([3, 3, -3, -3])), note="int64"),
    ]
)
def remainder(self: Tensor | float, other: Tensor | float) -> Tensor:
    """Python's ``%``: the result has the sign of the divisor (``fmod`` has the dividend's)."""
    if isinstance(other, Tensor):
        if not isinstance(self, Tensor):
            return remainder_Scalar_Tensor(self, other)
        return remainder_Tensor(self, other)
    return remainder_Scalar(self, other)


@composite(function=False)
def remainder_(self: Tensor, other: Tensor | float) -> Tensor:
    if isinstance(other, Tensor):
        return remainder_Tensor_(self, other)
    return remainder_Scalar_(self, other)


@composite(function=False)
def floor_divide_(self: Tensor, other: Tensor | float) -> Tensor:
    return _floor_divide_(self, other)


_floor_divide_ = inplace_variant(floor_divide, "floor_divide_.Tensor")
remainder_Tensor_ = inplace_variant(remainder_Tensor, "remainder_.Tensor")
remainder_Scalar_ = inplace_variant(remainder_Scalar, "remainder_.Scalar")


# --- isclose, allclose, equal (no gradient) ----------------------------------------------------


def _check_close(self: Tensor, other: Tensor, rtol: float, atol: float, equal_nan: bool) -> None:
    if self.dtype is not other.dtype:
        from engine.ops._kernel import _scalar_type_name

        raise RuntimeError(f"{_scalar_type_name(self.dtype)} did not match {_scalar_type_name(other.dtype)}")
    if self.is_complex() and equal_nan:
        raise RuntimeError("isclose with equal_nan=True is not supported for complex inputs.")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {_num(rtol)}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {_num(atol)}")


def _num(v: float) -> str:
    """A number as PyTorch's C++ messages print it (``-1``, ``0.5``, ``1e-05``)."""
    return f"{v:g}"


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3), T.of(2, 3))),
        SampleInput(
            (
                Lit([1.0, 1.0 + 1e-9, float("nan"), 2.0], "float64"),
                Lit([1.0, 1.0, float("nan"), 2.1], "float64"),
            )
        ),
        SampleInput(
            (
                Lit([1.0, float("nan"), float("inf")], "float64"),
                Lit([1.0, float("nan"), float("inf")], "float64"),
            ),
            {"equal_nan": True},
        ),
        SampleInput((Lit([1, 2, 3]), Lit([1, 3, 3])), note="int64"),
        SampleInput((T.of(2, 3), T((2, 3), dtype="float32")), note="dtype mismatch"),
    ]
)
def isclose(
    self: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """``|self - other| <= atol + rtol * |other|``, elementwise; PyTorch composes it from ``eq``,
    ``abs``, ``sub``... and so does the engine (their nodes save tensors when inputs require grad)."""
    _check_close(self, other, rtol, atol, equal_nan)
    close = self == other
    if equal_nan and (self.is_floating_point() or self.is_complex()):
        close = close | (self.isnan() & other.isnan())
    if (atol == 0 and rtol == 0) or not (self.is_floating_point() or self.is_complex()):
        return close
    from engine.ops.nn_ops import add_Scalar, mul_Scalar  # nn_ops imports this module

    allowed_error = add_Scalar(mul_Scalar(other, rtol).abs(), atol)
    actual_error = (self - other).abs()
    finite = actual_error.abs() != math.inf
    return close | (finite & (actual_error == actual_error) & (actual_error <= allowed_error))


@composite()
def allclose(
    self: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """``isclose(...).all()`` as a Python bool."""
    with _no_grad():
        return bool(isclose(self, other, rtol, atol, equal_nan).all().item())


@composite()
def equal(self: Tensor, other: Tensor) -> bool:
    """True if both tensors have the same shape and elements (dtypes may differ)."""
    if tuple(self.shape) != tuple(other.shape):
        return False
    return bool(np.array_equal(self._data, other._data))


def _no_grad():  # type: ignore[no-untyped-def]
    from engine.autograd.grad_mode import no_grad

    return no_grad()


atan2_ = inplace_variant(atan2)
