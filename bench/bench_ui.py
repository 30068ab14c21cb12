"""The viewer on long runs, in headless Chromium: how soon a page is interactive, and the latency
of a step and of a jump, at 100,000 and 1,000,000 events.

    .venv/bin/python bench/bench_ui.py [--sizes 100k,1M] [--steps 300] [--jumps 60] [--json PATH]

The issue's bar (issue 15): a step under 16 ms at 1M events; a 100,000-event run's page
interactive in under 2 s (4.2 s before) and a random jump under 16 ms at the 95th percentile
(47 ms before; 96 ms cold). For each size this records a trace with the engine (52 checkpointed
blocks, each logging activation statistics under ``no_grad``, and 17.5 backward passes with
``retain_graph`` per 100,000 events, so that a run has at least that many: about 2,000 graph nodes
at every size), derives each event's
changes and caption as the server does (``engine.trace.export.annotate``), its DOT, story and
memory report, and serves them, with the small ``nested_checkpoint`` scenario for comparison,
from a minimal stand-in of the server's API (``/api/runs/{id}``, its SSE ``/events``,
``/story``, ``/memory``, ``/graph.dot``, the run page from ``templates/``, ``static/``): the
stand-in answers at once, so this measures the front end alone. Then it drives the real viewer
page with Playwright.

Loading (ms from the start of navigation, read in the page; the page opens at the middle step at
the default, story level, as a shared link would):

- ``first caption``: the first events are in and rendered;
- ``events in``: every event of the run is in the Player;
- ``interactive``: every event is in, the story level is ready and the opened step shown, and a
  step forward issued then has rendered (this is the time at which it finished). Checked once an
  animation frame, so it is late by up to a frame, never early;
- ``graph drawn``: the graph is laid out (Graphviz, one long task) and drawn at the step.

Latencies (ms; each sample is the JavaScript of the step, the player and every view, plus a
forced style and layout, ``offsetHeight``: what the browser must do before it can paint), at the
"every event" level:

- ``step``: one step forward or back with the arrow key handler's call (``lens.act``), in three
  places of the run (start, middle, end), all pooled; each place also on its own;
- ``key →``: a real ``keydown`` event on the document;
- ``jump``: to a random step, once the page has built its snapshots (the player restores the
  nearest one); ``jump cold``: the first jumps on a fresh page, as soon as its graph is drawn
  (the snapshots are those built by then);
- ``next recompute``: "next event of kind recompute_start".

Reported: median, 95th percentile and max, the 95th percentile over the 16 ms frame budget, and
over the same measurement on the small run (how the cost grows with the trace: 1 means not at
all). ``play``: the share of animation frames longer than 20 ms while playing at 60 steps a
second, and from a Chromium trace the main thread's time per frame then (paint included).
``--profile`` adds each view's share of a jump (``lens.profile``). ``--json PATH`` writes every
figure (bench/run_all.py reads it for ``make bench``). ``--cache DIR`` keeps the recorded runs
between invocations (keyed by the scenario's text; delete it after changing the engine);
``--root DIR`` serves another checkout's ``static/`` and ``templates/`` (to compare a change with
what it changed), ``--port N`` the stand-in on a given port.

``--ab DIR [--rounds N]`` compares the viewer served from ``DIR`` (an export of ``static/`` and
``templates/`` before a change) with this checkout's, as interleaved rounds on the shared machine:
both pages open side by side in one browser, and each round takes the same 20 jumps, and 60 steps
forward then back at the start, middle and end of the run, on each page in turn (the order
alternating); reported are each side's median and p95 over all rounds and the medians of the
rounds' p50 and p95 ratios (after / before), which is what carries over from a loaded machine. Below 1M
events, each round also opens a fresh page of each side for 10 cold jumps.
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
BATCH = 500  # events per SSE message, as the app stores them (app/config.py batch_events)

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


def build_run(run_id: str, text: str, filename: str, title: str, cache: Path | None = None) -> dict[str, Any]:
    """Record ``text`` in this process and derive what the server would send for it (kept in
    ``cache``, a directory, when given)."""
    import hashlib
    import pickle

    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    cached = cache / f"{key}.pickle" if cache else None
    if cached and cached.exists():
        run: dict[str, Any] = pickle.loads(cached.read_bytes())
        run["meta"]["id"] = run_id
        print(f"{run_id}: {run['meta']['n_events']:,} events, {run['nodes']:,} nodes (cached)", flush=True)
        return run

    from app.runner import run_scenario
    from app.sandbox import Limits
    from engine.trace.export import annotate, to_dot
    from engine.trace.memory import memory_report
    from engine.trace.state import initial_state
    from engine.trace.story import story_document

    t0 = time.perf_counter()
    result = run_scenario(text, trusted=True, filename=filename, limits=Limits(max_events=10**8))
    if result.trace is None or result.error is not None:
        raise SystemExit(f"the bench scenario failed: {result.error}")
    events = result.trace["events"]
    t1 = time.perf_counter()
    derived = annotate(events)
    t2 = time.perf_counter()
    dot = to_dot(events).source
    t3 = time.perf_counter()
    story = json.dumps(story_document(events), separators=(",", ":"))
    memory = json.dumps(memory_report(events), separators=(",", ":"))
    batches = []
    for start in range(0, len(events), BATCH):
        chunk = [
            {"event": e, "changes": d["changes"], "caption": d["caption"], "changed": d["changed"]}
            for e, d in zip(events[start : start + BATCH], derived[start : start + BATCH], strict=True)
        ]
        batches.append((chunk[-1]["event"]["seq"], json.dumps(chunk, separators=(",", ":"))))
    nodes = sum(1 for e in events if e["kind"] == "node_new")
    print(
        f"{run_id}: {len(events):,} events, {nodes:,} nodes; recorded in {t1 - t0:.1f} s, "
        f"annotated in {t2 - t1:.1f} s, DOT in {t3 - t2:.1f} s ({len(dot) / 1e3:.0f} kB), "
        f"story and memory report in {time.perf_counter() - t3:.1f} s",
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
    run = {"meta": meta, "batches": batches, "dot": dot, "nodes": nodes, "story": story, "memory": memory}
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(pickle.dumps(run))
    return run


# --- a stand-in for the server's API --------------------------------------------------------------


def make_handler(runs: dict[str, dict[str, Any]], root: Path = ROOT) -> type[BaseHTTPRequestHandler]:
    """The stand-in, serving ``static/`` and ``templates/`` from ``root`` (another checkout's, to
    compare a change with what it changed)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(root / "templates"), autoescape=True)
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
                file = (root / path.lstrip("/")).resolve()
                if root.resolve() / "static" in file.parents and file.is_file():
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
                elif rest in (["story"], ["memory"]):
                    self.send(run[rest[0]].encode(), "application/json")
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
def serve(runs: dict[str, dict[str, Any]], root: Path = ROOT, port: int = 0) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(runs, root))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- measuring in the page ----------------------------------------------------------------------

