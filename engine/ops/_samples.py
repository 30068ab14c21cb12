"""Sample inputs for the op table: each op lists calls that tests run in the engine and in torch.

A sample names tensors by *spec* (``T(2, 3)``), not by value: the tests draw one NumPy array per
spec and build the engine tensor and the torch tensor from the same array.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Lit", "SampleInput", "T"]


@dataclass(frozen=True)
class T:
    """A tensor argument: its shape, value range and kind.

    ``kind`` is ``"float"`` (uniform in [low, high), requires grad unless ``grad=False``),
    ``"index"`` (int64 in [0, high)), ``"mask"`` (random bools) or ``"complex"``.
    """

    shape: tuple[int, ...]
    low: float = -2.0
    high: float = 2.0
    kind: str = "float"
    grad: bool = True
    dtype: str = "float64"

    @classmethod
    def of(cls, *shape: int, **kw: Any) -> T:
        return cls(tuple(shape), **kw)

    @classmethod
    def index(cls, *shape: int, high: int) -> T:
        return cls(tuple(shape), 0, high, "index", False, "int64")

    @classmethod
    def mask(cls, *shape: int) -> T:
        return cls(tuple(shape), 0, 1, "mask", False, "bool")

    @classmethod
    def complex(cls, *shape: int, low: float = -2.0, high: float = 2.0, grad: bool = True) -> T:
        """complex128, real and imaginary parts each uniform in [low, high)."""
        return cls(tuple(shape), low, high, "complex", grad, "complex128")


@dataclass(frozen=True)
class Lit:
    """A tensor argument with fixed values (e.g. exact indices): ``Lit([[0, 1]], "int64")``."""

    value: Any
    dtype: str = "int64"
    grad: bool = False


@dataclass
class SampleInput:
    """One call of an op: positional and keyword arguments, tensors given as ``T`` / ``Lit``."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    # Compare second-order gradients too (where torch supports double backward).
    gradgrad: bool = True
    # False where PyTorch's gradient is by definition not the derivative finite differences see:
    # ties of max/amax, embedding's padding_idx and scale_grad_by_freq, a NaN loss.
    gradcheck: bool = True
