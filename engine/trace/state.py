"""The reducer: the state of a traced run after event N, and the changes each event makes.

Every view of a trace (the browser's panes, the captions, the exports, the tests) reads the meaning
of events from here and nowhere else. ``State`` is plain JSON (dicts with string keys, lists,
strings, numbers, booleans, ``None``), so it can be sent to a browser or stored as is.

- ``initial_state()``: the state before the first event.
- ``apply(state, event) -> State``: a pure function, the state after ``event``.
- ``step(state, event) -> list[Change]``: the same, in place, returning what changed.
- ``state_at(events, n)``: the state after ``events[n]`` (``n = -1``: before any event).
- ``Cursor(events)``: ``forward()``, ``back()``, ``jump(n)`` over a trace, fast on long traces.
- ``diff(before, after)``, ``apply_changes(state, changes)``, ``revert_changes(state, changes)``.

Note [Changes]
~~~~~~~~~~~~~~
A change is ``[op, path, old, new]`` (a ``Change`` named tuple; JSON encodes it as that list).
``path`` is a list of keys from the root of the state: strings into dicts, integers into lists.

- ``"set"``: the key exists before and after; its value goes from ``old`` to ``new``.
- ``"add"``: the key does not exist before; after, it holds ``new`` (``old`` is ``None``). In a
  list the key is the list's length: an append.
- ``"remove"``: the key exists before and holds ``old``; after, it is gone (``new`` is ``None``).
  In a list the key is the last index: a pop.

The changes of one event apply in order. To step back, undo them in reverse order: ``set`` back
to ``old``, delete what ``add`` added, put back what ``remove`` removed. A browser can do both
without knowing what any event means; it must copy a value before inserting it, since later
changes mutate what they reach through a path (``apply_changes`` does the same).

Note [Gid keys]
~~~~~~~~~~~~~~~
``recomputed``, ``recomp_counter``, ``is_recomputed``, ``early_stopped`` and a holder's
``handles`` are keyed by the gid the checkpoint hooks use, as a string (JSON keys are strings).
That is the event's ``hook_gid`` when the recorder gives one (a ``GraphExecGroup``, or the
temporary id of an unpack outside backward), else its ``gid``; ``None`` becomes ``"none"``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, TypedDict

Event = dict[str, Any]
Key = str | int


class Change(NamedTuple):
    """One step of an event's effect on the state. See Note [Changes]."""

    op: Literal["set", "add", "remove"]
    path: tuple[Key, ...]
    old: Any
    new: Any


# --- the state -----------------------------------------------------------------------------------


class Now(TypedDict):
    """The last event applied: its position and where the run was when it happened."""

    seq: int  # -1 before any event
    kind: str | None
    phase: str | None
    gid: Any
    src: dict[str, Any] | None


class Holder(TypedDict):
    """A ``_Holder`` of a frame, by its position in ``frame.weak_holders``."""

    holder: int
    index: int
    frame: int
    alive: bool
    # What the forward saved here (the tensor itself is not kept: that is the point).
    tensor: int | None
    shape: list[int] | None
    dtype: str | None
    nbytes: int
    node: int | None
    slot: str | None
    # gid -> "set" (a ``_Handle`` keys a tensor in ``recomputed[gid]``) or "cleared" (``None``,
    # already unpacked: Rule 4). A gid absent here has no entry in ``holder.handles``.
    handles: dict[str, str]


class Frame(TypedDict):
    """A ``_CheckpointFrame``."""

    frame: int
    label: str
    name: str  # "label#frame", how captions and views name it
    parent: int | None
    early_stop: bool
    created_in: Any  # "forward" or {"recompute": frame}
    alive: bool
    running: list[str]  # the modes of the function's runs in progress, innermost last
    outcome: str | None  # how the last run ended
    runs: dict[str, int]  # "forward"/"recompute" -> number of runs started
    inputs: list[int]
    holders: dict[str, Holder]  # str(index) -> holder
    recomputed: dict[str, dict[str, int]]  # gid -> str(holder index) -> recomputed tensor id
    recomp_counter: dict[str, int]
    is_recomputed: dict[str, bool]
    early_stopped: dict[str, dict[str, int]]  # gid -> {"count", "total"}
    error: dict[str, str] | None


