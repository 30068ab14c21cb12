"""``make bench``: every performance figure of issue 15 beside its target and its anchor.

    .venv/bin/python bench/run_all.py [--rounds 12] [--quick] [--no-ui] [--no-stream]

Writes ``bench/results.json`` and prints a table. docs/performance.md explains each figure.

Note [Interleaved rounds]
~~~~~~~~~~~~~~~~~~~~~~~~~
The machine is shared and busy, so absolute times wander; ratios measured close together in time
do not. Every timed call runs in a *worker* process that waits on its stdin for "run workload W on
side S once" and answers with the seconds it took; this script (the coordinator) asks the workers
in turn, so one round of a workload times every side of it back to back (the order reversed every
other round), and each ratio is the median over rounds of the two sides' per-round ratio. A ratio
between two sides of one worker (engine / torch, engine / NumPy, recording on / off) is measured in
one process; the workers:

- ``1t``: this venv (torch 2.8.0), one thread (``OMP/OPENBLAS/MKL_NUM_THREADS=1``,
  ``torch.set_num_threads(1)``): engine, torch, NumPy, the engine recording a trace, and the
  floors of recording (bench/least_recorder.py);
- ``dt``: the same with default threads (the machine's cores);
- ``1t-213`` / ``dt-213``: torch 2.13.0's venv (scripts/setup.sh --oracle; its interpreter is
  named in ``.venv/autograd_lens_torch213``) running the engine and torch 2.13.0, one thread and
  default threads. That venv has its own NumPy (the same version here: checked and reported);
- ``no-emit``: one thread, the engine imported from a copy of ``engine/`` in which every
  ``emit.enabled`` check is replaced by ``False`` (Python then compiles the checks away; the same
  build as bench/bench_trace.py): the engine with emission removed. It cannot share a process
  with the real engine (both are the package ``engine``), so off / no-emit is the one ratio taken
  across two processes, still round by round;
- ``1t-b``: a second ``1t`` worker, the same build: "off/off (control)" times the engine in both,
  which would be 1.00x if two processes ran alike; how far it strays is the noise of the one ratio
  taken across processes (off / no-emit);
- ``app``: one thread, the engine alone, no torch imported: a process like the web app's sandbox
  worker, which records every run. The figures of recording (on / off, its floors, events per
  second recorded and stored) are taken here: with torch imported, the engine's large
  temporaries land in a heap that torch's allocations keep (Note [Worker clocks and heaps]), so
  the same MLP runs faster not recorded while recording costs the same, which is not what a user
  of the app meets. ``1t``'s recording on / off stays in the table beside it, as an anchor.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _timing import no_emit_build

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results.json"
PORT = 8210  # the streaming figure's server
TORCH213_FILE = ROOT / ".venv" / "autograd_lens_torch213"

# Calls per timed round (a round is then tens of milliseconds or more on the engine).
NUMBER = {"mlp": 3, "chain": 3, "ckpt_mlp": 3, "transformer": 3}
ONE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


# --- the worker -----------------------------------------------------------------------------------


def worker(threads: str, with_torch: bool) -> None:
    """Answer timing requests on stdin (one JSON object a line) until stdin closes."""
    sys.path.insert(0, str(BENCH))

    import least_recorder
    import numpy as np
    import workloads

    import engine

    torch: Any = None
    if with_torch:
        import torch

        if threads == "1":
            torch.set_num_threads(1)
    built: dict[tuple[str, str], Any] = {}

    def fn_of(side: str, name: str) -> Any:
        # Every engine side (not recorded, recorded, the floors, stored) runs one and the same
        # workload object, so a ratio between two of them differs by recording alone: two builds
        # of the MLP in one process run up to 1.4x apart, by where their arrays landed.
        lib = side if side in ("numpy", "torch") else "engine"
        key = (lib, name)
        if key not in built:
            if lib == "numpy":
                built[key] = workloads.build_numpy(name)
            elif lib == "torch":
                built[key] = workloads.build(torch, name)
            else:
                built[key] = workloads.build(engine, name)
            built[key]()  # warm up: first-call costs are not what we measure
            gc.collect()
            gc.freeze()  # see Note [Worker clocks and heaps]
        return built[key]

    info = {
        "engine": engine.__file__,
        "numpy": np.__version__,
        "torch": torch.__version__ if torch else None,
        "torch_threads": torch.get_num_threads() if torch else None,
        "python": platform.python_version(),
    }
    print(json.dumps(info), flush=True)
    # Note [Worker clocks and heaps]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A one-thread worker times with the CPU time of its process, not the wall clock: on a shared
    # machine the wall clock also counts the time the process waited for a core, which grows with
    # the other jobs and more for the longer side of a ratio. (A default-threads worker keeps the
    # wall clock: its CPU time would add up its threads.) And once a workload is built and warmed
    # up, everything alive is frozen out of the cyclic garbage collector (``gc.freeze``): a worker
    # holds torch's and the engine's modules at once (some 160,000 tracked objects), which every
    # full collection would scan, a cost that falls on whichever side allocates more and that
    # neither library has in a program of its own. What a workload allocates is still collected.
    # (The "stored" side keeps the wall clock: storing waits on the disk too.)
    clock = time.process_time if threads == "1" else time.perf_counter
    for line in sys.stdin:
        req = json.loads(line)
        side, name, number = req["side"], req["workload"], req["number"]
        fn = fn_of(side, name)
        events = 0
        if side == "recorded":
            t0 = clock()
            for _ in range(number):
                with engine.trace.record() as tr:
                    fn()
                events += len(tr.events)
            seconds = clock() - t0
        elif side in ("emit-noop", "least"):
            # Note [The floor of recording] in bench/least_recorder.py
            sink = (
                least_recorder.noop_sink
                if side == "emit-noop"
                else least_recorder.LeastRecorder(worker.__code__.co_filename).sink
            )
            t0 = clock()
            for _ in range(number):
                with least_recorder.installed(sink):
                    fn()
            seconds = clock() - t0
        elif side == "stored":
            seconds, events = _store_round(fn, number)
        else:
            t0 = clock()
            for _ in range(number):
                fn()
            seconds = clock() - t0
        print(json.dumps({"t": seconds / number, "events": events / number}), flush=True)


def _store_round(fn: Any, number: int) -> tuple[float, int]:
    """Record ``fn`` once, then time what the app does with its events: annotate each (reducer
    changes, caption: app/runs.py EventWriter) and store them in SQLite batches (app/store.py).
    Timed by the wall clock: storing waits on the disk too."""
    import engine
    from app.runs import EventWriter
    from app.store import Store

    with engine.trace.record() as tr:
        fn()
    events = tr.events
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "runs.sqlite3")
        store.open()
        t0 = time.perf_counter()
        for i in range(number):
            run_id = f"bench{i:04d}"
            store.create_run(run_id, scenario=None, title="bench", filename="b.py", source="", trusted=True)
            writer = EventWriter(store, run_id, 500)
            writer.add(events)
            writer.flush()
        seconds = time.perf_counter() - t0
    return seconds, len(events) * number


class Worker:
    """A worker process and the pipe to it."""

    def __init__(self, label: str, python: str, threads: str, engine_root: Path, with_torch: bool) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(engine_root), str(ROOT)]))
        for k in ONE_THREAD_ENV:
            env.pop(k, None)
        if threads == "1":
            env.update(ONE_THREAD_ENV)
        cmd = [python, str(Path(__file__)), "--worker", "--threads", threads]
        if not with_torch:
            cmd.append("--no-torch")
        self.label = label
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=engine_root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.info = self._read()
        if not self.info["engine"].startswith(str(engine_root)):
            raise SystemExit(f"worker {label}: engine imported from {self.info['engine']}, not {engine_root}")

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.label} died (exit code {self.proc.wait()})")
        value: dict[str, Any] = json.loads(line)
        return value

    def time(self, side: str, workload: str) -> dict[str, float]:
        assert self.proc.stdin is not None
        req = {"side": side, "workload": workload, "number": NUMBER[workload]}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


# --- the coordinator ------------------------------------------------------------------------------

# (figure id, numerator (worker, side), denominator (worker, side), target, anchor)
Cell = tuple[str, str]


def comparisons(workload: str, workers: dict[str, Worker]) -> list[tuple[str, Cell, Cell, float | None, str]]:
    target = {"mlp": 1.3, "chain": 3.0, "ckpt_mlp": 1.3, "transformer": None}[workload]
    rows: list[tuple[str, Cell, Cell, float | None, str]] = []
    for w, version in (("1t", "2.8.0"), ("dt", "2.8.0"), ("1t-213", "2.13.0"), ("dt-213", "2.13.0")):
        if w in workers:
            threads = "1 thread" if w.startswith("1t") else "default threads"
            anchor = f"torch {version}, {threads}"
            rows.append(
                (f"{workload} engine/torch {version} {w[:2]}", (w, "engine"), (w, "torch"), target, anchor)
            )
    if workload != "transformer":
        rows.append(
            (
                f"{workload} engine/numpy",
                ("1t", "engine"),
                ("1t", "numpy"),
                None,
                "raw NumPy, same arithmetic",
            )
        )
    if workload in ("chain", "ckpt_mlp"):
        rec = recording_worker(workers)
        rows.append(
            (
                f"{workload} recording on/off",
                (rec, "recorded"),
                (rec, "engine"),
                1.5,
                "recording off, the engine alone as in the app" if rec == "app" else "recording off",
            )
        )
        if rec != "1t":
            rows.append(
                (
                    f"{workload} recording on/off, torch loaded",
                    ("1t", "recorded"),
                    ("1t", "engine"),
                    None,
                    "recording off, in the 1t worker (torch's heap speeds up the run not recorded)",
                )
            )
        # The floor under that ratio: Note [The floor of recording] in bench/least_recorder.py.
        rows.append(
            (
                f"{workload} emission alone/off",
                (rec, "emit-noop"),
                (rec, "engine"),
                None,
                "recording off; a sink that does nothing (the engine's emission calls)",
            )
        )
        rows.append(
            (
                f"{workload} least recorder/off",
                (rec, "least"),
                (rec, "engine"),
                None,
                "recording off; a tuple, a stack walk, a weak ref per event: any Python recorder's floor",
            )
        )
    if "no-emit" in workers and workload != "transformer":
        rows.append(
            (f"{workload} off/no-emit", ("1t", "engine"), ("no-emit", "engine"), 1.03, "emission removed")
        )
    if "1t-b" in workers and workload != "transformer":
        rows.append(
            (
                f"{workload} off/off (control)",
                ("1t", "engine"),
                ("1t-b", "engine"),
                None,
                "the same build in another process: how far a ratio across processes strays",
            )
        )
    return rows


def recording_worker(workers: dict[str, Worker]) -> str:
    """The worker that times recording: ``app`` (the engine alone, as the app's sandbox worker
    runs it), else ``1t``."""
    return "app" if "app" in workers else "1t"


def run_rounds(workers: dict[str, Worker], names: list[str], rounds: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    rec = recording_worker(workers)
    for name in names:
        rows = comparisons(name, workers)
        cells: list[Cell] = []
        for _, a, b, _, _ in rows:
            for c in (a, b):
                if c not in cells:
                    cells.append(c)
        if name == "chain":
            cells.append((rec, "stored"))
        samples: dict[Cell, list[dict[str, float]]] = {c: [] for c in cells}
        print(f"{name}: {rounds} rounds of {len(cells)} cells", file=sys.stderr, flush=True)
        for r in range(rounds):
            for c in cells if r % 2 == 0 else reversed(cells):
                samples[c].append(workers[c[0]].time(c[1], name))
        for fid, a, b, target, anchor in rows:
            ratios = [x["t"] / y["t"] for x, y in zip(samples[a], samples[b], strict=True)]
            figures[fid] = {
                "value": statistics.median(ratios),
                "unit": "x",
                "target": target,
                "anchor": anchor,
                "numerator_ms": statistics.median(x["t"] for x in samples[a]) * 1e3,
                "denominator_ms": statistics.median(x["t"] for x in samples[b]) * 1e3,
                "rounds": rounds,
            }
        for c, label in (((rec, "recorded"), "recorded"), ((rec, "stored"), "stored (annotated, SQLite)")):
            if c in samples:
                rate = statistics.median(s["events"] / s["t"] for s in samples[c])
                n = statistics.median(s["events"] for s in samples[c])
                figures[f"{name} events/s {label.split()[0]}"] = {
                    "value": rate,
                    "unit": "events/s",
                    "target": 50_000.0 if label == "recorded" else None,
                    "anchor": f"{label}, {n:,.0f} events a run",
                    "rounds": rounds,
                }
        if (rec, "recorded") in samples:
            # The rate a recorder costing nothing would reach: a run's events over its time not
            # recorded. A workload of few events and much arithmetic (the checkpointed MLP) stays
            # under 50,000 events/s however fast the recorder is.
            n = statistics.median(s["events"] for s in samples[(rec, "recorded")])
            figures[f"{name} events/s ceiling"] = {
                "value": statistics.median(n / s["t"] for s in samples[(rec, "engine")]),
                "unit": "events/s",
                "target": None,
                "anchor": "a run's events over its time not recorded: a recorder costing nothing",
                "rounds": rounds,
            }
    return figures


# --- streaming through the web app ----------------------------------------------------------------

STREAM_SOURCE = '''"""Bench: the 1,000-op chain, 8 times"""
import engine as torch

x = torch.linspace(-1.0, 1.0, 16).requires_grad_()
for _ in range(8):
    h = x
    for _ in range(250):
        h = (h.sin() * 1.01 + 0.1).tanh()
    h.sum().backward()
'''


def stream_figures(repeat: int) -> dict[str, Any]:
    """Start the app (port PORT, its own data dir), upload STREAM_SOURCE (the sandbox runs it) and
    read its SSE stream as one client: time to the first event, events per second to ``done``."""
    import httpx

    data_dir = Path(tempfile.mkdtemp(prefix="perf-bench-data-"))
    env = dict(os.environ, AUTOGRAD_LENS_DATA_DIR=str(data_dir))
    server = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(PORT)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{PORT}"
    firsts, rates, counts, stories, reports = [], [], [], [], []
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            for _ in range(600):
                try:
                    client.get("/")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)  # waiting for the server to listen (not a test)
            for _ in range(repeat):
                t0 = time.perf_counter()
                # fresh: a new run each time, not the stored run of the same text (Note [Reusing
                # a run] in app/store.py), which would answer at once
                body = {"source": STREAM_SOURCE, "filename": "bench_stream.py", "fresh": True}
                r = client.post("/api/runs", json=body)
                r.raise_for_status()
                run_id = r.json()["id"]
                first = None
                n = 0
                with client.stream("GET", f"/api/runs/{run_id}/events") as s:
                    event = None
                    for line in s.iter_lines():
                        if line.startswith("event:"):
                            event = line.split(":", 1)[1].strip()
                        elif line.startswith("data:") and event == "events":
                            if first is None:
                                first = time.perf_counter() - t0
                            n += len(json.loads(line[5:]))
                        elif line.startswith("data:") and event == "done":
                            break
                total = time.perf_counter() - t0
                # What a viewer asks for once the run is done: the story (its default level) and,
                # after it, the memory report, each derived from the events when first asked.
                t1 = time.perf_counter()
                client.get(f"/api/runs/{run_id}/story").raise_for_status()
                t2 = time.perf_counter()
                client.get(f"/api/runs/{run_id}/memory").raise_for_status()
                stories.append(t2 - t1)
                reports.append(time.perf_counter() - t2)
                firsts.append(first if first is not None else float("nan"))
                rates.append(n / total)
                counts.append(n)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
    n_events = statistics.median(counts)
    return {
        "streamed events/s": {
            "value": statistics.median(rates),
            "unit": "events/s",
            "target": None,
            "anchor": f"one SSE client, upload to done, {n_events:,.0f} events (sandbox run)",
            "rounds": repeat,
        },
        "time to first event": {
            "value": statistics.median(firsts) * 1e3,
            "unit": "ms",
            "target": None,
            "anchor": "upload (POST /api/runs) to the first SSE event",
            "rounds": repeat,
        },
        "story after done": {
            "value": statistics.median(stories) * 1e3,
            "unit": "ms",
            "target": None,
            "anchor": f"GET story of that run once done, {n_events:,.0f} events (stored with the run)",
            "rounds": repeat,
        },
        "memory report after done": {
            "value": statistics.median(reports) * 1e3,
            "unit": "ms",
            "target": None,
            "anchor": "GET memory of that run, after its story",
            "rounds": repeat,
        },
    }


# --- checkpoint memory ----------------------------------------------------------------------------


def memory_figures() -> dict[str, Any]:
    """The bytes saved for the backward, measured through saved-tensor hooks on each backend (each
    storage once: Note [Strategies compared] in app/compare.py), for no checkpointing, one
    checkpoint per block and sqrt(N) segments, engine and torch 2.8.0. Equal to torch means the
    hook bytes, recomputations, early stops, holders and block runs are; the traced peak held is
    shown beside it for the engine only (a torch trace's is a lower bound under hooks, Note [Torch
    rows' memory])."""
    sys.path.insert(0, str(ROOT))
    from app.compare import model_source, row_of
    from app.runner import run_scenario

    def row(strategy: str, n: int, backend: str) -> dict[str, Any]:
        result = run_scenario(model_source(strategy, n), trusted=True, backend=backend)
        if result.trace is None or result.error is not None:
            raise SystemExit(f"the {backend} run failed: {result.error}")
        return row_of(strategy, n, backend, result.trace["events"])

    out: dict[str, Any] = {}
    for n in (16, 64):
        for strategy in ("none", "per_block", "sequential"):
            e, t = row(strategy, n, "engine"), row(strategy, n, "torch")
            compared = ("measured", "recomputations", "early_stops", "holders", "extra_block_runs")
            same = all(e[k] == t[k] for k in compared)  # as bench/bench_memory.py compares
            ours = e["measured"]["saved_bytes"] if e["measured"] else None
            theirs = t["measured"]["saved_bytes"] if t["measured"] else None
            out[f"memory N={n} {strategy}"] = {
                "value": ours,
                "unit": "bytes",
                "torch": theirs,
                "traced_peak_held": e["peak_held"],
                "equal_to_torch": same,
                "target": "= torch",
                "anchor": f"torch 2.8.0: {theirs:,} bytes saved (hooks)" if theirs else "torch: -",
            }
    return out


# --- the viewer (bench/bench_ui.py, owned with the viewer) ----------------------------------------


def ui_figures() -> dict[str, Any]:
    """Run bench/bench_ui.py; read its JSON (``--json PATH``) if it has that option, else parse
    the table it prints."""
    script = BENCH / "bench_ui.py"
    helptext = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True).stdout
    out: dict[str, Any] = {}
    if "--json" in helptext:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "ui.json"
            subprocess.run([sys.executable, str(script), "--json", str(path)], check=True, cwd=ROOT)
            data = json.loads(path.read_text())
        for key, value in (data.get("figures") or data).items():
            out[f"viewer {key}"] = value if isinstance(value, dict) else {"value": value}
        return out
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT)
    text = proc.stdout
    m = re.search(r"big: ([\d,]+) events", text)
    n = m.group(1) if m else "?"
    if (m := re.search(r"page ready .* in ([\d.]+) s", text)) is not None:
        out[f"viewer page ready ({n} events)"] = {
            "value": float(m.group(1)) * 1e3,
            "unit": "ms",
            "target": 2000.0,
            "anchor": "issue: 4.2 s before",
        }
    for line in text.splitlines():
        m = re.match(
            r"(forward|back|key →|jump|jump cold|next recompute)\S*\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line
        )
        if m:
            out[f"viewer {m.group(1)} p95 ({n} events)"] = {
                "value": float(m.group(3)),
                "unit": "ms",
                "p50": float(m.group(2)),
                "target": 16.0,
                "anchor": "the 16 ms frame budget",
            }
    if not out:
        out["viewer"] = {
            "value": None,
            "unit": "",
            "target": None,
            "anchor": f"bench_ui.py failed: {proc.stderr[-300:]}",
        }
    return out


