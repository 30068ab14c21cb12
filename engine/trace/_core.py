"""The recorder's bookkeeping: ids, the fields every event carries, memory.

``engine/trace/_kinds.py`` builds on this one handler per event kind; ``record.py`` is the public
face. ``RecorderCore`` inherits the naming of tensors after variables from ``_names.py``, where
Note [Final events] (which events may still change) lives. Nothing here keeps an engine object
alive: tensors, nodes, frames and holders are known through weak references, whose callbacks emit
``tensor_free``, ``node_free``, ``frame_gc`` and ``holder_gc``.

Note [Trace ids and ordering]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Tensors, nodes, frames, holders and storages get small integer ids, each kind counting from 0 in
the order their first event is emitted, so the same run gives the same ids whatever Python's
``id()`` values are. Graph-task ids (a process-wide counter in the engine) are mapped the same
way, in order of appearance, and a node's ``seq_nr`` counts from the recording's start
(negative for a node made before it; AccumulateGrad keeps UINT64_MAX). A checkpoint's
temporary gid (an unpack outside backward: a random uuid) becomes ``"tmp<n>"`` and a
``GraphExecGroup`` ``"group<n>"``.

A tensor is registered when it is created (``_init_tensor``) but its ``tensor_new`` is emitted
just before the next event, because only then are its ``grad_fn`` and ``requires_grad`` set (an
op sets them after its kernel returns). It keeps the ``src``, ``phase`` and ``gid`` of its
creation. A tensor that dies before any other event (a temporary inside one op) is never shown,
and a Python number wrapped as a tensor (``x * 2.0``) is never shown either. An engine object
an event refers to but that was created before recording started (or by a path with no
emission) gets its ``*_new`` event on the spot, with ``"pre_existing": true``.

Note [Re-entrant emission]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Weak-reference callbacks run whenever an object dies, which includes the middle of the
recorder's own work (the cyclic garbage collector may run at any allocation). An emission that
arrives while another is being handled is queued and handled right after it, so events are
never interleaved and ``seq`` stays contiguous. Only the thread that started recording is
recorded; an object of the run that dies on another thread is reported at the recording
thread's next event.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR
from threading import get_ident
from time import monotonic_ns
from types import FrameType
from typing import Any, Protocol, TypeVar

import numpy as np

from engine.trace._names import Statement, TensorNames, _locals_of

# An event, JSON-ready.
Event = dict[str, Any]

# Frames that can be suspended and resumed on another stack (Note [Recorder fast paths]).
_RESUMABLE = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


def _storage_root(a: np.ndarray) -> np.ndarray:
    """The array owning the memory of ``a``: the storage a tensor's bytes are counted in."""
    while True:
        base = a.base
        if not isinstance(base, np.ndarray):
            # NumPy's as_strided wraps its input in a DummyArray whose ``base`` is the array.
            base = getattr(base, "base", None)
            if not isinstance(base, np.ndarray):
                return a
        a = base


class _Storages:
    """Bytes of distinct storages in one memory category: a storage counts once, however many
    tensors (views, detached aliases, re-linked saved outputs) reference it."""

    __slots__ = ("refs", "sizes", "total")

    def __init__(self) -> None:
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.total = 0

    def add(self, key: int, nbytes: int) -> bool:
        """Count one more reference; True if the storage is new to the category."""
        n = self.refs.get(key, 0)
        self.refs[key] = n + 1
        if n == 0:
            self.sizes[key] = nbytes
            self.total += nbytes
        return n == 0

    def remove(self, key: int) -> bool:
        """Drop one reference; True if it was the storage's last."""
        n = self.refs.get(key, 0)
        if n <= 1:
            if n == 1:
                del self.refs[key]
                self.total -= self.sizes.pop(key)
            return True
        self.refs[key] = n - 1
        return False


class _Entry(Protocol):
    key: int
    ref: weakref.ref[Any] | None


_E = TypeVar("_E", bound=_Entry)


def live_entry(registry: dict[int, _E], obj: Any) -> _E | None:
    """``obj``'s entry in a registry keyed by ``id()``, or None: an entry whose object died is
    not its (``id()`` values are reused), which the entry's weak reference tells."""
    entry = registry.get(id(obj))
    if entry is not None and entry.ref is not None and entry.ref() is obj:
        return entry
    return None


