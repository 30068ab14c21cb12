"""Random numbers: one global generator per process, as in PyTorch.

The state is a NumPy bit-generator state (a dict). The numbers differ from torch's (different
algorithms); what matches is the API and its semantics: seeding, saving and restoring the state,
and ``fork_rng`` restoring it on exit, which checkpointing relies on to replay dropout.
"""

from __future__ import annotations

import contextlib
import copy
import secrets
from collections.abc import Generator as PyGenerator
from typing import Any

import numpy as np

__all__ = [
    "Generator",
    "default_generator",
    "fork_rng",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "seed",
    "set_rng_state",
]


class Generator:
    """A random-number generator (``engine.Generator``): a seedable NumPy ``PCG64`` stream."""

    def __init__(self, device: str = "cpu") -> None:
        self._seed = 67280421310721  # PyTorch's default CPU seed
        self._np = np.random.Generator(np.random.PCG64(self._seed))
        self.device = device

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self._np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self) -> int:
        s = secrets.randbits(63)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict[str, Any]:
        return dict(copy.deepcopy(self._np.bit_generator.state))

    def set_state(self, state: dict[str, Any]) -> Generator:
        if not isinstance(state, dict) or "bit_generator" not in state:
            raise TypeError(
                f"expected an engine RNG state (a NumPy bit-generator state dict), got {type(state).__name__}"
            )
        self._np.bit_generator.state = copy.deepcopy(state)
        return self


default_generator = Generator()


def _gen(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator)._np


def manual_seed(seed: int) -> Generator:
    """Seed the global generator."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> dict[str, Any]:
    """A copy of the global generator's state."""
    return default_generator.get_state()


def set_rng_state(new_state: dict[str, Any]) -> None:
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(
    devices: Any = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str = "cpu",
) -> PyGenerator[None, None, None]:
    """Restore the global generator's state when the block exits: random numbers drawn inside
    do not affect what is drawn after it."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
