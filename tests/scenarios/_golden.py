"""Golden traces: the normalized outcome of each bundled scenario, stored in ``tests/golden/``.

A golden file holds the run's outcome (``ok``, ``error``, printed output) and its trace document
with what varies between runs taken out: ``t_ns`` (wall time), and node ``seq_nr`` made relative to
the smallest one in the trace (the engine's sequence counter is process-wide, so its absolute values
depend on what ran before), and the stack traces of a ``debug=True`` checkpoint error's message
(they name every frame of whoever called the scenario). Events are written one per line, so a diff
shows which events changed.

``scripts/regen_golden.py`` rewrites the files; ``test_golden.py`` compares.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.runner import PROJECT_ROOT, RunResult, ScenarioInfo, run_scenario

GOLDEN_DIR = PROJECT_ROOT / "tests" / "golden"
REGEN_COMMAND = ".venv/bin/python scripts/regen_golden.py"
# seq_nr of nodes that have none (AccumulateGrad): UINT64_MAX, as in PyTorch.
_NO_SEQ_NR = 2**64 - 1


def golden_path(scenario_id: str) -> Path:
    return GOLDEN_DIR / f"{scenario_id}.json"


# debug=True's CheckpointError: sections 1 and 2 are stack traces, section 3 the op logs.
_DEBUG_STACKS = re.compile(
    r"\|\s+1\. Stack traces of the operators.*?(?=\+~+\+\n\|\s+3\. Log of operators)", re.S
)


def _without_stacks(e: dict[str, Any]) -> dict[str, Any]:
    if e["kind"] == "checkpoint_error" and isinstance(e.get("message"), str):
        return {**e, "message": _DEBUG_STACKS.sub("(stack traces left out)\n", e["message"])}
    return e


def normalize_trace(doc: dict[str, Any]) -> dict[str, Any]:
    events = [_without_stacks({k: v for k, v in e.items() if k != "t_ns"}) for e in doc["events"]]
    seq_nrs = [e["seq_nr"] for e in events if isinstance(e.get("seq_nr"), int) and e["seq_nr"] != _NO_SEQ_NR]
    base = min(seq_nrs, default=0)
    for e in events:
        if isinstance(e.get("seq_nr"), int) and e["seq_nr"] != _NO_SEQ_NR:
            e["seq_nr"] -= base
    return {**doc, "events": events}


def golden_document(result: RunResult) -> dict[str, Any]:
    return {
        "run": {
            "ok": result.ok,
            "error": asdict(result.error) if result.error else None,
            "stdout": result.stdout.splitlines(),
        },
        "trace": normalize_trace(result.trace) if result.trace is not None else None,
    }


def run_golden(info: ScenarioInfo) -> dict[str, Any]:
    return golden_document(run_scenario(info.path, trusted=True))


def dumps(doc: dict[str, Any]) -> str:
    """Stable text: sorted keys, one event per line."""
    trace = doc["trace"]
    head = {k: v for k, v in trace.items() if k != "events"} if trace is not None else None
    lines = ["{", f' "run": {json.dumps(doc["run"], sort_keys=True, ensure_ascii=False)},']
    if trace is None:
        lines.append(' "trace": null')
    else:
        lines.append(' "trace": {')
        for key in sorted(head):
            lines.append(f"  {json.dumps(key)}: {json.dumps(head[key], sort_keys=True, ensure_ascii=False)},")
        lines.append('  "events": [')
        events = trace["events"]
        for i, e in enumerate(events):
            comma = "," if i < len(events) - 1 else ""
            lines.append(f"   {json.dumps(e, sort_keys=True, ensure_ascii=False)}{comma}")
        lines.append("  ]")
        lines.append(" }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def load(scenario_id: str) -> dict[str, Any] | None:
    path = golden_path(scenario_id)
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text(encoding="utf-8")))


def describe_difference(expected: dict[str, Any], actual: dict[str, Any], context: int = 3) -> str:
    """Where a run departs from its golden file, readable in a test failure."""
    out: list[str] = []
    if expected["run"] != actual["run"]:
        out.append(f"run outcome differs:\n  golden: {expected['run']}\n  now:    {actual['run']}")
    et, at = expected["trace"], actual["trace"]
    if (et is None) != (at is None):
        out.append(f"trace present: golden {et is not None}, now {at is not None}")
        return "\n".join(out)
    if et is None or at is None:
        return "\n".join(out)
    for key in sorted(set(et) | set(at)):
        if key != "events" and et.get(key) != at.get(key):
            out.append(f"trace[{key!r}] differs:\n  golden: {et.get(key)}\n  now:    {at.get(key)}")
    ee, ae = et["events"], at["events"]
    first = next((i for i, (a, b) in enumerate(zip(ee, ae, strict=False)) if a != b), min(len(ee), len(ae)))
    if first < max(len(ee), len(ae)):
        out.append(f"events: golden has {len(ee)}, now {len(ae)}; first difference at event {first}")
        lo = max(0, first - context)
        for label, events in (("golden", ee), ("now", ae)):
            out.append(f"  {label}:")
            for i in range(lo, min(len(events), first + context + 1)):
                mark = ">" if i == first else " "
                out.append(f"   {mark}{i}: {json.dumps(events[i], sort_keys=True)}")
    return "\n".join(out)
