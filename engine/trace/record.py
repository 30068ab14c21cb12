"""Recording a run: ``record()``, ``mark()`` and the ``Trace`` they fill.

``with trace.record(source_files=[__file__]) as tr:`` installs a recorder as the sink of
``engine/trace/emit.py`` for the duration of the block; every engine call site that checks
``emit.enabled`` then reports what it does, and ``tr.events`` fills with JSON-ready events in
emission order. ``docs/trace.md`` documents the format; ``schema.json`` next to this file is its
JSON Schema. The bookkeeping (ids, memory) is in ``_core.py``, the names of tensors in
``_names.py``, one handler per kind in ``_kinds.py``.
"""

from __future__ import annotations

import json
import linecache
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

from engine.trace import emit
from engine.trace._names import _locals_of

__all__ = ["SCHEMA", "VERSION", "Trace", "TraceLimitExceeded", "mark", "record"]

SCHEMA = "autograd-lens/trace"
VERSION = 1
# The fields every event carries; mark() cannot use them for its own.
COMMON_FIELDS = frozenset({"seq", "kind", "t_ns", "phase", "gid", "src", "mem"})


class TraceLimitExceeded(RuntimeError):
    """Raised in the recorded code once the trace reaches its event limit."""


class Trace:
    """What ``record()`` returns: the events so far (complete once the block exits).

    ``events`` is a list of dicts in emission order; ``to_json()`` the whole document.
    Tensor names (``tensor_new.name``) are filled in as the recorded code binds variables, and
    for the last ones when the block exits; ``events[:n_final]`` will not change any more.
    """

    def __init__(self, sources: dict[str, str]) -> None:
        self.events: list[dict[str, Any]] = []
        self.sources = sources
        self.meta: dict[str, Any] = {
            "reference": "torch 2.8.0",
            "source_files": list(sources),
            "n_events": 0,
            "truncated": False,
            "error": None,
        }
        self._recorder: Any = None

    def set_event_limit(
        self, limit: int | None, make_error: Callable[[int], BaseException] | None = None
    ) -> None:
        """Stop recording after ``limit`` events: the recorded code then gets
        ``make_error(limit)`` (a ``TraceLimitExceeded`` by default) raised at every event."""
        if self._recorder is not None:
            self._recorder.set_event_limit(
                limit, make_error or (lambda n: TraceLimitExceeded(f"the trace reached {n} events"))
            )

    @property
    def n_final(self) -> int:
        """How many of ``events`` are final (will not change any more): all of them once the
        block has exited; while it runs, a prefix that grows at least once per top-level
        statement (see Note [Final events] in ``_names.py``). Safe to read from another thread:
        ``events[:n_final]`` can be copied while the recording goes on."""
        recorder = self._recorder
        return len(self.events) if recorder is None else recorder.final

    def to_json(self) -> dict[str, Any]:
        """The trace document: ``{"schema", "version", "meta", "sources", "events"}``."""
        return {
            "schema": SCHEMA,
            "version": VERSION,
            "meta": dict(self.meta, n_events=len(self.events)),
            "sources": dict(self.sources),
            "events": self.events,
        }

    def dumps(self, indent: int | None = None) -> str:
        return json.dumps(self.to_json(), indent=indent)


_active: list[Trace] = []


