"""Backends in the web app: a run's ``backend`` (stored, migrated, shown), torch refused for
uploads and when missing, and ``GET /api/diff`` with its page."""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient

import app.runs
from app.config import Settings
from app.main import create_app
from app.runner import SCENARIOS_DIR, run_scenario
from app.store import SCHEMA_VERSION, Store
from engine.trace.export import to_json
from tests.app.conftest import finished_run, manager, page_config, start_run


@pytest.fixture(scope="module")
def single() -> dict[str, Any]:
    """single_checkpoint on the engine: its trace document and gradients."""
    result = run_scenario(SCENARIOS_DIR / "single_checkpoint.py", trusted=True)
    assert result.ok and result.trace is not None
    return {"trace": result.trace, "grads": result.extra["grads"]}


def stored_run(client: TestClient, run_id: str, trace: dict[str, Any], grads: dict[str, Any] | None) -> None:
    """A finished run written straight into the store, with the trace and gradients given."""
    store = manager(client).store
    store.create_run(run_id, scenario=None, title="T", filename="t.py", source="", trusted=True)
    store.finish(
        run_id, status="done", error=None, meta=trace["meta"], trace_json=to_json(trace), grads=grads
    )


# --- the backend of a run ------------------------------------------------------------------------


def test_a_run_is_on_the_engine_by_default(client: TestClient) -> None:
    run_id = start_run(client, scenario="single_checkpoint")
    run = finished_run(client, run_id)
    assert (run["status"], run["backend"], run["backend_label"]) == ("done", "engine", "engine")
    assert manager(client).store.grads(run_id) == {
        "x": pytest.approx(run_scenario_grads("single_checkpoint"))
    }


def run_scenario_grads(scenario: str) -> list[float]:
    result = run_scenario(SCENARIOS_DIR / f"{scenario}.py", trusted=True)
    grads: list[float] = result.extra["grads"]["x"]
    return grads


def test_a_bundled_scenario_runs_on_torch(client: TestClient, torch_oracle: ModuleType) -> None:
    run_id = start_run(client, scenario="single_checkpoint", backend="torch")
    run = finished_run(client, run_id)
    assert run["status"] == "done", run["error"]
    assert run["backend"] == "torch"
    assert run["backend_label"] == f"torch {torch_oracle.__version__.split('+')[0]}"
    trace = client.get(f"/api/runs/{run_id}/trace.json").json()
    assert any(e["kind"] == "pack" for e in trace["events"])


def test_torch_is_refused_for_uploaded_text(client: TestClient) -> None:
    response = client.post("/api/runs", json={"source": "import engine\n", "backend": "torch"})
    assert response.status_code == 422
    assert "sandbox" in response.json()["detail"] and "bundled scenarios only" in response.json()["detail"]
    assert manager(client).store.run_ids() == []


def test_unknown_backends_are_422(client: TestClient) -> None:
    response = client.post("/api/runs", json={"scenario": "single_checkpoint", "backend": "jax"})
    assert response.status_code == 422
    assert "backend" in response.json()["detail"]


def test_torch_missing_is_503(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.runs, "torch_available", lambda: False)
    response = client.post("/api/runs", json={"scenario": "single_checkpoint", "backend": "torch"})
    assert response.status_code == 503
    assert response.json()["detail"] == (
        "torch is not installed on this server, so only the engine backend can run"
    )
    assert manager(client).store.run_ids() == []
    index = page_config(client.get("/").text)
    assert index["backends"] == {"engine": "engine"}  # the page disables torch and diff


def test_the_home_page_offers_the_backends(client: TestClient, torch_oracle: ModuleType) -> None:
    config = page_config(client.get("/").text)
    assert config["backends"] == {
        "engine": "engine",
        "torch": f"torch {torch_oracle.__version__.split('+')[0]}",
    }


# Version 1's table, before backends: what a database made by the previous server holds.
V1_RUNS = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY, status TEXT NOT NULL, scenario TEXT, title TEXT NOT NULL,
    filename TEXT NOT NULL, source TEXT NOT NULL, trusted INTEGER NOT NULL, error TEXT,
    n_events INTEGER NOT NULL DEFAULT 0, progress INTEGER NOT NULL DEFAULT 0,
    stdout TEXT NOT NULL DEFAULT '', meta TEXT, sources TEXT, dot TEXT, trace BLOB,
    created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT
);
INSERT INTO runs (id, status, title, filename, source, trusted, created_at, finished_at)
    VALUES ('oldrun', 'done', 'Old', 'old.py', '', 0, '2026-01-01T00:00:00.000+00:00', '2026-01-01');
