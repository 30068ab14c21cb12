"""Note [Why checkpointing saved little]'s ``peak_in_recompute`` on golden traces: the finding names
the region whose recomputation the peak is in, whether the peak falls while it runs or while what
it made waits for the backward, and it stays quiet when regions are small."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.trace.memory import memory_report

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def findings(name: str) -> dict[str, str]:
    events = json.loads((GOLDEN / f"{name}.json").read_text())["trace"]["events"]
    return {f["kind"]: f["text"] for f in memory_report(events)["diagnosis"]}


def report(name: str) -> dict[str, Any]:
    events = json.loads((GOLDEN / f"{name}.json").read_text())["trace"]["events"]
    return dict(memory_report(events))


def test_a_peak_while_the_recomputation_runs_names_its_region() -> None:
    # early_stop_off recomputes the whole function: the peak is inside that recomputation.
    assert report("early_stop_off")["peak"]["phase"] == "recompute"
    assert "inside the recomputation of `f#0`" in findings("early_stop_off")["peak_in_recompute"]


def test_a_peak_after_the_recomputation_of_one_big_region_names_it() -> None:
    # One checkpoint around the whole model: the peak comes in the backward, after the
    # recomputation ended, while every tensor it made waits to be used.
    r = report("pitfall_memory_one_region_broken")
    assert r["peak"]["phase"] == "backward"
    assert r["peak"]["parts"]["recomputed"] >= r["peak"]["live"] / 4
    text = findings("pitfall_memory_one_region_broken")["peak_in_recompute"]
    assert text.startswith("The peak (3.5 KB) is reached while what the recomputation of `model#0` made")
    assert "(1.8 KB of it recomputed)" in text


def test_one_region_per_block_keeps_the_peak_out_of_the_recomputations() -> None:
    # One block's recomputed tensors are a small part of the peak, if any: no finding.
    for name in ("pitfall_memory_one_region_fixed", "mlp_memory_per_block"):
        peak = report(name)["peak"]
        assert peak["phase"] != "recompute" and peak["parts"]["recomputed"] < peak["live"] / 4
        assert "peak_in_recompute" not in findings(name), name
