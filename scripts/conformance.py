"""PyTorch's own autograd and checkpoint tests, run on real torch and on the engine.

    .venv/bin/python scripts/conformance.py                 # every test; writes tests/conformance/report.md
    .venv/bin/python scripts/conformance.py -k checkpoint   # only tests whose id contains "checkpoint"
    .venv/bin/python scripts/conformance.py --tests TestCheckpoint.test_checkpoint_sequential --no-report

Each test method of the classes in ``CLASSES`` (sources vendored in tests/conformance/vendor/, see
its LICENSE) is first classified by the static rules of tests/conformance/rules.py: not applicable
(with the rule's reason) or applicable. Every applicable test runs twice, in worker processes
that import the vendored file with ``torch`` meaning real PyTorch in one and the engine in the
other (tests/conformance/shim.py, Note [Conformance shim]), under a per-test timeout. Outcomes:

- pass: passes on both;
- gap: passes on torch, fails (or times out, or crashes) on the engine, with the first error line;
- harness: fails or is skipped on torch itself under this harness (stand-ins, vendored copy):
  says nothing about the engine, listed and left out of the count.

It prints "N/M PyTorch tests pass on the engine", M being the applicable tests that pass on torch.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import queue
import re
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import unittest
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "tests" / "conformance" / "vendor"
REPORT = ROOT / "tests" / "conformance" / "report.md"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conformance.rules import classify  # noqa: E402

# (vendored file, class): the classes of PyTorch's tests that exercise what the engine claims.
CLASSES: tuple[tuple[str, str], ...] = (
    ("test_autograd.py", "TestAutograd"),
    ("test_autograd.py", "TestAutogradInferenceMode"),
    ("test_autograd.py", "TestAllowMutationOnSaved"),
    ("test_autograd.py", "TestNestedCheckpoint"),
    ("test_autograd.py", "TestSelectiveActivationCheckpoint"),
    ("test_functional.py", "TestAutogradFunctional"),
    ("test_utils.py", "TestCheckpoint"),
)
SOURCE = (
    "Ascend/pytorch@v7.3.1-pytorch2.8.0 (PyTorch 2.8's test/test_autograd.py, test/test_utils.py, "
    "test/autograd/test_functional.py)"
)


@dataclass
class Test:
    file: str
    cls: str
    name: str
    origin: str  # the method it was generated from (parametrized tests), else its own name
    na: str | None = None  # not applicable: the rule's reason
    torch: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.cls}.{self.name}"

    @property
    def outcome(self) -> str:
        if self.na:
            return "n/a"
        if not self.torch or not self.engine:
            return "not run"
        if self.torch["status"] != "pass":
            return "harness"
        return "pass" if self.engine["status"] == "pass" else "gap"


# ---------------------------------------------------------------- static side: sources and rules
def method_sources() -> dict[tuple[str, str], str]:
    """(class, method) -> the method's source, decorators included."""
    sources: dict[tuple[str, str], str] = {}
    for file, cls in CLASSES:
        text = (VENDOR / file).read_text()
        tree = ast.parse(text)
        lines = text.splitlines()
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        start = min([d.lineno for d in item.decorator_list] + [item.lineno])
                        seg = "\n".join(lines[start - 1 : item.end_lineno])
                        sources[(cls, item.name)] = seg
    return sources


