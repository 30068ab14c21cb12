"""``autograd-lens``: trace scenarios from the command line.

    autograd-lens scenarios                         list the bundled scenarios
    autograd-lens trace SCENARIO [-o trace.json] [--format json|chrome] [--backend engine|torch]
                                 [--untrusted] [--open [--server URL] [--no-browser]] [-- ARG...]
    autograd-lens trace SCENARIO --story [-o story.txt]   the story level as text (docs/viewer.md)
    autograd-lens open TRACE.json [--server URL] [--no-browser]   step through it in the viewer
    autograd-lens dot SCENARIO -o graph.dot|graph.svg [--backend engine|torch] [--untrusted]
    autograd-lens diff SCENARIO [--against TRACE.json] [-o diff.json] [--json]   engine vs torch
    autograd-lens compare [--n N] [--backend engine|torch|both] [--sweep] [--json]
                                 one MLP under each checkpointing strategy (docs/memory.md)
    autograd-lens memory SCENARIO [--backend engine|torch] [--what-if PATTERN]... [-- ARG...]
                                 per-module memory; --what-if: again with modules checkpointed
    autograd-lens serve [--host H] [--port P]       the web app

SCENARIO is a path to a Python file or the id (file stem) of a bundled scenario. A file runs in
this process, like ``python file.py ARG...`` would (its directory first on ``sys.path``, so it
imports its sibling modules; ``sys.argv`` its name and the ARGs given after ``--``);
``--untrusted`` runs it in the sandbox instead (the way the web app runs text it receives).
``--backend torch`` records the same trace from real PyTorch instead of the engine: a
scenario written with ``import engine as torch``, or a PyTorch script of your own that does
``import torch``. Trusted local code only: the sandbox knows the engine alone. The scenario's
printed output goes to stderr, with a progress indicator (the number of events recorded) while a
long run goes on.

``open`` sends a trace file to a running web app (``make run``; ``--server``, default
``$AUTOGRAD_LENS_URL`` or http://127.0.0.1:8000) and prints the viewer's address: the way to
step through the trace of your own PyTorch script (``trace my_script.py --backend torch -o
t.json``, then ``open t.json``; or ``trace ... --open`` at once). Nothing runs on the server.

``diff`` runs the scenario on both backends and aligns the traces (docs/diff.md): it prints the
checkpoint events around the first divergence side by side and compares the final gradients.

Exit codes: 0 success (``diff``: checkpoint events identical and gradients equal), 1 the scenario
failed (the trace, up to the error, is still written; ``diff``: the traces or gradients differ),
2 bad usage (unknown scenario, unknown format, torch missing or with ``--untrusted``, the web app;
``open``: no such file, no server answering). ``open`` exits 1 when the server refuses the trace.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import webbrowser
from pathlib import Path
from typing import Any, TextIO

from app.runner import BACKENDS, RunResult, list_scenarios, resolve_scenario, run_scenario
from app.sandbox import Limits

BACKEND_HELP = (
    "what records the trace: the engine (default), or real PyTorch (torch: trusted local code only; "
    "the file may `import engine as torch` or `import torch` itself)"
)

SERVER_HELP = "the web app (default: $AUTOGRAD_LENS_URL, or http://127.0.0.1:8000 where `make run` serves)"


class Progress:
    """``\\r``-updated event count on stderr, only on a terminal and only for runs over 0.5 s."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.start = time.monotonic()
        self.shown = False

    def __call__(self, n: int) -> None:
        if not self.enabled or time.monotonic() - self.start < 0.5:
            return
        self.stream.write(f"\rrecording... {n} events")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _torch_problem(untrusted: bool) -> str | None:
    """Why ``--backend torch`` cannot run, if it cannot."""
    if untrusted:
        return (
            "--backend torch runs trusted local code only; --untrusted runs in the sandbox, "
            "which knows the engine alone"
        )
    if importlib.util.find_spec("torch") is None:
        return "--backend torch needs PyTorch: pip install torch==2.8.0 (or scripts/setup.sh --oracle)"
    return None


