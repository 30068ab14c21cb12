"""The types of the reducer (``state.py``): an event as it reads it, and the state it builds.

``State`` is plain JSON: TypedDicts over dicts with string keys, lists, strings, numbers, booleans
and ``None``, so a state can be sent to a browser or stored as is. Ids used as keys are strings
(``str(frame)``, ``str(index)``, ...), and so are gids (Note [Gid keys] in ``state.py``).
docs/trace.md describes each key.
"""

from __future__ import annotations

from typing import Any, TypedDict

Event = dict[str, Any]


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
    variable: int | None  # the leaf tensor of an AccumulateGrad node
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


# The keys of ``State["mem"]`` and ``State["peak"]``, and of ``State["counts"]``.
MEM_KEYS = ("live", "saved", "recomputed")
COUNT_KEYS = ("ops", "packs", "unpacks", "rpacks", "recomputations", "early_stops", "node_execs", "backwards")