# ---------------------------------------------------------------- worker process
class _Result(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcome: dict[str, Any] = {"status": "pass"}

    def _error(self, test: Any, err: Any, kind: str) -> None:
        etype, value, tb = err
        if etype is _Timeout:
            self.outcome = {"status": "timeout", "error": "timed out"}
            return
        first = str(value).strip().splitlines()[0] if str(value).strip() else ""
        line = f"{etype.__name__}: {first}" if first else etype.__name__
        where = None
        for frame in traceback.extract_tb(tb):
            if "/tests/conformance/vendor/" in frame.filename:
                where = f"{Path(frame.filename).name}:{frame.lineno}"
        self.outcome = {"status": kind, "error": line[:300], "where": where}

    def addError(self, test: Any, err: Any) -> None:  # noqa: N802  (unittest's name)
        self._error(test, err, "fail")

    def addFailure(self, test: Any, err: Any) -> None:  # noqa: N802
        self._error(test, err, "fail")

    def addSkip(self, test: Any, reason: str) -> None:  # noqa: N802
        self.outcome = {"status": "skip", "error": f"skipped: {reason}"[:300]}

    def addUnexpectedSuccess(self, test: Any) -> None:  # noqa: N802
        self.outcome = {"status": "fail", "error": "unexpected success of an expected failure"}


class _Timeout(BaseException):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def worker(backend: str) -> None:
    """Answer one JSON request per line on stdin: ``list`` or ``run`` (Note [Conformance shim])."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = open(os.devnull, "w")  # noqa: SIM115  (the tests' own prints)
    os.dup2(devnull.fileno(), 1)
    sys.stdout = devnull
    from tests.conformance import shim

    shim.install(backend)
    # test_autograd.py ends by importing two sibling files' classes (to run them too): the
    # harness runs test_functional.py on its own and does not vendor test_complex.py.
    import types

    for name in ("autograd", "autograd.test_complex", "autograd.test_functional"):
        stub = types.ModuleType(name)
        stub.TestAutogradComplex = stub.TestAutogradFunctional = None  # type: ignore[attr-defined]
        sys.modules[name] = stub
    modules: dict[str, Any] = {}

    def load(file: str) -> Any:
        if file not in modules:
            import importlib.util

            spec = importlib.util.spec_from_file_location(f"conformance_vendor_{file[:-3]}", VENDOR / file)
            assert spec and spec.loader
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            shim.IMPORTING = True
            try:
                spec.loader.exec_module(module)
            finally:
                shim.IMPORTING = False
            modules[file] = module
        return modules[file]

    signal.signal(signal.SIGALRM, _on_alarm)
    for raw in sys.stdin:
        req = json.loads(raw)
        try:
            if req["op"] == "list":
                tests = []
                for file, cls_name in CLASSES:
                    cls = getattr(load(file), cls_name)
                    for name in sorted(dir(cls)):
                        if name.startswith("test") and callable(getattr(cls, name)):
                            fn = getattr(cls, name)
                            tests.append([file, cls_name, name, getattr(fn, "_conformance_origin", name)])
                answer: Any = tests
            else:
                try:
                    cls = getattr(load(req["file"]), req["cls"])
                except BaseException as e:
                    answer = {
                        "status": "fail",
                        "error": f"importing the test file: {type(e).__name__}: {e}"[:300],
                    }
                else:
                    result = _Result()
                    start = time.monotonic()
                    signal.alarm(int(req["timeout"]))
                    try:
                        cls(req["name"]).run(result)
                    except _Timeout:
                        result.outcome = {"status": "timeout", "error": f"timed out after {req['timeout']} s"}
                    finally:
                        signal.alarm(0)
                    answer = dict(result.outcome, seconds=round(time.monotonic() - start, 3))
        except _Timeout:
            answer = {"status": "timeout", "error": f"timed out after {req.get('timeout')} s"}
        except BaseException as e:
            answer = {"status": "fail", "error": f"harness: {type(e).__name__}: {e}"[:300]}
        out.write(json.dumps(answer) + "\n")


class Worker:
    """A worker subprocess for one backend; restarted after a crash or a hard timeout."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--worker", self.backend],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=env,
                cwd=ROOT,
            )
        return self.proc

    def ask(self, req: dict[str, Any], hard_timeout: float) -> Any:
        proc = self._start()
        assert proc.stdin and proc.stdout
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            self.kill()
            return {"status": "crash", "error": "the worker process died"}
        ready, _, _ = select.select([proc.stdout], [], [], hard_timeout)
        line = proc.stdout.readline() if ready else ""
        if not line:
            code = proc.poll()
            self.kill()
            if not ready:
                return {"status": "timeout", "error": f"timed out after {hard_timeout:.0f} s (worker killed)"}
            return {"status": "crash", "error": f"the worker process died (exit code {code})"}
        return json.loads(line)

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


# ---------------------------------------------------------------- the run
def collect(only: list[str] | None, keyword: str | None) -> list[Test]:
    lister = Worker("torch")
    listed = lister.ask({"op": "list"}, hard_timeout=300)
    lister.kill()
    if not isinstance(listed, list):
        raise SystemExit(f"could not list the tests: {listed}")
    sources = method_sources()
    tests = []
    for file, cls, name, origin in listed:
        t = Test(file, cls, name, origin)
        if only is not None and t.id not in only:
            continue
        if keyword and keyword not in t.id:
            continue
        t.na = classify(sources.get((cls, origin), ""), name)
        tests.append(t)
    return tests


