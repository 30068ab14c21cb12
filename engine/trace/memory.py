"""What memory a run used, and what checkpointing bought: measured from its trace.

``memory_report(events)`` answers, for one run, the questions people bring to checkpointing: how
high did memory go and when, what was alive at that moment and why, how much work the backward
re-did, and, tensor by tensor, what was saved for the backward, what a checkpoint replaced by a
holder and what became of it. The compare page (app/compare.py) puts the reports of one model
under several strategies side by side; the viewer's memory panel and ledger draw one.

Note [Memory report]
~~~~~~~~~~~~~~~~~~~~
Every figure comes from the events' own fields; nothing is estimated.

- ``metrics``: the maxima of the ``mem`` counters (docs/trace.md, "Memory") and the first event
  that reached each; ``peak_held`` is the most held for the backward at once (``saved`` +
  ``recomputed``), the figure checkpointing is about; ``forward_ops`` / ``recomputed_ops`` count
  ``op`` events by phase, so ``recomputed_ops`` is the forward work the backward did again (an
  op of a recomputation whose outputs all existed before it started is not work done again: a
  selective checkpoint's cache handed them back, and ``sac_cached_ops`` counts those);
  ``runs`` counts each checkpointed function's runs by mode (the three runs of an inner function under nested
  checkpoints are there); ``wall_ns`` is the recording's span (``t_ns``).
- ``peak``: the live bytes at the first event where ``live`` is highest, split by storage (a
  storage counts once, as ``mem`` counts it) into parts, each storage in the first that applies:
  ``leaves`` (a tensor made by the user that requires grad: a parameter, an input; it is alive
  whatever saves a view of it), ``gradients`` (a ``.grad`` that a ``grad_accumulate`` wrote),
  ``recomputed`` (in a frame's ``recomputed[gid]``: made again by a recomputation and not taken
  yet), ``checkpoint_inputs`` (the inputs a live checkpoint frame keeps, to run its function
  again), ``saved`` (held by a graph node's saved variable, not released), ``other`` (outputs and
  anything else a variable keeps). The parts add up to ``live``;
  ``tests/trace/test_memory.py`` checks it on every golden trace.
- ``ledger``: one entry per saved variable (a ``saved`` event) and per holder (a ``pack``):
  when it was saved, its bytes, where, the node and slot, whether it was kept as a tensor or a
  checkpoint's holder stood in for it, and what happened next (unpacks, the recomputation that
  refilled it, the take, the release or the holder's GC), and the ``policy`` that decided:
  ``saved`` (kept as a tensor), ``recomputed by checkpoint``, or ``cached by SAC`` (a selective
  checkpoint's cache refilled it with the tensor the forward made: the recomputation's op was not
  run again, its output handed back).
- ``diagnosis``: when checkpointing bought little, the reasons the trace shows (Note [Why
  checkpointing saved little]).
- ``modules``: per ``nn.Module`` (Note [Module paths]), the bytes its nodes saved, how much of it
  was alive at the peak of what is held for the backward, what holders stood in for and what
  recomputations made again: where a model's memory for the backward goes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, TypedDict

from engine.trace.state import Event, gid_key

MEM_PARTS = ("recomputed", "checkpoint_inputs", "saved", "gradients", "leaves", "other")
# Which part a storage is in when its tensors give several reasons (Note [Memory report]).
PRIORITY = ("leaves", "gradients", "recomputed", "checkpoint_inputs", "saved", "other")


class Metrics(TypedDict):
    events: int
    peak_live: int
    peak_live_seq: int | None
    peak_saved: int
    peak_saved_seq: int | None
    peak_recomputed: int
    peak_held: int
    peak_held_seq: int | None
    forward_ops: int
    recomputed_ops: int
    sac_cached_ops: int
    recomputations: int
    early_stops: int
    holders: int
    holder_bytes: int
    saved_tensors: int
    runs: dict[str, dict[str, int]]
    wall_ns: int


def memory_metrics(events: Sequence[Event]) -> Metrics:
    peak = {"live": 0, "saved": 0, "recomputed": 0}
    peak_seq: dict[str, int | None] = {"live": None, "saved": None, "recomputed": None}
    held, held_seq = 0, None
    kinds: Counter[str] = Counter()
    ops = Counter[str]()
    holder_bytes = 0
    labels: dict[Any, str] = {}
    runs: dict[str, dict[str, int]] = {}
    next_tensor = 0  # tensor ids count up: below this one, a tensor existed before
    fresh_from: list[int] = []  # per recomputation in progress: the first id it made
    for e in events:
        kind = e["kind"]
        kinds[kind] += 1
        mem = e.get("mem") or {}
        for k in peak:
            if mem.get(k, 0) > peak[k]:
                peak[k], peak_seq[k] = mem[k], e["seq"]
        if mem.get("saved", 0) + mem.get("recomputed", 0) > held:
            held, held_seq = mem.get("saved", 0) + mem.get("recomputed", 0), e["seq"]
        if kind == "tensor_new":
            next_tensor = max(next_tensor, e["tensor"] + 1)
        elif kind == "recompute_start":
            fresh_from.append(next_tensor)
        elif kind == "recompute_end" and fresh_from:
            fresh_from.pop()
        elif kind == "op":
            outputs = e.get("outputs") or []
            if e.get("phase") != "recompute":
                ops["forward"] += 1
            elif fresh_from and outputs and all(isinstance(t, int) and t < fresh_from[-1] for t in outputs):
                ops["cached"] += 1
            else:
                ops["recompute"] += 1
        elif kind == "pack":
            holder_bytes += e.get("nbytes", 0) or 0
        elif kind == "frame_new":
            labels[e.get("frame")] = e.get("label", "?")
        elif kind == "fn_start":
            label = labels.get(e.get("frame"), "?")
            mode = e.get("mode", "forward")
            runs.setdefault(label, {"forward": 0, "recompute": 0})
            runs[label][mode] = runs[label].get(mode, 0) + 1
    return {
        "events": len(events),
        "peak_live": peak["live"],
        "peak_live_seq": peak_seq["live"],
        "peak_saved": peak["saved"],
        "peak_saved_seq": peak_seq["saved"],
        "peak_recomputed": peak["recomputed"],
        "peak_held": held,
        "peak_held_seq": held_seq,
        "forward_ops": ops["forward"],
        "recomputed_ops": ops["recompute"],
        "sac_cached_ops": ops["cached"],
        "recomputations": kinds["recompute_start"],
        "early_stops": kinds["early_stop"],
        "holders": kinds["pack"],
        "holder_bytes": holder_bytes,
        "saved_tensors": sum(1 for e in events if e["kind"] == "saved" and e.get("packed") != "holder"),
        "runs": runs,
        "wall_ns": (events[-1].get("t_ns", 0) - events[0].get("t_ns", 0)) if events else 0,
    }


# --- the peak, split ------------------------------------------------------------------------


class AliveItem(TypedDict):
    storage: int
    bytes: int
    part: str
    tensors: list[int]
    names: list[str]
    what: str  # in words: "mat1 of AddmmBackward0 (node 6)", "input of checkpoint Sequential#0"
    line: int | None


class Peak(TypedDict):
    seq: int | None
    phase: str | None
    live: int
    parts: dict[str, int]
    alive: list[AliveItem]


class _Replay:
    """The facts the peak's split needs, replayed event by event (lighter than the reducer)."""

    def __init__(self) -> None:
        self.tensors: dict[int, Event] = {}  # alive tensor -> its tensor_new
        self.node_names: dict[int, str] = {}
        self.saved: dict[int, dict[tuple[int, str], int]] = {}  # node -> (node, slot) -> tensor
        self.released: set[int] = set()
        self.frame_labels: dict[int, str] = {}
        self.inputs: dict[int, list[int]] = {}  # live frame -> its saved inputs
        self.recomputed: dict[tuple[Any, str, Any], int] = {}  # (frame, gid, index) -> tensor
        self.grads: set[int] = set()

    def step(self, e: Event) -> None:
        kind = e["kind"]
        if kind == "tensor_new":
            self.tensors[e["tensor"]] = e
        elif kind == "tensor_free":
            self.tensors.pop(e.get("tensor"), None)  # type: ignore[arg-type]
        elif kind == "node_new":
            self.node_names[e["node"]] = e.get("name", "?")
        elif kind == "saved" and e.get("packed") != "holder" and e.get("tensor") is not None:
            self.saved.setdefault(e["node"], {})[(e["node"], str(e.get("slot")))] = e["tensor"]
        elif kind in ("saved_release", "node_free"):
            self.saved.pop(e.get("node"), None)  # type: ignore[arg-type]
        elif kind == "frame_new":
            self.frame_labels[e["frame"]] = f"{e.get('label', '?')}#{e['frame']}"
        elif kind == "inputs_saved":
            self.inputs[e["frame"]] = list(e.get("tensors") or [])
        elif kind == "rpack" and e.get("outcome") == "keep":
            self.recomputed[(e.get("frame"), gid_key(e), e.get("index"))] = e.get("tensor")  # type: ignore[assignment]
        elif kind == "recomputed_take":
            self.recomputed.pop((e.get("frame"), gid_key(e), e.get("index")), None)
        elif kind == "holder_gc":
            for key in [k for k in self.recomputed if k[0] == e.get("frame") and k[2] == e.get("index")]:
                del self.recomputed[key]
        elif kind == "grad_accumulate" and e.get("grad") is not None:
            self.grads.add(e["grad"])
        elif kind == "frame_gc":
            self.inputs.pop(e.get("frame"), None)  # type: ignore[arg-type]
            for key in [k for k in self.recomputed if k[0] == e.get("frame")]:
                del self.recomputed[key]

    def split(self) -> tuple[dict[str, int], list[AliveItem]]:
        # Why each tensor is alive, most specific reason first (Note [Memory report]).
        reason: dict[int, tuple[str, str]] = {}
        for (frame, gid, index), t in self.recomputed.items():
            name = self.frame_labels.get(frame, f"frame {frame}")
            reason.setdefault(t, ("recomputed", f"recomputed[{gid}][{index}] of {name}"))
        for frame, ts in self.inputs.items():
            for t in ts:
                reason.setdefault(
                    t, ("checkpoint_inputs", f"input of checkpoint {self.frame_labels.get(frame, frame)}")
                )
        for node, slots in self.saved.items():
            for (_, slot), t in slots.items():
                what = f"{slot} of {self.node_names.get(node, '?')} (node {node})"
                reason.setdefault(t, ("saved", what))
        rank = {p: i for i, p in enumerate(PRIORITY)}
        items: dict[int, AliveItem] = {}
        for t, e in self.tensors.items():
            storage = e.get("storage", t)
            if e.get("is_leaf") and e.get("requires_grad"):
                part, what = "leaves", "a parameter or input you made"
            elif t in self.grads:
                part, what = "gradients", "a .grad"
            else:
                part, what = reason.get(t, ("other", ""))
            item = items.get(storage)
            if item is None:
                item = items[storage] = {
                    "storage": storage,
                    "bytes": e.get("storage_nbytes", e.get("nbytes", 0)) or 0,
                    "part": part,
                    "tensors": [],
                    "names": [],
                    "what": what,
                    "line": (e.get("src") or {}).get("line"),
                }
            elif rank[part] < rank[item["part"]]:
                item["part"], item["what"] = part, what
            item["tensors"].append(t)
            if e.get("name"):
                item["names"].append(e["name"])
        parts = dict.fromkeys(MEM_PARTS, 0)
        for item in items.values():
            parts[item["part"]] += item["bytes"]
        alive = sorted(items.values(), key=lambda i: (-i["bytes"], i["storage"]))
        return parts, alive


