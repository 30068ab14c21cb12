"""Running a scenario under ``engine.trace.record()``: its trace, or a clear error.

- ``run_scenario(path_or_text, trusted=..., limits=...)``: the entry point of the CLI and the web
  app. Trusted files (the bundled ``scenarios/``) run in this process with plain ``exec``;
  anything else runs in the sandbox (``app/sandbox.py``): RestrictedPython in a limited worker.
- ``execute(code, namespace, ...)``: what both paths share, the run itself (the worker calls it).
- ``list_scenarios()`` / ``resolve_scenario(name)``: the bundled scenarios, by id (file stem).

A scenario's ``print`` output is kept in ``RunResult.stdout`` and also recorded in the trace, as a
``mark`` event per call (``label`` the printed text, ``stream: "stdout"``), so a viewer shows it
at the step where it happened. Warnings go the same way (``stream: "stderr"``), whatever the
host's warning filters are, so a run gives the same trace under pytest and from the CLI.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import CodeType, TracebackType
from typing import Any, TypeVar

from app._gc import paused as gc_paused
from app.sandbox import PROJECT_ROOT, LimitExceeded, Limits, ScenarioSyntaxError, run_in_worker

SCENARIOS_DIR = PROJECT_ROOT / "scenarios"
UNTRUSTED_FILENAME = "<scenario>"
BACKENDS = ("engine", "torch")
_ENGINE_IMPORT = re.compile(r"^\s*(import engine\b|from engine\b)", re.MULTILINE)
TICK_SECONDS = 0.1  # how often a running scenario reports its progress and final events


@dataclass
class RunError:
    """Why a run failed: the exception's type and message, and where in the scenario it came from.

    ``file``/``line`` point into the scenario (the innermost frame of the scenario's own code),
    or are ``None`` when the error is not tied to a line (a wall-clock timeout). ``limit`` names
    the sandbox limit that was hit (a field of ``Limits``), if that is what happened.
    """

    type: str
    message: str
    file: str | None = None
    line: int | None = None
    limit: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else ""
        return f"{where}{self.type}: {self.message}"


@dataclass
class RunResult:
    """The outcome of a run. ``trace`` (the trace document, JSON-ready) is present whenever
    recording started, also when the scenario failed: it then ends at the error."""

    ok: bool
    trace: dict[str, Any] | None
    error: RunError | None = None
    stdout: str = ""
    filename: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # Not ``asdict(self)``: that deep-copies the trace, every event of it, only for the
        # worker to dump it as JSON at once. The error is the one field that is a dataclass.
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        doc["error"] = asdict(self.error) if self.error is not None else None
        return doc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunResult:
        err = data.get("error")
        return cls(
            ok=bool(data.get("ok")),
            trace=data.get("trace"),
            error=RunError(**err) if err else None,
            stdout=data.get("stdout") or "",
            filename=data.get("filename") or "",
            extra=data.get("extra") or {},
        )


# --- the bundled scenarios -----------------------------------------------------------------------


@dataclass(frozen=True)
class ScenarioInfo:
    """A bundled scenario, read from its docstring (Note [Scenario metadata])."""

    id: str
    title: str
    description: str
    path: Path
    group: str | None = None
    pair: str | None = None
    variant: str | None = None
    symptoms: tuple[str, ...] = ()
    reports: tuple[str, ...] = ()


# Note [Scenario metadata]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# A scenario's docstring is its title (first line) and description (the rest). It may end with a
# paragraph of ``Key: value`` lines, each key one of ``METADATA_KEYS``, which the home page reads:
# ``Group`` (a section, "Pitfalls"), ``Pair`` and ``Variant`` (a broken/fixed pair's name, and
# which side this file is), ``Symptom`` (an error text or symptom a user would search for; may
# repeat) and ``Reports`` (a public report it reproduces, a URL; may repeat); an indented line
# continues the value above it. That paragraph is not part of the description. A docstring without
# it reads as before.
METADATA_KEYS = {
    "Group": "group",
    "Pair": "pair",
    "Variant": "variant",
    "Symptom": "symptoms",
    "Reports": "reports",
}
_METADATA_LINE = re.compile(rf"^({'|'.join(METADATA_KEYS)}): (.+)$")


def _split_metadata(rest: str) -> tuple[str, dict[str, Any]]:
    """The description without its metadata paragraph, and the fields that paragraph sets."""
    body, _, last = rest.rpartition("\n\n")
    entries: list[list[str]] = []  # [key, value]; an indented line continues the value before it
    for line in last.splitlines():
        m = _METADATA_LINE.match(line.strip())
        if line[:1].isspace() and entries:
            entries[-1][1] += " " + line.strip()
        elif m and not line[:1].isspace():
            entries.append([m[1], m[2].strip()])
        else:
            return rest, {}
    fields: dict[str, Any] = {}
    for key, value in entries:
        name = METADATA_KEYS[key]
        fields[name] = (*fields.get(name, ()), value) if name in ("symptoms", "reports") else value
    return body.strip(), fields


T = TypeVar("T")

# Note [Building ASTs in threads]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# CPython 3.11 keeps the AST constructor's recursion depth in state its threads share (see
# python/cpython#106905): while one thread turns source into ``ast`` objects (``ast.parse``,
# ``literal_eval``) and gives up the GIL half-way, another doing the same can make it fail with
# ``SystemError: AST constructor recursion depth mismatch``. The server builds ASTs from request
# threads (scenario docstrings, uploaded titles) while runs go on in others, so it did, once in a
# while. Its own AST work goes through ``with_ast``: one at a time, and again if a thread outside
# the lock (a library inside a run) collided with it. Compiling to code builds no ``ast``
# objects and needs none of this.
_AST_LOCK = threading.Lock()
_AST_TRIES = 3


def with_ast(build: Callable[[], T]) -> T:
    """``build()``, which makes ``ast`` objects, safely among threads (Note [Building ASTs in
    threads])."""
    for attempt in range(_AST_TRIES):
        with _AST_LOCK:
            try:
                return build()
            except SystemError as e:
                if "recursion depth mismatch" not in str(e) or attempt == _AST_TRIES - 1:
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


# Scenario files change only while someone edits them: read each version once.
_INFOS: dict[tuple[Path, int, int], ScenarioInfo] = {}


def scenario_info(path: Path) -> ScenarioInfo:
    """Title (first docstring line), description (the rest) and metadata (Note [Scenario
    metadata]), read without running the file."""
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    if (info := _INFOS.get(key)) is None:
        text = path.read_text(encoding="utf-8")
        doc = with_ast(lambda: ast.get_docstring(ast.parse(text))) or ""
        title, _, rest = doc.partition("\n")
        description, metadata = _split_metadata(rest.strip())
        info = _INFOS[key] = ScenarioInfo(
            path.stem, title.strip() or path.stem, description, path, **metadata
        )
    return info


def list_scenarios(directory: Path = SCENARIOS_DIR) -> list[ScenarioInfo]:
    return [scenario_info(p) for p in sorted(directory.glob("*.py")) if not p.name.startswith("_")]


def resolve_scenario(name: str | Path) -> Path:
    """A path to an existing file, or the id (file stem) of a bundled scenario."""
    path = Path(name)
    if path.is_file():
        return path.resolve()
    bundled = SCENARIOS_DIR / f"{path.stem if path.suffix == '.py' else name}.py"
    if isinstance(name, str) and "/" not in name and bundled.is_file():
        return bundled
    known = ", ".join(s.id for s in list_scenarios())
    raise FileNotFoundError(f"no scenario file or bundled scenario named {str(name)!r} (bundled: {known})")


def is_bundled(path: Path) -> bool:
    return path.resolve().parent == SCENARIOS_DIR.resolve()


# --- running -------------------------------------------------------------------------------------


def run_scenario(
    path_or_text: str | Path,
    *,
    trusted: bool,
    limits: Limits | None = None,
    on_progress: Callable[[int], None] | None = None,
    filename: str | None = None,
    on_events: Callable[[list[dict[str, Any]]], None] | None = None,
    backend: str = "engine",
    argv: Sequence[str] = (),
    checkpoint_modules: Sequence[str] = (),
) -> RunResult:
    """Run a scenario and return its trace, or the error that stopped it.

    ``path_or_text``: a ``Path``, or the scenario's text. With ``trusted=True`` a string naming an
    existing file is read as that file; untrusted strings are always text (a web request must not
    be able to name a file on the server).
    ``trusted``: run in this process (the bundled scenarios); otherwise in the sandbox.
    ``on_progress(n)`` is called now and then with the number of events recorded so far.
    ``on_events(batch)`` is called while the scenario runs with the events that became final
    (see Note [Final events] in ``engine/trace/_names.py``), in order, each event once; the result's
    trace still holds them all, so what was not delivered is ``trace["events"][delivered:]``.
    Both are called from another thread than the caller's. ``backend="torch"`` runs the scenario
    against real PyTorch (``engine.trace.torch_backend``: ``import engine`` gives it ``torch``),
    trusted code only. ``RunResult.extra["grads"]`` holds the gradients the scenario's variables
    end with (``_final_grads``). A trusted file runs as ``python FILE ARGV...`` would run it
    (``_as_script``): its directory first on ``sys.path``, ``sys.argv`` its name and ``argv``.
    ``checkpoint_modules``: module path patterns whose forwards run under ``checkpoint`` (Note
    [Checkpointing modules from outside], app/whatif.py), trusted code only; the paths wrapped are
    ``RunResult.extra["checkpointed"]``, and a pattern that matched nothing is the run's error.
    Never raises for what the scenario does.
    """
    limits = limits or Limits()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if backend == "torch" and not trusted:
        raise ValueError("the torch backend runs trusted local code only (the sandbox knows the engine)")
    if checkpoint_modules and not trusted:
        raise ValueError("checkpoint_modules is for trusted local code only")
    path: Path | None = None  # the file, when the scenario is one
    if isinstance(path_or_text, Path) or (trusted and _names_a_file(path_or_text)):
        path = Path(path_or_text).resolve()
        filename = filename or display_name(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            return RunResult(False, None, RunError(type(e).__name__, str(e), filename), filename=filename)
    else:
        text = str(path_or_text)
        filename = filename or UNTRUSTED_FILENAME
    if not trusted:
        data = run_in_worker(text, filename, limits, on_progress, on_events)
        result = RunResult.from_dict(data)
        result.filename = filename
        return result
    try:
        code = compile(text, filename, "exec", dont_inherit=True)
    except SyntaxError as e:
        return RunResult(False, None, syntax_error(e, filename), filename=filename)
    except (ValueError, UnicodeError, RecursionError, MemoryError) as e:
        error = RunError("SyntaxError", f"the scenario cannot be parsed: {type(e).__name__}: {e}", filename)
        return RunResult(False, None, error, filename=filename)
    # A file's __file__ is its real path (it may read data next to itself from any directory);
    # events and errors name it by ``filename``.
    namespace = {"__name__": "__main__", "__file__": str(path) if path is not None else filename}
    with _as_script(path, argv):
        return execute(
            code,
            namespace,
            filename=filename,
            text=text,
            limits=limits,
            on_progress=on_progress,
            on_events=on_events,
            backend=backend,
            checkpoint_modules=checkpoint_modules,
        )


@contextlib.contextmanager
def _as_script(path: Path | None, argv: Sequence[str]) -> Iterator[None]:
    """What ``python path argv...`` sets up for a script, for the duration of a trusted run: a
    user's training script imports its sibling modules and parses its own arguments, not the
    CLI's. Undone afterwards."""
    saved_argv = sys.argv
    sys.argv = [str(path) if path is not None else UNTRUSTED_FILENAME, *argv]
    entry = str(path.parent) if path is not None else None
    if entry is not None:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.argv = saved_argv
        if entry is not None and entry in sys.path:
            sys.path.remove(entry)  # the one inserted: the first occurrence


def _names_a_file(text: str) -> bool:
    if "\n" in text:
        return False
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long, a null byte: text, not a path
        return False


def display_name(path: Path) -> str:
    """The file name a trace shows: relative to the project for its own files (so traces of the
    bundled scenarios are the same on every machine), else absolute."""
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path.resolve())