def _run(args: argparse.Namespace, checkpoint_modules: list[str] | None = None) -> RunResult | int:
    backend = getattr(args, "backend", "engine")
    if backend == "torch" and (problem := _torch_problem(args.untrusted)):
        print(f"autograd-lens: {problem}", file=sys.stderr)
        return 2
    if checkpoint_modules is None:
        checkpoint_modules = getattr(args, "checkpoint_modules", None) or []
    if checkpoint_modules and args.untrusted:
        print(
            "autograd-lens: --checkpoint-modules runs trusted local code only, not --untrusted",
            file=sys.stderr,
        )
        return 2
    from app.whatif import WhatIfError, parse_patterns

    try:
        parse_patterns(checkpoint_modules)
    except WhatIfError as e:
        print(f"autograd-lens: {e}", file=sys.stderr)
        return 2
    try:
        path = resolve_scenario(args.scenario)
    except FileNotFoundError as e:
        print(f"autograd-lens: {e}", file=sys.stderr)
        return 2
    progress = Progress(sys.stderr, sys.stderr.isatty() and not args.quiet)
    limits = Limits(cpu_seconds=args.cpu_seconds, wall_seconds=args.wall_seconds)
    try:
        result = run_scenario(
            path,
            trusted=not args.untrusted,
            limits=limits,
            on_progress=progress,
            backend=backend,
            argv=args.script_args,
            checkpoint_modules=checkpoint_modules,
        )
    finally:
        progress.done()
    if result.stdout and not args.quiet:
        sys.stderr.write(result.stdout)
    if result.error is not None:
        print(f"autograd-lens: the scenario failed: {result.error}", file=sys.stderr)
    return result


def _write(text: str, output: str | None) -> None:
    if output is None or output == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        Path(output).write_text(text, encoding="utf-8")


def cmd_trace(args: argparse.Namespace) -> int:
    from engine.trace.export import to_chrome, to_json

    if args.open and args.format != "json":
        print(
            "autograd-lens: --open sends the json format to the viewer, not --format chrome", file=sys.stderr
        )
        return 2
    if args.story and (args.open or args.format != "json"):
        print("autograd-lens: --story prints text; it does not go with --open or --format", file=sys.stderr)
        return 2
    result = _run(args)
    if isinstance(result, int):
        return result
    if result.trace is None:
        return 1
    if args.story:
        from engine.trace.story import story_text

        _write(story_text(result.trace["events"]), args.output)
        return 0 if result.ok else 1
    text = to_chrome(result.trace) if args.format == "chrome" else to_json(result.trace, indent=args.indent)
    if args.output or not args.open:  # with --open alone, the trace goes to the viewer only
        _write(text, args.output)
    if args.output and args.output != "-" and not args.quiet:
        n = len(result.trace.get("events", []))
        print(f"wrote {n} events to {args.output} ({args.format})", file=sys.stderr)
    if args.open and (code := open_in_viewer(text.encode(), args.server, browser=not args.no_browser)) != 0:
        return code
    return 0 if result.ok else 1


def cmd_export(args: argparse.Namespace) -> int:
    """One self-contained HTML file of a trace file, or of a scenario run first (app/export_html.py)."""
    from app.export_html import lens_data, page_html, run_of_trace
    from app.imported import BadTrace, describe, read_trace
    from app.runs import docstring_title

    given = Path(args.scenario)
    ok = True
    if given.suffix == ".json" and given.is_file():
        try:
            doc = read_trace(given.read_bytes())
        except BadTrace as e:
            print(f"autograd-lens: {given} is not a trace: {e}", file=sys.stderr)
            return 2
        info = describe(doc)
        filename, source, backend = info.filename, info.source, info.backend
        title = docstring_title(source) or info.name
    else:
        result = _run(args)
        if isinstance(result, int):
            return result
        if result.trace is None:
            return 1
        doc, ok = result.trace, result.ok
        path = resolve_scenario(args.scenario)
        source = path.read_text(encoding="utf-8")
        filename, backend = result.filename or path.name, args.backend
        title = docstring_title(source) or path.stem
    run = run_of_trace(doc, run_id=given.stem, title=title, filename=filename, source=source, backend=backend)
    out = Path(args.html)
    out.write_text(page_html(lens_data(run, doc)), encoding="utf-8")
    if not args.quiet:
        print(f"wrote {out} ({len(doc['events'])} events; open it in a browser)", file=sys.stderr)
    return 0 if ok else 1


