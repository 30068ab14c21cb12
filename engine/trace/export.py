"""Exports of a trace: JSON, Chrome Trace Event format, and the autograd graph as DOT.

- ``to_json(trace, annotate=False)``: the trace document (``{"schema", "version", "meta", "sources",
  "events"}``); with ``annotate=True`` it also carries ``"derived"``, one ``{"changes", "caption"}``
  per event: what a browser needs to step both ways without knowing what events mean.
- ``to_chrome(trace)``: Chrome Trace Event format (JSON object form), for Perfetto or
  chrome://tracing. See ``Note [Chrome tracks]``.
- ``to_dot(trace)``: a ``graphviz.Digraph`` of every node the run created. See ``Note [DOT ids]``.
- ``dot_classes(state)``: the classes of each DOT id at one step, to restyle a rendered graph.

``trace`` may be a recorder (anything with ``.events``, and ``.to_json()`` for the document), a trace
document (dict) or a plain list of events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.trace.captions import caption
from engine.trace.changed import describe_changes
from engine.trace.record import SCHEMA, VERSION
from engine.trace.state import Event, State, gid_key, gid_label, initial_state, step


def events_of(trace: Any) -> list[Event]:
    """The events of a trace document, a recorder or a list of events."""
    if isinstance(trace, Mapping):
        return list(trace["events"])
    if isinstance(trace, Sequence):
        return list(trace)
    return list(trace.events)


def document_of(trace: Any) -> dict[str, Any]:
    if isinstance(trace, dict):
        return dict(trace)
    if not isinstance(trace, Sequence) and hasattr(trace, "to_json"):
        doc = trace.to_json()
        return dict(json.loads(doc) if isinstance(doc, str) else doc)
    return {"schema": SCHEMA, "version": VERSION, "meta": {}, "sources": {}, "events": events_of(trace)}


def annotate(trace: Any) -> list[dict[str, Any]]:
    """For each event, the reducer's changes (Note [Changes] in delta.py), its caption, and what
    the changes did in a few lines (``changed.py``)."""
    state = initial_state()
    out = []
    for event in events_of(trace):
        text = caption(state, event)
        changes = step(state, event)
        out.append({"changes": changes, "caption": text, "changed": describe_changes(state, changes)})
    return out


def to_json(trace: Any, *, annotate_events: bool = False, indent: int | None = None) -> str:
    doc = document_of(trace)
    if annotate_events:
        doc["derived"] = annotate(doc["events"])
    return json.dumps(doc, indent=indent)


# --- Chrome Trace Event format -------------------------------------------------------------------

# Note [Chrome tracks]
# ~~~~~~~~~~~~~~~~~~~~
# One process, one thread (track) per phase. Slices are "X" (complete) events made by pairing
# start and end events: recomputations (recompute track), runs of a checkpointed function,
# backward calls and node executions (the track of their start event's phase; a recomputing run
# always on the recompute track). The engine runs on one thread, so every pair opens and closes
# like a call: slices on a track nest, never overlap. A slice still open at the end of the trace
# (an error) is closed at the last event. Checkpoint moments are instant ("i") events on their
# phase's track, each with its caption; memory is a counter ("C") event whose keys (live, saved,
# recomputed) Perfetto draws as one counter track each.
#
# Note [Chrome flows]
# ~~~~~~~~~~~~~~~~~~~
# A saved tensor's life is drawn as flow arrows (``"ph": "s"`` then ``"f"``, one id per arrow)
# from its save (the pack of holder h) to each thing that happened to it later: every unpack of h,
# the recomputation an unpack of h started (``recompute_start``'s trigger names the frame and
# index of h), and its free (``holder_gc``). The start is on the pack's track at its time, the end
# on the target's track with ``"bp": "e"``: Perfetto binds each end to the slice enclosing it.
# A pack that no later event names (a run cut short) has no arrow.

TRACKS = {"forward": 1, "backward": 2, "recompute": 3}
_INSTANTS = {
    "frame_new",
    "inputs_saved",
    "pack",
    "unpack",
    "rpack",
    "early_stop",
    "recomputed_take",
    "holder_gc",
    "frame_gc",
    "checkpoint_error",
    "error",
    "mark",
    "version_bump",
    "saved_release",
}
_STARTS = {"fn_start": "fn_end", "recompute_start": "recompute_end", "backward_start": "backward_end"}
_STARTS["node_exec"] = "node_exec_end"
_ENDS = {end: start for start, end in _STARTS.items()}


def _slice_key(event: Event) -> tuple[str, Any]:
    kind = str(_ENDS.get(event["kind"]) or event["kind"])
    return kind, event.get("node", event.get("frame"))


def _slice_name(state: State, event: Event) -> tuple[str, int]:
    kind = event["kind"]
    phase_tid = TRACKS.get(event.get("phase") or "forward", 1)
    frame = state["frames"].get(str(event.get("frame")))
    frame_name = frame["name"] if frame else f"frame {event.get('frame')}"
    if kind == "fn_start":
        mode = event.get("mode", "forward")
        # A forward run met while recomputing (Rule 3) stays on the recompute track.
        return f"{frame['label'] if frame else '?'} ({mode} of {frame_name})", max(
            TRACKS.get(mode, 1), phase_tid
        )
    if kind == "recompute_start":
        return f"recompute {frame_name} for {gid_label(gid_key(event))}", TRACKS["recompute"]
    if kind == "backward_start":
        api = "autograd.grad" if event.get("api") == "grad" else "backward"
        gid = event.get("gid")
        return (f"{api} g{gid}" if gid is not None else api), phase_tid
    node = state["nodes"].get(str(event.get("node")))
    return (node["name"] if node else f"node {event.get('node')}"), phase_tid


def _instant_name(state: State, event: Event) -> str:
    kind = event["kind"]
    frame = state["frames"].get(str(event.get("frame")))
    if kind in {"pack", "unpack", "rpack", "recomputed_take", "holder_gc"} and frame:
        return f"{kind} {frame['name']}[{event.get('index')}]"
    if kind == "mark":
        return f"mark {event.get('label')}"
    if kind == "frame_new":
        return f"frame_new {event.get('label')}#{event.get('frame')}"
    if frame:
        return f"{kind} {frame['name']}"
    return kind


def chrome_trace(trace: Any, *, clock: str = "t_ns") -> dict[str, Any]:
    """The trace as a Chrome Trace Event object. ``clock="seq"`` puts event N at N microseconds,
    which spreads a fast run evenly and makes the timeline deterministic."""
    events = events_of(trace)
    pid = 1

    def ts(event: Event) -> float:
        return float(event["seq"]) if clock == "seq" else event.get("t_ns", 0) / 1000.0

    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "Autograd Lens"}}
    ]
    for phase, tid in TRACKS.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": phase}})
        out.append(
            {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
        )

    open_slices: list[tuple[tuple[str, Any], dict[str, Any]]] = []
    # See Note [Chrome flows]: each holder's pack, found by holder id or by (frame, index).
    packs: dict[Any, dict[str, Any]] = {}
    pack_at: dict[tuple[Any, Any], Any] = {}

    def flow(start: dict[str, Any], event: Event, what: str, tid: int) -> None:
        common = {"name": f"{what} {start['name']}", "cat": "saved", "id": len(out), "pid": pid}
        out.append(common | {"ph": "s", "ts": start["ts"], "tid": start["tid"]})
        out.append(
            common | {"ph": "f", "bp": "e", "ts": ts(event), "tid": tid, "args": {"seq": event["seq"]}}
        )

    state = initial_state()
    last_mem: dict[str, int] | None = None
    for event in events:
        kind = event["kind"]
        text = caption(state, event)
        if kind in _STARTS:
            name, tid = _slice_name(state, event)
            xev = {"name": name, "cat": kind, "ph": "X", "ts": ts(event), "dur": 0.0, "pid": pid, "tid": tid}
            xev["args"] = {"seq": event["seq"], "caption": text}
            out.append(xev)
            open_slices.append((_slice_key(event), xev))
        elif kind in _ENDS:
            key = _slice_key(event)
            # Close the innermost open slice of this kind and subject (and anything left open
            # inside it by an exception).
            for i in range(len(open_slices) - 1, -1, -1):
                if open_slices[i][0] == key:
                    for _, xev in open_slices[i:]:
                        xev["dur"] = ts(event) - xev["ts"]
                    open_slices[i][1]["args"]["end_seq"] = event["seq"]
                    del open_slices[i:]
                    break
        if kind in _INSTANTS:
            tid = TRACKS.get(event.get("phase") or "forward", 1)
            args = {"seq": event["seq"], "caption": text}
            out.append(
                {"name": _instant_name(state, event), "cat": kind, "ph": "i", "s": "t", "ts": ts(event)}
                | {"pid": pid, "tid": tid, "args": args}
            )
        holder = event.get("holder")
        phase_tid = TRACKS.get(event.get("phase") or "forward", 1)
        if kind == "pack" and holder is not None:
            name = _instant_name(state, event).removeprefix("pack ")
            packs[holder] = {"ts": ts(event), "tid": phase_tid, "name": name}
            pack_at[(event.get("frame"), event.get("index"))] = holder
        elif kind in {"unpack", "holder_gc"} and holder in packs:
            flow(packs[holder], event, "unpack" if kind == "unpack" else "free", phase_tid)
        elif kind == "recompute_start" and isinstance(trigger := event.get("trigger"), dict):
            h = pack_at.get((trigger.get("frame"), trigger.get("index")))
            if h in packs:  # ends on the recompute track, in the recomputation's slice
                flow(packs[h], event, "recompute", TRACKS["recompute"])
        mem = event.get("mem")
        if mem and mem != last_mem:
            out.append({"name": "memory (bytes)", "ph": "C", "ts": ts(event), "pid": pid, "args": dict(mem)})
            last_mem = dict(mem)
        step(state, event)
    if events:
        end = ts(events[-1])
        for _, xev in open_slices:
            xev["dur"] = end - xev["ts"]
            xev["args"]["unfinished"] = True
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": {"source": SCHEMA, "clock": clock}}


def to_chrome(trace: Any, *, clock: str = "t_ns") -> str:
    return json.dumps(chrome_trace(trace, clock=clock))


# The DOT export lives in its own module; it is part of this one's interface.
from engine.trace.export_dot import dot_classes, slot_id, to_dot  # noqa: E402

__all__ = ["annotate", "chrome_trace", "dot_classes", "slot_id", "to_chrome", "to_dot", "to_json"]