class TensorEntry:
    __slots__ = ("event", "gid", "key", "phase", "ref", "skey", "src", "stmt", "tid")

    def __init__(self) -> None:
        self.tid: int | None = None  # None until its tensor_new is emitted
        self.ref: weakref.ref[Any] | None = None
        self.key = 0  # id() of the tensor, the registry key
        self.skey = 0  # id() of the root ndarray of its storage
        self.event: Event | None = None
        self.src: dict[str, Any] | None = None
        self.phase = "forward"
        self.gid: Any = None
        self.stmt: Statement = None  # the top-level statement running when it was made


class NodeEntry:
    __slots__ = ("key", "nid", "ref", "saved", "was_saved")

    def __init__(self, nid: int, key: int) -> None:
        self.nid = nid
        self.key = key
        self.ref: weakref.ref[Any] | None = None
        self.saved: list[int] = []  # storage keys of the tensors its SavedVariables hold
        self.was_saved = False


class FrameEntry:
    __slots__ = ("fid", "key", "label", "ref")

    def __init__(self, fid: int, key: int, label: str) -> None:
        self.fid = fid
        self.key = key
        self.label = label
        self.ref: weakref.ref[Any] | None = None


class HolderEntry:
    __slots__ = ("fid", "hid", "index", "key", "nid", "recomputed", "ref", "slot")

    def __init__(self, hid: int, key: int, fid: int | None, index: int | None) -> None:
        self.hid = hid
        self.key = key
        self.fid = fid
        self.index = index
        self.nid: int | None = None
        self.slot: str | None = None
        self.ref: weakref.ref[Any] | None = None
        # hook gid -> storage key of the tensor stored for this holder in frame.recomputed[gid]
        self.recomputed: dict[Any, int] = {}


class ModuleEntry:
    """An ``nn.Module`` seen running: its id in the trace and its path (Note [Module paths])."""

    __slots__ = ("key", "mid", "path", "ref", "type")

    def __init__(self, mid: int, module: Any) -> None:
        self.mid = mid
        self.key = id(module)
        self.ref: weakref.ref[Any] | None = weakref.ref(module)
        self.type = type(module).__name__
        self.path: str | None = None


class _TrackedRef(weakref.ref):  # type: ignore[type-arg]
    """A weak reference to an engine object that knows its recorder, its registry entry and the
    kind of event its death is (``tensor_free``, ...): one function, ``_on_death``, serves as
    every callback, instead of a closure made for each object (Note [Recorder fast paths])."""

    __slots__ = ("dead_kind", "entry", "recorder")
    dead_kind: str
    entry: Any
    recorder: RecorderCore | None


def _on_death(ref: _TrackedRef) -> None:
    """The weak-reference callback of ``RecorderCore.track``: the object behind it was freed."""
    recorder, entry = ref.recorder, ref.entry
    # A dead reference needs neither again; kept, they would make a cycle (the entry holds the
    # reference) that only the cyclic garbage collector frees. See Note [Recorder fast paths].
    ref.recorder = ref.entry = None
    if recorder is not None:
        recorder._dead(ref.dead_kind, entry)


# Each recorder class's handler of each kind (``_k_<kind>``), looked up once per class and kind
# instead of by name at every event. Functions, not bound methods: nothing here keeps a recorder
# alive.
_HANDLERS: dict[type, dict[str, Callable[[Any, dict[str, Any]], None]]] = {}


