"""The reducer: the state of a traced run after event N, and the changes each event makes.

Every view of a trace (the browser's panes, the captions, the exports, the tests) reads the meaning
of events from here and nowhere else. ``State`` is plain JSON (dicts with string keys, lists,
strings, numbers, booleans, ``None``), so it can be sent to a browser or stored as is.

- ``initial_state()``: the state before the first event.
- ``apply(state, event) -> State``: a pure function, the state after ``event``.
- ``step(state, event) -> list[Change]``: the same, in place, returning what changed.
- ``state_at(events, n)``: the state after ``events[n]`` (``n = -1``: before any event).
- ``Cursor(events)``: ``forward()``, ``back()``, ``jump(n)`` over a trace, fast on long traces.
- ``diff(before, after)``, ``apply_changes(state, changes)``, ``revert_changes(state, changes)``:
  the change format every step returns (Note [Changes] in ``delta.py``).

``State``, ``Event`` and the TypedDicts of a state's parts (``Frame``, ``Holder``, ``Node``, ...)
are declared in ``_state_types.py``; this module imports them, so they can be imported from here.

Note [Gid keys]
~~~~~~~~~~~~~~~
``recomputed``, ``recomp_counter``, ``is_recomputed``, ``early_stopped`` and a holder's
``handles`` are keyed by the gid the checkpoint hooks use, as a string (JSON keys are strings).
That is the event's ``hook_gid`` when the recorder gives one (a ``GraphExecGroup``, or the
temporary id of an unpack outside backward), else its ``gid``; ``None`` becomes ``"none"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.trace._state_types import (
    COUNT_KEYS,
    MEM_KEYS,
    Event,
    Frame,
    Holder,
    Node,
    SavedSlot,
    State,
    TensorInfo,
)
from engine.trace.delta import Change, ChangeCursor, Tx, apply_changes, diff, plain, revert_changes
from engine.trace.record import COMMON_FIELDS

__all__ = [
    "KINDS",
    "Change",
    "Cursor",
    "Event",
    "State",
    "apply",
    "apply_changes",
    "diff",
    "gid_key",
    "gid_label",
    "initial_state",
    "plain",
    "revert_changes",
    "saved_holder",
    "state_at",
    "step",
]


# --- the state -----------------------------------------------------------------------------------


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


def saved_holder(state: State, e: Event) -> Any:
    """The holder a ``saved`` event stores: its ``holder`` field, or, when a trace leaves that out,
    the holder of the ``pack`` just before it for the same node and slot."""
    holder = e.get("holder")
    last = state["last_pack"]
    if holder is None and e.get("packed") == "holder" and last is not None:
        if last["node"] == e.get("node") and last["slot"] == e.get("slot"):
            holder = last["holder"]
    return holder


def gid_label(key: str) -> str:
    """How captions name a gid key: ``g3`` for graph task 3."""
    return f"g{key}" if key.lstrip("-").isdigit() else key


# --- the reducer ---------------------------------------------------------------------------------

_Handler = Callable[[Tx, State, Event], None]
_HANDLERS: dict[str, _Handler] = {}


def _on(kind: str) -> Callable[[_Handler], _Handler]:
    def register(fn: _Handler) -> _Handler:
        _HANDLERS[kind] = fn
        return fn

    return register


def step(state: State, event: Event) -> list[Change]:
    """Apply ``event`` to ``state`` in place and return the changes it made (Note [Changes])."""
    tx = Tx(state)
    _reduce(tx, event)
    return tx.changes


# Note [Values replaced whole]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``now``, ``mem`` and ``peak`` change at nearly every event, and a server annotating a long run
# steps the reducer over every event. So they are replaced whole (``Tx.replace``), never written
# into through a longer path: then the new value can be put into the state and into the change
# as one object, with no copies (``Tx.set`` copies a value into the state, and copies it again
# into the change, since a later write through a path would otherwise change the recorded
# value too). Their values are built fresh here from the event's scalars (``src`` copied).
# tests/trace/test_state.py checks that no change of any golden trace writes below them.


def _reduce(tx: Tx, event: Event) -> None:
    src = event.get("src")
    tx.replace(
        "now",
        {
            "seq": event.get("seq", tx.state["now"]["seq"] + 1),
            "kind": event.get("kind"),
            "phase": event.get("phase"),
            "gid": event.get("gid"),
            "src": plain(src) if src is not None else None,
        },
    )
    state: State = tx.state  # the root is owned from here on (Note [Copy on write])
    mem = event.get("mem")
    if mem:
        peak = state["peak"]
        new = {k: mem.get(k, 0) for k in MEM_KEYS}
        tx.replace("mem", new)
        if any(new[k] > peak[k] for k in MEM_KEYS):
            tx.replace("peak", {k: max(peak[k], new[k]) for k in MEM_KEYS})
    handler = _HANDLERS.get(event.get("kind", ""))
    if handler is not None:  # unknown kinds only move "now" (the spec allows extra kinds)
        handler(tx, state, event)


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


def _count(tx: Tx, state: State, name: str) -> None:
    tx.set(("counts", name), state["counts"][name] + 1)


def _frame_key(event: Event, state: State) -> str | None:
    key = str(event.get("frame"))
    return key if key in state["frames"] else None


# Checkpoint kinds


@_on("frame_new")
def _frame_new(tx: Tx, state: State, e: Event) -> None:
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
def _fn_start(tx: Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        mode = e.get("mode", "forward")
        tx.append(("frames", f, "running"), mode)
        tx.set(("frames", f, "runs", mode), state["frames"][f]["runs"].get(mode, 0) + 1)


@_on("fn_end")
def _fn_end(tx: Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.pop(("frames", f, "running"))
        tx.set(("frames", f, "outcome"), e.get("outcome"))


@_on("inputs_saved")
def _inputs_saved(tx: Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "inputs"), e.get("tensors") or [])


@_on("hooks_push")
def _hooks_push(tx: Tx, state: State, e: Event) -> None:
    gid = e.get("hook_gid", e.get("gid"))
    tx.append(("hooks",), {"hooks": e.get("hooks"), "frame": e.get("frame"), "gid": gid})


@_on("hooks_pop")
def _hooks_pop(tx: Tx, state: State, e: Event) -> None:
    # The engine's saved_tensors_hooks.__exit__ pops the top of the stack, whatever is there.
    tx.pop(("hooks",))


@_on("pack")
def _pack(tx: Tx, state: State, e: Event) -> None:
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
def _unpack(tx: Tx, state: State, e: Event) -> None:
    tx.append(
        ("unpacking",),
        {"frame": e.get("frame"), "index": e.get("index"), "holder": e.get("holder"), "gid": gid_key(e)},
    )
    _count(tx, state, "unpacks")


@_on("recompute_start")
def _recompute_start(tx: Tx, state: State, e: Event) -> None:
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
def _rpack(tx: Tx, state: State, e: Event) -> None:
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
def _early_stop(tx: Tx, state: State, e: Event) -> None:
    _count(tx, state, "early_stops")
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "early_stopped", gid_key(e)), {"count": e.get("count"), "total": e.get("total")})


@_on("recompute_end")
def _recompute_end(tx: Tx, state: State, e: Event) -> None:
    stack = state["recomputing"]
    if stack and stack[-1]["frame"] == e.get("frame"):
        tx.pop(("recomputing",))
    if (f := _frame_key(e, state)) is not None and e.get("reason") != "error":
        # The unpack hook sets is_recomputed[gid] once the run is over, stopped early or not;
        # an error propagates before that line.
        tx.set(("frames", f, "is_recomputed", gid_key(e)), True)


@_on("recomputed_take")
def _recomputed_take(tx: Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        gid, index, frame = gid_key(e), str(e.get("index")), state["frames"][f]
        if index in frame["holders"]:
            tx.set(("frames", f, "holders", index, "handles", gid), "cleared")
        if index in frame["recomputed"].get(gid, {}):
            tx.remove(("frames", f, "recomputed", gid, index))
    _finish_unpack(tx, state, e.get("holder"))


def _finish_unpack(tx: Tx, state: State, holder: Any) -> None:
    stack = state["unpacking"]
    if stack and stack[-1]["holder"] == holder:
        tx.pop(("unpacking",))


@_on("holder_gc")
def _holder_gc(tx: Tx, state: State, e: Event) -> None:
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
def _frame_gc(tx: Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "alive"), False)
        tx.set(("frames", f, "recomputed"), {})


@_on("checkpoint_error")
def _checkpoint_error(tx: Tx, state: State, e: Event) -> None:
    if (f := _frame_key(e, state)) is not None:
        tx.set(("frames", f, "error"), {"type": e.get("type"), "message": e.get("message")})
    stack = state["unpacking"]
    if stack and stack[-1]["frame"] == e.get("frame"):
        tx.pop(("unpacking",))


# Autograd kinds


@_on("tensor_new")
def _tensor_new(tx: Tx, state: State, e: Event) -> None:
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
def _tensor_free(tx: Tx, state: State, e: Event) -> None:
    tx.remove(("tensors", str(e.get("tensor"))))


@_on("node_new")
def _node_new(tx: Tx, state: State, e: Event) -> None:
    recomputing = state["recomputing"]
    node: Node = {
        "node": e["node"],
        "name": e.get("name", "?"),
        "seq_nr": e.get("seq_nr"),
        "next": e.get("next") or [],
        "variable": e.get("variable"),
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
def _saved(tx: Tx, state: State, e: Event) -> None:
    node = str(e.get("node"))
    if node not in state["nodes"]:
        return
    holder = saved_holder(state, e)
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
    # A holder whose pack did not know its node (a torch trace) learns it here.
    where = state["holders"].get(str(holder)) if holder is not None else None
    if where is not None and (f := _frame_key({"frame": where[0]}, state)) is not None:
        held = state["frames"][f]["holders"].get(str(where[1]))
        if held is not None and held["node"] is None:
            tx.set(("frames", f, "holders", str(where[1]), "node"), e.get("node"))
            tx.set(("frames", f, "holders", str(where[1]), "slot"), e.get("slot"))


def _set_node(tx: Tx, state: State, e: Event, field: str, value: Any) -> None:
    node = str(e.get("node"))
    if node in state["nodes"]:
        tx.set(("nodes", node, field), value)


@_on("saved_release")
def _saved_release(tx: Tx, state: State, e: Event) -> None:
    _set_node(tx, state, e, "released", True)


@_on("node_free")
def _node_free(tx: Tx, state: State, e: Event) -> None:
    _set_node(tx, state, e, "freed", True)


@_on("backward_start")
def _backward_start(tx: Tx, state: State, e: Event) -> None:
    call = {k: e.get(k) for k in ("api", "roots", "inputs", "retain_graph", "create_graph", "gid")}
    tx.append(("backward",), call)
    _count(tx, state, "backwards")


@_on("backward_end")
def _backward_end(tx: Tx, state: State, e: Event) -> None:
    tx.pop(("backward",))


@_on("node_exec")
def _node_exec(tx: Tx, state: State, e: Event) -> None:
    _set_node(tx, state, e, "status", "executing")
    tx.append(("executing",), e.get("node"))
    _count(tx, state, "node_execs")


@_on("node_exec_end")
def _node_exec_end(tx: Tx, state: State, e: Event) -> None:
    node = str(e.get("node"))
    if node in state["nodes"]:
        tx.set(("nodes", node, "status"), "executed")
        tx.set(("nodes", node, "runs"), state["nodes"][node]["runs"] + 1)
    if state["executing"] and state["executing"][-1] == e.get("node"):
        tx.pop(("executing",))


@_on("grad_accumulate")
def _grad_accumulate(tx: Tx, state: State, e: Event) -> None:
    tensor = str(e.get("tensor"))
    if tensor in state["tensors"]:
        tx.set(("tensors", tensor, "grads"), state["tensors"][tensor]["grads"] + 1)


@_on("version_bump")
def _version_bump(tx: Tx, state: State, e: Event) -> None:
    tensor = str(e.get("tensor"))
    if tensor in state["tensors"]:
        tx.set(("tensors", tensor, "version"), e.get("version", 0))


@_on("error")
def _error(tx: Tx, state: State, e: Event) -> None:
    tx.set(("error",), {"type": e.get("type"), "message": e.get("message")})


@_on("op")
def _op(tx: Tx, state: State, e: Event) -> None:
    _count(tx, state, "ops")


@_on("mark")
def _mark(tx: Tx, state: State, e: Event) -> None:
    tx.set(("mark",), {k: v for k, v in e.items() if k not in COMMON_FIELDS})


KINDS: frozenset[str] = frozenset(_HANDLERS)


# --- the cursor ----------------------------------------------------------------------------------


class Cursor(ChangeCursor):
    """``forward()``, ``back()`` and ``jump(n)`` over a trace's states, fast on long traces
    (Note [Cursor] in delta.py). ``cursor.state`` is live: read it, don't mutate it."""

    def __init__(self, events: Sequence[Event], snapshot_every: int = 512) -> None:
        super().__init__(events, initial_state(), _reduce, snapshot_every)