# --- the viewer of a running web app -------------------------------------------------------------


def default_server() -> str:
    """``$AUTOGRAD_LENS_URL``, else where ``make run`` serves (``$AUTOGRAD_LENS_HOST``/``_PORT``)."""
    if url := os.environ.get("AUTOGRAD_LENS_URL", "").strip():
        return url
    host = os.environ.get("AUTOGRAD_LENS_HOST", "").strip() or "127.0.0.1"
    if host in ("0.0.0.0", "::"):  # listening everywhere: reachable here on the loopback
        host = "127.0.0.1"
    port = os.environ.get("AUTOGRAD_LENS_PORT", "").strip() or "8000"
    return f"http://{host}:{port}"


def _opener(server: str) -> urllib.request.OpenerDirector:
    # A proxy from the environment must not swallow requests to this machine's own server.
    host = urllib.parse.urlsplit(server).hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    return (
        urllib.request.build_opener(urllib.request.ProxyHandler({}))
        if local
        else urllib.request.build_opener()
    )


def _can_open_a_browser() -> bool:
    # Without a display, webbrowser falls back to text browsers that would take over the terminal.
    graphical = sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    return graphical or bool(os.environ.get("BROWSER"))


def open_in_viewer(document: bytes, server: str, *, browser: bool) -> int:
    """POST a trace document to ``server``'s ``/api/traces``; print the viewer's address."""
    server = server.rstrip("/")
    if urllib.parse.urlsplit(server).scheme not in ("http", "https"):
        print(
            f"autograd-lens: --server must be an http:// or https:// address, not {server!r}", file=sys.stderr
        )
        return 2
    request = urllib.request.Request(
        f"{server}/api/traces", data=document, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with _opener(server).open(request, timeout=600) as response:
            created = json.load(response)
    except urllib.error.HTTPError as e:
        body = e.read().decode("utf-8", "replace")
        try:
            detail = json.loads(body)["detail"]
        except (ValueError, KeyError, TypeError):
            detail = body.strip() or e.reason
        print(f"autograd-lens: the server refused the trace ({e.code}): {detail}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        print(
            f"autograd-lens: no Autograd Lens server answers at {server} ({reason}); start one with "
            "`make run` (or `autograd-lens serve`), or give its address with --server URL",
            file=sys.stderr,
        )
        return 2
    url = f"{server}{created['url']}"
    print(url)
    if browser and _can_open_a_browser():
        webbrowser.open(url)
    return 0


def cmd_open(args: argparse.Namespace) -> int:
    if args.trace == "-":
        document = sys.stdin.buffer.read()
    else:
        try:
            document = Path(args.trace).read_bytes()
        except OSError as e:
            print(f"autograd-lens: cannot read {args.trace}: {e.strerror or e}", file=sys.stderr)
            return 2
    return open_in_viewer(document, args.server, browser=not args.no_browser)


def cmd_dot(args: argparse.Namespace) -> int:
    from engine.trace.export import to_dot

    out = Path(args.output)
    if out.suffix not in (".dot", ".gv", ".svg"):
        print("autograd-lens: dot -o must end in .dot, .gv or .svg", file=sys.stderr)
        return 2
    if out.suffix == ".svg" and shutil.which("dot") is None:
        print(
            "autograd-lens: rendering SVG needs Graphviz's `dot` (apt-get install graphviz)", file=sys.stderr
        )
        return 2
    result = _run(args)
    if isinstance(result, int):
        return result
    if result.trace is None:
        return 1
    source = to_dot(result.trace).source
    if out.suffix == ".svg":
        done = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, check=False)
        if done.returncode != 0:
            print(f"autograd-lens: dot failed: {done.stderr.decode(errors='replace')}", file=sys.stderr)
            return 1
        out.write_bytes(done.stdout)
    else:
        out.write_text(source, encoding="utf-8")
    if not args.quiet:
        print(f"wrote {out}", file=sys.stderr)
    return 0 if result.ok else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from engine.trace.diff import diff_traces, grads_verdict

    against = _read_against(args.against) if args.against else None
    if isinstance(against, int):
        return against
    if against is None and (problem := _torch_problem(untrusted=False)):
        print(f"autograd-lens: {problem}", file=sys.stderr)
        return 2
    try:
        path = resolve_scenario(args.scenario)
    except FileNotFoundError as e:
        print(f"autograd-lens: {e}", file=sys.stderr)
        return 2
    results: dict[str, RunResult] = {}
    for backend in BACKENDS if against is None else ("engine",):
        progress = Progress(sys.stderr, sys.stderr.isatty() and not args.quiet)
        try:
            results[backend] = run_scenario(
                path, trusted=True, on_progress=progress, backend=backend, argv=args.script_args
            )
        finally:
            progress.done()
        result = results[backend]
        if result.trace is None:
            print(f"autograd-lens: the {backend} run recorded nothing: {result.error}", file=sys.stderr)
            return 1
        if result.error is not None and not args.quiet:
            # Not a failure of the diff: a scenario may fail on purpose (determinism_error), and
            # then both backends must fail the same way.
            print(f"autograd-lens: the {backend} run ended with {result.error}", file=sys.stderr)
    engine = results["engine"]
    assert engine.trace is not None
    if against is None:
        torch = results["torch"]
        assert torch.trace is not None
        diff = diff_traces(engine.trace, torch.trace)
        grads = grads_verdict(engine.extra.get("grads"), torch.extra.get("grads"))
        equal = diff.checkpoint_equal and grads["equal"]
    else:
        label = str(against["meta"].get("backend") or "file")
        diff = diff_traces(engine.trace, against, b_label=label)
        # A trace file carries no gradients: the verdict is the events'.
        grads = {"equal": True, "problems": [], "verdict": "gradients not compared (a trace file has none)"}
        equal = diff.checkpoint_equal
    if args.output or args.json:
        doc = {**diff.to_json(), "grads": grads, "equal": equal, "scenario": str(args.scenario)}
        text = json.dumps(doc, indent=1)
        if args.json:
            _write(text, "-")
        if args.output:
            _write(text, args.output)
    if not args.json:
        print(_diff_text(diff.summary(), grads, equal))
    return 0 if equal else 1