# --- the table ------------------------------------------------------------------------------------


def show(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "x":
        return f"{value:.2f}x"
    if unit in ("events/s", "bytes"):
        return f"{value:,.0f}"
    return f"{value:,.1f} {unit}"


def met(fig: dict[str, Any]) -> str:
    target, value = fig.get("target"), fig.get("value")
    if target is None or value is None:
        return ""
    if target == "= torch":
        return "yes" if fig.get("equal_to_torch") else "NO"
    if fig["unit"] == "events/s":
        return "yes" if value >= target else "no"
    return "yes" if value <= target else "no"


def print_table(figures: dict[str, Any]) -> None:
    print(f"{'figure':44} {'value':>14} {'target':>10} {'met':>4}  anchor")
    for fid, fig in figures.items():
        target = fig.get("target")
        t = "-" if target is None else (target if isinstance(target, str) else show(target, fig["unit"]))
        value = show(fig.get("value"), fig.get("unit", ""))
        print(f"{fid:44} {value:>14} {t:>10} {met(fig):>4}  {fig.get('anchor', '')}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds per workload (median)")
    parser.add_argument("--quick", action="store_true", help="4 rounds, no viewer, no stream: a smoke run")
    parser.add_argument("--workloads", default="mlp,chain,ckpt_mlp,transformer")
    parser.add_argument("--no-ui", action="store_true", help="skip bench/bench_ui.py (headless Chromium)")
    parser.add_argument("--no-stream", action="store_true", help="skip the SSE streaming figures")
    parser.add_argument("--no-memory", action="store_true", help="skip the checkpoint memory figures")
    parser.add_argument("--no-213", action="store_true", help="skip torch 2.13.0")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", default="1", help=argparse.SUPPRESS)
    parser.add_argument("--no-torch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.threads, not args.no_torch)
        return 0
    if args.quick:
        args.rounds, args.no_ui, args.no_stream, args.no_memory = 4, True, True, True

    py = sys.executable
    workers: dict[str, Worker] = {}
    notes: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="perf-bench-"))
    try:
        workers["1t"] = Worker("1t", py, "1", ROOT, True)
        workers["dt"] = Worker("dt", py, "default", ROOT, True)
        py213 = TORCH213_FILE.read_text().strip() if TORCH213_FILE.exists() else ""
        if not args.no_213 and py213 and Path(py213).exists():
            workers["1t-213"] = Worker("1t-213", py213, "1", ROOT, True)
            workers["dt-213"] = Worker("dt-213", py213, "default", ROOT, True)
        else:
            notes.append("torch 2.13.0 not measured (--no-213, or no venv: scripts/setup.sh --oracle)")
        workers["no-emit"] = Worker(
            "no-emit", py, "1", no_emit_build(tmp), True
        )  # torch imported, unused: alike processes
        workers["1t-b"] = Worker("1t-b", py, "1", ROOT, True)  # the control of off/no-emit
        workers["app"] = Worker("app", py, "1", ROOT, False)  # recording, as in the app
        figures = run_rounds(workers, [w for w in args.workloads.split(",") if w], args.rounds)
        infos = {k: w.info for k, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
        shutil.rmtree(tmp, ignore_errors=True)
    doc = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
        "workers": infos,
        "notes": notes,
        "figures": figures,
    }
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")  # written after every stage: a late
    stages = []  # failure (Chromium, the server) keeps what was measured before it
    if not args.no_stream:
        stages.append(("stream", lambda: stream_figures(3)))
    if not args.no_memory:
        stages.append(("memory", memory_figures))
    if not args.no_ui:
        stages.append(("viewer", ui_figures))
    for name, stage in stages:
        try:
            figures.update(stage())
        except (Exception, SystemExit) as e:  # noqa: BLE001 - reported, and the table still printed
            notes.append(f"{name} figures failed: {type(e).__name__}: {e}")
        RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print_table(figures)
    for note in notes:
        print("note:", note)
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