def peak_split(events: Sequence[Event], seq: int | None = None) -> Peak:
    """The live bytes after event ``seq`` (default: the first event at the peak of ``live``),
    split into ``MEM_PARTS``, and what is alive, biggest first."""
    if seq is None:
        seq = memory_metrics(events)["peak_live_seq"]
    if seq is None:
        return {"seq": None, "phase": None, "live": 0, "parts": dict.fromkeys(MEM_PARTS, 0), "alive": []}
    replay = _Replay()
    for e in events[: seq + 1]:
        replay.step(e)
    parts, alive = replay.split()
    at = events[seq]
    return {
        "seq": seq,
        "phase": at.get("phase"),
        "live": (at.get("mem") or {}).get("live", 0),
        "parts": parts,
        "alive": alive,
    }


# --- the saved-tensor ledger ------------------------------------------------------------------


class LedgerEntry(TypedDict):
    id: str  # "s{seq}": the event that opened it
    seq: int  # its save: a ``saved`` (kept as a tensor) or a ``pack`` (a holder stood in)
    kept: str  # "tensor" | "holder"
    node: int | None
    node_name: str
    slot: str | None
    tensor: int | None
    bytes: int  # the tensor's bytes: held until the end, or, for a holder, not held
    line: int | None
    phase: str | None
    frame: str | None  # the checkpoint frame whose holder stood in for it
    holder: int | None
    index: int | None
    unpacks: list[int]
    recomputed_by: list[int]  # the recompute_start of each recomputation that refilled it
    refilled: list[int]  # the rpacks that put it in recomputed[gid]
    taken: list[int]
    end: int | None  # saved_release / node_free (a tensor), holder_gc (a holder)
    fate: str
    policy: str  # "saved", "recomputed by checkpoint", "cached by SAC" (Note [Memory report])
    module: int | None  # the module whose forward made its node (Note [Module paths])


