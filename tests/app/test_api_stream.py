"""The web app's event stream with FastAPI's TestClient and a real uvicorn server: annotated
batches then ``done``, resuming with ``Last-Event-ID`` (header or query parameter), a stream opened
before its run starts, and events reaching an open stream while the run still goes on."""

from __future__ import annotations

import json
import queue
import sys
import threading
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.runner import scenario_info
from app.runs import EventWriter, RunManager
from engine.trace.export import annotate
from tests.app.conftest import (
    BATCH,
    LiveServer,
    Message,
    iter_stream,
    manager,
    read_stream,
    start_run,
    stream_items,
)

# --- the stream ----------------------------------------------------------------------------------


def test_the_stream_sends_annotated_batches_then_done(client: TestClient, nested: str) -> None:
    events = client.get(f"/api/runs/{nested}/trace.json").json()["events"]
    messages = read_stream(client, nested)
    assert [m.event for m in messages] == ["events"] * (len(messages) - 1) + ["done"]
    assert len(messages) - 1 == -(-len(events) // BATCH)  # full batches, then the rest
    for m in messages[:-1]:
        assert 0 < len(m.data) <= BATCH
        assert m.id == str(m.data[-1]["event"]["seq"])
    items = stream_items(messages)
    assert [i["event"] for i in items] == events
    assert [
        {"changes": i["changes"], "caption": i["caption"], "changed": i["changed"]} for i in items
    ] == json.loads(json.dumps(annotate(events)))
    done = messages[-1]
    assert done.id is None  # the client's last event id stays the last event's seq
    assert done.data == {"status": "done", "error": None, "n_events": len(events)}


def test_resuming_with_last_event_id_continues_without_loss_or_duplicates(
    client: TestClient, nested: str
) -> None:
    whole = stream_items(read_stream(client, nested))
    first = read_stream(client, nested, stop_after=2)  # the connection drops after 2 messages
    assert len(first) == 2
    rest = read_stream(client, nested, headers={"Last-Event-ID": first[-1].id or ""})
    assert rest[0].data[0]["event"]["seq"] == int(first[-1].id or "") + 1
    assert stream_items(first) + stream_items(rest) == whole
    assert rest[-1].event == "done"


def test_resuming_inside_a_batch_with_the_query_parameter(client: TestClient, nested: str) -> None:
    whole = stream_items(read_stream(client, nested))
    rest = read_stream(client, nested, query="?last_event_id=150")
    # The rest of the stored batch holding event 150, under that batch's own id (the last seq in
    # it). Batches are cut every BATCH events or at each progress tick, whichever comes first, so
    # on a loaded machine the batch may end before 199.
    assert 150 < int(rest[0].id or "") <= 2 * BATCH - 1
    assert rest[0].data[0]["event"]["seq"] == 151
    assert stream_items(rest) == whole[151:]
    # A browser's reconnection header is more recent than the URL it was opened with.
    newer = read_stream(client, nested, headers={"Last-Event-ID": "300"}, query="?last_event_id=10")
    assert stream_items(newer) == whole[301:]
    at_end = read_stream(client, nested, headers={"Last-Event-ID": str(len(whole) - 1)})
    assert [m.event for m in at_end] == ["done"]


def test_a_malformed_last_event_id_is_refused(client: TestClient, nested: str) -> None:
    for headers, query in (({"Last-Event-ID": "abc"}, ""), ({}, "?last_event_id=-5")):
        response = client.get(f"/api/runs/{nested}/events{query}", headers=headers)
        assert response.status_code == 422
        assert isinstance(response.json()["detail"], str)


def test_a_stream_opened_before_the_run_starts_receives_every_event(client: TestClient) -> None:
    runs = manager(client)
    with runs.in_process:  # the server's in-process slot is busy: the run waits, queued
        run_id = start_run(client, scenario="single_checkpoint")
        run = client.get(f"/api/runs/{run_id}").json()
        assert (run["status"], run["n_events"], run["started_at"]) == ("queued", 0, None)
        for export in ("graph.dot", "trace.json", "trace.chrome.json", "story"):
            response = client.get(f"/api/runs/{run_id}/{export}")
            assert response.status_code == 409, export
            assert "queued" in response.json()["detail"]
        received: list[Any] = []
        reader = threading.Thread(target=lambda: received.extend(read_stream(client, run_id)))
        reader.start()
    reader.join(timeout=120)
    assert not reader.is_alive()
    events = client.get(f"/api/runs/{run_id}/trace.json").json()["events"]
    assert [i["event"] for i in stream_items(received)] == events
    assert received[-1].event == "done" and received[-1].data["status"] == "done"


def test_batches_appended_to_a_running_run_reach_an_open_stream(
    live_server: LiveServer, nested_direct: dict[str, Any]
) -> None:
    """Batches appended one by one to a running run reach an open stream as they are stored,
    before the run finishes (a real server: TestClient hands a response over only once it is
    complete)."""
    runs: RunManager = live_server.app.state.runs
    events = nested_direct["events"]
    assert len(events) > 3 * BATCH
    runs.store.create_run("liverun", scenario=None, title="t", filename="t.py", source="", trusted=False)
    runs.store.set_running("liverun")
    writer = EventWriter(runs.store, "liverun", BATCH, lambda: runs.notify("liverun"))
    arrived: queue.Queue[Any] = queue.Queue()

    def listen() -> None:
        try:
            with httpx.Client(base_url=live_server.url, timeout=60) as http:
                for message in iter_stream(http, "liverun"):
                    arrived.put(message)
        except BaseException as e:  # the test's thread reports it
            arrived.put(e)

    reader = threading.Thread(target=listen, daemon=True)
    reader.start()
    for first in (0, BATCH):
        writer.add(events[first : first + BATCH])  # a full batch: stored and announced
        message = arrived.get(timeout=30)
        assert (message.event, message.id) == ("events", str(first + BATCH - 1))
        assert [i["event"] for i in message.data] == json.loads(json.dumps(events[first : first + BATCH]))
        run = runs.store.get_run("liverun")
        assert run is not None and run.status == "running"
    writer.add(events[2 * BATCH :])
    writer.flush()
    runs.store.finish("liverun", status="done", error=None)
    runs.notify("liverun")
    rest = [arrived.get(timeout=30) for _ in range(-(-len(events) // BATCH) - 2 + 1)]
    reader.join(timeout=30)
    assert rest[-1].event == "done" and not reader.is_alive()
    assert [i["event"] for i in stream_items(rest)] == json.loads(json.dumps(events[2 * BATCH :]))


GATED = """\"\"\"Gated: waits for the test half-way\"\"\"
import engine as torch
import autograd_lens_gate as gate

x = torch.ones(3, requires_grad=True)
y = x.sin()
z = y.cos()
gate.wait()
z.sum().backward()
"""


def test_events_stream_while_the_scenario_still_runs(
    live_server: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real run through the API: the scenario stops half-way at a gate the test holds, and
    its first events reach an open stream meanwhile (they are final: Note [Final events])."""
    path = tmp_path / "gated.py"
    path.write_text(GATED, encoding="utf-8")
    release = threading.Event()
    gate = types.ModuleType("autograd_lens_gate")

    def wait() -> None:
        if not release.wait(60):
            raise TimeoutError("the test never opened the gate")

    gate.wait = wait  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "autograd_lens_gate", gate)
    monkeypatch.setattr("app.runs.find_scenario", lambda scenario_id: scenario_info(path))
    arrived: queue.Queue[Any] = queue.Queue()
    try:
        with httpx.Client(base_url=live_server.url, timeout=60) as http:
            response = http.post("/api/runs", json={"scenario": "gated"})
            assert response.status_code == 201, response.text
            run_id = response.json()["id"]

            def listen() -> None:
                try:
                    with httpx.Client(base_url=live_server.url, timeout=60) as reader_http:
                        for message in iter_stream(reader_http, run_id):
                            arrived.put(message)
                except BaseException as e:  # the test's thread reports it
                    arrived.put(e)

            reader = threading.Thread(target=listen, daemon=True)
            reader.start()
            first = arrived.get(timeout=30)
            assert isinstance(first, Message) and first.event == "events", first
            assert http.get(f"/api/runs/{run_id}").json()["status"] == "running"
            names = {i["event"]["name"] for i in first.data if i["event"]["kind"] == "tensor_new"}
            assert {"x", "y"} <= names
            release.set()
            messages = [first]
            while messages[-1].event != "done":
                message = arrived.get(timeout=30)
                assert isinstance(message, Message), message
                messages.append(message)
            reader.join(timeout=30)
            trace = http.get(f"/api/runs/{run_id}/trace.json").json()
    finally:
        release.set()
    assert messages[-1].data["status"] == "done", messages[-1].data
    assert [i["event"] for i in stream_items(messages)] == trace["events"]
    kinds = [e["kind"] for e in trace["events"]]
    assert "backward_start" in kinds and "backward_start" not in [i["event"]["kind"] for i in first.data]
