"""The cost of the trace's emission points, as ratios measured in one run.

    .venv/bin/python bench/bench_trace.py [--repeat 7] [--number 200]

Every place in the engine a trace event describes reads ``if emit.enabled: emit.emit(...)``.
This measures what those checks cost when nothing records, and what recording costs:

- ``no-emit``: a copy of ``engine/`` in a temporary directory where every ``emit.enabled`` is
  replaced by ``False`` (Python then compiles the checks away): the engine without emission;
- ``off``: the engine as it is, no recording;
- ``on``: the same, inside ``engine.trace.record()``;
- ``numpy``: the same computation in raw NumPy, for scale.

Each build runs in its own subprocess, alternately, several rounds; the best time of each is
kept (the least disturbed by the machine). Reported: ``off / no-emit`` (should be within a few
percent of 1), ``on / off``, and ``off / numpy``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _timing import best, no_emit_build

ROOT = Path(__file__).resolve().parent.parent


def worker(repeat: int, number: int) -> dict[str, float]:
    """Run in a subprocess: time each workload (engine from ``sys.path``) and print JSON."""
    import numpy as np

    import engine
    from engine.utils.checkpoint import checkpoint

    a = np.random.default_rng(0).standard_normal((32, 32))
    b = np.random.default_rng(1).standard_normal((32, 32))
    ex = engine.tensor(a, requires_grad=True)
    eb = engine.tensor(b, requires_grad=True)

    def ops() -> object:
        return ex.sin().exp().tanh()

    def step() -> None:
        ex.grad = None
        eb.grad = None
        ((ex @ eb).tanh() * ex).sum().backward()

    def block(t: object) -> object:
        return (t @ eb).tanh().sin()  # type: ignore[operator]

    def ckpt_step() -> None:
        ex.grad = None
        eb.grad = None
        checkpoint(block, ex, use_reentrant=False).sum().backward()

    def np_ops() -> object:
        return np.tanh(np.exp(np.sin(a)))

    def np_step() -> object:
        h = a @ b
        t = np.tanh(h)
        g = a * (1 - t * t)
        return g @ b.T + t, a.T @ g

    out: dict[str, float] = {}
    workloads = {"3 unary ops, 32x32": (ops, np_ops), "matmul-tanh-mul step": (step, np_step)}
    workloads["checkpointed block step"] = (ckpt_step, np_step)
    for name, (fn, np_fn) in workloads.items():
        out[f"{name}|off"] = best(fn, repeat, number)
        out[f"{name}|numpy"] = best(np_fn, repeat, number)
        if hasattr(engine, "trace") and "no-emit" not in os.environ.get("BENCH_BUILD", ""):

            def recorded(fn: Callable[[], object] = fn) -> None:
                with engine.trace.record():
                    for _ in range(number):
                        fn()

            out[f"{name}|on"] = best(recorded, repeat, 1) / number
    return out


def run_build(pythonpath: Path, build: str, repeat: int, number: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath), BENCH_BUILD=build)
    cmd = [sys.executable, __file__, "--worker", "--repeat", str(repeat), "--number", str(number)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, cwd=pythonpath)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each build")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.repeat, args.number)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        plain = no_emit_build(Path(tmp))
        results: dict[str, dict[str, float]] = {"no-emit": {}, "off": {}}
        for _ in range(args.rounds):
            for build, path in (("no-emit", plain), ("off", ROOT)):
                for key, t in run_build(path, build, args.repeat, args.number).items():
                    prev = results[build].get(key)
                    results[build][key] = t if prev is None else min(prev, t)
    names = sorted({k.split("|")[0] for k in results["off"]})
    header = f"{'workload':28} {'no-emit':>10} {'off':>10} {'on':>10} {'numpy':>10}"
    print(header + "  off/no-emit  on/off  off/numpy")
    for name in names:
        ne, off, on = (
            results["no-emit"][f"{name}|off"],
            results["off"][f"{name}|off"],
            results["off"][f"{name}|on"],
        )
        npy = results["off"][f"{name}|numpy"]
        print(
            f"{name:28} {ne * 1e6:8.1f}us {off * 1e6:8.1f}us {on * 1e6:8.1f}us {npy * 1e6:8.1f}us"
            f"  {off / ne:11.3f}  {on / off:6.2f}  {off / npy:9.1f}"
        )


if __name__ == "__main__":
    main()
