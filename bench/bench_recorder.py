"""What recording a trace costs: recording on / off and events per second, in CPU time.

    .venv/bin/python bench/bench_recorder.py [--rounds 15] [--workloads chain ckpt_mlp]
    .venv/bin/python bench/bench_recorder.py --baseline /tmp/old/engine/trace   # A/B, see below

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# One thread, as bench/run_all.py's ``1t`` worker: CPU time then counts one thread's work.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

# A worker of ``--baseline`` imports the engine from the root it is given.
_ROOT = (
    sys.argv[sys.argv.index("--root") + 1]
    if "--root" in sys.argv
    else str(Path(__file__).resolve().parent.parent)
)
sys.path[:0] = [_ROOT, str(Path(__file__).resolve().parent)]

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


def worker() -> None:
    """Answer "workload side" lines on stdin with "cpu_seconds events" lines."""
    cache: dict[str, dict[str, Callable[[], int]]] = {}
    for line in sys.stdin:
        name, side = line.split(maxsplit=1)
        if name not in cache:
            cache[name] = sides(name)
        t, n = _cpu(cache[name][side.strip()])
        print(t, n, flush=True)


def _spawn(root: Path) -> subprocess.Popen[str]:
    """A worker importing the package ``engine`` from ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", "--root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def ab(baseline: Path, rounds: int, names: list[str]) -> None:
    """New (this checkout) against a baseline ``engine/trace``; see the module's docstring."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(root / "engine", Path(tmp) / "engine", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.rmtree(Path(tmp) / "engine" / "trace")
        shutil.copytree(
            baseline, Path(tmp) / "engine" / "trace", ignore=shutil.ignore_patterns("__pycache__")
        )
        workers = {"new": _spawn(root), "base": _spawn(Path(tmp))}

        def ask(w: str, name: str, side: str) -> tuple[float, int]:
            proc = workers[w]
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(f"{name} {side}\n")
            proc.stdin.flush()
            t, n = proc.stdout.readline().split()
            return float(t), int(n)

        print(
            f"{'workload':10s} {'side':9s} {'base ms':>8s} {'new ms':>8s} {'new/base':>9s} "
            f"{'base on/off':>12s} {'new on/off':>11s} {'base ev/s':>10s} {'new ev/s':>10s} {'events':>7s}"
        )
        for name in names:
            keys = [(w, s) for s in ("off", "on", "on (src)") for w in workers]
            samples: dict[tuple[str, str], list[tuple[float, int]]] = {k: [] for k in keys}
            for r in range(rounds):
                for w, s in keys if r % 2 == 0 else reversed(keys):
                    samples[w, s].append(ask(w, name, s))
            for s in ("off", "on", "on (src)"):
                b, n = samples["base", s], samples["new", s]
                row = f"{name:10s} {s:9s} {statistics.median(t for t, _ in b) * 1e3:8.1f} "
                row += f"{statistics.median(t for t, _ in n) * 1e3:8.1f} "
                row += f"{statistics.median(x / y for (x, _), (y, _) in zip(n, b, strict=True)):8.2f}x"
                if s != "off":
                    for w in ("base", "new"):
                        off = samples[w, "off"]
                        on = samples[w, s]
                        ratio = statistics.median(x / y for (x, _), (y, _) in zip(on, off, strict=True))
                        row += f" {ratio:10.2f}x"
                    for w in ("base", "new"):
                        row += f" {statistics.median(e / t for t, e in samples[w, s]):10,.0f}"
                    row += f" {n[0][1]:7d}"
                print(row, flush=True)
        for proc in workers.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--workloads", nargs="*", default=["chain", "ckpt_mlp"])
    parser.add_argument("--baseline", type=Path, help="a copy of an older engine/trace to compare with")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    if args.baseline is not None:
        ab(args.baseline, args.rounds, args.workloads)
        return
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