def syntax_error(e: SyntaxError, filename: str) -> RunError:
    kind = "SyntaxError" if isinstance(e, ScenarioSyntaxError) else type(e).__name__
    return RunError(kind, str(e.msg), filename, e.lineno)


def error_of(exc: BaseException, filename: str) -> RunError:
    """``RunError`` for an exception raised while a scenario ran: its innermost scenario line."""
    line = None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    if isinstance(exc, LimitExceeded):
        return RunError("LimitExceeded", str(exc), filename, line, exc.limit)
    if isinstance(exc, MemoryError):
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return RunError("LimitExceeded", f"out of memory (memory_mb): {detail}", filename, line, "memory_mb")
    if isinstance(exc, RecursionError):
        return RunError("RecursionError", str(exc), filename, line, None)
    return RunError(type(exc).__name__, str(exc), filename, line)


def execute(
    code: CodeType,
    namespace: dict[str, Any],
    *,
    filename: str,
    text: str,
    limits: Limits,
    on_progress: Callable[[int], None] | None = None,
    set_print: Callable[[Callable[[str], None]], None] | None = None,
    on_events: Callable[[list[dict[str, Any]]], None] | None = None,
    backend: str = "engine",
    checkpoint_modules: Sequence[str] = (),
) -> RunResult:
    """Run compiled scenario code under ``trace.record()`` (``torch_backend.record()`` and an
    ``engine``-is-``torch`` import shim with ``backend="torch"``).

    ``code`` was compiled from ``text`` under ``filename``: events point at its lines.
    ``namespace`` is the module namespace (its ``__builtins__`` the restricted ones in the
    sandbox). ``set_print(sink)`` installs the print sink there; by default ``print`` is replaced
    in a copy of the real builtins. The cyclic garbage collector is off while the scenario runs:
    every holder and tensor then dies by reference counting, at the same event in every run, which
    keeps traces deterministic. ``on_events``: see ``run_scenario``; how many events it was given
    is ``RunResult.extra["delivered"]``.
    """
    from engine import trace

    printed: list[str] = []

    def sink(text: str, stream: str = "stdout") -> None:
        printed.append(text)
        label = text.rstrip("\n")
        if label:
            trace.mark(label, stream=stream)

    def show_warning(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        # Warnings are part of what a learner should see (use_reentrant's, for one): printed and
        # marked like output, whatever the warning filters of the host process say.
        sink(f"{category.__name__}: {message}\n", "stderr")

    if set_print is None:
        scenario_builtins = dict(vars(builtins))
        scenario_builtins["print"] = _make_print(sink)
        namespace["__builtins__"] = scenario_builtins
    else:
        set_print(sink)
    recording: Callable[..., Any] = trace.record
    rng: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if backend == "torch":
        from engine.trace import torch_backend

        recording = torch_backend.record
        namespace["__builtins__"] = dict(namespace["__builtins__"])
        namespace["__builtins__"]["__import__"] = torch_backend.engine_as_torch(
            namespace["__builtins__"]["__import__"]
        )
        if _ENGINE_IMPORT.search(text):  # written for the engine: one random stream for both
            rng = torch_backend.engine_rng()
    from app.whatif import CheckpointModules

    whatif = CheckpointModules(checkpoint_modules, backend, namespace) if checkpoint_modules else None
    recorder = None
    delivery = _Delivery(on_progress, on_events)
    error: RunError | None = None
    try:
        # Note [Pausing the collector] (app/_gc.py)
        with gc_paused(), warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = show_warning
            with (
                rng,
                recording(source_files={filename: text}) as recorder,
                _capped(recorder, limits, delivery),
                whatif or contextlib.nullcontext(),
            ):
                exec(code, namespace)
    except BaseException as exc:  # noqa: BLE001 - whatever the scenario raises is its result
        if isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
            raise
        error = error_of(exc, filename)
    if recorder is not None and on_progress is not None:
        on_progress(len(recorder.events))  # the final count, once recording has closed
    document = _document(recorder) if recorder is not None else None
    if document is not None and error is not None and error.limit == "max_events":
        document["meta"]["event_limit"] = limits.max_events  # the viewer's banner names it
    result = RunResult(error is None, document, error, "".join(printed), filename)
    result.extra["delivered"] = delivery.sent
    result.extra["grads"] = _final_grads(namespace)
    if whatif is not None:
        result.extra["checkpointed"] = whatif.wrapped
        unmatched = whatif.unmatched()
        if unmatched and result.error is None:
            seen = ", ".join(whatif.seen[:12]) or "none: no module ran"
            message = f"--checkpoint-modules {unmatched[0]!r} matched no module (module paths: {seen})"
            result.ok, result.error = False, RunError("WhatIfError", message, filename)
    return result


MAX_GRAD_NUMEL = 4096  # larger gradients are left out of RunResult.extra["grads"]


def _final_grads(namespace: dict[str, Any]) -> dict[str, Any]:
    """``{name: nested list}``: the ``.grad`` of each module-level tensor variable and of the
    parameters of each module variable (``model.fc1.weight``), the same for either backend, so
    the engine's gradients can be compared with torch's (``autograd-lens diff``)."""
    grads: dict[str, Any] = {}

    def add(name: str, t: Any) -> None:
        if not t.is_leaf:  # only leaves get a .grad (reading a non-leaf's warns in torch)
            return
        g = t.grad
        if g is not None and hasattr(g, "tolist") and g.numel() <= MAX_GRAD_NUMEL:
            grads[name] = g.detach().tolist()

    for name, value in list(namespace.items()):
        if name.startswith("_") or isinstance(value, type):
            continue
        if hasattr(value, "is_leaf") and hasattr(value, "tolist"):
            add(name, value)
        elif callable(getattr(value, "named_parameters", None)):
            try:
                params = list(value.named_parameters())
            except Exception:  # noqa: BLE001 - a user object with its own named_parameters
                continue
            for path, p in params:
                add(f"{name}.{path}", p)
    return grads


def _document(recorder: Any) -> dict[str, Any]:
    doc = recorder.to_json()
    return dict(json.loads(doc) if isinstance(doc, str) else doc)


def _make_print(sink: Callable[[str], None]) -> Callable[..., None]:
    def scenario_print(*objects: Any, sep: str | None = " ", end: str | None = "\n", **_: Any) -> None:
        sep = " " if sep is None else sep
        end = "\n" if end is None else end
        sink(sep.join(str(o) for o in objects) + end)

    return scenario_print


class _Delivery:
    """What a run reports while it goes on: its event count, and its final events."""

    def __init__(
        self,
        on_progress: Callable[[int], None] | None,
        on_events: Callable[[list[dict[str, Any]]], None] | None,
    ) -> None:
        self.on_progress = on_progress
        self.on_events = on_events
        self.sent = 0  # events given to on_events

    def tick(self, trace: Any) -> None:
        if self.on_progress is not None:
            self.on_progress(len(trace.events))
        if self.on_events is not None:
            final = trace.n_final
            if final > self.sent:
                # A slice copies the list under the GIL; the events in it no longer change.
                batch = trace.events[self.sent : final]
                self.sent = final
                self.on_events(batch)


@contextlib.contextmanager
def _capped(recorder: Any, limits: Limits, delivery: _Delivery) -> Iterator[None]:
    """Enforce ``limits.max_events`` on the recorder and report progress and final events while
    the run goes on."""
    recorder.set_event_limit(limits.max_events, lambda n: LimitExceeded("max_events", _events_message(n)))
    if delivery.on_progress is None and delivery.on_events is None:
        yield
        return
    # A polling thread: the recorder stays free of callbacks, and a long run reports a few times a
    # second. Nothing is delivered after the block: the run's result carries the rest.
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_SECONDS):
            delivery.tick(recorder)

    ticker = threading.Thread(target=tick, name="autograd-lens-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()


def _events_message(n: int) -> str:
    return f"trace length limit of {n} events exceeded (max_events): recording stopped"
