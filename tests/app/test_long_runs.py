"""Long runs: an untrusted run that hits the event limit keeps its trace up to the limit, and the
run's document says where and why it was cut (the viewer's banner reads it)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.runner import run_scenario
from app.sandbox import Limits
from tests.app.conftest import BATCH, finished_run, start_run

LOOP = "import engine as torch\nx = torch.ones(2, requires_grad=True)\nwhile True:\n    y = (x * 1.5).sin().sum()\n"


def test_the_default_event_limit_is_the_measured_one() -> None:
    # bench/bench_limit.py: about 43,000 events a second in the worker; a run into 100,000 events
    # takes about half the 5 s CPU budget.
    assert Limits().max_events == 100_000
    assert Limits().cpu_seconds == 5.0


def test_a_trace_cut_by_the_limit_holds_exactly_the_limit() -> None:
    # One engine call emits several events (op, node_new, tensor_new...): the cut is exact anyway.
    for limit in (997, 1000, 1003):
        result = run_scenario(LOOP, trusted=True, limits=Limits(max_events=limit))
        assert result.error is not None and result.error.limit == "max_events"
        assert result.trace is not None
        assert len(result.trace["events"]) == limit
        assert [e["seq"] for e in result.trace["events"]] == list(range(limit))
        assert result.trace["meta"]["truncated"] is True
        assert result.trace["meta"]["event_limit"] == limit


def test_a_whole_trace_names_no_event_limit() -> None:
    result = run_scenario(LOOP.replace("while True", "for i in range(3)"), trusted=True)
    assert result.ok and result.trace is not None
    assert result.trace["meta"]["truncated"] is False and "event_limit" not in result.trace["meta"]


def test_an_untrusted_run_into_the_limit_stays_open(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        batch_events=BATCH,
        limits=Limits(wall_seconds=60.0, cpu_seconds=20.0, max_events=1500),
    )
    with TestClient(create_app(settings)) as client:
        run_id = start_run(client, source=LOOP)
        run = finished_run(client, run_id)
        assert run["status"] == "error"
        assert run["error"]["limit"] == "max_events" and run["error"]["line"] == 4
        assert (run["truncated"], run["event_limit"], run["n_events"]) == (True, 1500, 1500)
        trace = client.get(f"/api/runs/{run_id}/trace.json").json()
        assert len(trace["events"]) == 1500 and trace["meta"]["truncated"] is True
        # What the viewer loads after it: the story, the memory figures and the graph.
        for part in ("story", "memory", "graph.dot"):
            assert client.get(f"/api/runs/{run_id}/{part}").status_code == 200, part
        # A run that finished whole is not truncated.
        whole = finished_run(client, start_run(client, scenario="nested_checkpoint"))
        assert (whole["truncated"], whole["event_limit"]) == (False, None)