def saved_ledger(events: Sequence[Event]) -> list[LedgerEntry]:
    """One entry per saved variable, in the order they were saved (Note [Memory report])."""
    entries: list[LedgerEntry] = []
    tensor_bytes: dict[int, int] = {}
    node_names: dict[int, str] = {}
    frame_names: dict[Any, str] = {}
    by_node: dict[Any, list[LedgerEntry]] = {}
    by_holder: dict[Any, LedgerEntry] = {}
    by_frame_index: dict[tuple[Any, Any], LedgerEntry] = {}
    recomputing: list[int] = []  # recompute_start seqs, innermost last
    node_modules: dict[Any, int | None] = {}
    next_tensor = 0  # tensor ids count up: one below a recomputation's first existed before it
    fresh_from: list[int] = []
    cached: set[str] = set()  # entries a selective checkpoint's cache refilled
    sac_outputs: set[int] = set()  # outputs a recomputation's ops handed back without running
    origin: dict[int, int] = {}  # a recomputation's detached copy -> the tensor it copies
    for e in events:
        kind, seq = e["kind"], e["seq"]
        if kind == "tensor_new":
            tensor_bytes[e["tensor"]] = e.get("nbytes", 0) or 0
            next_tensor = max(next_tensor, e["tensor"] + 1)
        elif kind == "node_new":
            node_names[e["node"]] = e.get("name", "?")
            node_modules[e["node"]] = e.get("module")
        elif kind == "frame_new":
            frame_names[e["frame"]] = f"{e.get('label', '?')}#{e['frame']}"
        elif kind in ("pack", "saved"):
            if kind == "saved" and (e.get("packed") == "holder" or e.get("holder") is not None):
                packed = by_holder.get(e.get("holder"))
                if packed is not None and packed["node"] is None:  # a torch trace's pack
                    packed["node"], packed["slot"] = e.get("node"), e.get("slot")
                    packed["node_name"] = node_names.get(e.get("node"), "?")  # type: ignore[arg-type]
                    packed["module"] = node_modules.get(e.get("node"))
                    by_node.setdefault(e.get("node"), []).append(packed)
                continue
            holder = e.get("holder") if kind == "pack" else None
            t = e.get("tensor")
            entry: LedgerEntry = {
                "id": f"s{seq}",
                "seq": seq,
                "kept": "holder" if kind == "pack" else "tensor",
                "node": e.get("node"),
                "node_name": node_names.get(e.get("node"), "?") if e.get("node") is not None else "?",  # type: ignore[arg-type]
                "slot": e.get("slot"),
                "tensor": t,
                "bytes": (e.get("nbytes") if kind == "pack" else tensor_bytes.get(t, 0)) or 0,  # type: ignore[arg-type]
                "line": (e.get("src") or {}).get("line"),
                "phase": e.get("phase"),
                "frame": frame_names.get(e.get("frame")) if kind == "pack" else None,
                "holder": holder,
                "index": e.get("index") if kind == "pack" else None,
                "unpacks": [],
                "recomputed_by": [],
                "refilled": [],
                "taken": [],
                "end": None,
                "fate": "",
                "policy": "",
                "module": node_modules.get(e.get("node")),
            }
            entries.append(entry)
            if e.get("node") is not None:
                by_node.setdefault(e.get("node"), []).append(entry)
            if holder is not None:
                by_holder[holder] = entry
                by_frame_index[(e.get("frame"), e.get("index"))] = entry
        elif kind == "unpack":
            held = by_holder.get(e.get("holder"))
            if held is not None:
                held["unpacks"].append(seq)
        elif kind == "recompute_start":
            recomputing.append(seq)
            fresh_from.append(next_tensor)
        elif kind == "recompute_end":
            if recomputing:
                recomputing.pop()
                fresh_from.pop()
        elif kind == "rpack" and e.get("outcome") == "keep":
            held = by_frame_index.get((e.get("frame"), e.get("index")))
            if held is not None:
                held["refilled"].append(seq)
                if recomputing and recomputing[-1] not in held["recomputed_by"]:
                    held["recomputed_by"].append(recomputing[-1])
                t = e.get("tensor")
                if isinstance(t, int) and origin.get(t, t) in sac_outputs:
                    cached.add(held["id"])
        elif kind == "op" and e.get("phase") == "recompute" and fresh_from:
            outputs = [t for t in e.get("outputs") or [] if isinstance(t, int)]
            inputs = [t for t in e.get("inputs") or [] if isinstance(t, int)]
            if e.get("name") == "detach" and len(inputs) == 1:
                for t in outputs:
                    origin[t] = origin.get(inputs[0], inputs[0])
            elif outputs and all(t < fresh_from[-1] for t in outputs):
                sac_outputs.update(outputs)  # handed back, not run: as memory_metrics' sac_cached_ops
        elif kind == "recomputed_take":
            held = by_holder.get(e.get("holder"))
            if held is not None:
                held["taken"].append(seq)
        elif kind == "holder_gc":
            held = by_holder.get(e.get("holder"))
            if held is not None and held["end"] is None:
                held["end"] = seq
        elif kind in ("saved_release", "node_free"):
            for saved in by_node.get(e.get("node"), []):
                if saved["kept"] == "tensor" and saved["end"] is None:
                    saved["end"] = seq
    for entry in entries:
        entry["fate"] = _fate(entry)
        entry["policy"] = (
            "saved"
            if entry["kept"] == "tensor"
            else "cached by SAC"
            if entry["id"] in cached
            else "recomputed by checkpoint"
        )
    return entries


