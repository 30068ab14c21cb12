"""``engine.autograd.set_multithreading_enabled``: accepted and recorded, nothing more.

PyTorch's engine runs the backward of each device on its own worker thread, and this switch
turns that off. The engine runs every backward on the calling thread (its CPU path), so the
flag changes nothing; it is kept, thread-local as in torch, for code that sets it.
"""

from __future__ import annotations

import threading
from types import TracebackType

from engine.autograd.grad_mode import _DecoratorContextManager

__all__ = ["is_multithreading_enabled", "set_multithreading_enabled"]

_state = threading.local()


def is_multithreading_enabled() -> bool:
    """``torch._C._is_multithreading_enabled()``: True unless switched off on this thread."""
    return getattr(_state, "enabled", True)


class set_multithreading_enabled(_DecoratorContextManager):  # noqa: N801 - PyTorch's name
    """Set the flag now (usable as a function); as a context manager, restore it on exit."""

    def __init__(self, mode: bool) -> None:
        self.prev = is_multithreading_enabled()
        _state.enabled = bool(mode)
        self.mode = mode

    def __enter__(self) -> None:
        pass

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _state.enabled = self.prev

    def clone(self) -> set_multithreading_enabled:
        return self.__class__(self.mode)