class RecorderCore(TensorNames):
    """Registries and common fields; see Note [Trace ids and ordering]."""

    # A tensor an event names before its tensor_new: made before recording started (the engine
    # reports every tensor it makes); the torch backend sees tensors torch made inside first there.
    unseen_is_pre_existing = True

    def __init__(self, events: list[Event], files: dict[str, str]) -> None:
        from engine._C import _tls
        from engine._tensor import Tensor
        from engine.nn.modules.module import Module

        self._tls = _tls
        self._Tensor = Tensor
        self._Module = Module
        self.events = events
        self._files = files  # co_filename -> the name used in src
        self._t0 = time.monotonic_ns()
        self._thread = threading.get_ident()
        self.closed = False
        self._busy = False
        self._deferred: deque[tuple[str, dict[str, Any]]] = deque()
        self._handlers = _HANDLERS.setdefault(type(self), {})
        # ``phase()`` and ``gid()`` are this class's own: ``append`` may inline them.
        cls = type(self)
        self._own_phase = (cls.phase, cls.gid, cls.task_gid) == (
            RecorderCore.phase,
            RecorderCore.gid,
            RecorderCore.task_gid,
        )
        # where() of the emission being handled; see Note [Recorder fast paths]
        self._here: tuple[FrameType | None, str, int] | None = None
        self._start: FrameType | None = None  # the frame that handed over the emission
        # Deaths seen on other threads, handled on the recording thread's next event.
        self._foreign: deque[tuple[str, dict[str, Any]]] = deque()
        self._limit: int | None = None
        # The frame that entered the ``with`` block, and the outermost recorded frame at or below
        # it: see Note [Recorder fast paths].
        self._anchor: FrameType | None = None
        self._anchor_outer: FrameType | None = None
        self._make_limit_error: Callable[[int], BaseException] | None = None
        self.truncated = False
        # registries, keyed by id() of the live object; see Note [Trace ids and ordering]
        self._tensors: dict[int, TensorEntry] = {}
        self._pending: list[TensorEntry] = []
        self._nodes: dict[int, NodeEntry] = {}
        self._frames: dict[int, FrameEntry] = {}
        self._holders: dict[int, HolderEntry] = {}
        self._n_tensors = self._n_nodes = self._n_frames = self._n_holders = 0
        self._storage_ids: dict[int, int] = {}
        self._n_storages = 0
        # Node sequence numbers count from the recording's start (the engine's counter is
        # per thread and runs on across runs); see Note [Trace ids and ordering].
        self.seq_base = _tls.sequence_nr
        self._task_gids: dict[int, int] = {}
        self._other_gids: dict[Any, str] = {}
        # memory, see the ``mem`` field in docs/trace.md
        self.live = _Storages()
        self.saved = _Storages()
        self.recomputed = _Storages()
        # names: tensors alive and not yet named, the last variables scan, ``final``
        TensorNames.__init__(self)
        # run state mirrored from the events (the hooks stack, recomputations, backward calls)
        self.hooks: list[dict[str, Any]] = []
        self.recomputing: list[tuple[int | None, Any]] = []  # (frame, hook gid)
        self.tasks: list[int] = []  # raw graph-task ids from backward_start to backward_end
        # nn.Modules: those seen running, and the ones whose forward is running now
        self._module_entries: dict[int, ModuleEntry] = {}
        self.modules: list[ModuleEntry] = []
        self.module_stack: list[int] = []

    # --- entry points ---------------------------------------------------------------------------

    def sink(self, kind: str, fields: dict[str, Any]) -> None:
        """What ``emit.emit`` calls. Events from other threads are ignored."""
        if self.closed or get_ident() != self._thread:
            return
        self._receive(kind, fields)
        if self.truncated:
            # Raised at every event from then on, so code that swallows it cannot run on.
            assert self._make_limit_error is not None and self._limit is not None
            raise self._make_limit_error(self._limit)

    def _receive(self, kind: str, fields: dict[str, Any]) -> None:
        # See Note [Re-entrant emission].
        if self.truncated:
            return
        if self._busy:
            self._deferred.append((kind, fields))
            return
        self._busy = True
        # The emitter's side of the stack starts below the two frames that called this one
        # (``sink`` and ``emit.emit``, or ``_dead`` and ``_on_death``; Note [Recorder fast paths]).
        try:
            self._start = sys._getframe(3)
        except ValueError:  # a shallower stack: an object freed with no Python frame below
            self._start = None
        try:
            while self._foreign:
                self._handle(*self._foreign.popleft())
            self._handle(kind, fields)
            while self._deferred:
                self._handle(*self._deferred.popleft())
        finally:
            self._busy = False
            # Both hold frames: never beyond the emission, or they would keep their variables.
            self._here = self._start = None

    def _handle(self, kind: str, fields: dict[str, Any]) -> None:
        if kind == "tensor_new":
            self._register_tensor(fields["tensor"])
            return
        if self._pending:
            self.flush()
        handler = self._handlers.get(kind)
        if handler is None:
            handler = getattr(type(self), "_k_" + kind, None)
            if handler is None:
                raise ValueError(f"engine.trace: unknown event kind {kind!r}")
            self._handlers[kind] = handler
        handler(self, fields)

    def track(self, registry: dict[int, _E], obj: Any, entry: _E, dead_kind: str) -> _E:
        """Register ``entry`` for ``obj``, weakly: its death is reported as ``dead_kind``."""
        ref = _TrackedRef(obj, _on_death)
        ref.recorder, ref.entry, ref.dead_kind = self, entry, dead_kind
        entry.ref = ref
        registry[entry.key] = entry
        return entry

    def _dead(self, kind: str, entry: Any) -> None:
        """A weak-reference callback: the object behind ``entry`` was freed."""
        if self.closed:
            return
        if get_ident() != self._thread:
            self._foreign.append((kind, {"entry": entry}))  # deque.append is thread-safe
            return
        self._receive(kind, {"entry": entry})

    def set_event_limit(self, limit: int | None, make_error: Callable[[int], BaseException]) -> None:
        self._limit = limit
        self._make_limit_error = make_error

    # --- common fields --------------------------------------------------------------------------

    # Note [Recorder fast paths]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~
    # Every event carries the ``src`` of the innermost frame running a recorded file, and every
    # tensor the top-level statement of its creation (Note [Final events]); both come from walks
    # up the stack, the recorder's largest per-event costs. What lets them be cut short, and
    # the other fast paths of the per-event work, each with what it relies on:
    #
    # - One walk per emission, from the emitter. ``where()`` is the same for every event made
    #   while one emission is handled (the events a handler makes for what it refers to, the
    #   tensor_new of a flush, the deaths queued meanwhile): the frames below the recorder's are
    #   the emitter's, which waits, and the recorder's own frames (``engine/trace``) are never
    #   in a recorded file. So the walk starts below the frames that delivered the emission
    #   (``_start``: under ``sink`` and ``emit.emit``, or ``_dead`` and ``_on_death``, none of
    #   them a recorded file), not at ``where()``'s caller, and its answer (``_here``) serves
    #   the whole emission; both are dropped when ``_receive`` returns, since a frame held any
    #   longer would keep its variables, and with them tensors, alive.
    # - The anchor. The frame that entered the ``with`` block (``anchor``, from
    #   ``_Recording.__enter__``) stays on the stack while the block runs, and the frames below
    #   a frame on the stack never change; so which of them is the outermost recorded frame is
    #   found once, and ``statement()`` stops its walk down at the anchor. It relies on meeting
    #   the anchor frame object itself, held by the recorder until ``close``: a frame that has
    #   returned is never met again, so its walks then run to the bottom as before (but its
    #   variables live until ``close``: only a block entered by calling ``__enter__`` from a
    #   function that returns first would see that). A generator's frame (a ``with`` block
    #   inside a generator) moves between stacks, so it is no anchor.
    # - Lines by instruction. ``f_lineno`` decodes the code's line table from its start up to
    #   the frame's instruction, so it costs more the further into the code the frame is (a
    #   scenario's module-level statement 300 lines down: microseconds, at every event). A
    #   code object's line at an instruction offset never changes (no tracer writes
    #   ``f_lineno`` outside its own callback), so ``line()`` in _names.py remembers it per
    #   (code object, ``f_lasti``), holding the code object so its ``id()`` stays its own.
    # - The common fields of an event are made in one dict display, the memory counters read
    #   directly, ``where()`` inlined into ``append``; each recorder class looks its handlers
    #   up by kind once (``_handlers``).
    # - ``track`` gives each weak reference its recorder, entry and kind as attributes
    #   (``_TrackedRef``) and one function as callback, instead of a new closure per tracked
    #   object: fewer objects made, and fewer for the cyclic garbage collector to visit. The
    #   reference drops its recorder and entry once it has fired (``_on_death``), and
    #   ``close`` those of the live ones: otherwise each entry and its reference form a
    #   cycle, and every tensor, node, frame and holder of the run would leave garbage that
    #   only the collector frees (and the recorder, the trace's events with it, only at a full
    #   collection), making each collection during the run longer.
    # - The walk's loop is the shortest Python allows (``in``, no method call per frame; the
    #   end of the stack found by the AttributeError of ``None.f_code``): it visits every frame
    #   between the emitter and the innermost recorded one (20-30 in a checkpointed model's
    #   backward), and no frame can be remembered across emissions to cut it short (a held
    #   frame that returns keeps its variables alive; a dead frame's ``id()`` is reused).
    # - ``phase()`` and ``gid()`` are inlined into ``append`` (and read at once by ``_now()``
    #   for a new tensor) when the recorder's class has not overridden them (``_own_phase``:
    #   the torch backend's recorder has); a gid is still numbered only when first asked for.
    # - Naming: see Note [Naming fast paths] in ``_names.py``; module paths
    #   (``_module_path``) skip a scope with no module, list or tuple at C speed, as naming does.
    #
    # The goldens (``tests/golden``) and the torch backend's tests pin every event these touch.

    def anchor(self, frame: FrameType | None) -> None:
        """The frame that entered the ``with`` block; see Note [Recorder fast paths]."""
        if frame is None or frame.f_code.co_flags & _RESUMABLE:
            return
        outer = None
        f: FrameType | None = frame
        while f is not None:
            if f.f_code.co_filename in self._files:
                outer = f
            f = f.f_back
        self._anchor, self._anchor_outer = frame, outer

    def where(self) -> tuple[FrameType | None, dict[str, Any] | None]:
        """The innermost Python frame running a recorded source file, and its ``src``."""
        if self._busy:
            here = self._here
            if here is None:
                here = self._here = self._walk(self._start)
        else:
            here = self._walk(sys._getframe(1))
        frame, name, line = here
        # A new dict each time: events never share a ``src``.
        return (None, None) if frame is None else (frame, {"file": name, "line": line})

    def _walk(self, f: FrameType | None) -> tuple[FrameType | None, str, int]:
        """The first frame from ``f`` down that runs a recorded file, its file's name and line."""
        files = self._files
        # The shortest loop per frame (Note [Recorder fast paths]): no method call, and the end of
        # the stack (no recorded frame at all: rare) found by the AttributeError of None.f_code.
        frame: Any = f
        try:
            while frame.f_code.co_filename not in files:
                frame = frame.f_back
        except AttributeError:
            return None, "", 0
        return frame, files[frame.f_code.co_filename], self.line(frame)

    def phase(self) -> str:
        # A recomputation wins over the backward that triggered it.
        if self.recomputing:
            return "recompute"
        if self.tasks or self._tls.graph_task is not None:
            return "backward"
        return "forward"

    def gid(self) -> int | None:
        """The graph task running, from its backward_start to its backward_end (the engine sets
        ``_current_graph_task_id()`` only around each node; the setup of a backward counts too)."""
        if self.tasks:
            return self.task_gid(self.tasks[-1])
        task = self._tls.graph_task
        return None if task is None else self.task_gid(task.id)

    def _now(self) -> tuple[str, int | None]:
        """``phase()`` and ``gid()``, at once for this class (Note [Recorder fast paths])."""
        if not self._own_phase:
            return self.phase(), self.gid()
        raw = self._raw_task()
        phase = "recompute" if self.recomputing else "forward" if raw is None else "backward"
        return phase, None if raw is None else self.task_gid(raw)

    def _raw_task(self) -> int | None:
        """The engine's id of the graph task ``gid()`` names, or None."""
        if self.tasks:
            return self.tasks[-1]
        task = self._tls.graph_task
        return None if task is None else task.id

    def task_gid(self, raw: int) -> int:
        gid = self._task_gids.get(raw)
        if gid is None:
            gid = self._task_gids[raw] = len(self._task_gids)
        return gid

    def hook_gid(self, raw: Any) -> int | str | None:
        """The gid a checkpoint hook uses: a graph task's, a temporary one, or a group's."""
        if raw is None:
            return None
        if isinstance(raw, int) and (raw in self._task_gids or raw < 2**62):
            return self.task_gid(raw)
        gid = self._other_gids.get(raw)
        if gid is None:
            prefix = "tmp" if isinstance(raw, int) else "group"
            n = sum(1 for g in self._other_gids.values() if g.startswith(prefix))
            gid = self._other_gids[raw] = f"{prefix}{n}"
        return gid

    def mem(self) -> dict[str, int]:
        return {"live": self.live.total, "saved": self.saved.total, "recomputed": self.recomputed.total}

    def append(
        self,
        kind: str,
        fields: dict[str, Any],
        *,
        src: Any = ...,
        phase: str | None = None,
        gid: Any = ...,
    ) -> Event:
        """Emit one event: the common fields (seq, t_ns, phase, gid, src, mem) and ``fields``."""
        events = self.events
        seq = len(events)
        if self.truncated:
            # Past the event limit (one engine call may emit several events): not recorded, so
            # a truncated trace holds exactly ``limit`` events.
            return {"seq": seq, "kind": kind, **fields}
        frame = None
        if src is ...:
            # ``where()``, inlined (Note [Recorder fast paths])
            here = self._here if self._busy else None
            if here is None:
                here = self._walk(self._start if self._busy else sys._getframe(1))
                if self._busy:
                    self._here = here
            frame = here[0]
            if frame is not None:
                src = {"file": here[1], "line": here[2]}  # a new dict: events never share a src
            else:
                src = None
        if not phase or gid is ...:
            if self._own_phase:
                # ``phase()`` and ``gid()``, inlined (Note [Recorder fast paths]); a gid is
                # numbered only when it is asked for, as ``gid()`` does.
                raw: int | None
                if self.tasks:
                    raw = self.tasks[-1]
                else:
                    task = self._tls.graph_task
                    raw = None if task is None else task.id
                if not phase:
                    phase = "recompute" if self.recomputing else "forward" if raw is None else "backward"
                if gid is ...:
                    gid = None if raw is None else self._task_gids.get(raw)
                    if gid is None and raw is not None:
                        gid = self.task_gid(raw)  # numbered now
            else:
                phase = phase or self.phase()
                if gid is ...:
                    gid = self.gid()
        # One dict display (Note [Recorder fast paths]); a key of ``fields`` that is a common
        # field keeps the common field's place, as ``dict.update`` would.
        event: Event = {
            "seq": seq,
            "kind": kind,
            "t_ns": monotonic_ns() - self._t0,
            "phase": phase,
            "gid": gid,
            "src": src,
            **fields,
            "mem": {"live": self.live.total, "saved": self.saved.total, "recomputed": self.recomputed.total},
        }
        events.append(event)
        unnamed = self._unnamed
        if unnamed:
            if frame is not None and (id(frame), src["line"], self._n_tensors) != self._last_scan:
                self._resolve_names(frame, src["line"])
            # A tensor_new joins ``_unnamed`` once this returns: it is not final yet. See
            # Note [Final events]; this is ``_update_final``, inlined.
            limit = seq if kind == "tensor_new" else seq + 1
            if unnamed:
                oldest = next(iter(unnamed.values())).event  # dicts keep emission order
                if oldest is not None and oldest["seq"] < limit:
                    limit = oldest["seq"]
            self._final = limit
        else:
            self._final = seq if kind == "tensor_new" else seq + 1
        if self._limit is not None and seq + 1 >= self._limit:
            self.truncated = True
        return event

    # --- tensors --------------------------------------------------------------------------------

    def _new_tensor_entry(self, t: Any) -> TensorEntry:
        """Registered now, with the ``src``, statement, phase and gid of this moment."""
        entry = TensorEntry()
        entry.key = id(t)
        frame, entry.src = self.where()
        if frame is not None:  # no recorded frame: no statement either
            entry.stmt = self.statement(frame)[0]
        entry.phase, entry.gid = self._now()
        return self.track(self._tensors, t, entry, "tensor_free")

    def _register_tensor(self, t: Any) -> TensorEntry:
        entry = self._new_tensor_entry(t)
        self._pending.append(entry)
        return entry

    def is_hidden(self, t: Any) -> bool:
        """Never shown: a Python number wrapped as a tensor (``x * 2.0``)."""
        return bool(t._wrapped_number)

    def flush(self) -> None:
        """Emit the tensor_new of every tensor created since the last event (Note [Trace ids
        and ordering])."""
        while self._pending:
            pending, self._pending = self._pending, []
            for entry in pending:
                t = entry.ref() if entry.ref is not None else None
                if t is None or entry.tid is not None:
                    continue
                if self.is_hidden(t):
                    self._forget(entry)
                    continue
                self._tensor_new(t, entry)

    def _forget(self, entry: TensorEntry) -> None:
        self.forget(self._tensors, entry)
        entry.ref = None  # its callback can no longer fire

    def _tensor_new(self, t: Any, entry: TensorEntry, pre_existing: bool = False) -> None:
        # What it refers to first: they may need their own *_new events, which come before this
        # one and so take the smaller ids (see Note [Trace ids and ordering]).
        view = t._view
        node = self.nid(t._grad_fn)
        base = self.tid(view.base) if view is not None else None
        storage, storage_nbytes = self._number_tensor(t, entry)
        fields: dict[str, Any] = {
            "tensor": entry.tid,
            "shape": list(t._data.shape),
            "dtype": t._dtype.name,
            "nbytes": int(t._data.nbytes),
            "requires_grad": bool(t.requires_grad),
            # Read without ``t.is_leaf``/``t.grad_fn``: on a stale view they rebuild its grad_fn.
            "is_leaf": t._grad_fn is None,
            "node": node,
            "output_nr": t._output_nr,
            "base": base,
            "storage": storage,
            "storage_nbytes": storage_nbytes,
            "version": t._version_counter.version,
            "name": None,
        }
        if pre_existing:
            fields["pre_existing"] = True
        self._append_tensor_new(entry, fields)

    def _number_tensor(self, t: Any, entry: TensorEntry) -> tuple[int, int]:
        """Give ``entry`` its tensor id and count its storage as live (once per storage): the
        storage's id and bytes, for its ``tensor_new``."""
        entry.tid = self._n_tensors
        self._n_tensors += 1
        entry.skey, storage_nbytes = self.storage_of(t)
        if self.live.add(entry.skey, storage_nbytes):
            self._storage_ids[entry.skey] = self._n_storages
            self._n_storages += 1
        return self._storage_ids[entry.skey], storage_nbytes

    def _append_tensor_new(self, entry: TensorEntry, fields: dict[str, Any]) -> None:
        """Emit a tensor_new with the ``src``, phase and gid of the tensor's creation; it may be
        named from now on (Note [Final events])."""
        entry.event = self.append("tensor_new", fields, src=entry.src, phase=entry.phase, gid=entry.gid)
        self._unnamed[entry.key] = entry

    def tid(self, t: Any) -> int | None:
        """The id of a tensor (None for None and for wrapped Python numbers)."""
        if t is None or self.is_hidden(t):
            return None
        entry = live_entry(self._tensors, t)
        if entry is None:
            entry = self._new_tensor_entry(t)
            self._tensor_new(t, entry, pre_existing=self.unseen_is_pre_existing)
        elif entry.tid is None:
            self._tensor_new(t, entry)
        return entry.tid

    def tensor_freed(self, entry: TensorEntry) -> bool:
        """Forget a dead tensor; True if its tensor_new was emitted (so a tensor_free is due)."""
        self.forget(self._tensors, entry)
        if entry.tid is None:
            return False
        self._unnamed.pop(entry.key, None)
        if self.live.remove(entry.skey):
            self._storage_ids.pop(entry.skey, None)
        return True

    def storage_of(self, t: Any) -> tuple[int, int]:
        """(storage key, storage bytes) of a tensor."""
        root = _storage_root(t._data)
        return id(root), int(root.nbytes)

    # --- nodes, frames, holders -----------------------------------------------------------------

    def nid(self, node: Any) -> int | None:
        if node is None:
            return None
        entry = self.node_entry(node)
        if entry is None:
            entry = self.register_node(node, pre_existing=True)
        return entry.nid

    def node_entry(self, node: Any) -> NodeEntry | None:
        return live_entry(self._nodes, node)

    def register_node(self, node: Any, pre_existing: bool = False) -> NodeEntry:
        raise NotImplementedError  # _kinds.Recorder emits its node_new

    def new_node_entry(self, node: Any) -> NodeEntry:
        entry = NodeEntry(self._n_nodes, id(node))
        self._n_nodes += 1
        return self.track(self._nodes, node, entry, "node_free")

    def fid(self, frame: Any) -> int | None:
        if frame is None:
            return None
        entry = live_entry(self._frames, frame)
        if entry is None:
            entry = self.register_frame(frame, "?", pre_existing=True)
        return entry.fid

    def register_frame(self, frame: Any, label: str, pre_existing: bool = False) -> FrameEntry:
        raise NotImplementedError  # _kinds.Recorder emits its frame_new

    def new_frame_entry(self, frame: Any, label: str) -> FrameEntry:
        entry = FrameEntry(self._n_frames, id(frame), label)
        self._n_frames += 1
        return self.track(self._frames, frame, entry, "frame_gc")

    def holder_entry(self, holder: Any, frame: Any) -> HolderEntry:
        entry = live_entry(self._holders, holder)
        if entry is not None:
            return entry
        # A holder packed before recording started: find its place in the frame.
        index = next((i for i, w in enumerate(frame.weak_holders) if w() is holder), None)
        return self.new_holder_entry(holder, self.fid(frame), index)

    def new_holder_entry(self, holder: Any, fid: int | None, index: int | None) -> HolderEntry:
        entry = HolderEntry(self._n_holders, id(holder), fid, index)
        self._n_holders += 1
        return self.track(self._holders, holder, entry, "holder_gc")

    def forget(self, registry: dict[int, Any], entry: Any) -> None:
        key = entry.key
        if registry.get(key) is entry:
            del registry[key]

    # --- modules ----------------------------------------------------------------------------------

    # Note [Module paths]
    # ~~~~~~~~~~~~~~~~~~~
    # Global forward hooks (``register_module_forward_pre_hook``, and a forward hook with
    # ``always_call=True``, so a forward that raises, as an early-stopped recomputation does, is
    # left too) keep the stack of modules whose forward is running. A node made while one runs
    # carries its id (``node_new.module``): the innermost module's, so the saved tensors of a
    # node, and the holders standing in for them, belong to the module that made it. A module is
    # named by its path in a variable of the recorded code the first time it runs: the file's
    # globals first, then the locals of each recorded frame from the outermost in (``self`` left
    # out), ``model.transformer.h.3.attn``, ``blocks[2].0``; one found in no variable is named by
    # its type (``Linear#4``). ``meta.modules`` maps ids to ``{path, type}``.

    def module_hooks(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The (pre-hook, always-called hook) pair a backend registers globally."""

        def pre(module: Any, *args: Any) -> None:
            self.module_enter(module)

        def post(module: Any, *args: Any) -> None:
            self.module_exit(module)

        return pre, post

    def module_enter(self, module: Any) -> None:
        if self.closed or get_ident() != self._thread:
            return
        entry = live_entry(self._module_entries, module)
        if entry is None:
            entry = ModuleEntry(len(self.modules), module)
            self._module_entries[entry.key] = entry
            self.modules.append(entry)
            entry.path = self._module_path(module)
        self.module_stack.append(entry.mid)

    def module_exit(self, module: Any) -> None:
        if self.closed or get_ident() != self._thread:
            return
        if self.module_stack:
            self.module_stack.pop()

    def current_module(self) -> int | None:
        return self.module_stack[-1] if self.module_stack else None

    def _module_path(self, module: Any) -> str | None:
        frames = []
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename in self._files:
                frames.append(frame)
            frame = frame.f_back
        if not frames:
            return None
        scopes = [frames[-1].f_globals] + [_locals_of(f) for f in reversed(frames)]
        for scope in scopes:
            if self._flat(set(map(type, scope.values()))):
                # No module, list or tuple in it (a module's globals, mostly): the loop below
                # would find nothing. See Note [Naming fast paths] in _names.py.
                continue
            for name, value in list(scope.items()):
                if name == "self" or name.startswith("__"):
                    continue
                if isinstance(value, self._Module):
                    found = module_path_in(value, name, module)
                elif type(value) in (list, tuple) and len(value) <= 64:
                    found = next(
                        (
                            p
                            for i, v in enumerate(value)
                            if isinstance(v, self._Module)
                            and (p := module_path_in(v, f"{name}[{i}]", module))
                        ),
                        None,
                    )
                else:
                    continue
                if found is not None:
                    return found
        return None

    def module_table(self) -> dict[str, dict[str, str]]:
        return {str(m.mid): {"path": m.path or f"{m.type}#{m.mid}", "type": m.type} for m in self.modules}

    def close(self) -> None:
        """Stop: drop every registry, so no weak-reference callback can fire into this recorder."""
        self.closed = True
        for registry in (self._tensors, self._nodes, self._frames, self._holders):
            for entry in registry.values():
                if isinstance(entry.ref, _TrackedRef):
                    # No cycle left to the cyclic garbage collector (see ``_on_death``).
                    entry.ref.recorder = entry.ref.entry = None
            registry.clear()
        self._module_entries.clear()
        self._pending.clear()
        self._unnamed.clear()
        self._anchor = self._anchor_outer = None
        self._final = len(self.events)
        self._modules_seen.clear()
        self._deferred.clear()


def module_path_in(root: Any, name: str, module: Any) -> str | None:
    """``module``'s path under ``root``, a module held by variable ``name`` (``""``: the path
    relative to ``root``); None if it is not in ``root``. Also app/whatif.py's."""
    for path, sub in root.named_modules():
        if sub is module:
            return ".".join(p for p in (name, path) if p)
    return None