def _read_against(path: str) -> dict[str, Any] | int:
    """The trace file of ``diff --against``, checked as an upload is (``app.imported``); or the
    exit code of a usage error."""
    from app.imported import BadTrace, read_trace

    try:
        return read_trace(Path(path).read_bytes())
    except OSError as e:
        print(f"autograd-lens: cannot read {path}: {e.strerror or e}", file=sys.stderr)
    except BadTrace as e:
        print(f"autograd-lens: {path} is not a trace: {e}", file=sys.stderr)
    return 2


def _diff_text(summary: str, grads: dict[str, object], equal: bool) -> str:
    verdict, _, rest = summary.partition("\n")
    lines = [f"{verdict}; {grads['verdict'] if grads['equal'] else 'gradients differ'}"]
    if rest:
        lines.append(rest)
    problems = grads["problems"]
    if isinstance(problems, list) and problems:
        lines.append("")
        lines.append("gradients:")
        lines.extend(f"  {p}" for p in problems)
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> int:
    """The compare page's table (app/compare.py), from runs in this process."""
    from app.compare import (
        STRATEGIES,
        SWEEP_NS,
        SWEEP_STRATEGIES,
        fit_exponent,
        model_source,
        row_of,
        table_text,
    )

    backends = list(BACKENDS) if args.backend == "both" else [args.backend]
    if "torch" in backends and (problem := _torch_problem(untrusted=False)):
        print(f"autograd-lens: {problem}", file=sys.stderr)
        return 2
    if args.sweep:
        specs = [(s, n, "engine") for s in SWEEP_STRATEGIES for n in SWEEP_NS]
    else:
        if not 1 <= args.n <= 64:
            print(f"autograd-lens: --n must be between 1 and 64 blocks, not {args.n}", file=sys.stderr)
            return 2
        specs = [(s, args.n, b) for s in STRATEGIES for b in backends]
    rows = []
    for strategy, n, backend in specs:
        result = run_scenario(
            model_source(strategy, n), trusted=True, backend=backend, filename=f"compare_{strategy}.py"
        )
        if result.trace is None or result.error is not None:
            print(f"autograd-lens: {strategy} (n={n}) on {backend} failed: {result.error}", file=sys.stderr)
            return 1
        rows.append(row_of(strategy, n, backend, result.trace["events"]))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not args.sweep:
        print(
            f"An MLP of {args.n} blocks under each strategy (held for backward = saved + recomputed bytes):"
        )
        print(table_text(rows))
        return 0
    print("Bytes held for the backward against the number of blocks N:")
    print("N".rjust(4) + "".join(f"{STRATEGIES[s].title:>42}" for s in SWEEP_STRATEGIES))
    for n in SWEEP_NS:
        held = {r["strategy"]: r["peak_held"] for r in rows if r["n"] == n}
        print(f"{n:>4}" + "".join(f"{held[s]:>42,}" for s in SWEEP_STRATEGIES))
    for s in SWEEP_STRATEGIES:
        points = [(r["n"], r["peak_held"]) for r in rows if r["strategy"] == s and r["n"] >= 4]
        k = fit_exponent([p[0] for p in points], [p[1] for p in points])
        print(f"{STRATEGIES[s].title}: grows as N^{k:.2f} (N = 4..{SWEEP_NS[-1]})")
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    """What a run's memory went to (engine/trace/memory.py), and with ``--what-if``, the same
    script again with those modules checkpointed, side by side."""
    from engine.trace.memory import memory_report

    runs = [("as written", [])] + ([("what if", args.what_if)] if args.what_if else [])
    reports = []
    for label, patterns in runs:
        result = _run(args, checkpoint_modules=patterns)
        if isinstance(result, int):
            return result
        if result.trace is None or result.error is not None:
            return 1
        modules = result.trace["meta"].get("modules")
        reports.append(
            (label, memory_report(result.trace["events"], modules=modules), result.extra.get("checkpointed"))
        )
    print(_memory_text(reports, args.top, args.depth))
    return 0


