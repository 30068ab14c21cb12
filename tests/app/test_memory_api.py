"""``GET /api/runs/{id}/memory``: the memory report of a finished run (Note [Memory report] in
engine/trace/memory.py), which the viewer's memory timeline and saved-tensor ledger draw.

Expected values come from the run's own trace through ``memory_report``: the route must send what
the engine's report says, nothing more and nothing less.
"""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from engine.trace.memory import memory_report
from tests.app.conftest import manager, page_config


def test_the_memory_report_of_a_finished_run(client: TestClient, nested: str) -> None:
    trace = client.get(f"/api/runs/{nested}/trace.json").json()
    events = trace["events"]
    response = client.get(f"/api/runs/{nested}/memory")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    report = response.json()
    expected = memory_report(events, modules=trace["meta"].get("modules"))
    assert report == json.loads(json.dumps(expected))
    assert set(report) >= {"metrics", "peak", "ledger", "marks", "diagnosis"}  # what the viewer draws
    assert report["metrics"]["events"] == len(events)
    # The marks are the events of each kind, by seq.
    for kind, seqs in report["marks"].items():
        assert seqs == [e["seq"] for e in events if e["kind"] == kind]
    # One ledger entry per saved variable kept as a tensor and per holder.
    packs = sum(e["kind"] == "pack" for e in events)
    assert sum(x["kept"] == "holder" for x in report["ledger"]) == packs
    assert client.get(f"/api/runs/{nested}/memory").json() == report  # the second answer is the cached one
    # Note [Documents ready at done] in app/runs.py: stored as the run finished, not derived now.
    stored = manager(client).store.document_json(nested, "memory")
    assert stored is not None and json.loads(stored) == report


def test_an_unknown_run_has_no_memory_report(client: TestClient) -> None:
    assert client.get("/api/runs/doesnotexist/memory").status_code == 404
    assert client.get("/api/runs/no!/memory").status_code == 404  # not even a run id


def test_a_run_still_running_has_no_memory_report_yet(client: TestClient) -> None:
    store = manager(client).store
    store.create_run("stillrunning", scenario=None, title="t", filename="t.py", source="", trusted=False)
    store.set_running("stillrunning")
    event = {"seq": 0, "kind": "mark", "label": "so far", "src": None}
    store.append_batch("stillrunning", 0, [{"event": event, "changes": [], "caption": "c"}])
    response = client.get("/api/runs/stillrunning/memory")
    assert response.status_code == 409
    assert "finished" in response.json()["detail"]


def test_the_run_page_names_the_memory_url(client: TestClient, nested: str) -> None:
    config = page_config(client.get(f"/runs/{nested}").text)
    assert config["urls"]["memory"] == f"/api/runs/{nested}/memory"
    assert client.get(config["urls"]["memory"]).status_code == 200