class SavedSlot(TypedDict):
    tensor: int | None
    packed: str  # "tensor", "holder" or "other"
    version: int | None
    holder: int | None
    shape: list[int] | None
    dtype: str | None


class Node(TypedDict):
    node: int
    name: str
    seq_nr: int | None
    next: list[list[Any]]
    frame: int | None
    phase: str | None  # the phase it was created in
    recompute: list[Any] | None  # [frame, gid] of the recomputation that created it, if any
    status: str  # "created", "executing", "executed"
    runs: int
    released: bool  # its saved variables were freed after it ran (no retain_graph)
    freed: bool
    saved: dict[str, SavedSlot]


class TensorInfo(TypedDict):
    tensor: int
    shape: list[int]
    dtype: str
    nbytes: int
    requires_grad: bool
    is_leaf: bool
    node: int | None
    base: int | None
    name: str | None
    version: int
    grads: int  # number of gradient accumulations into it


class State(TypedDict):
    now: Now
    mem: dict[str, int]  # live, saved, recomputed (from the event's ``mem``)
    peak: dict[str, int]  # the maximum of each so far
    frames: dict[str, Frame]
    holders: dict[str, list[int]]  # holder id -> [frame, index]
    hooks: list[dict[str, Any]]  # the saved-tensor hooks stack, innermost last
    recomputing: list[dict[str, Any]]  # recomputations in progress: {frame, gid, trigger}
    unpacking: list[dict[str, Any]]  # checkpoint unpacks in progress: {frame, index, holder, gid}
    backward: list[dict[str, Any]]  # backward calls in progress, innermost last
    executing: list[int]  # nodes running, innermost last
    nodes: dict[str, Node]  # every node created so far (freed ones stay, marked)
    tensors: dict[str, TensorInfo]  # tensors alive
    last_pack: dict[str, Any] | None  # the pack the next ``saved`` of its node/slot belongs to
    counts: dict[str, int]
    error: dict[str, str] | None
    mark: dict[str, Any] | None


MEM_KEYS = ("live", "saved", "recomputed")
COUNT_KEYS = ("packs", "unpacks", "rpacks", "recomputations", "early_stops", "node_execs", "backwards")


def initial_state() -> State:
    return {
        "now": {"seq": -1, "kind": None, "phase": None, "gid": None, "src": None},
        "mem": dict.fromkeys(MEM_KEYS, 0),
        "peak": dict.fromkeys(MEM_KEYS, 0),
        "frames": {},
        "holders": {},
        "hooks": [],
        "recomputing": [],
        "unpacking": [],
        "backward": [],
        "executing": [],
        "nodes": {},
        "tensors": {},
        "last_pack": None,
        "counts": dict.fromkeys(COUNT_KEYS, 0),
        "error": None,
        "mark": None,
    }


def gid_key(event: Event) -> str:
    """The gid the checkpoint hooks used for this event. See Note [Gid keys]."""
    gid = event.get("hook_gid", event.get("gid"))
    return "none" if gid is None else str(gid)


def gid_label(key: str) -> str:
    """How captions name a gid key: ``g3`` for graph task 3."""
    return f"g{key}" if key.lstrip("-").isdigit() else key