def _fate(entry: LedgerEntry) -> str:
    if entry["kept"] == "tensor":
        return (
            "kept as a tensor until released" if entry["end"] is not None else "kept as a tensor to the end"
        )
    if entry["refilled"]:
        n = len(entry["recomputed_by"])
        return "recomputed" + (f" {n} times" if n > 1 else "") + " for the backward"
    if entry["unpacks"]:
        return "unpacked without a recomputation of its own"
    if entry["phase"] == "recompute":
        return "made by a recomputation, never unpacked (Rule 3)"
    return "never needed: no backward unpacked it"


# --- why checkpointing saved little -----------------------------------------------------------

# Note [Why checkpointing saved little]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# "I turned checkpointing on and memory did not go down" has a handful of causes, each visible in
# a trace. ``diagnose`` names those that apply, with the figures that show it:
#
# - ``no_checkpoint``: no checkpoint frame at all.
# - ``region_small``: the holders stand in for under a quarter of the bytes saved for the
#   backward: most of it is saved outside the checkpointed regions.
# - ``outside_reference``: tensors made inside a checkpointed forward are still alive when the
#   backward starts, kept by a reference of the caller's (a variable, a list): the checkpoint
#   dropped its saved copy, but the memory stays.
# - ``peak_in_recompute``: the live peak is reached during a recomputation, or while a
#   recomputation's tensors (``recomputed`` at the peak) make a quarter of it or more: recomputing
#   a big region brings back, at once, the activations checkpointing had dropped (one region
#   around the whole model moves the peak instead of lowering it). The finding names the
#   regions whose recomputation it is: the innermost one running at the peak, and those whose
#   recomputed tensors are alive there.
# - ``other_dominates``: at the live peak, what is saved, recomputed or kept as checkpoint inputs
#   is under a quarter of the live bytes: parameters, gradients and the caller's tensors make the
#   peak, and checkpointing cannot shrink those. The figure to watch is ``peak_held``.