class _Recording:
    """The ``with`` block of ``record()``. The torch backend (``engine/trace/torch_backend``)
    subclasses it: another recorder (``_make_recorder``), and its instrumentation of torch
    installed and removed around the block."""

    backend = "engine"
    exit_frames = 0  # frames between the ``with`` block and this __exit__

    def __init__(self, files: dict[str, str], sources: dict[str, str], max_events: int | None) -> None:
        self.files = files
        self.trace = Trace(sources)
        self.trace.meta["backend"] = self.backend
        self.max_events = max_events

    def _make_recorder(self) -> Any:
        from engine.trace._kinds import Recorder

        return Recorder(self.trace.events, self.files)

    def _module_hooks(self, recorder: Any) -> list[Any]:
        """Register the recorder's global module hooks (Note [Module paths]); their handles."""
        from engine.nn.modules._hooks import register_module_forward_hook, register_module_forward_pre_hook

        pre, post = recorder.module_hooks()
        return [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]

    def __enter__(self) -> Trace:
        if emit.enabled or _active:
            raise RuntimeError("engine.trace.record() calls cannot be nested: a recording is already active")
        recorder = self._make_recorder()
        recorder.anchor(sys._getframe(1))  # the ``with`` block's frame (Note [Recorder fast paths])
        self.trace._recorder = recorder
        if self.max_events is not None:
            self.trace.set_event_limit(self.max_events)
        _active.append(self.trace)
        emit._install(recorder.sink)
        self._handles = self._module_hooks(recorder)
        return self.trace

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        recorder = self.trace._recorder
        try:
            if exc is not None and not recorder.truncated and not recorder.closed:
                recorder.flush()
                error = {"type": type(exc).__name__, "message": str(exc)}
                recorder.append("error", error, src=self._src_of(tb))
                self.trace.meta["error"] = error
        finally:
            for handle in getattr(self, "_handles", ()):
                handle.remove()
            emit._install(None)
            _active.clear()
            # The frame of the ``with`` block (a subclass's __exit__ is one more frame).
            caller = sys._getframe(1 + self.exit_frames)
            if caller.f_code.co_filename in self.files:
                recorder.name_remaining(_locals_of(caller))
            self.trace.meta.update(n_events=len(self.trace.events), truncated=recorder.truncated)
            if recorder.modules:
                self.trace.meta["modules"] = recorder.module_table()
            recorder.close()
            self.trace._recorder = None

    def _src_of(self, tb: TracebackType | None) -> dict[str, Any] | None:
        """The innermost recorded line of a traceback: where the error happened."""
        src = None
        while tb is not None:
            name = self.files.get(tb.tb_frame.f_code.co_filename)
            if name is not None:
                src = {"file": name, "line": tb.tb_lineno}
            tb = tb.tb_next
        return src


def record(
    source_files: Iterable[str] | Mapping[str, str] | None = None, *, max_events: int | None = None
) -> _Recording:
    """Record every engine event of a ``with`` block into a ``Trace``.

    ``source_files``: the files whose lines events point at (``src``): the innermost stack frame
    running one of them. Paths are read for the trace's ``sources``; a mapping gives
    ``{filename: text}`` directly (code compiled from a string under that filename). Default: the
    file calling ``record()``. ``max_events``: see ``Trace.set_event_limit``.

    Example::

        >>> import engine
        >>> from engine import trace
        >>> with trace.record() as tr:
        ...     x = engine.ones(2, requires_grad=True)
        ...     x.sin().sum().backward()
        >>> tr.events[0]["kind"]
        'tensor_new'
    """
    if source_files is None:
        source_files = [sys._getframe(1).f_code.co_filename]
    return _Recording(*_files_and_sources(source_files), max_events)


def recorded_files() -> frozenset[str]:
    """The files (``co_filename``) the active ``record()`` block records; empty when none is."""
    recorder = _active[0]._recorder if _active else None
    return frozenset(getattr(recorder, "_files", ()))


def _files_and_sources(
    source_files: Iterable[str] | Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str]]:
    """What ``record()``'s ``source_files`` stands for: ``co_filename`` -> the name events use in
    ``src`` (each path as given and absolute), and each name's text (the trace's ``sources``)."""
    sources: dict[str, str] = {}
    if isinstance(source_files, Mapping):
        sources = {str(k): str(v) for k, v in source_files.items()}
    else:
        for name in source_files:
            sources[str(name)] = _read(str(name))
    files: dict[str, str] = {}
    for name in sources:
        files[name] = name
        files.setdefault(os.path.abspath(name), name)
    return files, sources


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return "".join(linecache.getlines(path))


def mark(label: str, **fields: Any) -> None:
    """Add a ``mark`` event (a user annotation) to the active trace; nothing when not recording."""
    if not emit.enabled:
        return
    clash = COMMON_FIELDS.intersection(fields)
    if clash:
        raise ValueError(f"trace.mark(): {sorted(clash)} are fields of every event")
    emit.emit("mark", label=str(label), **{k: _json_ready(v) for k, v in fields.items()})


def _json_ready(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    if isinstance(v, list | tuple):
        return [_json_ready(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_ready(x) for k, x in v.items()}
    return repr(v)
