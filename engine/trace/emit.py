"""The one flag and the one call the engine uses to describe what it does.

A leaf module: it imports nothing from the engine, so every engine module can import it. Each
place in the engine that a trace event describes reads::

    if emit.enabled:
        emit.emit("node_new", node=node)

With no recording active that is one attribute check. The fields are the engine's own objects
(tensors, nodes, frames, holders); the recorder (``engine/trace/record.py``) turns them into the
JSON fields of ``docs/trace.md``, so the call sites stay one line and carry no formatting logic.
Kinds starting with ``_`` are context for the recorder, never events (``_saving``: the node and
slot of the save whose pack hook is about to run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["emit", "enabled"]

# True exactly while a ``trace.record()`` block is active (see engine/trace/record.py).
enabled: bool = False

# The recorder's entry point; None when not recording.
_sink: Callable[[str, dict[str, Any]], None] | None = None


def emit(kind: str, **fields: Any) -> None:
    """Hand one event to the active recorder (call sites check ``enabled`` first)."""
    sink = _sink
    if sink is not None:
        sink(kind, fields)


def _install(sink: Callable[[str, dict[str, Any]], None] | None) -> None:
    """Start (``sink``) or stop (``None``) delivering events; only the recorder calls this."""
    global enabled, _sink
    _sink = sink
    enabled = sink is not None


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No engine events for the block: the torch backend uses the engine's random generator
    while it records torch (its events describe torch's objects, not the engine's)."""
    global enabled, _sink
    saved = enabled, _sink
    enabled, _sink = False, None
    try:
        yield
    finally:
        enabled, _sink = saved