SMALL = 0.25


class Finding(TypedDict):
    kind: str
    text: str
    seq: int | None  # where to look


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def diagnose(
    events: Sequence[Event], metrics: Metrics, peak: Peak, ledger: Sequence[LedgerEntry]
) -> list[Finding]:
    """Note [Why checkpointing saved little]."""
    found: list[Finding] = []

    def add(kind: str, text: str, seq: int | None = None) -> None:
        found.append({"kind": kind, "text": text, "seq": seq})

    if not any(e["kind"] == "frame_new" for e in events):
        add(
            "no_checkpoint",
            "Nothing is checkpointed: every tensor saved for the backward is kept until it is used.",
        )
    else:
        first = [x for x in ledger if x["phase"] != "recompute"]
        total = sum(x["bytes"] for x in first)
        held = sum(x["bytes"] for x in first if x["kept"] == "holder")
        if total and held < SMALL * total:
            add(
                "region_small",
                f"The checkpointed regions hold {_bytes(held)} of the {_bytes(total)} saved for the "
                "backward: the rest is saved outside them, so checkpointing cannot drop it.",
            )
        kept = _kept_outside(events)
        if kept and kept[0] > SMALL * max(1, held):
            names = ", ".join(f"`{n}`" for n in kept[2][:4])
            add(
                "outside_reference",
                f"{_bytes(kept[0])} made inside checkpointed functions is still alive when the backward "
                f"starts{f' ({names})' if names else ''}: a reference outside the checkpoint keeps it, so "
                "dropping the saved copy frees nothing.",
                kept[1],
            )
    recomputed = peak["parts"]["recomputed"]
    if peak["seq"] is not None and (peak["phase"] == "recompute" or recomputed >= SMALL * peak["live"]):
        running, waiting = _recomputing_at(events, peak["seq"])
        where = (
            f"inside the recomputation of {_names(running)}"
            if running
            else f"while what the recomputation of {_names(waiting)} made waits for the backward"
            if waiting
            else "inside a recomputation"
        )
        add(
            "peak_in_recompute",
            f"The peak ({_bytes(peak['live'])}) is reached {where}"
            + (f" ({_bytes(recomputed)} of it recomputed)" if recomputed else "")
            + ": re-running a large region brings back at once the activations checkpointing dropped. "
            "Smaller regions (one per block) lower it.",
            peak["seq"],
        )
    if peak["live"]:
        held_parts = sum(peak["parts"][p] for p in ("recomputed", "checkpoint_inputs", "saved"))
        if held_parts < SMALL * peak["live"]:
            add(
                "other_dominates",
                f"At the peak ({_bytes(peak['live'])}), only {_bytes(held_parts)} is held for the backward; "
                "parameters, gradients and your own tensors make the rest, and checkpointing does not "
                f"shrink those. What is held for the backward peaks at {_bytes(metrics['peak_held'])}.",
                peak["seq"],
            )
    return found


