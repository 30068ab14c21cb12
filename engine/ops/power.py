"""Powers: ``pow`` in its three aten overloads (tensor ** number, tensor ** tensor, number ** tensor).

For complex values the gradient is the conjugate Wirtinger derivative, hence the ``.conj()`` of
derivatives.yaml's ``pow_backward*``; the exponent is promoted with the base (``x ** 1j`` is
complex), and a real input gets the real part of a complex gradient (``handle_r_to_c``).
"""

from __future__ import annotations

import cmath
import math

import numpy as np

from engine import _dtype
from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import composite, inplace_variant, op
from engine.ops._samples import SampleInput, T
from engine.ops.complex import handle_r_to_c
from engine.ops.pointwise import infer_size, where

Array = np.ndarray


def _pow_backward(grad: Tensor, self: Tensor, exponent: complex) -> Tensor:
    if exponent == 0.0:
        return zeros_like(self)
    return handle_r_to_c(self.dtype, grad * (exponent * self.pow(exponent - 1)).conj())


@op(
    derivatives={"self": _pow_backward},
    name="pow.Tensor_Scalar",
    node="PowBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T((2, 3), 0.5, 2.0), 3)),
        SampleInput((T((2, 3), 0.5, 2.0), 0.5)),
        SampleInput((T((2, 3), 0.5, 2.0), 0)),
        SampleInput((T.complex(2, 3), 3), note="complex"),
        SampleInput((T.complex(2, 3), 2.5), note="complex float exponent"),
        SampleInput((T.complex(2, 3), 1.5 - 0.5j), note="complex complex exponent"),
        SampleInput((T((2, 3), 0.5, 2.0), 1.5 + 1j), note="real complex exponent"),
    ],
)
def pow_Tensor_Scalar(self: Tensor, exponent: complex) -> Array:  # noqa: N802 - aten overload name
    # The exponent takes part in type promotion: ``x ** 1j`` is complex, ``int_tensor ** 0.5`` float.
    out = _dtype.result_type([Tensor._make(self), exponent])
    return np.power(self.astype(out._np), exponent).astype(out._np)


def _pow_backward_self(grad: Tensor, self: Tensor, exponent: Tensor) -> Tensor:
    out = where(exponent == 0.0, 0.0, grad * (exponent * self.pow(exponent - 1)).conj())
    return handle_r_to_c(self.dtype, out)


def _nonnegative_real(exponent: Tensor) -> Tensor:
    if exponent.is_complex():
        return (exponent.imag == 0).logical_and(exponent.real >= 0)
    return exponent >= 0.0


def _pow_backward_exponent(grad: Tensor, self: Tensor, exponent: Tensor, result: Tensor) -> Tensor:
    # 0 ** e for e >= 0 is 0 or 1 whatever e is near there: PyTorch defines its gradient as 0.
    cond = (self == 0.0).logical_and(_nonnegative_real(exponent))
    # log of a negative real base is complex when the result is: promote before the log.
    self_ = self.to(_dtype.result_type([self, exponent]))
    return handle_r_to_c(exponent.dtype, grad * where(cond, 0.0, (result * self_.log()).conj()))


def _pow_scalar_backward_exponent(grad: Tensor, self: complex, exponent: Tensor, result: Tensor) -> Tensor:
    base = complex(self) if exponent.is_complex() else self
    log_base = cmath.log(base) if isinstance(base, complex) else (math.log(base) if base > 0 else math.nan)
    if self == 0:
        out = grad * where(_nonnegative_real(exponent), 0.0, (result * -math.inf).conj())
    else:
        out = grad * (result * log_base).conj()
    return handle_r_to_c(exponent.dtype, out)


@op(
    derivatives={"self": _pow_backward_self, "exponent": _pow_backward_exponent},
    name="pow.Tensor_Tensor",
    node="PowBackward1",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T((2, 3), 0.5, 2.0), T((2, 3), -1.0, 2.0))),
        SampleInput((T((2, 3), 0.5, 2.0), T((3,), -1.0, 2.0))),
        SampleInput((T.complex(2, 3), T.complex(2, 3, low=-1.0)), note="complex"),
        SampleInput((T.complex(2, 3), T((3,), -1.0, 2.0)), note="complex base"),
        SampleInput((T((2, 3), 0.5, 2.0), T.complex(3, low=-1.0)), note="complex exponent"),
    ],
)
def pow_Tensor_Tensor(self: Tensor, exponent: Tensor) -> Array:  # noqa: N802
    infer_size(self.shape, exponent.shape)
    return np.power(self, exponent)


@op(
    derivatives={"exponent": _pow_scalar_backward_exponent},
    name="pow.Scalar",
    node="PowBackward2",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((2.0, T((2, 3)))),
        SampleInput((2.0, T.complex(2, 3)), note="complex exponent"),
        SampleInput((1.5 + 1j, T((2, 3))), note="complex base"),
    ],
)
def pow_Scalar(self: complex, exponent: Tensor) -> Array:  # noqa: N802
    # The Python number takes part in type promotion: a complex base makes the result complex.
    out = _dtype.result_type([Tensor._make(exponent), self])
    if not (out.is_floating_point or out.is_complex):
        out = _dtype.get_default_dtype()
    base = self if isinstance(self, complex) else float(self)
    return np.power(base, exponent.astype(out._np)).astype(out._np)


# --- in-place twins and the router ----------------------------------------------------------

pow_Tensor_Scalar_ = inplace_variant(pow_Tensor_Scalar, "pow_.Scalar")
pow_Tensor_Tensor_ = inplace_variant(pow_Tensor_Tensor, "pow_.Tensor")


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
