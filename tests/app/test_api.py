"""The web app's API with FastAPI's TestClient: scenarios, runs (bundled and sandboxed), exports,
errors, persistence across app instances, pages, the schema. The event stream is in
``test_api_stream.py``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.runner import SCENARIOS_DIR, list_scenarios
from app.runs import clean_filename, docstring_title
from app.store import INTERRUPTED, Store
from engine.trace.export import annotate, to_dot
from engine.trace.glossary import glossary
from engine.trace.state import initial_state
from engine.trace.story import story_document
from tests.app.conftest import (
    finished_run,
    manager,
    page_config,
    read_stream,
    start_run,
    stream_items,
)


def without_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # t_ns is the one field that differs between two runs of a scenario (docs/trace.md).
    return [{k: v for k, v in e.items() if k != "t_ns"} for e in events]


# --- scenarios -----------------------------------------------------------------------------------


def test_scenarios_are_the_bundled_files_with_their_docstrings(client: TestClient) -> None:
    response = client.get("/api/scenarios")
    assert response.status_code == 200
    scenarios = response.json()
    assert [s["id"] for s in scenarios] == sorted(p.stem for p in SCENARIOS_DIR.glob("*.py"))
    nested = next(s for s in scenarios if s["id"] == "nested_checkpoint")
    assert nested["title"] == "Nested checkpoints"
    assert nested["description"]
    assert set(nested) == {"id", "title", "description"}


# --- a bundled run -------------------------------------------------------------------------------


def test_a_bundled_run_completes_with_its_status(client: TestClient, nested_direct: dict[str, Any]) -> None:
    response = client.post("/api/runs", json={"scenario": "nested_checkpoint"})
    assert response.status_code == 201
    created = response.json()
    run_id = created["id"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{11}", run_id)
    assert created["url"] == f"/runs/{run_id}"
    assert created["status"] in ("queued", "running", "done")
    assert response.headers["location"] == f"/api/runs/{run_id}"

    run = finished_run(client, run_id)
    assert run["status"] == "done"
    assert run["error"] is None
    assert run["scenario"] == "nested_checkpoint"
    assert run["title"] == "Nested checkpoints"
    assert run["filename"] == "scenarios/nested_checkpoint.py"
    assert run["source"] == (SCENARIOS_DIR / "nested_checkpoint.py").read_text()
    assert run["n_events"] == run["progress"] == len(nested_direct["events"])
    assert run["initial_state"] == initial_state()
    assert run["stdout"].startswith("x.grad: tensor(")
    assert run["created_at"] <= run["started_at"] <= run["finished_at"]


def test_trace_json_is_the_run_trace(client: TestClient, nested: str, nested_direct: dict[str, Any]) -> None:
    response = client.get(f"/api/runs/{nested}/trace.json")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    doc = response.json()
    assert doc["schema"] == "autograd-lens/trace" and doc["version"] == 1
    assert doc["sources"] == nested_direct["sources"]
    assert doc["meta"] == nested_direct["meta"]
    assert without_time(doc["events"]) == without_time(nested_direct["events"])
    assert "derived" not in doc

    derived = client.get(f"/api/runs/{nested}/trace.json?derived=true").json()["derived"]
    assert json.loads(json.dumps(annotate(doc["events"]))) == derived


def test_graph_dot_and_chrome_exports(client: TestClient, nested: str) -> None:
    trace = client.get(f"/api/runs/{nested}/trace.json").json()
    dot = client.get(f"/api/runs/{nested}/graph.dot")
    assert dot.status_code == 200
    assert dot.headers["content-type"].startswith("text/vnd.graphviz")
    assert dot.text == to_dot(trace).source  # the document: its meta.modules fold module instances
    assert "id=f0" in dot.text  # frame 0's cluster, which the viewer restyles by id

    chrome = client.get(f"/api/runs/{nested}/trace.chrome.json?clock=seq").json()
    slices = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
    assert slices and all(e["ts"] == int(e["ts"]) for e in slices)
    assert client.get(f"/api/runs/{nested}/trace.chrome.json?clock=wall").status_code == 422


def test_the_graph_of_a_model_folds_its_repeated_module_instances(client: TestClient) -> None:
    # Note [Folded blocks]: mlp_memory_none's blocks.0-2 are three alike instances of one module
    # outside any checkpoint; only the trace's meta.modules names them, so the server must draw
    # the graph from the document, not from its events alone.
    run_id = start_run(client, scenario="mlp_memory_none")
    assert finished_run(client, run_id)["status"] == "done"
    trace = client.get(f"/api/runs/{run_id}/trace.json").json()
    dot = client.get(f"/api/runs/{run_id}/graph.dot").text
    assert dot == to_dot(trace).source
    assert dot.count("subgraph cluster_m") == 3 and dot.count("fold=g") >= 3


def test_the_story_of_a_finished_run(client: TestClient, nested: str) -> None:
    events = client.get(f"/api/runs/{nested}/trace.json").json()["events"]
    response = client.get(f"/api/runs/{nested}/story")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    story = response.json()
    assert story == json.loads(json.dumps(story_document(events)))
    assert story["n_events"] == len(events)
    assert client.get(f"/api/runs/{nested}/story").json() == story  # the second answer is the cached one
    # Note [Documents ready at done]: it was stored with the run, not derived when asked for.
    stored = manager(client).store.document_json(nested, "story")
    assert stored is not None and json.loads(stored) == story
    assert client.get("/api/runs/doesnotexist/story").status_code == 404


def test_the_glossary_and_the_run_page_carry_the_terms(client: TestClient, nested: str) -> None:
    terms = client.get("/api/glossary").json()
    assert [t["id"] for t in terms] == [t["id"] for t in glossary()]
    page = client.get(f"/runs/{nested}").text
    assert '"glossary":' in page and "_CheckpointFrame (a frame)" in page


# --- concurrency ---------------------------------------------------------------------------------

UPLOAD = '''"""Upload {name}"""
import engine as torch
from engine.utils.checkpoint import checkpoint

x = torch.ones({n}, requires_grad=True)
y = checkpoint(lambda t: t.sin() * {n}, x, use_reentrant=False)
y.sum().backward()
print("this is run {name}")
'''


def test_concurrent_runs_do_not_mix(client: TestClient) -> None:
    bodies = {
        "nested": {"scenario": "nested_checkpoint"},
        "single": {"scenario": "single_checkpoint"},
        "a": {"source": UPLOAD.format(name="a", n=2), "filename": "a.py"},
        "b": {"source": UPLOAD.format(name="b", n=3), "filename": "b.py"},
    }
    ids = {name: start_run(client, **body) for name, body in bodies.items()}  # all before any wait
    runs = {name: finished_run(client, run_id) for name, run_id in ids.items()}
    assert {name: r["status"] for name, r in runs.items()} == dict.fromkeys(bodies, "done")
    for name, run_id in ids.items():
        doc = client.get(f"/api/runs/{run_id}/trace.json").json()
        filename = runs[name]["filename"]
        assert list(doc["sources"]) == [filename]
        assert {e["src"]["file"] for e in doc["events"] if e["src"]} == {filename}
        assert [i["event"] for i in stream_items(read_stream(client, run_id))] == doc["events"]
        if name in ("a", "b"):
            labels = [e["label"] for e in doc["events"] if e["kind"] == "mark"]
            assert labels == [f"this is run {name}"]
            assert runs[name]["title"] == f"Upload {name}"
            x = next(e for e in doc["events"] if e["kind"] == "tensor_new" and e["name"] == "x")
            assert x["shape"] == [2 if name == "a" else 3]


# --- uploaded scenarios that fail ----------------------------------------------------------------


def test_an_uploaded_scenario_that_raises_reports_its_line(client: TestClient) -> None:
    source = (
        "import engine as torch\nx = torch.ones(2, requires_grad=True)\ny = x * 2\nraise ValueError('boom')\n"
    )
    run_id = start_run(client, source=source, filename="dir/../broken.py")
    run = finished_run(client, run_id)
    assert run["status"] == "error"
    assert run["filename"] == "broken.py"
    assert run["error"] == {
        "type": "ValueError",
        "message": "boom",
        "file": "broken.py",
        "line": 4,
        "limit": None,
    }
    messages = read_stream(client, run_id)
    items = stream_items(messages)
    assert items[-1]["event"]["kind"] == "error"  # the trace up to the error is there to step through
    assert items[-1]["event"]["src"] == {"file": "broken.py", "line": 4}
    assert messages[-1].data == {"status": "error", "error": run["error"], "n_events": len(items)}


@pytest.mark.parametrize(
    ("source", "kind", "line"),
    [
        ("import engine\n\nx = (1,\n", "SyntaxError", 3),
        ("import engine\nimport os\n", "ImportError", 2),  # the sandbox allows engine and math only
    ],
)
def test_an_uploaded_scenario_that_cannot_run_reports_its_line(
    client: TestClient, source: str, kind: str, line: int
) -> None:
    run = finished_run(client, start_run(client, source=source))
    assert run["status"] == "error"
    assert (run["error"]["type"], run["error"]["file"], run["error"]["line"]) == (kind, "scenario.py", line)


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/doesnotexist",
        "/api/runs/doesnotexist/events",
        "/api/runs/doesnotexist/trace.json",
        "/api/runs/doesnotexist/trace.chrome.json",
        "/api/runs/doesnotexist/graph.dot",
        "/api/runs/bad%20id!",
        "/api/runs/..%2F..%2Fetc",
        "/runs/doesnotexist",
    ],
)
def test_unknown_runs_are_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    detail = response.json()["detail"]
    # An encoded slash splits the path: no route matches at all.
    assert "no run with id" in detail or (detail == "Not Found" and "%2F" in path)


def test_unknown_routes_and_methods_answer_json(client: TestClient) -> None:
    assert client.get("/api/nothing").json() == {"detail": "Not Found"}
    assert client.get("/static/no/such/file.js").status_code == 404
    response = client.delete("/api/scenarios")
    assert response.status_code == 405 and response.json() == {"detail": "Method Not Allowed"}


@pytest.mark.parametrize("scenario", ["no_such_scenario", "../app/main", "nested_checkpoint.py", "_private"])
def test_unknown_scenarios_are_404(client: TestClient, scenario: str) -> None:
    response = client.post("/api/runs", json={"scenario": scenario})
    assert response.status_code == 404
    assert "no bundled scenario" in response.json()["detail"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "exactly one of"),
        ({"scenario": "nested_checkpoint", "source": "x = 1"}, "exactly one of"),
        ({"scenario": "nested_checkpoint", "filename": "a.py"}, '"filename" goes with "source"'),
        ({"source": 42}, "body.source"),
        ({"source": "x = 1", "extra": True}, "body.extra"),
        ({"source": "x = '\ud800'"}, "lone surrogate"),
    ],
)
def test_malformed_bodies_are_422(client: TestClient, body: dict[str, Any], fragment: str) -> None:
    response = client.post(
        "/api/runs", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    payload = response.json()
    assert fragment in payload["detail"]
    assert payload["errors"] and all(set(e) == {"type", "loc", "msg"} for e in payload["errors"])


def test_invalid_json_is_422(client: TestClient) -> None:
    response = client.post("/api/runs", content=b'{"source": ', headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert "JSON" in response.json()["detail"]


def test_oversized_uploads_are_413(client: TestClient, settings: Settings) -> None:
    text = "#" * (settings.max_upload_bytes + 1)
    response = client.post("/api/runs", json={"source": text})
    assert response.status_code == 413
    assert f"the limit is {settings.max_upload_bytes} bytes" in response.json()["detail"]

    huge = b'{"source": "' + b"x" * settings.max_body_bytes + b'"}'
    response = client.post("/api/runs", content=huge, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "request body is larger" in response.json()["detail"]

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted while it is read
        yield b'{"source": "'
        for _ in range(settings.max_body_bytes // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    response = client.post("/api/runs", content=chunked(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert client.get("/api/scenarios").status_code == 200  # and the server carries on


def test_a_full_queue_answers_503(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path, max_pending=1))
    with TestClient(app) as client:
        runs = manager(client)
        with runs.in_process:
            # fresh: a reused bundled run would answer 200, and would not count (test_reuse.py)
            first = start_run(client, scenario="single_checkpoint", fresh=True)
            response = client.post("/api/runs", json={"scenario": "single_checkpoint", "fresh": True})
            assert response.status_code == 503
            assert response.headers["retry-after"] == "5"
            assert "try again" in response.json()["detail"]
        assert finished_run(client, first)["status"] == "done"
        assert finished_run(client, start_run(client, scenario="single_checkpoint"))["status"] == "done"


# --- persistence ---------------------------------------------------------------------------------


def test_runs_survive_a_restart(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        run_id = start_run(client, scenario="early_stop_on")
        before = finished_run(client, run_id)
        trace_before = client.get(f"/api/runs/{run_id}/trace.json").text
        dot_before = client.get(f"/api/runs/{run_id}/graph.dot").text
    with TestClient(create_app(settings)) as client:  # a new server on the same database
        assert client.get(f"/api/runs/{run_id}").json() == before
        assert client.get(f"/api/runs/{run_id}/trace.json").text == trace_before
        assert client.get(f"/api/runs/{run_id}/graph.dot").text == dot_before
        items = stream_items(read_stream(client, run_id))
        assert [i["event"] for i in items] == json.loads(trace_before)["events"]


def test_runs_a_restart_interrupted_end_as_errors(settings: Settings) -> None:
    store = Store(settings.database)
    store.open()
    for run_id in ("queuedrun", "runningrun"):
        store.create_run(run_id, scenario=None, title="t", filename="t.py", source="", trusted=False)
    store.set_running("runningrun")
    event = {"seq": 0, "kind": "mark", "label": "before the crash", "src": None}
    store.append_batch("runningrun", 0, [{"event": event, "changes": [], "caption": "c"}])
    with TestClient(create_app(settings)) as client:
        for run_id in ("queuedrun", "runningrun"):
            run = client.get(f"/api/runs/{run_id}").json()
            assert run["status"] == "error"
            assert run["error"]["message"] == INTERRUPTED
        # The story of what was stored before the crash (a finished run, with an error).
        assert client.get("/api/runs/runningrun/story").json()["steps"][0]["kind"] == "mark"
        messages = read_stream(client, "runningrun")  # what was stored stays readable
        assert [i["event"] for i in stream_items(messages)] == [event]
        assert messages[-1].data["status"] == "error"
        assert client.get("/api/runs/runningrun/trace.json").json()["events"] == [event]


# --- pages ---------------------------------------------------------------------------------------


def test_the_home_page_lists_the_scenarios(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    config = page_config(response.text)
    assert config["page"] == "index"
    assert [s["id"] for s in config["scenarios"]] == [s.id for s in list_scenarios()]


def test_the_run_page_carries_its_config_safely(client: TestClient) -> None:
    hostile = '"""</script><script>alert(1)</script>"""\nimport engine\n'
    run_id = start_run(client, source=hostile)
    response = client.get(f"/runs/{run_id}?step=7")
    assert response.status_code == 200
    assert "<script>alert(1)" not in response.text
    config = page_config(response.text)
    assert config["run_id"] == run_id and config["step"] == 7
    assert config["title"] == "</script><script>alert(1)</script>"
    assert config["urls"]["events"] == f"/api/runs/{run_id}/events"
    assert page_config(client.get(f"/runs/{run_id}?step=abc").text)["step"] is None
    finished_run(client, run_id)


# --- the schema, the settings, the module --------------------------------------------------------


def test_the_openapi_schema_describes_the_api(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/api/scenarios",
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/events",
        "/api/runs/{run_id}/trace.json",
        "/api/runs/{run_id}/trace.chrome.json",
        "/api/runs/{run_id}/graph.dot",
    ):
        assert path in paths, path
    post = paths["/api/runs"]["post"]
    assert post["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/RunCreated")
    assert post["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ValidationErrorResponse"
    )
    assert set(post["responses"]) >= {"201", "404", "413", "422", "503"}
    run = schema["components"]["schemas"]["Run"]
    assert set(run["required"]) >= {"id", "status", "scenario", "title", "filename", "source", "error"}
    assert run["properties"]["status"]["enum"] == ["queued", "running", "done", "error"]
    assert "text/event-stream" in paths["/api/runs/{run_id}/events"]["get"]["responses"]["200"]["content"]


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    env = {
        "AUTOGRAD_LENS_DATA_DIR": str(tmp_path),
        "AUTOGRAD_LENS_PORT": "9001",
        "AUTOGRAD_LENS_LIMIT_CPU_SECONDS": "2.5",
        "AUTOGRAD_LENS_LIMIT_MAX_EVENTS": "1000",
        "AUTOGRAD_LENS_MAX_UPLOAD_BYTES": "",  # empty: the default
    }
    settings = Settings.from_env(env)
    assert settings.database == tmp_path / "runs.sqlite3"
    assert settings.port == 9001
    assert (settings.limits.cpu_seconds, settings.limits.max_events) == (2.5, 1000)
    assert settings.max_upload_bytes == 1_000_000
    assert Settings.from_env({"AUTOGRAD_LENS_DB": "/x/y.db"}).database == Path("/x/y.db")
    with pytest.raises(ValueError, match="AUTOGRAD_LENS_PORT='http'"):
        Settings.from_env({"AUTOGRAD_LENS_PORT": "http"})
    with pytest.raises(ValueError, match="workers"):
        Settings.from_env({"AUTOGRAD_LENS_WORKERS": "0"})


def test_importing_the_app_module_creates_no_data_dir(tmp_path: Path) -> None:
    code = "import app.main; a = app.main.app; print(type(a).__name__)"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "FastAPI"
    assert list(tmp_path.iterdir()) == []


def test_uploaded_names_and_titles() -> None:
    assert clean_filename("../../etc/passwd") == "passwd.py"
    assert clean_filename("C:\\Users\\me\\demo.py") == "demo.py"
    assert clean_filename("my <scenario>.py") == "my _scenario_.py"
    assert clean_filename(None) == clean_filename("..") == "scenario.py"
    assert docstring_title('# c\n"""  First line\n\n more"""\nx = 1') == "First line"
    assert docstring_title("x = 1\n") is None
    assert docstring_title('"""a""" + x\n') is None
    assert docstring_title('f"""{x}"""\n') is None
    assert docstring_title('"""unterminated\n') is None