def _names(labels: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in labels)


def _recomputing_at(events: Sequence[Event], seq: int) -> tuple[list[str], list[str]]:
    """The checkpoint frames (``label#id``) whose recomputation is running after event ``seq``
    (innermost first), and the others whose recomputed tensors are alive there, not yet taken."""
    replay = _Replay()
    running: list[Any] = []
    for e in events[: seq + 1]:
        replay.step(e)
        if e["kind"] == "recompute_start":
            running.append(e.get("frame"))
        elif e["kind"] == "recompute_end" and running:
            running.pop()
    waiting = [f for f in dict.fromkeys(k[0] for k in replay.recomputed) if f not in running]
    label = replay.frame_labels.get
    return [label(f, f"frame {f}") for f in reversed(running)], [label(f, f"frame {f}") for f in waiting]


def _kept_outside(events: Sequence[Event]) -> tuple[int, int, list[str]] | None:
    """Bytes of storages made inside a checkpointed forward and alive, not as checkpoint inputs,
    at the first ``backward_start``; that event's seq; the names of such tensors."""
    start = next((e["seq"] for e in events if e["kind"] == "backward_start"), None)
    if start is None:
        return None
    replay = _Replay()
    inside: set[int] = set()
    outputs: set[int] = set()
    last_op: list[list[int]] = []  # per forward run in progress: the outputs of its last op
    for e in events[:start]:
        replay.step(e)
        kind = e["kind"]
        if kind == "fn_start" and e.get("mode", "forward") == "forward":
            last_op.append([])
        elif kind == "fn_end" and last_op and e.get("phase") == "forward":
            # What a checkpointed function returns is alive by design: its last op's outputs.
            outputs.update(last_op.pop())
        elif kind == "op" and last_op and e.get("phase") == "forward":
            last_op[-1] = list(e.get("outputs") or [])
        elif kind == "tensor_new" and last_op and e.get("phase") == "forward":
            inside.add(e["tensor"])
    _, alive = replay.split()
    kept = [
        i
        for i in alive
        if i["part"] in ("other", "leaves")
        and set(i["tensors"]) <= inside
        and not set(i["tensors"]) & outputs
    ]
    total = sum(i["bytes"] for i in kept)
    names = [n for i in kept for n in i["names"]]
    return (total, start, names) if total else None


