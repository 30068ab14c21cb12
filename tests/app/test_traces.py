"""``POST /api/traces``: a trace file opened in the viewer (Note [Opening a trace file] in
app/imported.py). Documents come from real runs: the engine's, torch's (the user's-own-script
case, docs/examples/torch_train_step.py), and broken copies of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app import imported
from app.config import Settings
from app.main import create_app
from app.runner import PROJECT_ROOT, SCENARIOS_DIR, run_scenario
from engine.trace.export import to_chrome, to_json
from tests.app.conftest import finished_run, read_stream, start_run, stream_items

EXAMPLE = PROJECT_ROOT / "docs" / "examples" / "torch_train_step.py"


def _trace(name: str) -> dict[str, Any]:
    result = run_scenario(SCENARIOS_DIR / f"{name}.py", trusted=True)
    assert result.trace is not None
    return result.trace


def _post(client: TestClient, doc: Any) -> Any:
    body = doc if isinstance(doc, bytes) else to_json(doc).encode()
    return client.post("/api/traces", content=body, headers={"Content-Type": "application/json"})


def _import(client: TestClient, doc: dict[str, Any]) -> dict[str, Any]:
    response = _post(client, doc)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["url"] == f"/runs/{created['id']}"
    return finished_run(client, created["id"])


def test_an_imported_trace_is_a_run_like_any_other(client: TestClient) -> None:
    doc = _trace("nested_checkpoint")
    run = _import(client, doc)
    assert run["status"] == "done" and run["error"] is None
    assert run["scenario"] is None and run["imported"] is True
    assert run["title"] == "Nested checkpoints: Rules 1-6 of the seed"[: len(run["title"])]
    assert run["filename"] == "scenarios/nested_checkpoint.py"
    assert run["source"] == (SCENARIOS_DIR / "nested_checkpoint.py").read_text()
    assert run["backend"] == "engine" and run["n_events"] == len(doc["events"])
    # The same events, changes and captions as the run of the scenario itself.
    ran = finished_run(client, start_run(client, scenario="nested_checkpoint"))
    assert ran["imported"] is False
    imported = stream_items(read_stream(client, run["id"]))
    original = stream_items(read_stream(client, ran["id"]))
    assert [i["event"]["kind"] for i in imported] == [i["event"]["kind"] for i in original]
    assert [i["caption"] for i in imported] == [i["caption"] for i in original]
    # Exported again, it is the document that was imported.
    assert json.loads(client.get(f"/api/runs/{run['id']}/trace.json").text) == json.loads(to_json(doc))
    assert client.get(f"/api/runs/{run['id']}/graph.dot").status_code == 200


def test_a_failed_run_keeps_its_error_and_line(client: TestClient) -> None:
    ran = run_scenario(SCENARIOS_DIR / "determinism_error.py", trusted=True)
    assert ran.trace is not None and ran.error is not None
    run = _import(client, ran.trace)
    assert run["status"] == "error"
    assert run["error"]["type"] == "CheckpointError" == ran.error.type
    assert run["error"]["message"] == ran.error.message
    assert (run["error"]["file"], run["error"]["line"]) == ("scenarios/determinism_error.py", ran.error.line)


def test_printed_output_comes_from_marks(client: TestClient) -> None:
    run = _import(client, _trace("dropout_rng"))
    assert run["stdout"] == run_scenario(SCENARIOS_DIR / "dropout_rng.py", trusted=True).stdout


@pytest.mark.oracle
def test_a_users_pytorch_script_traced_on_torch_opens(client: TestClient, torch_oracle: Any) -> None:
    # What the README shows: trace your own script locally, open the file in the viewer.
    result = run_scenario(EXAMPLE, trusted=True, backend="torch")
    assert result.ok and result.trace is not None, result.error
    run = _import(client, result.trace)
    assert run["backend"] == "torch" and run["backend_label"] == "torch 2.8.0"
    assert run["filename"] == "docs/examples/torch_train_step.py"
    assert run["source"] == EXAMPLE.read_text()
    kinds = {i["event"]["kind"] for i in stream_items(read_stream(client, run["id"]))}
    assert {"pack", "unpack", "recompute_start", "holder_gc"} <= kinds
    # Diffable against an engine run; a trace carries no gradients, so only events compare.
    other = _import(client, _trace("single_checkpoint"))
    diff = client.get(f"/api/diff?a={other['id']}&b={run['id']}").json()
    assert diff["runs"]["b"]["backend_label"] == "torch 2.8.0"


def _broken(doc: dict[str, Any], kind: str, field: str, value: Any) -> tuple[dict[str, Any], int]:
    doc = copy.deepcopy(doc)
    i = next(i for i, e in enumerate(doc["events"]) if e["kind"] == kind)
    doc["events"][i][field] = value
    return doc, i


def test_bad_documents_are_refused_saying_where(client: TestClient) -> None:
    doc = _trace("single_checkpoint")

    def detail(body: Any) -> str:
        response = _post(client, body)
        assert response.status_code == 422, response.text
        text: str = response.json()["detail"]
        return text

    assert detail(b'{"schema": "autograd-lens/trace",\n "events": [1,]}') == (
        "the file is not JSON: line 2, column 15: Expecting value"
    )
    assert detail(b"{\xff}") == "the file is not UTF-8 text (byte 1 is not)"
    assert "Chrome trace" in detail(to_chrome(doc).encode())
    assert detail(b"[]") == "a trace document is a JSON object, not a array"
    broken, i = _broken(doc, "unpack", "holder", 999)
    assert (
        detail(broken)
        == f"event {i} (unpack): holder refers to holder 999, which no earlier event introduces"
    )
    broken, i = _broken(doc, "pack", "nbytes", "many")
    assert detail(broken) == f"event {i} (pack): nbytes: 'many' is not of type integer"
    # Nothing of a refused document is stored.
    assert client.get("/api/runs/none-such").status_code == 404


def test_events_the_reducer_cannot_replay_are_refused(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The schema and id checks leave nothing the reducer is known to trip on (ids shifted at
    # random all pass it); if it ever does, the upload is refused, not stored half-annotated.
    real = imported.step

    def step(state: Any, event: dict[str, Any]) -> Any:
        if event["seq"] == 5:
            raise KeyError(7)
        return real(state, event)

    monkeypatch.setattr(imported, "step", step)
    doc = _trace("single_checkpoint")
    response = _post(client, doc)
    assert response.status_code == 422, response.text
    kind = doc["events"][5]["kind"]
    assert response.json()["detail"] == f"event 5 ({kind}) contradicts the events before it: KeyError: 7"


def test_a_trace_larger_than_the_limit_is_refused(tmp_path: Path) -> None:
    doc = _trace("mlp_memory_nested")
    size = len(to_json(doc).encode())
    settings = Settings(data_dir=tmp_path / "data", max_trace_bytes=size - 1)
    with TestClient(create_app(settings)) as client:
        response = _post(client, doc)
        assert response.status_code == 413
        assert response.json()["detail"] == f"the request body is larger than {size - 1} bytes"
    # The trace limit is not the scenario-text limit: a trace far above that one is taken.
    settings = Settings(data_dir=tmp_path / "data2", max_upload_bytes=1000, max_trace_bytes=size)
    with TestClient(create_app(settings)) as client:
        assert size > settings.max_body_bytes
        assert _post(client, doc).status_code == 201


def test_old_runs_go_when_keep_runs_is_set(tmp_path: Path) -> None:
    # AUTOGRAD_LENS_KEEP_RUNS: an uploaded trace can be 100 MB; a server can keep the newest N.
    doc = _trace("single_checkpoint")
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", keep_runs=1))) as client:
        first = _import(client, doc)
        second = _import(client, doc)
        assert client.get(f"/api/runs/{first['id']}").status_code == 404
        assert client.get(f"/api/runs/{second['id']}").json()["status"] == "done"
