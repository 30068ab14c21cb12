"""Two builds of the engine, A and B, each against torch 2.8.0, in two worker processes timed round by round.

    .venv/bin/python bench/bench_ab.py --a /tmp/eng-old --b . [--rounds 12] [--workloads chain,mlp]

For a change to the engine's hot paths: ``--a`` and ``--b`` are directories holding an
``engine/`` each (a copy of the package before the change, and the checkout). Each build runs in
its own worker (both are the package ``engine``, so they cannot share a process) with one thread,
and each worker also runs torch. Every round times, back to back, A's engine, A's torch, B's
engine and B's torch (the order reversed every other round), each as the CPU time
(``time.process_time()``) of ``--calls`` calls. Printed per workload: the median over rounds of
each worker's engine / torch (measured in one process, as bench/run_all.py does), and of B / A
(engine against engine, across the two processes but in the same round: Note [Interleaved
rounds] in bench/run_all.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker(engine_root: str, calls: int) -> None:
    """Answer each "workload side" line on stdin with the CPU seconds of one call of it."""
    sys.path[:0] = [engine_root, str(ROOT / "bench")]
    import torch
    import workloads

    import engine

    torch.set_num_threads(1)
    steps: dict[tuple[str, str], object] = {}
    for line in sys.stdin:
        name, side = line.split()
        key = (name, side)
        if key not in steps:
            steps[key] = workloads.build(engine if side == "engine" else torch, name)
            steps[key]()  # type: ignore[operator]  # warm up
        fn = steps[key]
        start = time.process_time()
        for _ in range(calls):
            fn()  # type: ignore[operator]
        print((time.process_time() - start) / calls, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a", default="", help="the directory holding build A's engine/")
    parser.add_argument("--b", default=str(ROOT), help="the directory holding build B's engine/")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--workloads", default="chain,mlp,ckpt_mlp")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.calls)
        return
    if not args.a:
        parser.error("--a is required")
    env = {**os.environ, **dict.fromkeys(THREAD_VARS, "1")}
    procs = {
        build: subprocess.Popen(
            [sys.executable, __file__, "--worker", str(Path(root).resolve()), "--calls", str(args.calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for build, root in (("A", args.a), ("B", args.b))
    }

    def run(build: str, name: str, side: str) -> float:
        proc = procs[build]
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{name} {side}\n")
        proc.stdin.flush()
        return float(proc.stdout.readline())

    try:
        for name in args.workloads.split(","):
            order = [(b, s) for b in ("A", "B") for s in ("engine", "torch")]
            for build, side in order:
                run(build, name, side)  # build and warm up
            times: dict[tuple[str, str], list[float]] = {k: [] for k in order}
            for r in range(args.rounds):
                for key in order if r % 2 == 0 else reversed(order):
                    times[key].append(run(key[0], name, key[1]))
            ratio = {
                b: statistics.median(
                    e / t for e, t in zip(times[(b, "engine")], times[(b, "torch")], strict=True)
                )
                for b in ("A", "B")
            }
            b_over_a = statistics.median(
                b / a for a, b in zip(times[("A", "engine")], times[("B", "engine")], strict=True)
            )
            ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            print(
                f"{name:11s} A engine/torch {ratio['A']:5.2f}x  B engine/torch {ratio['B']:5.2f}x  "
                f"B/A engine {b_over_a:5.3f}  (ms: A {ms[('A', 'engine')]:.2f}/{ms[('A', 'torch')]:.2f}, "
                f"B {ms[('B', 'engine')]:.2f}/{ms[('B', 'torch')]:.2f})",
                flush=True,
            )
    finally:
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()


if __name__ == "__main__":
    main()
