"""The floor of recording: what emission costs before the recorder does anything, and the least a
Python recorder of the same events can do. Two sides of ``make bench`` (bench/run_all.py).

Note [The floor of recording]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
"Recording on / off" divides the time of a recorded run by the time of the same run with no
recorder. Part of the difference is not the recorder's: with a recorder installed, the engine
calls ``emit.emit`` at every call site (its keyword arguments made into a dict each time), so
``noop_sink`` (a recorder that does nothing) measures that part alone. ``LeastRecorder`` then
does what any recorder of the trace's events must do at the very least, and nothing more:

- one tuple a call, holding the kind, the time and the ``id()`` of each field's value (never
  the objects: holding them would keep the run's tensors alive);
- one walk up the stack to the frame of the file being recorded, and its line (every event
  carries its ``src``);
- one weak reference with a callback per new tensor and node, whose death is an event
  (``tensor_free``, ``node_free``).

No JSON fields, names, memory accounting, phases or ids. Its ratio to the run not recorded is a
lower bound for any recorder of this event stream written in Python: a target below it cannot be
met by making the recorder faster, only by emitting fewer events.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import monotonic_ns
from typing import Any

from engine.trace import emit


def noop_sink(kind: str, fields: dict[str, Any]) -> None:
    """A recorder that does nothing: the cost of the engine's emission calls alone."""


class _DeathRef(weakref.ref):  # type: ignore[type-arg]
    __slots__ = ("key",)
    key: int


class LeastRecorder:
    """See Note [The floor of recording]."""

    def __init__(self, filename: str) -> None:
        self.filename = filename  # the recorded file: the walk up the stack stops at its frames
        self.events: list[Any] = []
        self._refs: list[_DeathRef] = []

    def _died(self, ref: _DeathRef) -> None:
        self.events.append(("free", ref.key, monotonic_ns()))

    def sink(self, kind: str, fields: dict[str, Any]) -> None:
        frame: Any = sys._getframe(1)
        filename = self.filename
        while frame is not None and frame.f_code.co_filename != filename:
            frame = frame.f_back
        line = frame.f_lineno if frame is not None else 0
        self.events.append((kind, monotonic_ns(), line, [id(v) for v in fields.values()]))
        obj = (
            fields.get("tensor")
            if kind == "tensor_new"
            else fields.get("node")
            if kind == "node_new"
            else None
        )
        if obj is not None:
            ref = _DeathRef(obj, self._died)
            ref.key = id(obj)
            self._refs.append(ref)


@contextmanager
def installed(sink: Callable[[str, dict[str, Any]], None]) -> Iterator[None]:
    """``sink`` receives the engine's emissions for the block, as a recorder's would."""
    emit._install(sink)
    try:
        yield
    finally:
        emit._install(None)
