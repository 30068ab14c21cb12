"""50 clients streaming runs at once from a real server process, finished runs and runs still
going, a third of them hanging up mid-stream and resuming with ``Last-Event-ID``: every client
gets every event exactly once, in order (Note [The event stream] in app/routes/stream.py), and
the server's memory stays bounded."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.load._server import Message, Server, async_client, messages, rss_mb

pytestmark = pytest.mark.slow

CLIENTS = 50
# Events arrive over a few seconds: a bit of Python between the statements that record events.
SLOW = '''"""A run that takes a while"""
import engine as torch
x = torch.ones(4, requires_grad=True)
for i in range({n}):
    for j in range(3000):
        pass
    y = (x * 2).sum()
'''
FINISHED = ["nested_checkpoint", "single_checkpoint", "early_stop_on"]


async def client(c: Any, run_id: str, resumes: int) -> list[Message]:
    """One viewer: the whole stream, or (``resumes`` > 0) hanging up after a message or two and
    coming back with the last id it saw, ``resumes`` times."""
    got: list[Message] = []
    after: int | None = None
    for k in range(resumes):
        part = await messages(c, run_id, after=after, limit=1 + k % 2)
        got += part
        if part and part[-1].event == "done":
            return got
        ids = [m.id for m in got if m.id is not None]
        after = int(ids[-1]) if ids else None
    return got + await messages(c, run_id, after=after)


def check_stream(got: list[Message], reference: list[dict[str, Any]]) -> dict[str, int]:
    """Lost, duplicated and reordered events of one client against the run's trace."""
    assert got and got[-1].event == "done" and got[-1].id is None
    assert all(m.event == "events" for m in got[:-1])
    seqs = []
    for m in got[:-1]:
        assert m.id == str(m.data[-1]["event"]["seq"])  # a message's id is its last seq
        seqs += [item["event"]["seq"] for item in m.data]
    events = [item["event"] for m in got[:-1] for item in m.data]
    expected = [e["seq"] for e in reference]
    assert got[-1].data["n_events"] == len(reference)
    counts = {
        "events": len(seqs),
        "lost": len(set(expected) - set(seqs)),
        "duplicated": len(seqs) - len(set(seqs)),
        "reordered": sum(a >= b for a, b in itertools.pairwise(seqs)),
    }
    if counts["lost"] == counts["duplicated"] == counts["reordered"] == 0:
        assert events == reference  # and each event is the stored one
    return counts


def test_fifty_clients_with_resumes_lose_nothing(tmp_path: Path) -> None:
    env = {
        "AUTOGRAD_LENS_BATCH_EVENTS": "100",  # many messages per run: resumes land mid-run
        "AUTOGRAD_LENS_LIMIT_WALL_SECONDS": "90",
        "AUTOGRAD_LENS_LIMIT_CPU_SECONDS": "60",
    }
    with Server(tmp_path / "data", env=env) as server:
        finished = [server.start_run(scenario=s) for s in FINISHED]
        for run_id in finished:
            assert server.finished(run_id)["status"] == "done"
        before = rss_mb(server.pid)
        going = [server.start_run(source=SLOW.format(n=n)) for n in (200, 201)]
        statuses = [server.run(run_id)["status"] for run_id in going]
        assert all(status in ("queued", "running") for status in statuses), statuses

        peak = [before]
        sampling = threading.Event()

        def sample() -> None:  # the peak while the clients stream (a sample every 50 ms)
            while not sampling.wait(0.05):
                peak.append(rss_mb(server.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        async def crowd() -> list[list[Message]]:
            async with async_client(server.url, CLIENTS) as c:
                plan = [(going + finished)[i % 5] for i in range(CLIENTS)]  # 2 of 5 on running runs
                return await asyncio.gather(
                    *(client(c, run_id, resumes=2 if i % 3 == 0 else 0) for i, run_id in enumerate(plan))
                )

        try:
            results = asyncio.run(crowd())
        finally:
            sampling.set()
            sampler.join()
        after = rss_mb(server.pid)

        plan = [(going + finished)[i % 5] for i in range(CLIENTS)]
        references = {
            run_id: json.loads(server.text(f"/api/runs/{run_id}/trace.json"))["events"]
            for run_id in going + finished
        }
        for run_id in going:
            assert server.run(run_id)["status"] == "done"
        totals = {"events": 0, "lost": 0, "duplicated": 0, "reordered": 0}
        for run_id, got in zip(plan, results, strict=True):
            for key, value in check_stream(got, references[run_id]).items():
                totals[key] += value
        resumed = sum(1 for i in range(CLIENTS) if i % 3 == 0)
        print(
            f"\n{CLIENTS} clients ({resumed} resuming twice), {totals['events']} events delivered: "
            f"lost {totals['lost']}, duplicated {totals['duplicated']}, reordered {totals['reordered']}; "
            f"server RSS {before:.0f} MB before, {max(peak):.0f} MB peak, {after:.0f} MB after"
        )
        assert totals == {"events": totals["events"], "lost": 0, "duplicated": 0, "reordered": 0}
        assert totals["events"] == sum(len(references[r]) for r in plan)
        # Bounded: streams send stored batches, they keep no run in memory. Generous, since an
        # allocator keeps what it freed.
        assert max(peak) - before < 300, (before, max(peak))
        assert after - before < 200, (before, after)