# Before the page's own scripts: the loading milestones, checked once an animation frame (so each
# is late by up to a frame, never early), in ms from the start of navigation.
LOAD_JS = """
(() => {
  const t = (window.__bench = {});
  const check = () => {
    const lens = window.lens;
    const P = lens && lens.player;
    if (P) {
      const now = performance.now();
      if (!t.first_caption && P.length > 0) t.first_caption = now;
      const n = lens.run ? lens.run.n_events : -1;
      if (!t.events && P.length >= n && n > 0) t.events = now;
      if (!t.story && document.body.dataset.story === "1") t.story = now;
      // "deferred": a graph too big to lay out unasked (Note [Graphs too big to lay out at once]).
      const g = document.body.dataset.graph;
      if (!t.graph && (g === "1" || g === "deferred")) t.graph = now;
      if (!t.interactive && t.events && t.story) {
        lens.act("forward");
        document.body.offsetHeight;
        t.interactive = performance.now();
      }
    }
    if (!t.interactive || !t.graph) requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})();
"""

# Each sample is one call through the viewer's action handler (the player and every view render
# synchronously) plus a forced style recalculation and layout.
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
  out["step"] = Object.values(out).flat(); // every forward and back sample
  lens.act("goto", Math.floor(n / 3)); await frame();
  out["key \u2192"] = [];
  for (let i = 0; i < steps; i++) {
    out["key \u2192"].push(sample(() => document.dispatchEvent(
      new KeyboardEvent("keydown", {key: "ArrowRight", bubbles: true}))));
    if (i % 25 === 0) await frame();
  }
  // Jumps once every snapshot is built (Note [Snapshots built ahead] in static/js/player.js).
  while (P.aheadStep < n) await frame();
  out["jump"] = [];
  const views = {};
  for (let i = 0; i < jumps; i++) { const to = Math.floor(rand() * n); lens.profile = {};
    out["jump"].push(sample(() => lens.act("goto", to)));
    for (const [k, v] of Object.entries(lens.profile)) (views[k] ||= []).push(v.reduce((a, b) => a + b, 0));
    lens.profile = null; await frame(); }
  lens.act("goto", 0); await frame();
  out["next recompute"] = [];
  for (let i = 0; i < jumps && P.nextOf("recompute_start") !== null; i++) {
    out["next recompute"].push(sample(() => lens.act("next-kind", "recompute_start"))); await frame(); }
  return {samples: out, views};
}
"""

COLD_JUMPS_JS = """
async ({jumps, seed}) => {
  const lens = window.lens, n = lens.player.length;
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  let s = seed; const rand = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  const built = lens.player.aheadStep;
  const out = [];
  for (let i = 0; i < jumps; i++) { const to = Math.floor(rand() * n); const t0 = performance.now();
    lens.act("goto", to); document.body.offsetHeight; out.push(performance.now() - t0); await frame(); }
  return {samples: out, built};
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


def open_viewer(browser: Any, base: str, run_id: str, n_events: int) -> tuple[Any, dict[str, float]]:
    """A fresh page at the run's middle step at the default level, once interactive and its graph
    drawn; returns it and its loading milestones (ms from the start of navigation)."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.add_init_script(LOAD_JS)
    page.goto(f"{base}/runs/{run_id}?step={n_events // 2}")
    ready = "window.__bench.interactive && window.__bench.graph"
    page.wait_for_function(ready, timeout=1_800_000, polling=100)
    if errors:
        raise SystemExit(f"errors in the page: {errors}")
    milestones: dict[str, float] = page.evaluate("window.__bench")
    page.evaluate("window.lens.act('level', 'events')")
    return page, milestones


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


def size_arg(text: str) -> list[int]:
    """``100k,1M`` -> [100000, 1000000]."""
    scale = {"k": 1_000, "m": 1_000_000}
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        out.append(int(float(part[:-1]) * scale[part[-1]]) if part[-1] in scale else int(part))
    return out


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


def measure_size(
    browser: Any, base: str, run_id: str, run: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    n = run["meta"]["n_events"]
    page, load = open_viewer(browser, base, run_id, n)
    cold = page.evaluate(COLD_JUMPS_JS, {"jumps": args.jumps, "seed": 7})
    measured = page.evaluate(MEASURE_JS, {"steps": args.steps, "jumps": args.jumps, "seed": 11})
    samples: dict[str, list[float]] = measured["samples"]
    samples["jump cold"] = cold["samples"]
    trace_path = Path(tempfile.mkdtemp()) / "play.json"
    browser.start_tracing(page=page, path=str(trace_path), categories=["devtools.timeline", "cc"])
    play = page.evaluate(PLAY_JS, {"seconds": 3})
    browser.stop_tracing()
    main_frames = frame_times(trace_path)
    if args.shot:
        page.evaluate("window.lens.act('goto', Math.floor(window.lens.player.length / 2))")
        page.wait_for_timeout(500)
        page.screenshot(path=str(args.shot).replace(".png", f"-{label(n)}.png"))
    page.close()
    return {
        "n": n,
        "nodes": run["nodes"],
        "load": load,
        "samples": samples,
        "views": measured["views"],
        "cold_built": cold["built"],
        "play": play,
        "main_frames": main_frames,
    }


def print_size(result: dict[str, Any], small: dict[str, list[float]], profile: bool) -> None:
    n, load = result["n"], result["load"]
    print(
        f"\n{n:,} events, {result['nodes']:,} nodes. Loading (ms from navigation): first caption "
        f"{load['first_caption']:.0f}, events in {load['events']:.0f}, story {load['story']:.0f}, "
        f"interactive {load['interactive']:.0f}, graph drawn {load['graph']:.0f}."
    )
    print(
        f"Latencies in ms (step JS + style + layout); jump cold with snapshots built to event "
        f"{result['cold_built'] or 0:,} of {n:,}."
    )
    print(f"{'measurement':22} {'median':>8} {'p95':>8} {'max':>8}  {'p95/16ms':>8}  {'p95/small':>9}")
    for name, samples in result["samples"].items():
        med, p95, top = summary(samples)
        ref = small.get(name)
        ratio = f"{p95 / max(summary(ref)[1], 1e-3):9.2f}" if ref else f"{'':>9}"
        print(f"{name:22} {med:8.2f} {p95:8.2f} {top:8.2f}  {p95 / BUDGET_MS:8.2f}  {ratio}")
    if profile:
        print(
            "a jump, per view (ms): "
            + ", ".join(f"{k} {summary(v)[0]:.1f}/{summary(v)[1]:.1f}" for k, v in result["views"].items())
            + " (median/p95)"
        )
    play = result["play"]
    slow = sum(1 for t in play if t > 20.0)
    print(
        f"play at 60 steps/s: {len(play)} frames, {slow} longer than 20 ms "
        f"({100 * slow / max(1, len(play)):.1f}%), median frame {statistics.median(play):.1f} ms"
    )
    if result["main_frames"]:
        med, p95, top = summary(result["main_frames"])
        print(
            f"  main thread per frame while playing (the step, style, layout, paint): median {med:.1f} ms, "
            f"p95 {p95:.1f} ms, max {top:.1f} ms"
        )


def figures(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every figure for bench/run_all.py: value, unit, target and anchor (what it is compared to)."""
    budget = "the 16 ms frame budget"
    anchors = {
        "jump": "issue 15: 47 ms before at 100k",
        "jump cold": "issue 15: 96 ms before at 100k",
    }
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        at = f"{label(r['n'])} events"
        load = r["load"]
        out[f"interactive ({at})"] = {
            "value": round(load["interactive"], 1),
            "unit": "ms",
            "target": 2000.0 if r["n"] <= 100_000 * 1.1 else None,
            "anchor": "issue 15: 4.2 s before (100k)",
        }
        milestones = (("first_caption", "first caption"), ("events", "events in"), ("graph", "graph drawn"))
        for key, name in milestones:
            out[f"{name} ({at})"] = {"value": round(load[key], 1), "unit": "ms", "target": None, "anchor": ""}
        for name in ("step", "key \u2192", "jump", "jump cold", "next recompute"):
            if not r["samples"].get(name):
                continue
            med, p95, top = summary(r["samples"][name])
            out[f"{name} p95 ({at})"] = {
                "value": round(p95, 2),
                "unit": "ms",
                "p50": round(med, 2),
                "max": round(top, 2),
                "target": BUDGET_MS,
                "anchor": anchors.get(name, budget),
            }
        if r["main_frames"]:
            med, p95, _ = summary(r["main_frames"])
            out[f"play frame p95 ({at})"] = {
                "value": round(p95, 1),
                "unit": "ms",
                "p50": round(med, 1),
                "target": None,
                "anchor": "main thread per frame at 60 steps/s, paint included",
            }
    return out


# --- interleaved A/B ------------------------------------------------------------------------------

AB_ROUND_JS = """
async ({what, seed, where}) => {
  const lens = window.lens, P = lens.player, n = P.length;
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const sample = (fn) => { const t0 = performance.now(); fn(); document.body.offsetHeight;
                           return performance.now() - t0; };
  while (P.aheadStep < n) await frame();
  let s = seed; const rand = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  const out = [];
  if (what === "jump") {
    for (let i = 0; i < 20; i++) {
      const to = Math.floor(rand() * n);
      out.push(sample(() => lens.act("goto", to)));
      await frame();
    }
  } else {
    lens.act("goto", where === "start" ? 0 : where === "middle" ? Math.floor(n / 2) - 60 : n - 61);
    await frame();
    for (const act of ["forward", "back"]) {
      for (let i = 0; i < 60; i++) { out.push(sample(() => lens.act(act))); if (i % 25 === 0) await frame(); }
    }
  }
  return out;
}
"""


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ab_size(browser: Any, bases: dict[str, str], run_id: str, n: int, rounds: int) -> None:
    """Interleaved rounds on the viewer before (bases["before"]) and after (bases["after"])."""
    pages = {side: open_viewer(browser, base, run_id, n)[0] for side, base in bases.items()}
    kinds = ["jump", "step (start)", "step (middle)", "step (end)"] + (["jump cold"] if n < 1_000_000 else [])
    samples: dict[tuple[str, str], list[float]] = {(k, side): [] for k in kinds for side in bases}
    ratios: dict[str, list[float]] = {k: [] for k in kinds}  # per round: p95 after / before
    medians: dict[str, list[float]] = {k: [] for k in kinds}  # per round: median after / before
    for r in range(rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for kind in kinds:
            got: dict[str, list[float]] = {}
            for side in order:
                if kind == "jump cold":
                    page, _ = open_viewer(browser, bases[side], run_id, n)
                    got[side] = page.evaluate(COLD_JUMPS_JS, {"jumps": 10, "seed": 7 + r})["samples"]
                    page.close()
                else:
                    pages[side].bring_to_front()
                    where = kind[6:-1] if kind.startswith("step") else None
                    what = "jump" if where is None else "step"
                    got[side] = pages[side].evaluate(
                        AB_ROUND_JS, {"what": what, "seed": 11 + r, "where": where}
                    )
                samples[(kind, side)] += got[side]
            ratios[kind].append(p95(got["after"]) / p95(got["before"]))
            medians[kind].append(statistics.median(got["after"]) / statistics.median(got["before"]))
    print(f"\n{label(n)}: {rounds} interleaved rounds (ms: median / p95 over all rounds)")
    head = "after/before (median of the rounds' p50, p95 ratios)"
    print(f"{'measurement':16} {'before':>16} {'after':>16}  {head}")
    for kind in kinds:
        b, a = samples[(kind, "before")], samples[(kind, "after")]
        cells = [f"{statistics.median(x):6.1f} / {p95(x):6.1f}" for x in (b, a)]
        p50_ratio, p95_ratio = statistics.median(medians[kind]), statistics.median(ratios[kind])
        print(f"{kind:16} {cells[0]:>16} {cells[1]:>16}  {p50_ratio:.2f}, {p95_ratio:.2f}")
    for page in pages.values():
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=size_arg, default=[100_000, 1_000_000], help="events per run (default 100k,1M)"
    )
    parser.add_argument("--steps", type=int, default=300, help="samples per step measurement")
    parser.add_argument("--jumps", type=int, default=60, help="samples per jump measurement")
    parser.add_argument("--shot", type=Path, help="save a screenshot of each big run here (-100k.png ...)")
    parser.add_argument("--profile", action="store_true", help="print each view's share of a jump")
    parser.add_argument("--json", type=Path, help="write every figure here, as JSON")
    parser.add_argument("--cache", type=Path, help="keep the recorded runs in this directory")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="serve static/ and templates/ from this checkout instead"
    )
    parser.add_argument("--port", type=int, default=0, help="the stand-in server's port (default: any free)")
    parser.add_argument(
        "--ab", type=Path, help="compare the viewer served from this directory (before) with --root's"
    )
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds of --ab")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM_ARGS, chromium_path

    small_path = ROOT / "scenarios" / "nested_checkpoint.py"
    runs = {
        "small": build_run(
            "small", small_path.read_text(), "scenarios/nested_checkpoint.py", "Nested checkpoints"
        )
    }
    for n in args.sizes:
        # A backward pass makes about 5,800-6,100 events (fewer per pass in a longer run, whose
        # forward counts less): 17.5 per 100,000 events make a run at least that long.
        passes = max(1, round(17.5 * n / 100_000))
        text = BIG_SCENARIO.replace("BLOCKS", "52").replace("BACKWARDS", str(passes))
        runs[label(n)] = build_run(label(n), text, "bench_big.py", f"Bench: {label(n)} events", args.cache)
    path = chromium_path()
    if path is None:
        raise SystemExit("Chromium is not installed: run scripts/setup.sh --browser")
    if args.ab:
        before_port = args.port + 1 if args.port else 0
        with (
            serve(runs, args.ab, before_port) as before,
            serve(runs, args.root, args.port) as after,
            sync_playwright() as p,
        ):
            browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
            for n in args.sizes:
                ab_size(browser, {"before": before, "after": after}, label(n), n, args.rounds)
            browser.close()
        return
    results = []
    with serve(runs, args.root, args.port) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        page, _ = open_viewer(browser, base, "small", runs["small"]["meta"]["n_events"])
        small_steps = min(args.steps, runs["small"]["meta"]["n_events"] // 4)
        small = page.evaluate(MEASURE_JS, {"steps": small_steps, "jumps": args.jumps, "seed": 11})["samples"]
        page.close()
        for n in args.sizes:
            results.append(measure_size(browser, base, label(n), runs[label(n)], args))
            print_size(results[-1], small, args.profile)
        browser.close()
    if args.json:
        doc = {"figures": figures(results), "small_events": runs["small"]["meta"]["n_events"]}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