def _memory_text(reports: list[tuple[str, Any, Any]], top: int, depth: int = 0) -> str:
    from app.compare import _bytes

    lines = []
    names = [label for label, _, _ in reports]
    head = f"{'':<40}" + "".join(f"{n:>16}" for n in names)
    figures = [
        ("peak live", lambda r: _bytes(r["metrics"]["peak_live"])),
        ("held for the backward", lambda r: _bytes(r["metrics"]["peak_held"])),
        ("holders", lambda r: str(r["metrics"]["holders"])),
        ("recomputations", lambda r: str(r["metrics"]["recomputations"])),
        ("ops run again", lambda r: str(r["metrics"]["recomputed_ops"])),
    ]
    lines.append(head)
    for title, fmt in figures:
        lines.append(f"{title:<40}" + "".join(f"{fmt(r):>16}" for _, r, _ in reports))
    for label, _, wrapped in reports:
        if wrapped:
            lines.append(f"{label}: checkpointed {', '.join(wrapped)}")
    for label, report, _ in reports:
        if report["diagnosis"]:
            lines.append(f"\n{label}: why checkpointing saved little")
            lines.extend(f"  - {f['text']}" for f in report["diagnosis"])
    lines.append("\nPer module (bytes its saves reference: kept as tensors / replaced by holders):")
    rows: dict[str, list[Any]] = {}
    for i, (_, report, _) in enumerate(reports):
        for row in report["modules"]:
            # --depth N adds up the modules under each path of N parts (model.transformer.h.3).
            path = ".".join(row["path"].split(".")[:depth]) if depth else row["path"]
            cell = rows.setdefault(path, [None] * len(reports))
            if cell[i] is None:
                cell[i] = {"saved": 0, "holders": 0}
            cell[i]["saved"] += row["saved"]
            cell[i]["holders"] += row["holders"]
    order = sorted(rows, key=lambda p: -max((r["saved"] + r["holders"]) if r else 0 for r in rows[p]))[:top]
    lines.append(f"{'':<40}" + "".join(f"  {n:^30}" for n in names))
    lines.append(f"{'module':<40}" + "".join(f"  {'kept':>14}{'holders':>16}" for _ in names))

    def natural(path: str) -> list[tuple[int, Any]]:  # h.2 before h.10
        return [(0, int(p)) if p.isdigit() else (1, p) for p in path.split(".")]

    for path in sorted(order, key=natural):
        cells = "".join(
            f"  {_bytes(r['saved']) if r else '-':>14}{_bytes(r['holders']) if r else '-':>16}"
            for r in rows[path]
        )
        lines.append(f"{path[-39:]:<40}{cells}")
    if len(rows) > top:
        lines.append(f"... and {len(rows) - top} more modules (--top N)")
    return "\n".join(line.rstrip() for line in lines)


