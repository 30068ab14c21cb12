"""Faults injected into a real server process: a ``kill -9`` of the server mid-run (every finished
run intact after the restart, the interrupted one marked with a reason), and sandbox workers
killed, hung and out of memory (each such run fails with a reason naming what happened, the
others finish). Then two server processes on one database: neither interrupts the other's runs
(Note [Who owns an unfinished run] in app/store.py)."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import pytest

from app.store import INTERRUPTED
from tests.load._server import Server, is_zombie_or_gone, kill_quietly, poll, workers

pytestmark = pytest.mark.slow

# Records events for as long as it is let run, slowly (a bit of Python between statements).
ENDLESS = '''"""Endless {tag}"""
import engine as torch
x = torch.ones(4, requires_grad=True)
while True:
    for j in range(3000):
        pass
    y = (x * 2).sum()
'''
QUICK = '"""Quick {tag}"""\nimport engine as torch\nx = torch.ones(3, requires_grad=True)\n(x * {tag}).sum().backward()\n'
OOM = '"""Out of memory"""\nx = [0] * (10**9)\n'
GENEROUS = {"AUTOGRAD_LENS_LIMIT_WALL_SECONDS": "60", "AUTOGRAD_LENS_LIMIT_CPU_SECONDS": "60"}


def reuse_key(data_dir: Path, run_id: str) -> str | None:
    with sqlite3.connect(data_dir / "runs.sqlite3") as conn:
        row = conn.execute("SELECT reuse_key FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def streaming(server: Server, run_id: str) -> bool:
    run = server.run(run_id)
    assert run["status"] in ("queued", "running"), run
    return bool(run["n_events"] > 0)


def test_kill_9_of_the_server_mid_run_loses_no_finished_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = Server(data, env=GENEROUS).start()
    try:
        finished = [first.start_run(scenario=s) for s in ("nested_checkpoint", "early_stop_on")]
        finished.append(first.start_run(source=QUICK.format(tag=2)))
        before = {}
        for run_id in finished:
            assert first.finished(run_id)["status"] == "done"
            before[run_id] = (first.run(run_id), first.text(f"/api/runs/{run_id}/trace.json"))
        going = first.start_run(source=ENDLESS.format(tag="killed with its server"))
        poll("events of the run to be stored", lambda: streaming(first, going))
        left = first.kill9()
    finally:
        first.stop()
    # Note [A worker dies with its server]: the kernel ends the orphaned worker too.
    assert left, "the endless run had a worker when its server was killed"
    for pid in left:
        poll(f"worker {pid} to end with its server", lambda pid=pid: is_zombie_or_gone(pid))

    with Server(data, env=GENEROUS) as second:  # the restart, on the same database
        for run_id, (run, trace) in before.items():
            assert second.run(run_id) == run
            assert second.text(f"/api/runs/{run_id}/trace.json") == trace
        interrupted = second.run(going)
        assert interrupted["status"] == "error"
        assert interrupted["error"]["type"] == "Interrupted"
        assert interrupted["error"]["message"] == INTERRUPTED
        assert interrupted["n_events"] > 0  # what it had stored stays readable
        events = second.text(f"/api/runs/{going}/trace.json")
        assert '"seq":0' in events.replace(" ", "")
        assert reuse_key(data, going) is None  # never served again: the next request reruns it
        status, again = second.api("/api/runs", {"scenario": "nested_checkpoint"})
        assert (status, again["id"]) == (200, finished[0])  # while the finished one is reused


def test_a_killed_a_hung_and_an_oom_worker_fail_alone(tmp_path: Path) -> None:
    env = {
        "AUTOGRAD_LENS_WORKERS": "4",
        "AUTOGRAD_LENS_LIMIT_WALL_SECONDS": "12",  # what ends the hung worker (and bounds the others)
        "AUTOGRAD_LENS_LIMIT_CPU_SECONDS": "60",
    }
    data = tmp_path / "data"
    with Server(data, env=env) as server:

        def new_worker(known: set[int]) -> int:
            def check() -> int | None:
                fresh = set(workers(server.pid)) - known
                return fresh.pop() if len(fresh) == 1 else None

            return poll("the run's sandbox worker", check)

        killed = server.start_run(source=ENDLESS.format(tag="killed"))
        killed_pid = new_worker(set())
        hung = server.start_run(source=ENDLESS.format(tag="hung"))
        hung_pid = new_worker({killed_pid})
        poll("both to record events", lambda: streaming(server, killed) and streaming(server, hung))
        oom = server.start_run(source=OOM)
        others = [server.start_run(source=QUICK.format(tag=t)) for t in (3, 4)]
        others.append(server.start_run(scenario="nested_checkpoint"))

        kill_quietly(killed_pid, signal.SIGKILL)  # killed from outside, as the OOM killer does
        kill_quietly(hung_pid, signal.SIGSTOP)  # stops answering: only the wall clock can end it

        error = server.finished(killed)["error"]
        assert (error["type"], error["limit"]) == ("WorkerError", None)
        assert "the scenario worker was killed (signal SIGKILL) from outside" in error["message"]
        error = server.finished(hung)["error"]
        assert (error["type"], error["limit"]) == ("LimitExceeded", "wall_seconds")
        assert error["message"] == "wall-clock time limit of 12 s exceeded"
        poll("the hung worker to be reaped", lambda: is_zombie_or_gone(hung_pid))
        error = server.finished(oom)["error"]
        assert (error["type"], error["limit"], error["line"]) == ("LimitExceeded", "memory_mb", 2)
        assert error["message"].startswith("out of memory (memory_mb)")
        for run_id in others:
            assert server.finished(run_id)["status"] == "done"
        for run_id in (killed, hung, oom):
            assert server.run(run_id)["n_events"] >= 0
            assert reuse_key(data, run_id) is None  # a fault is never served again
        assert all(reuse_key(data, run_id) for run_id in others)
        assert workers(server.pid) == []


def test_two_server_processes_share_one_database(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Server(data, env=GENEROUS) as first:
        going = first.start_run(source=ENDLESS.format(tag="two servers"))
        poll("the run to record events", lambda: streaming(first, going))
        with Server(data, env=GENEROUS) as second:  # starts while the first one's run goes on
            run = second.run(going)
            assert run["status"] == "running", run  # not marked interrupted: its owner is alive
            status, created = second.api("/api/runs", {"source": ENDLESS.format(tag="two servers")})
            assert (status, created["id"]) == (200, going)  # the other process's run, reused
            done = second.start_run(scenario="single_checkpoint")
            assert second.finished(done)["status"] == "done"
            assert first.finished(done)["status"] == "done"
        for pid in workers(first.pid):
            kill_quietly(pid, signal.SIGTERM)
        error = first.finished(going)["error"]
        assert error["type"] == "WorkerError", error