def plain(value: Any) -> Any:
    """A fresh JSON-like copy of ``value`` (tuples become lists), safe to insert into a state."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


# --- recording changes ---------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    # ``True == 1`` in Python, but a browser would show them differently: compare types too.
    return type(a) is type(b) and a == b


class _Tx:
    """Mutates a state through paths and records each change (see Note [Changes])."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.changes: list[Change] = []

    def _parent(self, path: tuple[Key, ...]) -> Any:
        obj = self.state
        for key in path[:-1]:
            obj = obj[key]
        return obj

    def set(self, path: tuple[Key, ...], value: Any) -> None:
        parent, key = self._parent(path), path[-1]
        value = plain(value)
        if isinstance(parent, list) and key == len(parent):
            parent.append(value)
            self.changes.append(Change("add", path, None, plain(value)))
        elif isinstance(parent, list) or key in parent:
            old = parent[key]
            if _same(old, value):
                return
            parent[key] = value
            self.changes.append(Change("set", path, old, plain(value)))
        else:
            parent[key] = value
            self.changes.append(Change("add", path, None, plain(value)))

    def remove(self, path: tuple[Key, ...]) -> None:
        parent, key = self._parent(path), path[-1]
        if isinstance(parent, list):
            if key != len(parent) - 1:
                raise ValueError(f"can only remove the last item of a list, not {path}")
            old = parent.pop()
        elif key in parent:
            old = parent.pop(key)
        else:
            return
        self.changes.append(Change("remove", path, old, None))

    def append(self, path: tuple[Key, ...], value: Any) -> None:
        self.set((*path, len(self._parent((*path, 0)))), value)

    def pop(self, path: tuple[Key, ...]) -> None:
        items = self._parent((*path, 0))
        if items:
            self.remove((*path, len(items) - 1))


def _insert(parent: Any, key: Key, value: Any) -> None:
    if isinstance(parent, list):
        if key != len(parent):
            raise ValueError(f"can only add at the end of a list (index {key}, length {len(parent)})")
        parent.append(plain(value))
    else:
        parent[key] = plain(value)


def _delete(parent: Any, key: Key) -> None:
    if isinstance(parent, list):
        if key != len(parent) - 1:
            raise ValueError(f"can only remove the last item of a list (index {key}, length {len(parent)})")
        parent.pop()
    else:
        del parent[key]


def _walk(state: Any, path: Sequence[Key]) -> Any:
    for key in path[:-1]:
        state = state[key]
    return state


def apply_changes(state: Any, changes: Sequence[Sequence[Any]]) -> Any:
    """Apply an event's changes to ``state`` in place (one step forward); returns ``state``."""
    for op, path, _old, new in changes:
        parent, key = _walk(state, path), path[-1]
        if op == "remove":
            _delete(parent, key)
        elif op == "add":
            _insert(parent, key, new)
        else:
            parent[key] = plain(new)
    return state


def revert_changes(state: Any, changes: Sequence[Sequence[Any]]) -> Any:
    """Undo an event's changes on ``state`` in place (one step back); returns ``state``."""
    for op, path, old, _new in reversed(changes):
        parent, key = _walk(state, path), path[-1]
        if op == "add":
            _delete(parent, key)
        elif op == "remove":
            _insert(parent, key, old)
        else:
            parent[key] = plain(old)
    return state


