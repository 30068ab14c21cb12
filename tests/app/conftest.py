"""Fixtures of the web app's tests: settings on a temporary database, the app, a TestClient, the
bundled nested_checkpoint scenario run directly and through the API, and helpers to wait for a run
and to read its event stream."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.runner import SCENARIOS_DIR, run_scenario
from app.runs import RunManager
from app.sandbox import Limits
from tests._sse import Message, SseReader

# Small batches, so even a small scenario streams as several messages and resuming can land
# inside one; generous wall time, since tests share the machine's two cores.
BATCH = 100
MAX_MESSAGES = 1000


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        batch_events=BATCH,
        max_upload_bytes=20_000,
        limits=Limits(wall_seconds=60.0, cpu_seconds=20.0),
    )


@pytest.fixture
def app(settings: Settings) -> FastAPI:
    return create_app(settings)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:  # `with`: runs the lifespan (opens the database)
        yield c


@dataclass
class LiveServer:
    url: str
    app: FastAPI


@pytest.fixture
def live_server(app: FastAPI) -> Iterator[LiveServer]:
    """The app under a real uvicorn on a free loopback port, in a thread: TestClient hands a
    response over only once the app has finished it, so seeing a stream arrive piece by piece
    takes a real server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app, log_level="warning", ws="none", http="h11", lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(3000):  # bounded: the server starts in well under a second
            if server.started or not thread.is_alive():
                break
            thread.join(0.01)
        assert server.started, "uvicorn did not start"
        host, port = sock.getsockname()
        yield LiveServer(f"http://{host}:{port}", app)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def manager(client: TestClient) -> RunManager:
    runs: RunManager = client.app.state.runs  # type: ignore[attr-defined]
    return runs


def start_run(client: TestClient, **body: Any) -> str:
    """A run of ``body``: a new one (201), or one stored for the same text (200, Note [Reusing a
    run] in app/store.py); ``fresh=True`` always makes a new one."""
    response = client.post("/api/runs", json=body)
    assert response.status_code in (200, 201), response.text
    assert response.json()["reused"] == (response.status_code == 200)
    run_id: str = response.json()["id"]
    return run_id


def finished_run(client: TestClient, run_id: str) -> dict[str, Any]:
    """Wait on the run's completion future (no polling, no sleeps), then its status."""
    manager(client).wait(run_id, timeout=120)
    run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] in ("done", "error"), run
    return run


def page_config(html: str) -> dict[str, Any]:
    """The JSON a page hands its script (``<script type="application/json" id="config">``)."""
    match = re.search(r'<script type="application/json" id="config">(.*?)</script>', html, re.S)
    assert match, html
    config: dict[str, Any] = json.loads(match.group(1))
    return config


@pytest.fixture(scope="module")
def nested_direct() -> dict[str, Any]:
    """nested_checkpoint run directly, the reference the served run is compared with."""
    result = run_scenario(SCENARIOS_DIR / "nested_checkpoint.py", trusted=True)
    assert result.ok and result.trace is not None
    return result.trace


@pytest.fixture
def nested(client: TestClient) -> str:
    run_id = start_run(client, scenario="nested_checkpoint")
    assert finished_run(client, run_id)["status"] == "done"
    return run_id


def iter_stream(
    client: httpx.Client, run_id: str, *, headers: dict[str, str] | None = None, query: str = ""
) -> Iterator[Message]:
    """The messages of ``/events`` as they arrive, parsed per the SSE format."""
    reader = SseReader()
    with client.stream("GET", f"/api/runs/{run_id}/events{query}", headers=headers or {}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if (message := reader.feed(line)) is not None:
                yield message


def read_stream(
    client: TestClient,
    run_id: str,
    *,
    headers: dict[str, str] | None = None,
    query: str = "",
    stop_after: int = 0,
) -> list[Message]:
    """Every message of ``/events``. ``stop_after=N``: hang up after N ``events`` messages, as a
    dropped connection would."""
    messages: list[Message] = []
    stream = iter_stream(client, run_id, headers=headers, query=query)
    try:
        for message in stream:
            messages.append(message)
            if stop_after and sum(m.event == "events" for m in messages) >= stop_after:
                break
            # A stream that repeats itself would otherwise hang the test instead of failing it.
            assert len(messages) <= MAX_MESSAGES, "the stream does not end"
    finally:
        stream.close()  # closes the response: the server sees the client hang up
    return messages


def stream_items(messages: list[Message]) -> list[dict[str, Any]]:
    return [item for m in messages if m.event == "events" for item in m.data]
