"""How many trace events an untrusted run records within the sandbox's budget, on this machine.

    .venv/bin/python bench/bench_limit.py [--seconds 4] [--repeat 3]

Runs a loop scenario (a small training step: matmul, tanh, sum, backward, again and again) in
the sandbox worker (``run_scenario(..., trusted=False)``, the path of every text the web app did
not ship) with the event limit out of the way, and reads the worker's ``progress N`` heartbeat:
events/s is the slope of the event count over the recording (worker start-up excluded). Then it
runs the same loop into the event limit the sandbox has now (``Limits().max_events``) and
reports what that run costs end to end: wall seconds from the request to the answer (the worker's
start-up, the recording, the answer's JSON and the parent reading it), and how much of the CPU
and wall-clock budgets that is. The limit is right when a run that hits it finishes well inside
``Limits().cpu_seconds`` (the tighter budget: the worker's CPU time counts the recording and the
answer's serialisation) on a machine that may be twice as slow.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOOP = """import engine as torch
x = torch.randn(4, 4)
w = torch.randn(4, 4, requires_grad=True)
while True:
    loss = (x @ w).tanh().sum()
    loss.backward()
"""


def rate(seconds: float) -> float:
    """Events a second recorded in the worker: the slope of its progress heartbeat."""
    from app.runner import run_scenario
    from app.sandbox import Limits

    seen: list[tuple[float, int]] = []
    limits = Limits(cpu_seconds=seconds + 30, wall_seconds=seconds, max_events=10**8)
    run_scenario(LOOP, trusted=False, limits=limits, on_progress=lambda n: seen.append((time.monotonic(), n)))
    moving = [(t, n) for t, n in seen if n > 0]
    if len(moving) < 2:
        raise SystemExit("the worker reported no progress: is the sandbox working?")
    (t0, n0), (t1, n1) = moving[0], moving[-1]
    return (n1 - n0) / (t1 - t0)


def at_the_limit(max_events: int) -> tuple[float, int, str | None]:
    """Wall seconds of a run that hits ``max_events`` (default budgets otherwise), its event
    count and the limit its error names."""
    from app.runner import run_scenario
    from app.sandbox import Limits

    limits = replace(Limits(), max_events=max_events)
    t0 = time.monotonic()
    result = run_scenario(LOOP, trusted=False, limits=limits)
    seconds = time.monotonic() - t0
    n = len(result.trace["events"]) if result.trace else 0
    return seconds, n, result.error.limit if result.error else None


def main() -> None:
    from app.sandbox import Limits

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="recording time of each rate run")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    limits = Limits()
    rates = [rate(args.seconds) for _ in range(args.repeat)]
    median = statistics.median(rates)
    each = ", ".join(f"{r:,.0f}" for r in rates)
    print(f"events/s in the sandbox worker: median {median:,.0f} (runs: {each})")
    print(
        f"the budgets: cpu_seconds {limits.cpu_seconds:g} s, wall_seconds {limits.wall_seconds:g} s; "
        f"{limits.cpu_seconds:g} s of recording at that rate: {median * limits.cpu_seconds:,.0f} events"
    )
    seconds, n, limit = at_the_limit(limits.max_events)
    print(
        f"a run into the limit max_events={limits.max_events:,}: {n:,} events, stopped by {limit}, "
        f"{seconds:.2f} s end to end ({seconds / limits.cpu_seconds:.0%} of the CPU budget, "
        f"{seconds / limits.wall_seconds:.0%} of the wall-clock budget)"
    )


if __name__ == "__main__":
    main()
