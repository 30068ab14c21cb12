"""A trace seen the way ``tests/utils/_ckpt_probe.py`` sees a run, to compare it with torch 2.8.0.

``TraceProbe`` stands in for the ``Probe`` on the engine side: the scenario's marks (phases, body
starts and ends) go into the trace as ``mark`` events instead of a probe's list, and the checkpoint
events come from the trace itself. ``probe_events`` turns a trace into the probe's strings.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from engine import trace


class TraceProbe:
    def __init__(self) -> None:
        self.trace: trace.Trace | None = None

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        name = fn.__name__

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            trace.mark(f"body {name} start")
            try:
                out = fn(*args, **kwargs)
            except BaseException as e:
                trace.mark(f"body {name} raised {type(e).__name__}")
                raise
            trace.mark(f"body {name} end")
            return out

        return run

    def mark(self, event: str) -> None:
        trace.mark(event)

    def set_phase(self, phase: str) -> None:
        trace.mark(f"phase {phase}")

    def recomputed_alive(self) -> int:
        """Recomputed tensors still held by live frames, from the recorder's own bookkeeping."""
        assert self.trace is not None and self.trace._recorder is not None
        holders = self.trace._recorder._holders.values()
        return sum(len(h.recomputed) for h in holders if h.ref is not None and h.ref() is not None)


def probe_events(events: list[dict[str, Any]], bodies_from_fn: bool = False) -> tuple[list[str], list[str]]:
    """(events, timeline) as ``Probe`` records them: checkpoint events and marks; the timeline
    also has the holder deaths. With ``bodies_from_fn``, body starts and ends come from the
    trace's ``fn_start``/``fn_end`` instead of the marks (and other marks are left out)."""
    names: dict[Any, str] = {}
    out: list[str] = []
    timeline: list[str] = []

    def name(frame: Any) -> str:
        return names.get(frame, "?")

    for e in events:
        kind = e["kind"]
        s: str | None = None
        if kind == "frame_new":
            names[e["frame"]] = f"{e['label']}#{e['frame']}"
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
        elif kind == "mark" and not bodies_from_fn:
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
