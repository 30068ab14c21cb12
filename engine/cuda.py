"""``engine.cuda``: the answers ``torch.cuda`` gives on a machine without a GPU.

Tutorials write ``device = "cuda" if torch.cuda.is_available() else "cpu"``: here that is always
the CPU. Calls that need a GPU raise the error torch (a CUDA build) raises without a driver; the
ones torch accepts lazily without a GPU (seeding, ``empty_cache``) do nothing.
"""

from __future__ import annotations

from typing import Any

from engine._device import NO_CUDA_MESSAGE

__all__ = [
    "current_device",
    "device_count",
    "empty_cache",
    "get_device_name",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "memory_allocated",
    "synchronize",
]


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def current_device() -> int:
    raise RuntimeError(NO_CUDA_MESSAGE)


def get_device_name(device: Any = None) -> str:
    raise RuntimeError(NO_CUDA_MESSAGE)


def synchronize(device: Any = None) -> None:
    raise RuntimeError(NO_CUDA_MESSAGE)


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as torch does when CUDA is absent (it would seed GPUs lazily)."""


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored, as torch does when CUDA is absent."""


def empty_cache() -> None:
    """Nothing to free: no CUDA memory was ever allocated."""


def memory_allocated(device: Any = None) -> int:
    return 0
