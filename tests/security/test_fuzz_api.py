"""API fuzzing: every operation of ``/openapi.json`` driven by schemathesis (in-process, over
ASGI), then targeted hostile requests: path traversal in every path and file parameter, and trace
documents that are malformed, huge or deeply nested.

What must hold for every response: no status of 500 or more, and every error a JSON object with
a ``"detail"``. The budget is bounded and the examples derandomized (the same cases every run).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from app.config import Settings
from app.main import create_app
from app.sandbox import Limits

EXAMPLES = 25  # per operation

# Runs the fuzzer starts queue behind one worker; far more may wait than it makes, so it never
# meets the (documented) 503 of a full queue. The queue is cancelled when the app stops.
_DATA = Path(tempfile.mkdtemp(prefix="autograd-lens-fuzz-"))
SETTINGS = Settings(
    data_dir=_DATA / "data",
    workers=1,
    max_pending=100_000,
    max_upload_bytes=20_000,
    max_trace_bytes=2_000_000,
    limits=Limits(cpu_seconds=1.0, wall_seconds=10.0, max_events=2_000),
)
APP = create_app(SETTINGS)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(APP) as c:  # the lifespan: opens the database, starts the run manager
        yield c
    shutil.rmtree(_DATA, ignore_errors=True)


def assert_answer(response: Any, what: str) -> None:
    """No 5xx; an error is a JSON object with a "detail"."""
    assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:500]}"
    if response.status_code >= 400:
        content_type = response.headers.get("content-type")
        if isinstance(content_type, list):  # schemathesis' responses: every value of a header
            content_type = content_type[0]
        assert content_type.startswith("application/json"), what
        body = response.json()
        assert isinstance(body, dict) and isinstance(body.get("detail"), str), f"{what}: {body}"


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_without_5xx(case: Any, client: TestClient) -> None:
    response = case.call()
    assert_answer(response, f"{case.method} {case.formatted_path} {case.query} {str(case.body)[:200]}")


# --- path traversal --------------------------------------------------------------------------------

TRAVERSALS = [
    "../../../../etc/passwd",
    "..%2F..%2F..%2Fetc%2Fpasswd",
    "%2e%2e%2f%2e%2e%2fapp%2fmain.py",
    "....//....//etc/passwd",
    "..\\..\\app\\main.py",
    "%00",
    "..%00",
    "/etc/passwd",
    "%252e%252e%252f",
    "a" * 5000,
]


@dataclass
class RawResponse:
    status_code: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def raw_get(path: str) -> RawResponse:
    """GET ``path`` exactly as written, straight into the app over ASGI: an HTTP client would
    resolve its ``..`` segments first, and only a hostile client sends them on."""
    raw = path.encode("latin-1")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": unquote(path), "raw_path": raw, "root_path": "", "query_string": b"",
        "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(APP(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return RawResponse(start["status"], headers, body.decode("utf-8", "replace"))


def _run_paths() -> list[str]:
    return sorted(p for p in APP.openapi()["paths"] if "{" in p)


def test_every_path_parameter_refuses_traversal(client: TestClient) -> None:
    paths = _run_paths()
    assert paths, "no path has a parameter"
    for template in paths:
        name = template[template.index("{") : template.index("}") + 1]
        for payload in TRAVERSALS:
            url = template.replace(name, payload)
            response = raw_get(url)
            assert response.status_code in (404, 405, 422), (url, response.status_code)
            assert "root:" not in response.text and "def create_app" not in response.text
            assert_answer(response, url)


@pytest.mark.parametrize(
    "url",
    [
        "/static/../app/main.py",
        "/static/%2e%2e/app/main.py",
        "/static/..%2fapp%2fmain.py",
        "/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/static/....//app/main.py",
        "/static//etc/passwd",
        "/static/js/%00.js",
    ],
)
def test_static_files_stay_in_static(client: TestClient, url: str) -> None:
    response = raw_get(url)
    assert response.status_code in (400, 404), (url, response.status_code)
    assert "def create_app" not in response.text and "root:" not in response.text


@pytest.mark.parametrize(
    "scenario", ["../app/main", "../../etc/passwd", "/etc/passwd", "nested_checkpoint/..", "a\x00b"]
)
def test_a_scenario_id_never_names_another_file(client: TestClient, scenario: str) -> None:
    response = client.post("/api/runs", json={"scenario": scenario})
    assert response.status_code in (404, 422), response.text
    assert_answer(response, scenario)


@pytest.mark.parametrize(
    "filename", ["../../app/main.py", "/etc/passwd", "..\\..\\x.py", "a\x00.py", "<scenario>"]
)
def test_an_uploaded_file_name_is_only_a_label(client: TestClient, filename: str) -> None:
    response = client.post("/api/runs", json={"source": "x = 1\n", "filename": filename})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    client.app.state.runs.wait(run_id, timeout=60)  # type: ignore[attr-defined]
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "done", run
    assert "/" not in run["filename"] and "\\" not in run["filename"] and "\x00" not in run["filename"]
    trace = client.get(f"/api/runs/{run_id}/trace.json").json()
    assert list(trace["sources"].values()) == ["x = 1\n"]


# --- trace documents: malformed, huge, deeply nested -----------------------------------------------


def _valid_trace(client: TestClient) -> dict[str, Any]:
    response = client.post("/api/runs", json={"source": "import engine as torch\nx = torch.ones(2).sin()\n"})
    run_id = response.json()["id"]
    client.app.state.runs.wait(run_id, timeout=60)  # type: ignore[attr-defined]
    doc: dict[str, Any] = client.get(f"/api/runs/{run_id}/trace.json").json()
    return doc


BAD_BODIES: dict[str, bytes] = {
    "empty": b"",
    "not_json": b"{not json",
    "invalid_utf8": b'{"schema": "\xff\xfe"}',
    "null": b"null",
    "array": b"[]",
    "number": b"1e999999",
    "nan": b'{"events": NaN}',
    "string": b'"trace"',
    "nested_arrays": b"[" * 100_000 + b"]" * 100_000,
    "nested_objects": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "lone_surrogate": b'{"schema": "\\ud800"}',
    "huge_int": b'{"version": ' + b"9" * 100_000 + b"}",
    "bom": b"\xef\xbb\xbf{}",
}


@pytest.mark.parametrize("name", BAD_BODIES)
def test_malformed_trace_documents_are_refused(client: TestClient, name: str) -> None:
    response = client.post(
        "/api/traces", content=BAD_BODIES[name], headers={"content-type": "application/json"}
    )
    assert response.status_code in (413, 422), (name, response.status_code, response.text[:300])
    assert_answer(response, name)


def test_a_trace_larger_than_the_limit_is_413(client: TestClient) -> None:
    body = b'{"pad": "' + b"x" * (SETTINGS.max_trace_bytes + 1) + b'"}'
    response = client.post("/api/traces", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert_answer(response, "huge")


DEEP = "<deep>"  # stands for a value nested 20,000 deep, which json.dumps cannot write


def _mutations(doc: dict[str, Any]) -> dict[str, Any]:
    events = doc["events"]
    deep = DEEP
    return {
        "events_not_a_list": {**doc, "events": {"0": events[0]}},
        "event_not_an_object": {**doc, "events": [1, *events[1:]]},
        "seq_string": {**doc, "events": [{**events[0], "seq": "zero"}, *events[1:]]},
        "kind_unknown": {
            **doc,
            "events": [{**events[0], "kind": "<img src=x onerror=alert(1)>"}, *events[1:]],
        },
        "deep_field": {**doc, "events": [{**events[0], "extra": deep}, *events[1:]]},
        "meta_deep": {**doc, "meta": deep},
        "sources_not_strings": {**doc, "sources": {"a.py": 1}},
        "many_events": {**doc, "events": events * 3000},
        "schema_wrong": {**doc, "schema": "something-else"},
        "version_huge": {**doc, "version": 10**30},
        "surrogate_label": {**doc, "meta": {**doc["meta"], "title": "\ud800"}},
    }


def test_mutated_trace_documents_never_fail_the_server(client: TestClient) -> None:
    doc = _valid_trace(client)
    ok = client.post("/api/traces", json=doc)
    assert ok.status_code == 201, ok.text  # the control: the unmutated document is accepted
    for name, bad in _mutations(doc).items():
        nested = '{"a":' * 20_000 + '"x"' + "}" * 20_000
        body = json.dumps(bad).replace(json.dumps(DEEP), nested).encode()
        response = client.post("/api/traces", content=body, headers={"content-type": "application/json"})
        assert_answer(response, name)
        if response.status_code == 201:  # accepted as a trace: its pages and exports still work
            run_id = response.json()["id"]
            for path in ("", "/trace.json", "/story", "/memory"):
                assert_answer(client.get(f"/api/runs/{run_id}{path}"), f"{name} {path}")
            assert_answer(client.get(f"/runs/{run_id}"), f"{name} page")


def test_a_run_that_prints_a_lone_surrogate_is_served(client: TestClient) -> None:
    response = client.post("/api/runs", json={"source": "print('\\udcff x')\nprint('\\x00')\n"})
    run_id = response.json()["id"]
    client.app.state.runs.wait(run_id, timeout=60)  # type: ignore[attr-defined]
    for path in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/trace.json", f"/api/runs/{run_id}/story",
                 f"/api/runs/{run_id}/events", f"/runs/{run_id}", f"/api/runs/{run_id}/export.html"):  # fmt: skip
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
    assert client.get(f"/api/runs/{run_id}").json()["status"] in ("done", "error")


def test_unknown_content_and_methods_are_json_errors(client: TestClient) -> None:
    for response in (
        client.post("/api/runs", content=b"\xff\xfe", headers={"content-type": "application/json"}),
        client.post("/api/runs", content=b"x=1", headers={"content-type": "text/plain"}),
        client.post("/api/runs", content=b"{}", headers={"content-length": "abc"}),
        client.delete("/api/scenarios"),
        client.get("/api/no-such-thing"),
    ):
        assert_answer(response, str(response.request.url))
