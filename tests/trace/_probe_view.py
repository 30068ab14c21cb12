"""A trace seen the way ``tests/utils/_ckpt_probe.py`` sees a run, to compare it with torch 2.8.0.

``TraceProbe`` stands in for the ``Probe`` on the engine side: the scenario's marks (phases, body
starts and ends) go into the trace as ``mark`` events instead of a probe's list, and the checkpoint
events come from the trace itself. ``probe_events`` turns a trace into the probe's strings;
``checkpoint_events`` keeps the checkpoint events alone (no marks, no holder deaths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine import trace
from tests.utils._ckpt_probe import marked_body


class TraceProbe:
    def __init__(self) -> None:
        self.trace: trace.Trace | None = None

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return marked_body(fn, trace.mark)

    def mark(self, event: str) -> None:
        trace.mark(event)

    def set_phase(self, phase: str) -> None:
        trace.mark(f"phase {phase}")

    def recomputed_alive(self) -> int:
        """Recomputed tensors still held by live frames, from the recorder's own bookkeeping."""
        assert self.trace is not None and self.trace._recorder is not None
        holders = self.trace._recorder._holders.values()
        return sum(len(h.recomputed) for h in holders if h.ref is not None and h.ref() is not None)


def probe_events(
    events: list[dict[str, Any]], bodies_from_fn: bool = False, marks: bool = True
) -> tuple[list[str], list[str]]:
    """(events, timeline) as ``Probe`` records them: checkpoint events and marks; the timeline
    also has the holder deaths. Frames are named ``LABEL#i``, i counting them in creation order.
    With ``bodies_from_fn``, body starts and ends come from the trace's ``fn_start``/``fn_end``
    instead of the marks (and other marks are left out); ``marks=False`` leaves the marks out."""
    names: dict[Any, str] = {}
    out: list[str] = []
    timeline: list[str] = []

    def name(frame: Any) -> str:
        return names.get(frame, "?")

    for e in events:
        kind = e["kind"]
        s: str | None = None
        if kind == "frame_new":
            names[e["frame"]] = f"{e['label']}#{len(names)}"
            s = f"frame {name(e['frame'])}"
            if isinstance(e["created_in"], dict):
                s += f" in_recompute({name(e['created_in']['recompute'])})"
        elif kind == "pack":
            s = f"pack {name(e['frame'])}[{e['index']}] {e['shape']}"
        elif kind == "unpack":
            s = f"unpack {name(e['frame'])}[{'?' if e['index'] is None else e['index']}]"
        elif kind == "recompute_start":
            s = f"recompute {name(e['frame'])}"
        elif kind == "recompute_end":
            s = f"recompute_end {name(e['frame'])}"
        elif kind == "rpack":
            f = name(e["frame"])
            if e["outcome"] == "extra":
                s = f"rpack {f}[extra] {e['shape']}"
            elif e["outcome"] == "skip":
                s = f"rpack {f}[{e['index']}] skip"
            else:
                s = f"rpack {f}[{e['index']}] {e['shape']}"
        elif kind == "early_stop":
            s = f"early_stop {name(e['frame'])} {e['count']}/{e['total']}"
        elif kind == "mark" and marks and not bodies_from_fn:
            s = e["label"]
        elif kind == "fn_start" and bodies_from_fn:
            s = f"body {name(e['frame']).split('#')[0]} start"
        elif kind == "fn_end" and bodies_from_fn:
            label = name(e["frame"]).split("#")[0]
            outcome = e["outcome"]
            s = (
                f"body {label} end"
                if outcome == "returned"
                else f"body {label} raised "
                + ("_StopRecomputationError" if outcome == "early_stop" else e.get("error", "?"))
            )
        elif kind == "holder_gc":
            timeline.append(f"gc {name(e['frame'])}[{e['index']}]")
        if s is not None:
            out.append(s)
            timeline.append(s)
    return out, timeline


def checkpoint_events(events: list[dict[str, Any]]) -> list[str]:
    """A trace's checkpoint events alone, in the probe's notation."""
    return probe_events(events, marks=False)[0]
