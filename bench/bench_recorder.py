"""What recording a trace costs: recording on / off and events per second, in CPU time.

    .venv/bin/python bench/bench_recorder.py [--rounds 15] [--workloads chain ckpt_mlp]

The workloads of bench/workloads.py (the 1,000-op chain, the checkpointed MLP), run by the
engine with recording off and on, in interleaved rounds (Note [Interleaved rounds] in
bench/run_all.py), each round timed with ``time.process_time()``: the machine is shared, and CPU
time is far less disturbed by other jobs than wall time. Reported: the median over rounds of the
per-round ratio on / off, and the median events per CPU second recorded.

Two ways of recording, because where the recorded code is changes what the recorder does:

- ``on``: ``engine.trace.record()`` called here, as bench/run_all.py does: this file is the one
  recorded file, so every event's ``src`` is the line calling the workload and the workload's own
  variables are never scanned for names;
- ``on (src)``: ``record(source_files=[workloads.py])``, as the web app records a scenario: the
  workload's own lines are the events' ``src`` and its variables name the tensors.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# One thread, as bench/run_all.py's ``1t`` worker: CPU time then counts one thread's work.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import workloads  # noqa: E402

import engine  # noqa: E402

NUMBER = 3  # calls per timed round


def _cpu(fn: Callable[[], int]) -> tuple[float, int]:
    """CPU seconds per call of ``fn`` over NUMBER calls, and the events per call."""
    events = 0
    t0 = time.process_time()
    for _ in range(NUMBER):
        events += fn()
    return (time.process_time() - t0) / NUMBER, events // NUMBER


def sides(name: str) -> dict[str, Callable[[], int]]:
    step = workloads.build(engine, name)
    step()  # warm up
    src = [workloads.__file__]

    def off() -> int:
        step()
        return 0

    def on() -> int:
        with engine.trace.record() as tr:
            step()
        return len(tr.events)

    def on_src() -> int:
        with engine.trace.record(source_files=src) as tr:
            step()
        return len(tr.events)

    return {"off": off, "on": on, "on (src)": on_src}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--workloads", nargs="*", default=["chain", "ckpt_mlp"])
    args = parser.parse_args()
    print(f"{'workload':10s} {'side':10s} {'ms (CPU)':>10s} {'on/off':>8s} {'events':>8s} {'events/s':>10s}")
    for name in args.workloads:
        fns = sides(name)
        samples: dict[str, list[tuple[float, int]]] = {k: [] for k in fns}
        order = list(fns)
        for r in range(args.rounds):
            for k in order if r % 2 == 0 else reversed(order):
                samples[k].append(_cpu(fns[k]))
        off = samples["off"]
        for k, s in samples.items():
            ms = statistics.median(t for t, _ in s) * 1e3
            if k == "off":
                print(f"{name:10s} {k:10s} {ms:10.1f}")
                continue
            ratio = statistics.median(t / o for (t, _), (o, _) in zip(s, off, strict=True))
            n = s[0][1]
            rate = statistics.median(e / t for t, e in s)
            print(f"{name:10s} {k:10s} {ms:10.1f} {ratio:7.2f}x {n:8d} {rate:10,.0f}")


if __name__ == "__main__":
    main()