def diff(before: Any, after: Any, path: tuple[Key, ...] = ()) -> list[Change]:
    """The changes that turn ``before`` into ``after`` (both JSON-like), in the format of ``step``."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[Change] = []
        for key in before:
            if key not in after:
                changes.append(Change("remove", (*path, key), plain(before[key]), None))
        for key, value in after.items():
            if key not in before:
                changes.append(Change("add", (*path, key), None, plain(value)))
            else:
                changes += diff(before[key], value, (*path, key))
        return changes
    if isinstance(before, list) and isinstance(after, list) and path:
        changes = []
        common = min(len(before), len(after))
        for i in range(common):
            changes += diff(before[i], after[i], (*path, i))
        for i in range(len(before) - 1, common - 1, -1):
            changes.append(Change("remove", (*path, i), plain(before[i]), None))
        for i in range(common, len(after)):
            changes.append(Change("add", (*path, i), None, plain(after[i])))
        return changes
    if _same(before, after):
        return []
    if not path:
        raise ValueError("the root of a state must be a dict")
    return [Change("set", path, plain(before), plain(after))]


# --- the reducer ---------------------------------------------------------------------------------

_Handler = Callable[[_Tx, State, Event], None]
_HANDLERS: dict[str, _Handler] = {}


def _on(kind: str) -> Callable[[_Handler], _Handler]:
    def register(fn: _Handler) -> _Handler:
        _HANDLERS[kind] = fn
        return fn

    return register


def step(state: State, event: Event) -> list[Change]:
    """Apply ``event`` to ``state`` in place and return the changes it made (Note [Changes])."""
    tx = _Tx(state)
    tx.set(
        ("now",),
        {
            "seq": event.get("seq", state["now"]["seq"] + 1),
            "kind": event.get("kind"),
            "phase": event.get("phase"),
            "gid": event.get("gid"),
            "src": event.get("src"),
        },
    )
    mem = event.get("mem")
    if mem:
        tx.set(("mem",), {k: mem.get(k, 0) for k in MEM_KEYS})
        peak = state["peak"]
        if any(mem.get(k, 0) > peak[k] for k in MEM_KEYS):
            tx.set(("peak",), {k: max(peak[k], mem.get(k, 0)) for k in MEM_KEYS})
    handler = _HANDLERS.get(event.get("kind", ""))
    if handler is not None:  # unknown kinds only move "now" (the spec allows extra kinds)
        handler(tx, state, event)
    return tx.changes


def apply(state: State, event: Event) -> State:
    """The state after ``event``, as a new object: ``state`` is left untouched."""
    after: State = plain(state)
    step(after, event)
    return after


def state_at(events: Sequence[Event], n: int) -> State:
    """The state after ``events[n]``; ``n = -1`` is the state before any event."""
    if not -1 <= n < len(events):
        raise IndexError(f"step {n} is outside the trace (0..{len(events) - 1})")
    state = initial_state()
    for event in events[: n + 1]:
        step(state, event)
    return state


def _count(tx: _Tx, state: State, name: str) -> None:
    tx.set(("counts", name), state["counts"][name] + 1)


def _frame_key(event: Event, state: State) -> str | None:
    key = str(event.get("frame"))
    return key if key in state["frames"] else None


# Checkpoint kinds


@_on("frame_new")
def _frame_new(tx: _Tx, state: State, e: Event) -> None:
    frame: Frame = {
        "frame": e["frame"],
        "label": e["label"],
        "name": f"{e['label']}#{e['frame']}",
        "parent": e.get("parent"),
        "early_stop": e.get("early_stop", True),
        "created_in": e.get("created_in", "forward"),
        "alive": True,
        "running": [],
        "outcome": None,
        "runs": {"forward": 0, "recompute": 0},
        "inputs": [],
        "holders": {},
        "recomputed": {},
        "recomp_counter": {},
        "is_recomputed": {},
        "early_stopped": {},
        "error": None,
    }
    tx.set(("frames", str(e["frame"])), frame)


@_on("fn_start")
def _fn_start(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        mode = e.get("mode", "forward")
        tx.append(("frames", f, "running"), mode)
        tx.set(("frames", f, "runs", mode), state["frames"][f]["runs"].get(mode, 0) + 1)


@_on("fn_end")
def _fn_end(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.pop(("frames", f, "running"))
        tx.set(("frames", f, "outcome"), e.get("outcome"))


@_on("inputs_saved")
def _inputs_saved(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "inputs"), e.get("tensors") or [])


@_on("hooks_push")
def _hooks_push(tx: _Tx, state: State, e: Event) -> None:
    gid = e.get("hook_gid", e.get("gid"))
    tx.append(("hooks",), {"hooks": e.get("hooks"), "frame": e.get("frame"), "gid": gid})


@_on("hooks_pop")
def _hooks_pop(tx: _Tx, state: State, e: Event) -> None:
    # The engine's saved_tensors_hooks.__exit__ pops the top of the stack, whatever is there.
    tx.pop(("hooks",))


@_on("pack")
def _pack(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is None:
        return
    holder: Holder = {
        "holder": e["holder"],
        "index": e["index"],
        "frame": e["frame"],
        "alive": True,
        "tensor": e.get("tensor"),
        "shape": e.get("shape"),
        "dtype": e.get("dtype"),
        "nbytes": e.get("nbytes", 0),
        "node": e.get("node"),
        "slot": e.get("slot"),
        "handles": {},
    }
    tx.set(("frames", f, "holders", str(e["index"])), holder)
    tx.set(("holders", str(e["holder"])), [e["frame"], e["index"]])
    tx.set(("last_pack",), {"holder": e["holder"], "node": e.get("node"), "slot": e.get("slot")})
    _count(tx, state, "packs")
    # If the node's ``saved`` came first, point its slot at the holder now.
    node, slot = str(e.get("node")), e.get("slot")
    if node in state["nodes"] and slot in state["nodes"][node]["saved"]:
        tx.set(("nodes", node, "saved", slot, "holder"), e["holder"])


@_on("unpack")
def _unpack(tx: _Tx, state: State, e: Event) -> None:
    tx.append(
        ("unpacking",),
        {"frame": e.get("frame"), "index": e.get("index"), "holder": e.get("holder"), "gid": gid_key(e)},
    )
    _count(tx, state, "unpacks")


@_on("recompute_start")
def _recompute_start(tx: _Tx, state: State, e: Event) -> None:
    gid = gid_key(e)
    tx.append(("recomputing",), {"frame": e.get("frame"), "gid": gid, "trigger": e.get("trigger")})
    _count(tx, state, "recomputations")
    if (f := _frame_key(e, state)) is not None:
        frame = state["frames"][f]
        # Python's defaultdicts create these on first use; showing them from the start lets a
        # learner watch the counter climb towards the number of holders.
        if gid not in frame["recomp_counter"]:
            tx.set(("frames", f, "recomp_counter", gid), 0)
        if gid not in frame["recomputed"]:
            tx.set(("frames", f, "recomputed", gid), {})


@_on("rpack")
def _rpack(tx: _Tx, state: State, e: Event) -> None:
    _count(tx, state, "rpacks")
    if (f := _frame_key(e, state)) is None:
        return
    gid, frame = gid_key(e), state["frames"][f]
    tx.set(("frames", f, "recomp_counter", gid), frame["recomp_counter"].get(gid, 0) + 1)
    index = str(e.get("index"))
    if e.get("outcome") == "keep" and index in frame["holders"]:
        tx.set(("frames", f, "holders", index, "handles", gid), "set")
        if gid not in frame["recomputed"]:
            tx.set(("frames", f, "recomputed", gid), {})
        tx.set(("frames", f, "recomputed", gid, index), e.get("tensor"))


@_on("early_stop")
def _early_stop(tx: _Tx, state: State, e: Event) -> None:
    _count(tx, state, "early_stops")
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "early_stopped", gid_key(e)), {"count": e.get("count"), "total": e.get("total")})


@_on("recompute_end")
def _recompute_end(tx: _Tx, state: State, e: Event) -> None:
    stack = state["recomputing"]
    if stack and stack[-1]["frame"] == e.get("frame"):
        tx.pop(("recomputing",))
    if (f := _frame_key(e, state)) is not None and e.get("reason") != "error":
        # The unpack hook sets is_recomputed[gid] once the run is over, stopped early or not;
        # an error propagates before that line.
        tx.set(("frames", f, "is_recomputed", gid_key(e)), True)


@_on("recomputed_take")
def _recomputed_take(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        gid, index, frame = gid_key(e), str(e.get("index")), state["frames"][f]
        if index in frame["holders"]:
            tx.set(("frames", f, "holders", index, "handles", gid), "cleared")
        if index in frame["recomputed"].get(gid, {}):
            tx.remove(("frames", f, "recomputed", gid, index))
    _finish_unpack(tx, state, e.get("holder"))


def _finish_unpack(tx: _Tx, state: State, holder: Any) -> None:
    stack = state["unpacking"]
    if stack and stack[-1]["holder"] == holder:
        tx.pop(("unpacking",))


@_on("holder_gc")
def _holder_gc(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is None:
        return
    index, frame = str(e.get("index")), state["frames"][f]
    if index not in frame["holders"]:
        return
    tx.set(("frames", f, "holders", index, "alive"), False)
    # Its handles die with it, and with them the entries they keyed in the frame's
    # WeakKeyDictionaries (the partial-backward case of ``recomputed``).
    for gid in frame["holders"][index]["handles"]:
        if index in frame["recomputed"].get(gid, {}):
            tx.remove(("frames", f, "recomputed", gid, index))
    tx.set(("frames", f, "holders", index, "handles"), {})


@_on("frame_gc")
def _frame_gc(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "alive"), False)
        tx.set(("frames", f, "recomputed"), {})


@_on("checkpoint_error")
def _checkpoint_error(tx: _Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "error"), {"type": e.get("type"), "message": e.get("message")})
    stack = state["unpacking"]
    if stack and stack[-1]["frame"] == e.get("frame"):
        tx.pop(("unpacking",))


# Autograd kinds


@_on("tensor_new")
def _tensor_new(tx: _Tx, state: State, e: Event) -> None:
    info: TensorInfo = {
        "tensor": e["tensor"],
        "shape": e.get("shape") or [],
        "dtype": e.get("dtype", ""),
        "nbytes": e.get("nbytes", 0),
        "requires_grad": e.get("requires_grad", False),
        "is_leaf": e.get("is_leaf", True),
        "node": e.get("node"),
        "base": e.get("base"),
        "name": e.get("name"),
        "version": 0,
        "grads": 0,
    }
    tx.set(("tensors", str(e["tensor"])), info)


@_on("tensor_free")
def _tensor_free(tx: _Tx, state: State, e: Event) -> None:
    tx.remove(("tensors", str(e.get("tensor"))))


@_on("node_new")
def _node_new(tx: _Tx, state: State, e: Event) -> None:
    recomputing = state["recomputing"]
    node: Node = {
        "node": e["node"],
        "name": e.get("name", "?"),
        "seq_nr": e.get("seq_nr"),
        "next": e.get("next") or [],
        "frame": e.get("frame"),
        "phase": e.get("phase"),
        "recompute": [recomputing[-1]["frame"], recomputing[-1]["gid"]] if recomputing else None,
        "status": "created",
        "runs": 0,
        "released": False,
        "freed": False,
        "saved": {},
    }
    tx.set(("nodes", str(e["node"])), node)


@_on("saved")
def _saved(tx: _Tx, state: State, e: Event) -> None:
    node = str(e.get("node"))
    if node not in state["nodes"]:
        return
    holder = e.get("holder")
    last = state["last_pack"]
    if holder is None and e.get("packed") == "holder" and last is not None:
        if last["node"] == e.get("node") and last["slot"] == e.get("slot"):
            holder = last["holder"]
    tensor = state["tensors"].get(str(e.get("tensor")))
    slot: SavedSlot = {
        "tensor": e.get("tensor"),
        "packed": e.get("packed", "tensor"),
        "version": e.get("version"),
        "holder": holder,
        "shape": tensor["shape"] if tensor else None,
        "dtype": tensor["dtype"] if tensor else None,
    }
    tx.set(("nodes", node, "saved", str(e.get("slot"))), slot)


def _set_node(tx: _Tx, state: State, e: Event, field: str, value: Any) -> None:
    node = str(e.get("node"))
    if node in state["nodes"]:
        tx.set(("nodes", node, field), value)


@_on("saved_release")
def _saved_release(tx: _Tx, state: State, e: Event) -> None:
    _set_node(tx, state, e, "released", True)


@_on("node_free")
def _node_free(tx: _Tx, state: State, e: Event) -> None:
    _set_node(tx, state, e, "freed", True)


@_on("backward_start")
def _backward_start(tx: _Tx, state: State, e: Event) -> None:
    call = {k: e.get(k) for k in ("api", "roots", "inputs", "retain_graph", "create_graph", "gid")}
    tx.append(("backward",), call)
    _count(tx, state, "backwards")


@_on("backward_end")
def _backward_end(tx: _Tx, state: State, e: Event) -> None:
    tx.pop(("backward",))


@_on("node_exec")
def _node_exec(tx: _Tx, state: State, e: Event) -> None:
    _set_node(tx, state, e, "status", "executing")
    tx.append(("executing",), e.get("node"))
    _count(tx, state, "node_execs")


@_on("node_exec_end")
def _node_exec_end(tx: _Tx, state: State, e: Event) -> None:
    node = str(e.get("node"))
    if node in state["nodes"]:
        tx.set(("nodes", node, "status"), "executed")
        tx.set(("nodes", node, "runs"), state["nodes"][node]["runs"] + 1)
    if state["executing"] and state["executing"][-1] == e.get("node"):
        tx.pop(("executing",))


@_on("grad_accumulate")
def _grad_accumulate(tx: _Tx, state: State, e: Event) -> None:
    tensor = str(e.get("tensor"))
    if tensor in state["tensors"]:
        tx.set(("tensors", tensor, "grads"), state["tensors"][tensor]["grads"] + 1)


@_on("version_bump")
def _version_bump(tx: _Tx, state: State, e: Event) -> None:
    tensor = str(e.get("tensor"))
    if tensor in state["tensors"]:
        tx.set(("tensors", tensor, "version"), e.get("version", 0))


@_on("error")
def _error(tx: _Tx, state: State, e: Event) -> None:
    tx.set(("error",), {"type": e.get("type"), "message": e.get("message")})


_COMMON_FIELDS = {"seq", "kind", "t_ns", "phase", "gid", "src", "mem"}


@_on("mark")
def _mark(tx: _Tx, state: State, e: Event) -> None:
    tx.set(("mark",), {k: v for k, v in e.items() if k not in _COMMON_FIELDS})


KINDS: frozenset[str] = frozenset(_HANDLERS)


# --- the cursor ----------------------------------------------------------------------------------


class Cursor:
    """Steps through a trace in both directions and jumps anywhere, without replaying it all.

    Note [Cursor]
    ~~~~~~~~~~~~~
    The changes of every event reached so far are kept, so ``forward()`` applies one event's
    changes and ``back()`` reverts them. Every ``snapshot_every`` events a serialised copy of the
    state is kept too: ``jump(n)`` restores the nearest snapshot at or before ``n`` and steps from
    there, or steps from where it is when that is closer. Events past the furthest point reached
    so far are reduced once, on first visit.

    ``cursor.state`` is the live state: read it, don't mutate it (``copy()`` gives a private one).
    """

    def __init__(self, events: Sequence[Event], snapshot_every: int = 1024) -> None:
        self.events = events
        self.snapshot_every = snapshot_every
        self.state: State = initial_state()
        self.position = -1
        self._changes: list[list[Change]] = []
        self._snapshots: dict[int, str] = {-1: json.dumps(self.state)}

    def __len__(self) -> int:
        return len(self.events)

    def changes(self, n: int) -> list[Change]:
        """The changes event ``n`` makes (reducing the trace up to ``n`` if needed)."""
        if n >= len(self._changes):
            here = self.position
            self.jump(n)
            self.jump(here)
        return self._changes[n]

    def copy(self) -> State:
        return plain(self.state)

    def forward(self) -> State:
        n = self.position + 1
        if n >= len(self.events):
            raise IndexError("already at the last event")
        if n < len(self._changes):
            apply_changes(self.state, self._changes[n])
        else:
            self._changes.append(step(self.state, self.events[n]))
        self.position = n
        if n % self.snapshot_every == self.snapshot_every - 1 and n not in self._snapshots:
            self._snapshots[n] = json.dumps(self.state)
        return self.state

    def back(self) -> State:
        if self.position < 0:
            raise IndexError("already before the first event")
        revert_changes(self.state, self._changes[self.position])
        self.position -= 1
        return self.state

    def jump(self, n: int) -> State:
        if not -1 <= n < len(self.events):
            raise IndexError(f"step {n} is outside the trace (-1..{len(self.events) - 1})")
        base = max(s for s in self._snapshots if s <= n)
        # Restoring a snapshot costs about as much as a few hundred small steps.
        if abs(n - self.position) > (n - base) + 256 or (n > self.position and base > self.position):
            self.state = json.loads(self._snapshots[base])
            self.position = base
        while self.position < n:
            self.forward()
        while self.position > n:
            self.back()
        return self.state