def run(tests: list[Test], jobs: int, timeout: float, budget: float, progress: bool) -> None:
    deadline = time.monotonic() + budget
    todo: dict[str, queue.Queue[Test]] = {"torch": queue.Queue(), "engine": queue.Queue()}
    for t in tests:
        if not t.na:
            todo["torch"].put(t)
            todo["engine"].put(t)
    counts = {"torch": 0, "engine": 0}
    lock = threading.Lock()

    def drain(backend: str) -> None:
        w = Worker(backend)
        try:
            while True:
                try:
                    t = todo[backend].get_nowait()
                except queue.Empty:
                    return
                if time.monotonic() > deadline:
                    res: Any = {"status": "not run", "error": "the overall time budget ran out"}
                else:
                    req = {"op": "run", "file": t.file, "cls": t.cls, "name": t.name, "timeout": timeout}
                    res = w.ask(req, hard_timeout=timeout + 60)
                setattr(t, backend, res)
                with lock:
                    counts[backend] += 1
                    if progress and counts[backend] % 50 == 0:
                        print(f"  {backend}: {counts[backend]} tests run", file=sys.stderr, flush=True)
        finally:
            w.kill()

    # The engine is the slow side: it gets the extra workers.
    threads = [threading.Thread(target=drain, args=("torch",))]
    threads += [threading.Thread(target=drain, args=("engine",)) for _ in range(max(1, jobs - 1))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


# ---------------------------------------------------------------- the report
# Failure causes, in order: the first pattern that matches a first error line names the group.
CAUSES: tuple[tuple[str, str], ...] = (
    (r"^EngineLacks: engine lacks (torch(?:\.[A-Za-z_][A-Za-z0-9_]*)+)", "missing API: {0}"),
    (r"^AttributeError: module 'torch(?:\.[\w.]+)?' has no attribute '(\w+)'", "missing API: torch.{0}"),
    (r"^AttributeError: '(\w+)' object has no attribute '(\w+)'", "missing attribute: {0}.{1}"),
    (r"^AttributeError: type object '(\w+)' has no attribute '(\w+)'", "missing attribute: {0}.{1}"),
    (
        r"^TypeError: (\S+)\(\) got an unexpected keyword argument '(\w+)'",
        "missing keyword argument: {0}({1}=)",
    ),
    (r'^AssertionError: ".*" does not match', "different error message"),
    (r"^AssertionError: (\w+) not raised", "no error where torch raises {0}"),
    (
        r"^AssertionError: .*(?:values differ|!=|lengths differ|dtypes differ|shapes differ)",
        "different values",
    ),
    (
        r"^AssertionError: (?:False is not true|True is not false|.* is not None|unexpectedly None)",
        "a different truth value",
    ),
    (r"^(?:timeout|.*timed out)", "timeout (slow, or a hang)"),
    (r"^unexpected success", "an expected failure passes"),
    (r"^(\w+): (.{0,70})", "raises {0}: {1}"),
)


def cause_of(error: str) -> str:
    for pattern, label in CAUSES:
        m = re.search(pattern, error)
        if m:
            return label.format(*m.groups())
    return "other"


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write_report(tests: list[Test], path: Path, seconds: float) -> None:
    date = datetime.date.today().isoformat()
    by_outcome: dict[str, list[Test]] = defaultdict(list)
    for t in tests:
        by_outcome[t.outcome].append(t)
    n_pass, n_gap = len(by_outcome["pass"]), len(by_outcome["gap"])
    m = n_pass + n_gap
    out: list[str] = []
    out.append("# PyTorch's own tests on the engine\n")
    out.append(
        f"Generated by `make conformance` (scripts/conformance.py) on {date} in {seconds:.0f} s. "
        f"Sources: {SOURCE}; see tests/conformance/vendor/LICENSE.\n"
    )
    out.append(
        f"**{n_pass}/{m} PyTorch tests pass on the engine** (M: applicable tests that pass on torch).\n"
    )
    out.append(
        f"{len(tests)} tests collected: {n_pass} pass on both, {n_gap} fail on the engine only (gaps), "
        f"{len(by_outcome['n/a'])} not applicable by rule, {len(by_outcome['harness'])} fail or are "
        f"skipped on torch itself under this harness, {len(by_outcome['not run'])} not run.\n"
    )
    notes = path.with_name("notes.md")
    if notes.exists():
        out.append(notes.read_text().rstrip() + "\n")
    out.append("## Gaps by cause\n")
    out.append("Every test that passes on torch and fails on the engine, grouped by its first error line.\n")
    groups: dict[str, list[Test]] = defaultdict(list)
    for t in by_outcome["gap"]:
        groups[cause_of(t.engine.get("error", t.engine["status"]))].append(t)
    out.append("| cause | tests | examples |")
    out.append("|---|---|---|")
    for cause, ts in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        examples = ", ".join(t.name for t in ts[:3]) + (", ..." if len(ts) > 3 else "")
        out.append(f"| {_md(cause)} | {len(ts)} | {_md(examples)} |")
    out.append("")
    out.append("## Counts per class\n")
    out.append("| class | collected | pass | gap | not applicable | harness | not run |")
    out.append("|---|---|---|---|---|---|---|")
    for _, cls in CLASSES:
        c = Counter(t.outcome for t in tests if t.cls == cls)
        total = sum(c.values())
        out.append(
            f"| {cls} | {total} | {c['pass']} | {c['gap']} | {c['n/a']} | {c['harness']} | {c['not run']} |"
        )
    out.append("")
    out.append("## Failing on the engine\n")
    out.append("| test | cause | first error line | where |")
    out.append("|---|---|---|---|")
    for t in sorted(by_outcome["gap"], key=lambda t: t.id):
        err = t.engine.get("error", t.engine["status"])
        out.append(f"| {t.id} | {_md(cause_of(err))} | `{_md(err)}` | {t.engine.get('where') or ''} |")
    out.append("")
    out.append("## Not applicable (static rules, tests/conformance/rules.py)\n")
    reasons = Counter(t.na for t in by_outcome["n/a"])
    out.append("| reason | tests |")
    out.append("|---|---|")
    for reason, n in reasons.most_common():
        out.append(f"| {_md(reason or '')} | {n} |")
    out.append("")
    out.append("| test | reason |")
    out.append("|---|---|")
    for t in sorted(by_outcome["n/a"], key=lambda t: t.id):
        out.append(f"| {t.id} | {_md(t.na or '')} |")
    out.append("")
    out.append("## Failing or skipped on torch under this harness (not counted)\n")
    out.append("| test | torch's first error line | engine |")
    out.append("|---|---|---|")
    for t in sorted(by_outcome["harness"], key=lambda t: t.id):
        out.append(
            f"| {t.id} | `{_md(t.torch.get('error', t.torch['status']))}` | {t.engine.get('status')} |"
        )
    if by_outcome["not run"]:
        out.append("")
        out.append("## Not run (time budget)\n")
        out.extend(f"- {t.id}" for t in by_outcome["not run"])
    path.write_text("\n".join(out) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", choices=["torch", "engine"], help=argparse.SUPPRESS)
    p.add_argument("--tests", nargs="*", help="only these Class.method ids")
    p.add_argument("-k", dest="keyword", help="only tests whose id contains this")
    p.add_argument("-j", "--jobs", type=int, default=max(2, min(4, os.cpu_count() or 2)))
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per test and backend")
    p.add_argument("--budget", type=float, default=900.0, help="seconds for the whole run")
    p.add_argument("--report", type=Path, default=REPORT)
    p.add_argument("--no-report", action="store_true")
    p.add_argument("--json", type=Path, help="also write every outcome here")
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    start = time.monotonic()
    tests = collect(args.tests, args.keyword)
    if args.tests is not None:
        missing = set(args.tests) - {t.id for t in tests}
        if missing:
            print(f"unknown tests: {sorted(missing)}", file=sys.stderr)
            return 2
    run(tests, args.jobs, args.timeout, args.budget, progress=not args.no_report)
    seconds = time.monotonic() - start
    outcomes = Counter(t.outcome for t in tests)
    m = outcomes["pass"] + outcomes["gap"]
    print(f"{outcomes['pass']}/{m} PyTorch tests pass on the engine")
    print(
        f"({len(tests)} collected; {outcomes['n/a']} not applicable, {outcomes['harness']} fail on torch "
        f"under the harness, {outcomes['not run']} not run; {seconds:.0f} s)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {"id": t.id, "outcome": t.outcome, "na": t.na, "torch": t.torch, "engine": t.engine}
                    for t in tests
                ],
                indent=1,
            )
        )
    if not args.no_report:
        write_report(tests, args.report, seconds)
        print(f"report: {args.report.relative_to(ROOT) if args.report.is_relative_to(ROOT) else args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
