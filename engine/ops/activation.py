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
    samples=lambda: [
        SampleInput((T.of(2, 3), T.of(2, 3), 0.0)),
        SampleInput((T.of(2, 3), T((2, 3), grad=False), 0.5), note="grad_output only"),
    ],
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
    samples=lambda: [
        SampleInput((T.of(2, 3), T.of(2, 3))),
        SampleInput((T.of(2, 3), T((2, 3), grad=False)), note="grad_output only"),
        SampleInput((T.of(2, 3), T.of(2, 3)), {"approximate": "tanh"}, note="tanh"),
    ],
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


# --- leaky_relu --------------------------------------------------------------------------------


@op(
    derivatives={
        "grad_output": lambda grad, self, negative_slope: leaky_relu_backward(
            grad, self, negative_slope, False
        ),
        "self": lambda grad: zeros_like(grad),
    },
    method=False,
    function=False,
)
def leaky_relu_backward(
    grad_output: Tensor, self: Tensor, negative_slope: float, self_is_result: bool
) -> Array:
    if self_is_result and negative_slope < 0:
        raise RuntimeError(
            "In-place leakyReLu backward calculation is triggered with a negative slope which is not "
            "supported. This is caused by calling in-place forward function with a negative slope, please "
            "call out-of-place version instead. File an issue at https://github.com/pytorch/pytorch if you "
            "do require supporting in-place leakRelu backward calculation with negative slope"
        )
    return np.where(self > 0, grad_output, grad_output * negative_slope).astype(grad_output.dtype, copy=False)


def _leaky_relu(self: Array, negative_slope: float) -> Array:
    return np.where(self > 0, self, self * negative_slope).astype(self.dtype, copy=False)


@op(
    derivatives={
        "self": lambda grad, self, negative_slope: leaky_relu_backward(grad, self, negative_slope, False)
    },
    dtypes="float",
    method=False,
    function=False,
    samples=lambda: [
        *_unary(),
        SampleInput((T.of(2, 3), 0.2)),
        SampleInput((T.of(2, 3), -1.5), note="negative"),
    ],
)
def leaky_relu(self: Tensor, negative_slope: float = 0.01) -> Array:
    return _leaky_relu(self, negative_slope)


@op(
    # In place, PyTorch saves the result (LeakyReluBackward1); its sign is the input's.
    derivatives={
        "self": lambda grad, result, negative_slope: leaky_relu_backward(grad, result, negative_slope, True)
    },
    node="LeakyReluBackward1",
    name="leaky_relu_",
    inplace=True,
    function=False,
    method=False,
    samples=lambda: [SampleInput((T.of(2, 3), 0.2))],
)
def leaky_relu_(self: Tensor, negative_slope: float = 0.01) -> Array:
    return _leaky_relu(self, negative_slope)


# --- elu ---------------------------------------------------------------------------------------


def _elu_double_backward(
    grad: Tensor,
    grad_output: Tensor,
    alpha: float,
    scale: float,
    input_scale: float,
    is_result: bool,
    self_or_result: Tensor,
) -> Tensor:
    negative = (self_or_result < 0).to(grad.dtype)
    if is_result:
        return grad * grad_output * input_scale * negative
    return (
        elu_backward(grad * grad_output * input_scale, alpha, scale, input_scale, is_result, self_or_result)
        * negative
    )  # type: ignore[no-any-return]


@op(
    derivatives={
        "grad_output": lambda grad, alpha, scale, input_scale, is_result, self_or_result: elu_backward(
            grad, alpha, scale, input_scale, is_result, self_or_result
        ),
        "self_or_result": lambda grad, grad_output, alpha, scale, input_scale, is_result, self_or_result: (
            _elu_double_backward(grad, grad_output, alpha, scale, input_scale, is_result, self_or_result)
        ),
    },
    method=False,
    function=False,
)
def elu_backward(
    grad_output: Tensor,
    alpha: float,
    scale: float,
    input_scale: float,
    is_result: bool,
    self_or_result: Tensor,
) -> Array:
    if is_result and alpha < 0:
        raise RuntimeError(
            "In-place elu backward calculation is triggered with a negative slope which is not supported. "
            "This is caused by calling in-place forward function with a negative slope, please call "
            "out-of-place version instead."
        )
    x = self_or_result
    if is_result:
        neg = grad_output * input_scale * (x + alpha * scale)
    else:
        neg = grad_output * input_scale * alpha * scale * np.exp(np.minimum(x, 0) * input_scale)
    return np.where(x <= 0, neg, grad_output * scale).astype(grad_output.dtype, copy=False)


def _elu(self: Array, alpha: float, scale: float, input_scale: float) -> Array:
    neg = (np.expm1(np.minimum(self, 0) * input_scale)) * alpha * scale
    return np.where(self <= 0, neg, self * scale).astype(self.dtype, copy=False)


@op(
    derivatives={
        "self": lambda grad, alpha, scale, input_scale, self: elu_backward(
            grad, alpha, scale, input_scale, False, self
        )
    },
    dtypes="float",
    method=False,
    function=False,
    samples=lambda: [*_unary(), SampleInput((T.of(2, 3), 0.5, 1.5, 2.0), note="alpha scale input_scale")],
)
def elu(self: Tensor, alpha: float = 1, scale: float = 1, input_scale: float = 1) -> Array:
    return _elu(self, alpha, scale, input_scale)


@op(
    derivatives={
        "self": lambda grad, alpha, scale, input_scale, result: elu_backward(
            grad, alpha, scale, input_scale, True, result
        )
    },
    node="EluBackward1",
    name="elu_",
    inplace=True,
    function=False,
    method=False,
    samples=lambda: [SampleInput((T.of(2, 3), 0.5))],
)
def elu_(self: Tensor, alpha: float = 1, scale: float = 1, input_scale: float = 1) -> Array:
    return _elu(self, alpha, scale, input_scale)


# --- mish --------------------------------------------------------------------------------------


def _mish_backward(grad: Tensor, self: Tensor) -> Tensor:
    # PyTorch's infinitely_differentiable_mish_backward (what it uses with grad mode on).
    sigmoid = self.sigmoid()
    tanh_softplus = self.exp().log1p().tanh()
    return grad * (tanh_softplus + self * sigmoid * (1.0 - tanh_softplus * tanh_softplus))


@op(derivatives={"self": _mish_backward}, dtypes="float", method=False, function=False, samples=_unary)
def mish(self: Tensor) -> Array:
    return self * np.tanh(np.logaddexp(0, self))


mish_ = inplace_variant(mish)