PRAGMA user_version = 1;
"""


def test_a_version_1_database_is_migrated(settings: Settings) -> None:
    settings.database.parent.mkdir(parents=True)
    with sqlite3.connect(settings.database) as conn:
        conn.executescript(V1_RUNS)
    with TestClient(create_app(settings)) as client:
        run = client.get("/api/runs/oldrun").json()
        assert (run["backend"], run["backend_label"], run["title"]) == ("engine", "engine", "Old")
        assert run["imported"] is False
        run_id = start_run(client, scenario="early_stop_on")  # new runs work in the old file
        assert finished_run(client, run_id)["backend"] == "engine"
    with sqlite3.connect(settings.database) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    Store(settings.database).open()  # opening again changes nothing


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="schema version 6, this server knows 5"):
        Store(path).open()


# --- the diff ------------------------------------------------------------------------------------


def test_the_diff_of_two_engine_runs(client: TestClient) -> None:
    a = start_run(client, scenario="single_checkpoint")
    b = start_run(client, scenario="single_checkpoint")
    finished_run(client, a)
    finished_run(client, b)
    response = client.get(f"/api/diff?a={a}&b={b}")
    assert response.status_code == 200
    diff = response.json()
    assert diff["checkpoint_equal"] and diff["equal"] and diff["first_divergence"] is None
    assert (diff["a_label"], diff["b_label"]) == (f"engine {a}", f"engine {b}")
    assert diff["grads"] == {
        "equal": True,
        "problems": [],
        "verdict": "gradients equal (1 tensor)",
        "rtol": 1e-5,
        "atol": 1e-6,
    }
    assert diff["counts"]["checkpoint_a"] == diff["counts"]["same"] == 24
    assert diff["runs"]["a"] == {
        "id": a,
        "backend": "engine",
        "backend_label": "engine",
        "title": "A single checkpoint",
        "status": "done",
        "n_events": diff["counts"]["events_a"],
        "url": f"/runs/{a}",
    }
    assert all(r["status"] == "same" for r in diff["rows"])
    row = next(r for r in diff["rows"] if r["kind"] == "pack")
    assert row["a_text"] == row["b_text"] == "f#0[0] [3] ← SinBackward0.self"


def test_the_diff_finds_a_divergence_and_different_grads(client: TestClient, single: dict[str, Any]) -> None:
    changed = copy.deepcopy(single["trace"])
    i = [n for n, e in enumerate(changed["events"]) if e["kind"] == "pack"][1]
    changed["events"][i]["shape"] = [4]
    stored_run(client, "runA", single["trace"], single["grads"])
    stored_run(client, "runB", changed, {"x": [g + 0.5 for g in single["grads"]["x"]]})
    diff = client.get("/api/diff?a=runA&b=runB").json()
    assert not diff["checkpoint_equal"] and not diff["equal"]
    row = diff["rows"][diff["first_divergence"]]
    assert (row["a"], row["b"], row["status"], row["fields"]) == (i, i, "differ", ["shape"])
    assert diff["verdict"].startswith(f"checkpoint events diverge at row {diff['first_divergence']}: pack")
    assert diff["grads"]["equal"] is False
    assert diff["grads"]["problems"] == ["x: max abs difference 0.5 (rtol=1e-05, atol=1e-06)"]


def test_a_run_without_gradients_is_not_called_equal(client: TestClient, single: dict[str, Any]) -> None:
    stored_run(client, "runA", single["trace"], single["grads"])
    stored_run(client, "runB", single["trace"], None)
    diff = client.get("/api/diff?a=runA&b=runB").json()
    assert diff["checkpoint_equal"] and not diff["equal"]
    assert diff["grads"]["problems"] == ["no gradients reported by engine runB"]


def test_the_diff_of_the_engine_and_torch(client: TestClient, torch_oracle: ModuleType) -> None:
    a = start_run(client, scenario="single_checkpoint", backend="engine")
    b = start_run(client, scenario="single_checkpoint", backend="torch")
    finished_run(client, a)
    finished_run(client, b)
    diff = client.get(f"/api/diff?a={a}&b={b}").json()
    assert (diff["a_label"], diff["b_label"]) == ("engine", "torch")
    assert diff["checkpoint_equal"], diff["verdict"]
    assert diff["grads"]["equal"], diff["grads"]
    assert diff["runs"]["b"]["backend_label"].startswith("torch 2.8")


def test_the_diff_needs_two_finished_known_runs(client: TestClient, single: dict[str, Any]) -> None:
    stored_run(client, "runA", single["trace"], single["grads"])
    manager(client).store.create_run(
        "waiting", scenario=None, title="t", filename="t.py", source="", trusted=False
    )
    response = client.get("/api/diff?a=runA&b=waiting")
    assert response.status_code == 409
    assert response.json()["detail"] == "run waiting is queued: a diff needs both runs finished"
    for query in ("a=runA&b=nosuchrun", "a=no/such&b=runA"):
        response = client.get(f"/api/diff?{query}")
        assert response.status_code == 404
        assert "no run with id" in response.json()["detail"]
    assert client.get("/api/diff?a=runA").status_code == 422


def test_the_diff_page(client: TestClient, single: dict[str, Any]) -> None:
    stored_run(client, "runA", single["trace"], single["grads"])
    stored_run(client, "runB", single["trace"], single["grads"])
    response = client.get("/diff?a=runA&b=runB")
    assert response.status_code == 200
    config = page_config(response.text)
    assert config["page"] == "diff" and (config["a"], config["b"]) == ("runA", "runB")
    assert config["urls"]["diff"] == "/api/diff?a=runA&b=runB"
    assert '<script type="module" src="/static/js/diff.js">' in response.text
    assert client.get("/diff?a=runA&b=nosuchrun").status_code == 404
    assert client.get("/static/js/views/diff_rows.js").status_code == 200


def test_the_openapi_schema_describes_backends_and_the_diff(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    assert components["Run"]["properties"]["backend"]["enum"] == ["engine", "torch"]
    assert {"backend", "backend_label"} <= set(components["Run"]["required"])
    assert components["RunCreate"]["properties"]["backend"]["default"] == "engine"
    get = schema["paths"]["/api/diff"]["get"]
    assert get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/TraceDiffResponse"
    )
    assert set(get["responses"]) >= {"200", "404", "409", "422"}
    assert set(components["DiffRow"]["properties"]) == {
        "a",
        "b",
        "status",
        "checkpoint",
        "kind",
        "fields",
        "reordered",
        "a_text",
        "b_text",
    }
