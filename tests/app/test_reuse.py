"""Reusing runs (Note [Reusing a run] in app/store.py, Note [The engine's fingerprint] and Note [A
class on one server] in app/runs.py), and the owners of unfinished runs (Note [Who owns an
unfinished run])."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import app.runs
from app.config import Settings
from app.main import create_app
from app.runs import reuse_key
from app.sandbox import Limits
from app.store import INTERRUPTED, Store, claim_owner, owner_alive, release_owner, reusable_error
from tests.app.conftest import finished_run, manager, start_run

RAISES = '"""Raises"""\nimport engine as torch\nx = torch.ones(2)\nraise ValueError("boom")\n'
MANY_EVENTS = '"""Many"""\nimport engine as torch\nx = torch.ones(3, requires_grad=True)\nfor i in range(200):\n    x = x * 2\n'


def post(client: TestClient, **body: object) -> tuple[int, dict[str, object]]:
    response = client.post("/api/runs", json=body)
    assert response.status_code in (200, 201), response.text
    assert response.headers["location"] == f"/api/runs/{response.json()['id']}"
    return response.status_code, response.json()


def test_a_bundled_scenario_is_run_once(client: TestClient) -> None:
    status, first = post(client, scenario="single_checkpoint")
    assert (status, first["reused"]) == (201, False)
    status, again = post(client, scenario="single_checkpoint")  # queued or running: the same run
    assert (status, again["reused"], again["id"]) == (200, True, first["id"])
    assert finished_run(client, str(first["id"]))["status"] == "done"
    status, done = post(client, scenario="single_checkpoint")
    assert (status, done["id"], done["status"]) == (200, first["id"], "done")
    status, fresh = post(client, scenario="single_checkpoint", fresh=True)
    assert status == 201 and fresh["id"] != first["id"] and fresh["reused"] is False
    # A fresh run is reusable too: the newest run of the key answers from now on.
    assert post(client, scenario="single_checkpoint")[1]["id"] == fresh["id"]
    assert post(client, scenario="early_stop_on")[0] == 201  # another scenario: another run


def test_an_identical_upload_is_reused_and_a_scenario_error_too(client: TestClient) -> None:
    status, first = post(client, source=RAISES, filename="raises.py")
    assert status == 201
    run = finished_run(client, str(first["id"]))
    assert run["status"] == "error" and run["error"]["type"] == "ValueError"
    assert post(client, source=RAISES, filename="raises.py")[1]["id"] == first["id"]  # deterministic
    assert post(client, source=RAISES, filename="other.py")[0] == 201  # the name is in the trace
    assert post(client, source=RAISES + "\n", filename="raises.py")[0] == 201


def test_a_run_stopped_at_a_limit_is_never_reused(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, limits=Limits(max_events=50, wall_seconds=60, cpu_seconds=20))
    with TestClient(create_app(settings)) as client:
        first = start_run(client, source=MANY_EVENTS)
        run = finished_run(client, first)
        assert run["status"] == "error" and run["error"]["limit"] == "max_events"
        status, again = post(client, source=MANY_EVENTS)
        assert status == 201 and again["id"] != first
        finished_run(client, str(again["id"]))


def test_reuse_off_makes_a_run_each_time(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path, reuse_runs=False))) as client:
        ids = {post(client, scenario="single_checkpoint")[1]["id"] for _ in range(3)}
        assert len(ids) == 3
        for run_id in ids:
            finished_run(client, str(run_id))


def test_the_reuse_flag_comes_from_the_environment() -> None:
    assert Settings().reuse_runs is True
    assert Settings.from_env({"AUTOGRAD_LENS_REUSE_RUNS": "off"}).reuse_runs is False
    assert Settings.from_env({"AUTOGRAD_LENS_REUSE_RUNS": "1"}).reuse_runs is True
    with pytest.raises(ValueError, match="AUTOGRAD_LENS_REUSE_RUNS='maybe' is not valid"):
        Settings.from_env({"AUTOGRAD_LENS_REUSE_RUNS": "maybe"})


def test_the_access_log_flag_comes_from_the_environment() -> None:
    assert Settings().access_log is True
    assert Settings.from_env({"AUTOGRAD_LENS_ACCESS_LOG": "0"}).access_log is False
    with pytest.raises(ValueError, match="AUTOGRAD_LENS_ACCESS_LOG='loud' is not valid"):
        Settings.from_env({"AUTOGRAD_LENS_ACCESS_LOG": "loud"})


def test_concurrent_requests_make_one_run(client: TestClient) -> None:
    runs = manager(client)
    ids: list[str] = []
    with runs.in_process:  # every request arrives while the run waits in the queue

        def ask() -> None:
            ids.append(runs.create_bundled("nested_checkpoint").id)

        threads = [threading.Thread(target=ask) for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(ids) == 50 and len(set(ids)) == 1
    assert runs.store.run_ids() == ids[:1]
    assert finished_run(client, ids[0])["status"] == "done"


def test_a_new_engine_makes_a_new_run(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    first = start_run(client, scenario="single_checkpoint")
    key = reuse_key(text="x", filename="a.py", backend="engine", trusted=False)
    monkeypatch.setattr(app.runs, "engine_fingerprint", lambda backend="engine": "another engine")
    assert reuse_key(text="x", filename="a.py", backend="engine", trusted=False) != key
    status, second = post(client, scenario="single_checkpoint")
    assert status == 201 and second["id"] != first
    finished_run(client, first)
    finished_run(client, str(second["id"]))


def test_the_fingerprint_covers_the_engine_and_the_backend() -> None:
    files = set(app.runs.FINGERPRINT_FILES)
    assert {"engine/**/*.py", "app/runner.py", "app/_worker.py"} <= files
    assert app.runs.engine_fingerprint("engine") != app.runs.engine_fingerprint("torch")
    keys = {
        reuse_key(text="x", filename="a.py", backend="engine", trusted=False),
        reuse_key(text="x", filename="a.py", backend="engine", trusted=True),
        reuse_key(text="x", filename="b.py", backend="engine", trusted=False),
        reuse_key(text="y", filename="a.py", backend="engine", trusted=False),
    }
    assert len(keys) == 4


def test_library_runs_do_not_fill_the_queue(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path, max_pending=1))) as client:
        runs = manager(client)
        with runs.in_process:  # nothing bundled can start: every run stays queued
            scenarios = ["single_checkpoint", "early_stop_on", "early_stop_off", "nested_checkpoint"]
            library = [start_run(client, scenario=s) for s in scenarios]
            fresh = start_run(client, scenario="single_checkpoint", fresh=True)  # counted: fills it
            response = client.post("/api/runs", json={"scenario": "early_stop_on", "fresh": True})
            assert response.status_code == 503
            assert post(client, scenario="early_stop_on")[0] == 200  # reuse still answers
        for run_id in [*library, fresh]:
            assert finished_run(client, run_id)["status"] == "done"


def test_reusable_errors() -> None:
    assert reusable_error(None)
    assert reusable_error({"type": "ValueError", "message": "boom", "limit": None})
    assert not reusable_error({"type": "LimitExceeded", "message": "...", "limit": "wall_seconds"})
    assert not reusable_error({"type": "Interrupted", "message": INTERRUPTED, "limit": None})
    assert not reusable_error({"type": "WorkerError", "message": "the worker died", "limit": None})


# --- owners of unfinished runs -------------------------------------------------------------------


def new_run(store: Store, run_id: str, owner: str | None, key: str | None = None) -> None:
    store.create_run(
        run_id,
        scenario=None,
        title="t",
        filename="t.py",
        source="",
        trusted=False,
        owner=owner,
        reuse_key=key,
    )


def test_only_orphans_are_marked_interrupted(tmp_path: Path) -> None:
    store = Store(tmp_path / "runs.sqlite3")
    store.open()
    mine = claim_owner("live-manager")
    host, pid, start, _ = mine.split(":")
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with open(f"/proc/{other.pid}/stat") as f:
            other_start = f.read().rsplit(")", 1)[1].split()[19]
        alive = f"{host}:{other.pid}:{other_start}:tok"
        assert owner_alive(mine) and owner_alive(alive)
        new_run(store, "mine", mine)
        new_run(store, "otherproc", alive, key="k")
        new_run(store, "noowner", None)
        new_run(store, "reusedpid", f"{host}:{other.pid}:1:tok")  # same pid, another start time
        new_run(store, "otherhost", f"elsewhere:{pid}:{start}:tok")
        new_run(store, "stopped", f"{host}:{pid}:{start}:stopped-manager")
        assert sorted(store.mark_interrupted()) == ["noowner", "otherhost", "reusedpid", "stopped"]
        # A live process's run is still reused while it goes on.
        assert (
            store.create_run(
                "x1", scenario=None, title="t", filename="t.py", source="", trusted=False, reuse_key="k"
            ).id
            == "otherproc"
        )
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait()
    assert not owner_alive(alive)
    # Its process gone, the run is an orphan: asked for again, it is interrupted and replaced.
    replaced = store.create_run(
        "x2", scenario=None, title="t", filename="t.py", source="", trusted=False, reuse_key="k"
    )
    assert (replaced.id, replaced.reused) == ("x2", False)
    orphan = store.get_run("otherproc")
    assert orphan is not None and orphan.status == "error"
    assert orphan.error is not None and orphan.error["message"] == INTERRUPTED
    assert store.mark_interrupted() == ["x2"]  # no owner: an orphan as soon as anyone looks
    release_owner("live-manager")
    assert store.mark_interrupted() == ["mine"]
    assert os.getpid() == int(pid)


def test_a_second_server_leaves_the_first_ones_runs_alone(settings: Settings) -> None:
    first = TestClient(create_app(settings))
    with first:
        runs = manager(first)
        with runs.in_process:
            run_id = start_run(first, scenario="single_checkpoint")
            with TestClient(create_app(replace(settings))) as second:  # same database, same process
                assert manager(second).interrupted == []
                assert second.get(f"/api/runs/{run_id}").json()["status"] == "queued"
                assert post(second, scenario="single_checkpoint")[1]["id"] == run_id
        assert finished_run(first, run_id)["status"] == "done"