class ModuleRow(TypedDict):
    module: int | None
    path: str
    type: str
    # A tensor's bytes count in full per entry: unlike ``mem``, two saves of views of one storage
    # both count, so the rows say what each module's saves reference, not a split of ``live``.
    saved: int  # bytes its nodes saved as tensors in the forward
    held_at_peak: int  # of those, alive at the peak of what is held for the backward
    holders: int  # bytes a checkpoint's holders stood in for: not held until recomputed
    recomputed: int  # bytes the recomputations made again for it
    entries: int
    first: int  # the seq of its first save, where the viewer goes to show it


def module_breakdown(
    ledger: Sequence[LedgerEntry], at: int | None, modules: dict[str, dict[str, str]] | None = None
) -> list[ModuleRow]:
    """Per module (Note [Module paths]; ``modules`` is ``meta.modules``): what its nodes saved,
    what was alive at event ``at``, what holders stood in for and what was recomputed. Saves made
    outside any module's forward are one row with ``module`` None."""
    rows: dict[int | None, ModuleRow] = {}
    for x in ledger:
        if x["phase"] == "recompute":
            continue  # a recomputation's own saves are counted as recomputed, below
        m = x["module"]
        row = rows.get(m)
        if row is None:
            info = (modules or {}).get(str(m), {})
            path = "(outside any module)" if m is None else info.get("path", f"module {m}")
            row = rows[m] = {
                "module": m,
                "path": path,
                "type": info.get("type", ""),
                "saved": 0,
                "held_at_peak": 0,
                "holders": 0,
                "recomputed": 0,
                "entries": 0,
                "first": x["seq"],
            }
        row["entries"] += 1
        if x["kept"] == "tensor":
            row["saved"] += x["bytes"]
            if at is not None and x["seq"] <= at and (x["end"] is None or x["end"] > at):
                row["held_at_peak"] += x["bytes"]
        else:
            row["holders"] += x["bytes"]
            row["recomputed"] += x["bytes"] * len(x["refilled"])
    return sorted(rows.values(), key=lambda r: (r["module"] is None, r["path"]))


class MemoryReport(TypedDict):
    metrics: Metrics
    peak: Peak
    ledger: list[LedgerEntry]
    marks: dict[str, list[int]]
    diagnosis: list[Finding]
    modules: list[ModuleRow]


MARK_KINDS = ("pack", "unpack", "recompute_start", "early_stop", "holder_gc", "backward_start")


def memory_report(
    events: Sequence[Event], alive_limit: int = 40, modules: dict[str, dict[str, str]] | None = None
) -> MemoryReport:
    """Note [Memory report]; ``modules``: the trace's ``meta.modules``, to name modules by path."""
    metrics = memory_metrics(events)
    peak = peak_split(events, metrics["peak_live_seq"])
    ledger = saved_ledger(events)
    marks: dict[str, list[int]] = {k: [] for k in MARK_KINDS}
    for e in events:
        if e["kind"] in marks:
            marks[e["kind"]].append(e["seq"])
    findings = diagnose(events, metrics, peak, ledger)
    peak["alive"] = peak["alive"][:alive_limit]
    return {
        "metrics": metrics,
        "peak": peak,
        "ledger": ledger,
        "marks": marks,
        "diagnosis": findings,
        "modules": module_breakdown(ledger, metrics["peak_held_seq"], modules),
    }
