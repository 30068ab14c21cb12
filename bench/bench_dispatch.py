"""Engine / torch 2.8.0 for the chain, the MLP and the checkpointed MLP, in one process, one thread.

    .venv/bin/python bench/bench_dispatch.py [--rounds 12] [--workloads chain,mlp,ckpt_mlp]
                                             [--record] [--engine-root DIR]

The figures of docs/performance.md's "Op dispatch, nodes and the engine loop": CPU time
(``time.process_time()``), engine and torch timed back to back in each round (the order reversed
every other round), 3 calls a round, the median over rounds of the per-round ratio (Note
[Interleaved rounds] in bench/run_all.py). ``--record`` also times the engine inside
``engine.trace.record()``. ``--engine-root`` imports ``engine`` from another directory (a copy of
an earlier ``engine/``, to compare two builds: run each in turn, a few times, alternating).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before NumPy and torch load their BLAS

ROOT = Path(__file__).resolve().parent.parent
CALLS = 3


def _seconds(fn: Callable[[], object]) -> float:
    start = time.process_time()
    for _ in range(CALLS):
        fn()
    return (time.process_time() - start) / CALLS


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--workloads", default="chain,mlp,ckpt_mlp")
    parser.add_argument("--record", action="store_true", help="also time the engine recording a trace")
    parser.add_argument("--engine-root", default=str(ROOT), help="the directory holding engine/")
    args = parser.parse_args()
    sys.path[:0] = [args.engine_root, str(ROOT / "bench")]
    import torch
    import workloads

    import engine

    torch.set_num_threads(1)
    for name in args.workloads.split(","):
        eng, ref = workloads.build(engine, name), workloads.build(torch, name)
        sides: dict[str, Callable[[], object]] = {"engine": eng, "torch": ref}
        if args.record:

            def recorded(eng: Callable[[], object] = eng) -> None:
                with engine.trace.record():
                    eng()

            sides["recording"] = recorded
        for fn in sides.values():
            fn()  # warm up
        times: dict[str, list[float]] = {side: [] for side in sides}
        for r in range(args.rounds):
            for side in list(sides) if r % 2 == 0 else list(reversed(sides)):
                times[side].append(_seconds(sides[side]))
        ratio = statistics.median(e / t for e, t in zip(times["engine"], times["torch"], strict=True))
        line = (
            f"{name:9s} engine {statistics.median(times['engine']) * 1e3:8.2f} ms  "
            f"torch {statistics.median(times['torch']) * 1e3:8.2f} ms  engine/torch {ratio:5.2f}x"
        )
        if args.record:
            on_off = statistics.median(
                on / off for on, off in zip(times["recording"], times["engine"], strict=True)
            )
            line += (
                f"  recording {statistics.median(times['recording']) * 1e3:8.2f} ms  on/off {on_off:5.2f}x"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
