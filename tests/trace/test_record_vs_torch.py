"""The trace's checkpoint events against torch 2.8.0, for every differential scenario of tests/utils.

Each scenario of ``tests/utils/test_vs_torch_*.py`` runs once in torch under the ``Probe`` and once
in the engine under ``trace.record()`` alone (no probe: ``TraceProbe`` turns the scenario's marks
into trace marks). The trace, read the way the probe reads a run (``probe_events``), must give
torch's events in torch's order, the same holder deaths between consecutive events, and the same
results: recording does not change what the engine does.
"""

from __future__ import annotations

import gc
import importlib
import warnings
from collections import Counter
from types import ModuleType

import pytest

import engine
import engine.utils.checkpoint as engine_cp
import tests.utils.test_vs_torch_basic
import tests.utils.test_vs_torch_errors
import tests.utils.test_vs_torch_inplace_rng
import tests.utils.test_vs_torch_nested
import tests.utils.test_vs_torch_sac_reentrant  # noqa: F401 - they register the scenarios
from engine import trace
from tests.trace._check import check
from tests.trace._probe_view import TraceProbe, probe_events
from tests.utils._vs_torch import SCENARIOS, assert_same, gc_segments, run


def run_traced(name: str) -> tuple[trace.Trace, dict[str, object]]:
    probe = TraceProbe()
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with trace.record(source_files=[tests.utils.test_vs_torch_basic.__file__]) as tr:
                probe.trace = tr
                result = SCENARIOS[name](engine, engine_cp, probe)  # type: ignore[arg-type]
    finally:
        gc.enable()
    return tr, result


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_checkpoint_events_match_torch(name: str, torch_oracle: ModuleType) -> None:
    theirs = run(SCENARIOS[name], torch_oracle, importlib.import_module("torch.utils.checkpoint"))
    tr, result = run_traced(name)
    check(tr)
    events, timeline = probe_events(tr.events)
    assert events == theirs.probe.events
    assert gc_segments(timeline) == gc_segments(theirs.probe.timeline)
    assert_same(result, theirs.result, "result")
    kinds = Counter(e["kind"] for e in tr.events)
    # Every frame died inside the recording (the scenario returned), as in torch.
    assert kinds["frame_new"] == kinds["frame_gc"]
    # fn_start/fn_end are where the body marks are, when every body run is a checkpointed run.
    from_fn = probe_events(tr.events, bodies_from_fn=True)[0]
    if _body_starts([e["label"] for e in tr.events if e["kind"] == "mark"]) == _body_starts(from_fn):
        assert from_fn == [e for e in theirs.probe.events if e.startswith(CHECKPOINT_EVENTS)]


CHECKPOINT_EVENTS = (
    "frame ",
    "pack ",
    "unpack ",
    "recompute ",
    "recompute_end ",
    "rpack ",
    "early_stop ",
    "body ",
)


def _body_starts(events: list[str]) -> Counter[str]:
    return Counter(e.split()[1] for e in events if e.startswith("body ") and e.endswith(" start"))
