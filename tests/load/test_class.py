"""A class on one server (Note [A class on one server] in app/runs.py): 200 viewers open the
bundled scenarios at once, with the server's default settings. Nobody gets a 503, everyone gets
the first event of their run, and each scenario runs once. The time to the first event is a
figure (bench/bench_class.py, docs/security.md "Reliability"), not something asserted."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.load._server import Server, class_of, percentile

pytestmark = pytest.mark.slow

VIEWERS = 200
SCENARIOS = 20


def test_two_hundred_viewers_open_twenty_scenarios(tmp_path: Path) -> None:
    with Server(tmp_path / "data") as server:
        status, listed = server.api("/api/scenarios")
        assert status == 200
        scenarios = [s["id"] for s in listed][:SCENARIOS]
        assert len(scenarios) == SCENARIOS

        cold = class_of([server.url], scenarios, VIEWERS)  # nothing run yet: the first click runs it
        assert Counter(v.status for v in cold) == {201: SCENARIOS, 200: VIEWERS - SCENARIOS}
        assert all(v.first == "events" for v in cold), [v for v in cold if v.first != "events"]
        runs = {v.scenario: v.run_id for v in cold if not v.reused}
        assert len(runs) == SCENARIOS  # one run per scenario, whoever asked first
        assert all(v.run_id == runs[v.scenario] for v in cold)
        for run_id in runs.values():
            assert server.finished(run_id)["status"] in ("done", "error")

        warm = class_of([server.url], scenarios, VIEWERS)  # the next lesson: every run is stored
        assert Counter(v.status for v in warm) == {200: VIEWERS}
        assert all(v.first == "events" and v.run_id == runs[v.scenario] for v in warm)
        print(
            f"\n{VIEWERS} viewers on {SCENARIOS} scenarios: time to first event "
            f"p50 {percentile([v.seconds for v in cold], 50):.2f} s, "
            f"p95 {percentile([v.seconds for v in cold], 95):.2f} s cold (each scenario run once), "
            f"p50 {percentile([v.seconds for v in warm], 50):.2f} s, "
            f"p95 {percentile([v.seconds for v in warm], 95):.2f} s warm; no 503"
        )
