"""``engine.nn.init``: fill a tensor in place, under no_grad, from the engine's global generator
(or the ``generator`` given). Same bounds, gains and fans as PyTorch; the numbers drawn differ
(NumPy's generator is not PyTorch's), so tests compare distributions and bounds, not values.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from engine._tensor import Tensor
from engine.autograd.grad_mode import no_grad
from engine.random import Generator, _gen

__all__ = [
    "calculate_gain",
    "constant_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def _fill_from(tensor: Tensor, values: np.ndarray) -> Tensor:
    # copy_ is an in-place op: it bumps the version counter and checks the in-place rules,
    # like PyTorch's uniform_ / normal_.
    with no_grad():
        tensor.copy_(Tensor._make(np.asarray(values, dtype=tensor.dtype._np)))
    return tensor


def _no_grad_uniform_(tensor: Tensor, a: float, b: float, generator: Generator | None = None) -> Tensor:
    return _fill_from(tensor, _gen(generator).uniform(a, b, tuple(tensor.shape)))


def _no_grad_normal_(tensor: Tensor, mean: float, std: float, generator: Generator | None = None) -> Tensor:
    return _fill_from(tensor, _gen(generator).normal(mean, std, tuple(tensor.shape)))


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (``relu`` -> sqrt(2), ``tanh`` -> 5/3, ...)."""
    linear_fns = [
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fill with U(a, b)."""
    return _no_grad_uniform_(tensor, a, b, generator)


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None
) -> Tensor:
    """Fill with N(mean, std²)."""
    return _no_grad_normal_(tensor, mean, std, generator)


def _erfinv(x: np.ndarray) -> np.ndarray:
    """The inverse of erf on (-1, 1) (NumPy has none): Giles' approximation, then Newton steps."""
    w = -np.log((1.0 - x) * (1.0 + x))
    small = w < 5.0
    ws, wl = w - 2.5, np.sqrt(np.maximum(w, 5.0)) - 3.0
    ps = np.polyval(
        [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
         -0.00417768164, 0.246640727, 1.50140941], ws,
    )  # fmt: skip
    pl = np.polyval(
        [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
         0.00943887047, 1.00167406, 2.83297682], wl,
    )  # fmt: skip
    y = np.where(small, ps, pl) * x
    erf = np.vectorize(math.erf, otypes=[np.float64])
    for _ in range(3):
        y = y - (erf(y) - x) / (2.0 / math.sqrt(math.pi) * np.exp(-y * y))
    return y


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """Fill with N(mean, std²) truncated to [a, b], by inverse-CDF sampling as PyTorch does:
    U(2l - 1, 2u - 1) through erfinv, scaled, shifted and clamped."""

    def norm_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    lo, up = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    u = _gen(generator).uniform(2 * lo - 1, 2 * up - 1, tuple(tensor.shape))
    values = np.clip(_erfinv(u) * std * math.sqrt(2.0) + mean, a, b)
    return _fill_from(tensor, values)


def constant_(tensor: Tensor, val: float) -> Tensor:
    with no_grad():
        return tensor.fill_(val)  # type: ignore[no-any-return]


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    with no_grad():
        return tensor.zero_()  # type: ignore[no-any-return]


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(size(1) * receptive field, size(0) * receptive field)`` of a weight."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field_size = math.prod(tensor.shape[2:])
    return tensor.size(1) * receptive_field_size, tensor.size(0) * receptive_field_size


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Glorot: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return _no_grad_uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _no_grad_normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """He: U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``. ``Linear`` uses it with
    ``a=sqrt(5)``, which gives ``bound = 1 / sqrt(fan_in)``."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return _no_grad_uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _no_grad_normal_(tensor, 0.0, std, generator)