def cmd_scenarios(args: argparse.Namespace) -> int:
    infos = list_scenarios()
    width = max((len(s.id) for s in infos), default=0)
    for s in infos:
        print(f"{s.id:<{width}}  {s.title}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from app.main import serve

    serve(args.host, args.port)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autograd-lens", description="Trace PyTorch-style autograd and activation checkpointing."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", metavar="SCENARIO", help="a Python file, or a bundled scenario's id")
        p.add_argument(
            "--untrusted", action="store_true", help="run in the sandbox (RestrictedPython, limits)"
        )
        p.add_argument("--cpu-seconds", type=float, default=Limits.cpu_seconds, help="sandbox CPU limit")
        p.add_argument(
            "--wall-seconds", type=float, default=Limits.wall_seconds, help="sandbox wall-clock limit"
        )
        p.add_argument("--backend", choices=list(BACKENDS), default="engine", help=BACKEND_HELP)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress, no scenario output")
        p.add_argument(
            "--checkpoint-modules",
            metavar="PATTERN",
            action="append",
            help="run the modules whose path matches (e.g. 'transformer.h.*', one * a path part) under "
            "checkpoint(..., use_reentrant=False), without editing the script; repeatable",
        )

    p_trace = sub.add_parser(
        "trace",
        help="record a scenario's trace",
        epilog="A file's own arguments go after --: trace train.py -- --lr 0.1",
    )
    run_options(p_trace)
    p_trace.add_argument("-o", "--output", help="output file (default: stdout)")
    p_trace.add_argument("--format", choices=["json", "chrome"], default="json")
    p_trace.add_argument("--indent", type=int, default=None, help="indent the JSON (json format)")
    p_trace.add_argument(
        "--story",
        action="store_true",
        help="print the story level instead of the trace: chapters, and one captioned line per story step",
    )
    p_trace.add_argument(
        "--open",
        action="store_true",
        help="also send the trace to a running web app and print its viewer's address",
    )
    p_trace.add_argument("--server", default=default_server(), help=SERVER_HELP)
    p_trace.add_argument("--no-browser", action="store_true", help="with --open: only print the address")
    p_trace.set_defaults(func=cmd_trace)

    p_open = sub.add_parser(
        "open",
        help="step through a trace file in a running web app's viewer",
        description="Send TRACE (a json trace written by `autograd-lens trace`) to the web app at "
        "--server and print the address of its viewer; a browser opens it if one can. Nothing runs "
        "on the server: this is how the trace of your own PyTorch script gets to the viewer.",
    )
    p_open.add_argument("trace", metavar="TRACE", help="a trace file (json format), or - for stdin")
    p_open.add_argument("--server", default=default_server(), help=SERVER_HELP)
    p_open.add_argument("--no-browser", action="store_true", help="only print the address")
    p_open.set_defaults(func=cmd_open)

    p_dot = sub.add_parser("dot", help="the autograd graph of a scenario, as DOT or SVG")
    run_options(p_dot)
    p_dot.add_argument("-o", "--output", required=True, help="graph.dot or graph.svg")
    p_dot.set_defaults(func=cmd_dot)

    p_diff = sub.add_parser(
        "diff",
        help="run a scenario on the engine and on torch, and compare the traces (trusted local code only)",
        description="Run SCENARIO on both backends (in this process: trusted local code only), align "
        "the two traces and compare the final gradients. Exit 0: checkpoint events identical and "
        "gradients equal; 1: they differ; 2: bad usage.",
    )
    p_diff.add_argument("scenario", metavar="SCENARIO", help="a Python file, or a bundled scenario's id")
    p_diff.add_argument(
        "--against",
        metavar="TRACE",
        help="compare the engine's run with this trace file instead of running torch here (e.g. "
        "recorded under torch 2.13 by `python -m engine.trace.torch_backend`); events only",
    )
    p_diff.add_argument("-o", "--output", help="also write the diff as JSON to this file")
    p_diff.add_argument("--json", action="store_true", help="print the diff as JSON instead of text")
    p_diff.add_argument("-q", "--quiet", action="store_true", help="no progress, no notes about failed runs")
    p_diff.set_defaults(func=cmd_diff)

    p_compare = sub.add_parser(
        "compare",
        help="one MLP under each checkpointing strategy: memory held, recomputation, time",
        description="Run an MLP of N blocks under each strategy of Note [Strategies compared] "
        "(app/compare.py) and print what each holds for the backward, what it recomputes and how "
        "long it takes; --sweep prints the bytes held against N for no checkpointing, one "
        "checkpoint per block and sqrt(N) segments, with the exponent each grows with.",
    )
    p_compare.add_argument("--n", type=int, default=4, help="the number of blocks (default 4)")
    p_compare.add_argument(
        "--backend", choices=[*BACKENDS, "both"], default="engine", help="engine (default), torch, or both"
    )
    p_compare.add_argument(
        "--sweep", action="store_true", help="N = 2..64 on the engine, and the fitted exponents"
    )
    p_compare.add_argument("--json", action="store_true", help="print the rows as JSON")
    p_compare.set_defaults(func=cmd_compare)

    p_memory = sub.add_parser(
        "memory",
        help="what a run's memory went to, per module; --what-if: again with modules checkpointed",
        description="Run SCENARIO and print its memory report (docs/memory.md): peaks, why "
        "checkpointing saved little, and per nn.Module what its saved tensors reference. With "
        "--what-if PATTERN, run it again with the matching modules under checkpoint (no edit to "
        "the script) and print both side by side.",
        epilog="A file's own arguments go after --: "
        "memory train.py --backend torch --what-if 'h.*' -- --steps 1",
    )
    run_options(p_memory)
    p_memory.add_argument(
        "--what-if",
        metavar="PATTERN",
        action="append",
        help="modules to checkpoint in a second run; repeatable",
    )
    p_memory.add_argument("--top", type=int, default=20, help="modules listed (default 20, the largest)")
    p_memory.add_argument(
        "--depth",
        type=int,
        default=0,
        help="add up modules by the first N parts of their path (e.g. 3: model.h.3)",
    )
    p_memory.set_defaults(func=cmd_memory)

    p_list = sub.add_parser("scenarios", help="list the bundled scenarios")
    p_list.set_defaults(func=cmd_scenarios)

    p_export = sub.add_parser(
        "export",
        help="the viewer of a run as one HTML file that opens without a server",
        description="RUN_OR_TRACE: a trace file (.json, from `trace -o`), or a scenario (a Python "
        "file or a bundled scenario's id) run first.",
    )
    run_options(p_export)
    p_export.add_argument("--html", required=True, metavar="OUT", help="the HTML file to write")
    p_export.set_defaults(func=cmd_export)

    p_serve = sub.add_parser("serve", help="start the web app (http://127.0.0.1:8000)")
    p_serve.add_argument("--host", help="default: $AUTOGRAD_LENS_HOST or 127.0.0.1")
    p_serve.add_argument("--port", type=int, help="default: $AUTOGRAD_LENS_PORT or 8000")
    p_serve.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # A file's own arguments come after "--" (``trace train.py --backend torch -- --lr 0.1``):
    # split here, since argparse would read them as its own.
    script_args: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, script_args = argv[:at], argv[at + 1 :]
    args = build_parser().parse_args(argv)
    if script_args and args.command not in ("trace", "dot", "diff", "memory", "export"):
        print(f"autograd-lens: {args.command} takes no arguments after --", file=sys.stderr)
        return 2
    args.script_args = script_args
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
