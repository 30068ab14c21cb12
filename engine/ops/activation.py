"""Activations: relu, gelu, silu, softplus, their ``*_backward`` ops and in-place twins.

PyTorch gives several activations a backward *op* of their own (``threshold_backward``,
``gelu_backward``, ``softplus_backward``) with its own row in derivatives.yaml, so the
gradient of a gradient runs through ``ThresholdBackwardBackward0`` and the like. The engine
keeps those ops: double backward then builds the same graph, unpacks the same saved tensors
(``relu`` unpacks its result a second time when the gradient of its gradient is taken) and
gives the same values, including the zeros that ``threshold_backward`` sends to ``self``.
"""

from __future__ import annotations

import math

import numpy as np

from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import inplace_variant, op
from engine.ops._samples import SampleInput, T
from engine.ops.pointwise import _erf_array, _unary

Array = np.ndarray

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_KAPPA = 0.044715


# --- relu --------------------------------------------------------------------------------------


@op(
    derivatives={
        "grad_output": lambda grad, self, threshold: threshold_backward(grad, self, threshold),
        "self": lambda grad: zeros_like(grad),
    },
    method=False,
    function=False,
)
def threshold_backward(grad_output: Tensor, self: Tensor, threshold: float) -> Array:
    return np.where(self <= threshold, 0, grad_output).astype(grad_output.dtype, copy=False)


@op(derivatives={"self": lambda grad, result: threshold_backward(grad, result, 0)}, samples=_unary)
def relu(self: Tensor) -> Array:
    return np.maximum(self, 0).astype(self.dtype, copy=False)


relu_ = inplace_variant(relu)


# --- gelu --------------------------------------------------------------------------------------


def _gelu_double_backward(ggi: Tensor, go: Tensor, self: Tensor, approximate: str) -> Tensor:
    """FunctionsManual's ``gelu_double_backward``: the derivative of ``gelu_backward`` in
    ``self``, written with engine ops so that it is differentiable in turn."""
    if approximate == "tanh":
        k_beta = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5
        inner = k_beta * (self + _GELU_KAPPA * self.pow(3))
        tanh_inner = inner.tanh()
        f = 0.5 * self
        g = 1 - tanh_inner * tanh_inner  # sech(inner) ** 2
        h = k_beta * (1 + 3 * _GELU_KAPPA * self * self)
        f_prime_gh = 0.5 * g * h
        g_prime = -2 * g * tanh_inner * h
        g_prime_fh = f * h * g_prime
        h_prime = 6 * _GELU_KAPPA * self * k_beta
        h_prime_fg = f * g * h_prime
        return ggi * go * (f_prime_gh + f_prime_gh + g_prime_fh + h_prime_fg)
    k_beta = (2.0 / math.sqrt(math.pi)) * math.sqrt(0.5) * 0.5
    self_sq = self * self
    pdf = k_beta * (-0.5 * self_sq).exp()
    return ggi * go * (2 * pdf - self_sq * pdf)


@op(
    derivatives={
        "grad_output": lambda grad, self, approximate: gelu_backward(grad, self, approximate=approximate),
        "self": lambda grad, grad_output, self, approximate: _gelu_double_backward(
            grad, grad_output, self, approximate
        ),
    },
    dtypes="float",
    method=False,
    function=False,
)
def gelu_backward(grad_output: Tensor, self: Tensor, *, approximate: str = "none") -> Array:
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (self + _GELU_KAPPA * self**3)
        tanh_inner = np.tanh(inner)
        left_derivative = 0.5 * (1 + tanh_inner)
        right_derivative = (
            0.5 * self * (1 - tanh_inner * tanh_inner) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_KAPPA * self**2)
        )
        return grad_output * (left_derivative + right_derivative)
    cdf = 0.5 * (1 + _erf_array(self / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * self * self) / math.sqrt(2 * math.pi)
    return grad_output * (cdf + self * pdf)


@op(
    derivatives={"self": lambda grad, self, approximate: gelu_backward(grad, self, approximate=approximate)},
    dtypes="float",
    samples=lambda: [*_unary(), SampleInput((T.of(2, 3),), {"approximate": "tanh"})],
)
def gelu(self: Tensor, *, approximate: str = "none") -> Array:
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (self + _GELU_KAPPA * self**3)
        return 0.5 * self * (1 + np.tanh(inner))
    return 0.5 * self * (1 + _erf_array(self / math.sqrt(2.0)))


# --- silu --------------------------------------------------------------------------------------


@op(
    # PyTorch's infinitely_differentiable_silu_backward (what it uses with grad mode on).
    derivatives={"self": lambda grad, self: grad * self.sigmoid() * (1 + self * (1 - self.sigmoid()))},
    dtypes="float",
    samples=_unary,
)
def silu(self: Tensor) -> Array:
    return self / (1.0 + np.exp(-self))


# --- softplus ----------------------------------------------------------------------------------


def _softplus_double_backward(grad: Tensor, self: Tensor, beta: float, threshold: float) -> Tensor:
    x = self * beta
    y = x.sigmoid()
    return grad * (y * (1 - y)).conj() * (x < threshold).to(grad.dtype) * beta


@op(
    derivatives={
        "grad_output": lambda grad, self, beta, threshold: softplus_backward(grad, self, beta, threshold),
        "self": lambda grad, grad_output, self, beta, threshold: _softplus_double_backward(
            grad * grad_output, self, beta, threshold
        ),
    },
    dtypes="float",
    method=False,
    function=False,
)
def softplus_backward(grad_output: Tensor, self: Tensor, beta: float, threshold: float) -> Array:
    z = self * beta
    # exp only where it is used, so that large inputs do not overflow.
    e = np.exp(np.minimum(z, threshold))
    return np.where(z > threshold, grad_output, grad_output * e / (e + 1))


@op(
    derivatives={"self": lambda grad, self, beta, threshold: softplus_backward(grad, self, beta, threshold)},
    dtypes="float",
    samples=lambda: [*_unary(), SampleInput((T.of(2, 3),), {"beta": 2.0, "threshold": 1.0})],
)
def softplus(self: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Array:
    z = self * beta
    return np.where(z > threshold, self, np.log1p(np.exp(np.minimum(z, threshold))) / beta)
