"""``engine.set_warn_always`` / ``engine.is_warn_always_enabled``: PyTorch's switch that turns
its warn-once warnings (``TORCH_WARN_ONCE``) into warn-every-time ones. ``warn_once`` is the
engine's equivalent of ``TORCH_WARN_ONCE`` for warnings of its own."""

from __future__ import annotations

import warnings

__all__ = ["is_warn_always_enabled", "set_warn_always", "warn_once"]

_warn_always = False
_warned: set[str] = set()


def set_warn_always(b: bool) -> None:
    """When on, warnings meant to be shown once per process are shown every time."""
    global _warn_always
    _warn_always = bool(b)


def is_warn_always_enabled() -> bool:
    return _warn_always


def warn_once(key: str, message: str, category: type[Warning] = UserWarning, stacklevel: int = 2) -> None:
    """Warn the first time ``key`` is seen in this process (every time with ``set_warn_always``)."""
    if key in _warned and not _warn_always:
        return
    _warned.add(key)
    warnings.warn(message, category, stacklevel=stacklevel + 1)
