"""The viewer's step latency on a big run, in headless Chromium, as ratios measured in one run.

    .venv/bin/python bench/bench_ui.py [--blocks 52] [--backwards 16] [--steps 300] [--shot PATH]

The issue's bar: one step under 16 ms on a 2,000-node, 100,000-event trace. This records such a
trace with the engine (``--blocks`` checkpointed blocks, each logging activation statistics under
``no_grad``, and ``--backwards`` backward passes with ``retain_graph``: about 2,000 nodes and
100,000 events with the defaults), derives each event's changes and caption as the server does
(``engine.trace.export.annotate``) and its DOT (``to_dot``), and serves it, with the small
``nested_checkpoint`` scenario for comparison, from a minimal stand-in of the server's API
(``/api/runs/{id}``, its SSE ``/events``, ``/graph.dot``, the run page from ``templates/``,
``static/``): the viewer never asks the server anything while stepping, so this measures the
front end alone. Then it drives the real viewer page with Playwright:

- ``forward`` / ``back``: one step with the arrow key handler's call (``lens.act``), in three
  places of the run (start, middle, end);
- ``key →``: a real ``keydown`` event on the document;
- ``jump``: to a random step (the player restores the nearest snapshot), after one walk through
  the run; ``jump cold``: the same on a fresh page, before any walk;
- ``next recompute``: "next event of kind recompute_start".

Each sample is the JavaScript of the step (the player and every view) plus a forced style and
layout (``offsetHeight``), so what the browser must do before it can paint. Reported: median,
95th percentile and max in ms, the 95th percentile over the 16 ms frame budget, and over the same
step on the small run (how the cost grows with the trace: 1 means not at all). ``play``: the share
of animation frames longer than 20 ms while playing at 60 steps a second, and from a Chromium trace
the main thread's time per frame then: a step with everything the browser does to show it, paint
included (Chromium repaints the whole SVG when any element of it changes, so a big graph pays there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET_MS = 16.0
BATCH = 2000  # events per SSE message

BIG_SCENARIO = '''"""Bench: a long chain of checkpointed blocks, backpropagated many times"""
import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)
ws = [torch.randn(4, 4, requires_grad=True) for _ in range(BLOCKS)]


def block(h, w):
    with torch.no_grad():  # activation statistics, as a training loop would log them
        s = h
        for _ in range(12):
            s = s.abs()
    return (h @ w).tanh() * 0.5 + h


x = torch.randn(2, 4, requires_grad=True)
h = x
for i in range(BLOCKS):
    h = checkpoint(block, h, ws[i], use_reentrant=False)
loss = h.sum()
for r in range(BACKWARDS):
    loss.backward(retain_graph=r < BACKWARDS - 1)
'''


# --- the runs ------------------------------------------------------------------------------------


def build_run(run_id: str, text: str, filename: str, title: str) -> dict[str, Any]:
    """Record ``text`` in this process and derive what the server would send for it."""
    from app.runner import run_scenario
    from app.sandbox import Limits
    from engine.trace.export import annotate, to_dot
    from engine.trace.state import initial_state
    from engine.trace.story import story_document

    t0 = time.perf_counter()
    result = run_scenario(text, trusted=True, filename=filename, limits=Limits(max_events=10**7))
    if result.trace is None or result.error is not None:
        raise SystemExit(f"the bench scenario failed: {result.error}")
    events = result.trace["events"]
    t1 = time.perf_counter()
    derived = annotate(events)
    t2 = time.perf_counter()
    dot = to_dot(events).source
    t3 = time.perf_counter()
    story = json.dumps(story_document(events))
    batches = []
    for start in range(0, len(events), BATCH):
        chunk = [
            {"event": e, "changes": d["changes"], "caption": d["caption"], "changed": d["changed"]}
            for e, d in zip(events[start : start + BATCH], derived[start : start + BATCH], strict=True)
        ]
        batches.append((chunk[-1]["event"]["seq"], json.dumps(chunk)))
    nodes = sum(1 for e in events if e["kind"] == "node_new")
    print(
        f"{run_id}: {len(events):,} events, {nodes:,} nodes; recorded in {t1 - t0:.1f} s, "
        f"annotated in {t2 - t1:.1f} s, DOT in {t3 - t2:.1f} s ({len(dot) / 1e3:.0f} kB)",
        flush=True,
    )
    meta = {
        "id": run_id,
        "status": "done",
        "scenario": None,
        "title": title,
        "filename": filename,
        "source": text,
        "error": None,
        "n_events": len(events),
        "initial_state": initial_state(),
    }
    return {"meta": meta, "batches": batches, "dot": dot, "nodes": nodes, "story": story}


# --- a stand-in for the server's API --------------------------------------------------------------


def make_handler(runs: dict[str, dict[str, Any]]) -> type[BaseHTTPRequestHandler]:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROOT / "templates"), autoescape=True)
    types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".md": "text/plain"}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def send(self, body: bytes, ctype: str, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path = urlparse(self.path).path
            parts = path.strip("/").split("/")
            if parts[0] == "static":
                file = (ROOT / path.lstrip("/")).resolve()
                if ROOT / "static" in file.parents and file.is_file():
                    self.send(file.read_bytes(), types.get(file.suffix, "application/octet-stream"))
                else:
                    self.send(b"not found", "text/plain", 404)
            elif parts[0] == "runs" and len(parts) == 2 and parts[1] in runs:
                config = {"page": "run", "run_id": parts[1]}
                html = env.get_template("run.html").render(config=config, run_id=parts[1])
                self.send(html.encode(), "text/html; charset=utf-8")
            elif parts[:2] == ["api", "runs"] and len(parts) >= 3 and parts[2] in runs:
                run = runs[parts[2]]
                rest = parts[3:]
                if not rest:
                    self.send(json.dumps(run["meta"]).encode(), "application/json")
                elif rest == ["graph.dot"]:
                    self.send(run["dot"].encode(), "text/vnd.graphviz")
                elif rest == ["events"]:
                    self.stream(run)
                elif rest == ["story"]:
                    self.send(run["story"].encode(), "application/json")
                else:
                    self.send(b'{"detail": "not found"}', "application/json", 404)
            else:
                self.send(b'{"detail": "not found"}', "application/json", 404)

        def stream(self, run: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for last, data in run["batches"]:
                self.wfile.write(f"event: events\nid: {last}\ndata: {data}\n\n".encode())
            done = {"status": "done", "error": None, "n_events": run["meta"]["n_events"]}
            self.wfile.write(f"event: done\ndata: {json.dumps(done)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def serve(runs: dict[str, dict[str, Any]]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(runs))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- measuring in the page ----------------------------------------------------------------------

# Runs in the page: each sample is one call through the viewer's action handler (the player and
# every view render synchronously) plus a forced style recalculation and layout.
MEASURE_JS = """
async ({steps, jumps, seed}) => {
  const lens = window.lens, P = lens.player, n = P.length;
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const sample = (fn) => { const t0 = performance.now(); fn(); document.body.offsetHeight;
                           return performance.now() - t0; };
  let s = seed;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  const out = {};
  const places = {start: 0, middle: Math.floor(n / 2) - steps, end: n - steps - 1};
  for (const [where, at] of Object.entries(places)) {
    lens.act("goto", Math.max(0, at)); await frame();
    out[`forward (${where})`] = [];
    for (let i = 0; i < steps; i++) { out[`forward (${where})`].push(sample(() => lens.act("forward")));
                                      if (i % 25 === 0) await frame(); }
    out[`back (${where})`] = [];
    for (let i = 0; i < steps; i++) { out[`back (${where})`].push(sample(() => lens.act("back")));
                                      if (i % 25 === 0) await frame(); }
  }
  lens.act("goto", Math.floor(n / 3)); await frame();
  out["key \u2192"] = [];
  for (let i = 0; i < steps; i++) {
    out["key \u2192"].push(sample(() => document.dispatchEvent(
      new KeyboardEvent("keydown", {key: "ArrowRight", bubbles: true}))));
    if (i % 25 === 0) await frame();
  }
  out["jump"] = [];
  for (let i = 0; i < jumps; i++) { const to = Math.floor(rand() * n);
    out["jump"].push(sample(() => lens.act("goto", to))); await frame(); }
  lens.act("goto", 0); await frame();
  out["next recompute"] = [];
  for (let i = 0; i < jumps && P.nextOf("recompute_start") !== null; i++) {
    out["next recompute"].push(sample(() => lens.act("next-kind", "recompute_start"))); await frame(); }
  return out;
}
"""

COLD_JUMPS_JS = """
async ({jumps, seed}) => {
  const lens = window.lens, n = lens.player.length;
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  let s = seed; const rand = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  const out = [];
  for (let i = 0; i < jumps; i++) { const to = Math.floor(rand() * n); const t0 = performance.now();
    lens.act("goto", to); document.body.offsetHeight; out.push(performance.now() - t0); await frame(); }
  return out;
}
"""

# Frames while playing at 60 steps a second: their durations, from requestAnimationFrame.
PLAY_JS = """
async ({seconds}) => {
  const lens = window.lens;
  lens.act("goto", Math.floor(lens.player.length / 4));
  const sel = document.querySelector(".ctl-speed"); sel.value = "60"; sel.dispatchEvent(new Event("change"));
  lens.act("toggle-play");
  const times = [];
  await new Promise((done) => { let last = performance.now(); const t_end = last + seconds * 1000;
    const tick = (now) => { times.push(now - last); last = now;
      if (now < t_end) requestAnimationFrame(tick); else done(); };
    requestAnimationFrame(tick); });
  lens.act("toggle-play");
  return times.slice(1);
}
"""


def open_viewer(browser: Any, base: str, run_id: str) -> tuple[Any, float]:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    t0 = time.perf_counter()
    page.goto(f"{base}/runs/{run_id}?step=0&level=events")
    page.wait_for_function("document.body.dataset.graph === '1'", timeout=600_000)
    loaded = time.perf_counter() - t0
    if errors:
        raise SystemExit(f"errors in the page: {errors}")
    return page, loaded


def frame_times(trace_path: Path) -> list[float]:
    """Durations in ms of the renderer's main-thread frames (``ProxyMain::BeginMainFrame``: the
    requestAnimationFrame callbacks, where playing steps, then style, layout and paint) in a trace."""
    data = json.loads(trace_path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    by_thread: dict[Any, list[float]] = {}
    for e in events:
        if e.get("name") == "ProxyMain::BeginMainFrame" and e.get("ph") == "X":
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e["dur"] / 1000)
    return max(by_thread.values(), key=len) if by_thread else []


def summary(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95, ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--blocks", type=int, default=52, help="checkpointed blocks of the big run")
    parser.add_argument("--backwards", type=int, default=16, help="backward passes of the big run")
    parser.add_argument("--steps", type=int, default=300, help="samples per step measurement")
    parser.add_argument("--jumps", type=int, default=60, help="samples per jump measurement")
    parser.add_argument("--shot", type=Path, help="save a screenshot of the big run here")
    parser.add_argument(
        "--expanded",
        action="store_true",
        help="measure with every cluster expanded (a big graph starts with its recomputations collapsed)",
    )
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path

    small_path = ROOT / "scenarios" / "nested_checkpoint.py"
    big_text = BIG_SCENARIO.replace("BLOCKS", str(args.blocks)).replace("BACKWARDS", str(args.backwards))
    runs = {
        "small": build_run(
            "small", small_path.read_text(), "scenarios/nested_checkpoint.py", "Nested checkpoints"
        ),
        "big": build_run("big", big_text, "bench_big.py", "Bench: a big run"),
    }
    path = chromium_path()
    if path is None:
        raise SystemExit("Chromium is not installed: run scripts/setup.sh --browser")
    results: dict[str, dict[str, list[float]]] = {}
    with serve(runs) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        page, loaded = open_viewer(browser, base, "big")
        print(
            f"big run: page ready (events streamed and parsed, graph laid out) in {loaded:.1f} s", flush=True
        )
        if args.expanded:
            t0 = time.perf_counter()
            page.click(".graph-tools [data-act=expand]")
            page.wait_for_function(
                "!document.querySelector('#view-graph svg .node.collapsed')", timeout=600_000
            )
            print(f"big run: every cluster expanded (a new layout) in {time.perf_counter() - t0:.1f} s")
        shown = page.evaluate("document.querySelectorAll('#view-graph svg g.node').length")
        print(f"big run: the graph draws {shown:,} boxes", flush=True)
        cold = page.evaluate(COLD_JUMPS_JS, {"jumps": args.jumps, "seed": 7})
        params = {"steps": args.steps, "jumps": args.jumps, "seed": 11}
        results["big"] = page.evaluate(MEASURE_JS, params)
        results["big"]["jump cold"] = cold
        trace_path = Path(tempfile.mkdtemp()) / "play.json"
        browser.start_tracing(page=page, path=str(trace_path), categories=["devtools.timeline", "cc"])
        play = page.evaluate(PLAY_JS, {"seconds": 3})
        browser.stop_tracing()
        main_frames = frame_times(trace_path)
        if args.shot:
            page.evaluate("window.lens.act('goto', Math.floor(window.lens.player.length / 2))")
            page.wait_for_timeout(500)
            page.screenshot(path=str(args.shot))
        page.close()
        page, _ = open_viewer(browser, base, "small")
        small_params = {**params, "steps": min(args.steps, runs["small"]["meta"]["n_events"] // 4)}
        results["small"] = page.evaluate(MEASURE_JS, small_params)
        page.close()
        browser.close()

    big = runs["big"]
    print(
        f"\nbig: {big['meta']['n_events']:,} events, {big['nodes']:,} nodes"
        f"{' (every cluster expanded)' if args.expanded else ''}; small: nested_checkpoint, "
        f"{runs['small']['meta']['n_events']:,} events. Times in ms (step JS + style + layout)."
    )
    print(f"{'measurement':22} {'median':>8} {'p95':>8} {'max':>8}  {'p95/16ms':>8}  {'p95/small':>9}")
    for name, samples in results["big"].items():
        med, p95, top = summary(samples)
        small = results["small"].get(name)
        ratio = f"{p95 / max(summary(small)[1], 1e-3):9.2f}" if small else f"{'':>9}"
        print(f"{name:22} {med:8.2f} {p95:8.2f} {top:8.2f}  {p95 / BUDGET_MS:8.2f}  {ratio}")
    slow = sum(1 for t in play if t > 20.0)
    print(
        f"play at 60 steps/s: {len(play)} frames, {slow} longer than 20 ms "
        f"({100 * slow / max(1, len(play)):.1f}%), median frame {statistics.median(play):.1f} ms"
    )
    if main_frames:
        med, p95, top = summary(main_frames)
        print(
            f"  main thread per frame while playing (the step, style, layout, paint): median {med:.1f} ms, "
            f"p95 {p95:.1f} ms, max {top:.1f} ms ({med / BUDGET_MS:.2f} of the budget at the median)"
        )


if __name__ == "__main__":
    main()
