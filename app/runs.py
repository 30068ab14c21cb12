"""The lifecycle of a run: created (queued), executed in the background, its events annotated and
stored batch by batch, finished (done or error). Streams wait on ``RunManager.watch``.

Note [One in-process run at a time]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Bundled scenarios are trusted and run in the server's own process (``run_scenario(trusted=True)``):
fast, and they may use anything. But a recording is process-wide (``engine.trace.record()``
installs one sink, and refuses to nest), the runner switches the cyclic garbage collector off for
the run, and the engine keeps global state (the RNG, grad mode). So in-process runs take
``RunManager.in_process``, one at a time; a run waiting for it stays ``queued``. Untrusted text runs
in a sandbox process of its own (``app/sandbox.py``), so those run side by side, up to
``Settings.workers`` at once, and nothing one of them does reaches another run or the server.

Note [Events while running]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
The runner hands over a run's final events while it goes on (``run_scenario(on_events=...)``, a
few times a second; which events are final: Note [Final events] in ``engine/trace/_names.py``).
``EventWriter`` annotates them (the reducer's changes and the caption of each) and appends them to
the store at once, so a stream sends them while the scenario still runs; the events not yet
delivered when the run ends are added from its result. A failure while streaming (the store, a
caption) stops the streaming, not the run: the rest is then added from the result too.

Note [Documents ready at done]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A run page asks for the run's story (the viewer's default level) and then its memory report as
soon as the run is done. Derived then, each parses all the events back (0.74 s for a 99k-event
run) and makes its own pass over them (the story's a pass of the reducer: 1.9 s in all; the
memory report's 0.8 s). Instead:

- the story: ``EventWriter`` has just stepped the reducer through the same events, with the state
  before each, which is all the story's builders need (``StoryDocumentBuilder`` in
  engine/trace/story.py; ``story_document`` is that builder fed by its own pass). So the writer
  feeds it as it annotates, with the caption it makes anyway;
- the memory report is derived as the run finishes, from the events the server holds then
  (no parse).

Both are stored with the run (``app.store.STORED_DOCUMENTS``), and ``GET story`` / ``GET
memory`` read them (app/routes/derived.py). They are the documents a request would derive
(tests/app/test_store.py checks the story on every golden trace, also after a resume, and
tests/app/test_api.py both through the API). One that fails to build here is not stored, and is
derived when asked for as before, where its error is reported; it never stops the events from
being stored.

Note [The engine's fingerprint]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A run is reused for the same scenario text only while the code that made it is the same (Note
[Reusing a run] in ``app/store.py``): its ``reuse_key`` hashes the text, the file name, whether it
ran trusted, the backend, and ``engine_fingerprint(backend)``, a hash of every source file of the
engine and of the code that runs a scenario and annotates its events (``FINGERPRINT_FILES``), with
the NumPy and Python versions, and torch's version for the torch backend. It is computed once per
process (a server runs the code it loaded at start), so editing the engine and restarting the
server makes new runs, and two processes of one checkout agree on every key.

Note [A class on one server]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A teacher points a class at one server, and everyone opens the same few bundled scenarios at
once. With reuse on (``Settings.reuse_runs``), the first request for a scenario makes its run and
every later one is answered with it, queued, running or done: the class costs one run per
scenario, and each viewer streams the same stored events. ``max_pending`` bounds the work that
requests can pile up; reused bundled runs cannot pile up (at most one per scenario and backend is
ever pending), so they are not counted against it, and a class opening every card of the library
at once gets no 503 while the queue works through them. Uploaded texts are unbounded and still
count, and so does a bundled run asked for ``fresh``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import inspect
import io
import logging
import re
import secrets
import sqlite3
import sys
import threading
import tokenize
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app._gc import paused as gc_paused
from app.config import Settings
from app.documents import derive_json, document_json
from app.imported import describe, imported_result
from app.runner import (
    BACKENDS,
    SCENARIOS_DIR,
    RunError,
    RunResult,
    ScenarioInfo,
    display_name,
    run_scenario,
    scenario_info,
    with_ast,
)
from app.sandbox import PROJECT_ROOT
from app.store import INTERRUPTED, RunRecord, Store, claim_owner, release_owner
from engine.trace.captions import caption
from engine.trace.changed import describe_changes
from engine.trace.export import to_json
from engine.trace.export_dot import DotCollector, dot_of, modules_of
from engine.trace.state import Change, Event, initial_state, step
from engine.trace.story import StoryDocumentBuilder

log = logging.getLogger("autograd_lens.runs")

RUN_ID_RE = re.compile(r"[A-Za-z0-9_-]{4,64}")
SCENARIO_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
DEFAULT_FILENAME = "scenario.py"
TITLE_MAX = 200


class UnknownScenario(LookupError):
    pass


class SourceTooLarge(ValueError):
    pass


class ServerBusy(RuntimeError):
    pass


class BackendRefused(ValueError):
    """A backend this run cannot use: torch for uploaded text (the sandbox only knows the engine)."""


class BackendMissing(RuntimeError):
    """The backend's library is not installed here (torch)."""


# --- backends ------------------------------------------------------------------------------------


def torch_available() -> bool:
    """Whether ``import torch`` would find torch, without paying for the import."""
    return importlib.util.find_spec("torch") is not None


def backend_version(backend: str) -> str:
    """``"engine"``, or ``"torch 2.8.0"`` (the installed distribution's version, without importing
    it); what a run shows until its trace says (``meta.backend``)."""
    if backend != "torch":
        return backend
    try:
        return f"torch {importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        return "torch"


def check_backend(backend: str, *, trusted: bool) -> None:
    """Refuse what cannot run: an unknown backend or torch for untrusted text (``BackendRefused``),
    torch when it is not installed (``BackendMissing``)."""
    if backend not in BACKENDS:
        raise BackendRefused(f"unknown backend {backend!r}: one of {', '.join(BACKENDS)}")
    if backend == "torch" and not trusted:
        raise BackendRefused(
            "the torch backend runs trusted code only (the bundled scenarios, or a local file from the "
            "command line): uploaded text runs in a sandbox that only knows the engine"
        )
    if backend == "torch" and not torch_available():
        raise BackendMissing("torch is not installed on this server, so only the engine backend can run")


def backend_label(backend: str, meta: dict[str, Any] | None) -> str:
    """How a run's backend is shown: the trace's ``meta.backend`` once it has one (``"torch
    2.8.0"``, or ``{"name", "version"}``), else ``backend_version``."""
    value = (meta or {}).get("backend")
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and value.get("name"):
        return f"{value['name']} {value.get('version', '')}".strip()
    return backend_version(backend)


# --- reusing runs (Note [The engine's fingerprint]) ---------------------------------------------

# What makes a scenario's trace besides its text: the engine (and its trace schema), and the app's
# code that runs a scenario (in the server or the sandbox worker) and annotates its events.
FINGERPRINT_FILES = (
    "engine/**/*.py",
    "engine/**/*.json",
    "app/runner.py",
    "app/runs.py",
    "app/sandbox.py",
    "app/_worker.py",
    "app/_sandbox_policy.py",
)


@functools.cache
def engine_fingerprint(backend: str = "engine") -> str:
    """A hash of the code that makes a run's trace on ``backend``; once per process."""
    digest = hashlib.sha256()
    paths = sorted({p for pattern in FINGERPRINT_FILES for p in PROJECT_ROOT.glob(pattern)})
    for path in paths:
        digest.update(f"{path.relative_to(PROJECT_ROOT).as_posix()}\0".encode())
        digest.update(path.read_bytes())
        digest.update(b"\0")
    versions = [sys.version, importlib.metadata.version("numpy")]
    if backend == "torch":
        versions.append(backend_version("torch"))
    digest.update("\0".join(versions).encode())
    return digest.hexdigest()[:32]


def reuse_key(*, text: str, filename: str, backend: str, trusted: bool) -> str:
    """What identifies a run's result (Note [Reusing a run] in app/store.py)."""
    parts = [engine_fingerprint(backend), backend, "trusted" if trusted else "sandbox", filename, text]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


# --- scenarios and uploaded text -----------------------------------------------------------------


def find_scenario(scenario_id: str, directory: Path = SCENARIOS_DIR) -> ScenarioInfo:
    """A bundled scenario by id (its file stem). The id is checked against a strict pattern
    before it reaches the file system, so it can only name a file directly in ``scenarios/``."""
    if SCENARIO_ID_RE.fullmatch(scenario_id):
        path = directory / f"{scenario_id}.py"
        if path.is_file():
            return scenario_info(path)
    raise UnknownScenario(f"no bundled scenario {scenario_id!r} (GET /api/scenarios lists them)")


def clean_filename(name: str | None) -> str:
    """The name an uploaded scenario's events and errors point at: a bare ``*.py`` file name.
    Directories are dropped so the name can never match a file of the server (the recorder
    attributes events to files by path)."""
    base = re.split(r"[\\/]", name or "")[-1]
    base = re.sub(r"[^A-Za-z0-9._ -]", "_", base).strip(" .")[:100]
    if not base:
        return DEFAULT_FILENAME
    return base if base.endswith(".py") else f"{base}.py"


def docstring_title(text: str) -> str | None:
    """The first line of the module docstring of untrusted text, without parsing the whole text:
    tokens up to the first statement, and ``literal_eval`` of one string literal."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text[:65536]).readline)
        skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING}
        first = next(t for t in tokens if t.type not in skip)
        if first.type != tokenize.STRING:
            return None
        after = next(tokens)
        if after.type not in (tokenize.NEWLINE, tokenize.ENDMARKER):  # "..." + x is no docstring
            return None
        value = with_ast(lambda: ast.literal_eval(first.string))
    except Exception:  # noqa: BLE001 - broken text simply has no title; the run reports the error
        return None
    if not isinstance(value, str):
        return None
    title = inspect.cleandoc(value).partition("\n")[0].strip()
    return title[:TITLE_MAX] or None


def new_run_id() -> str:
    return secrets.token_urlsafe(8)  # 11 url-safe characters, 64 random bits


# --- events --------------------------------------------------------------------------------------


class EventWriter:
    """Annotates events in order and stores them in batches (Note [Events while running]).

    Each item is ``{"event", "changes", "caption", "changed"}``: the caption comes from the state
    before the event, the changes from stepping the reducer over it (docs/trace.md, "The reducer"),
    and ``changed`` says them in a few lines (``engine/trace/changed.py``). What the run's graph
    needs is collected on the way (``dot``, ``graph_dot()``), so drawing it at the end does not
    step the reducer through every event a second time, and so is its story (``story``,
    ``story_json()``: Note [Documents ready at done]).
    """

    def __init__(
        self, store: Store, run_id: str, batch_events: int, on_append: Callable[[], None] = lambda: None
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.batch_events = batch_events
        self.on_append = on_append
        self.state = initial_state()
        self.dot: DotCollector | None = DotCollector()
        self.story: StoryDocumentBuilder | None = StoryDocumentBuilder()
        self.pending: list[dict[str, Any]] = []
        self.next_seq = 0
        self.count = 0  # events added so far
        self.broken = False  # adding failed part-way: see resume()

    def add(self, events: Iterable[Event]) -> None:
        with gc_paused():  # Note [Pausing the collector] (app/_gc.py)
            self._add(events)

    def _add(self, events: Iterable[Event]) -> None:
        for event in events:
            self.count += 1
            text = caption(self.state, event)
            self._collect_before(event, text)
            changes = step(self.state, event)
            self._collect_after(event, changes)
            changed = describe_changes(self.state, changes)
            self.pending.append({"event": event, "changes": changes, "caption": text, "changed": changed})
            if len(self.pending) >= self.batch_events:
                self.flush()

    def resume(self, events: list[Event]) -> None:
        """After a failure part-way through ``add``: go on from the last stored batch, with the
        reducer's state rebuilt from the events before it."""
        self.pending = []
        self.state = initial_state()
        self.dot = DotCollector()
        self.story = StoryDocumentBuilder()
        for event in events[: self.next_seq]:
            self._collect_before(event)
            changes = step(self.state, event)
            self._collect_after(event, changes)
        self.count = self.next_seq
        self.broken = False

    # What the graph and the story need, gathered on the way. A collector that fails is dropped
    # and logged, and must not stop the events from being stored: the graph is then missing, as
    # when drawing it failed before, and the story is derived when asked for, where its error
    # is reported (Note [Documents ready at done]).

    def _collect_before(self, event: Event, text: str | None = None) -> None:
        if self.dot is not None:
            try:
                self.dot.see(self.state, event)
            except Exception:
                self.dot = None
                self._dropped("its graph")
        if self.story is not None:
            try:
                self.story.see(self.state, event, text)
            except Exception:
                self.story = None
                self._dropped("its story")

    def _collect_after(self, event: Event, changes: list[Change]) -> None:
        if self.story is not None:
            try:
                self.story.after(event, changes)
            except Exception:
                self.story = None
                self._dropped("its story")

    def _dropped(self, what: str) -> None:
        log.exception("run %s: collecting what %s needs failed", self.run_id, what)

    def story_json(self, events: list[Event]) -> str | None:
        """The story document of ``events``, every event added, as ``GET story`` sends it."""
        if self.story is None:
            return None
        try:
            return document_json(self.story.finish(self.state, events))
        except Exception:
            self.story = None
            self._dropped("its story")
            return None

    def graph_dot(self, trace: dict[str, Any]) -> str | None:
        """The DOT of every event added, ``engine.trace.export.to_dot`` of ``trace``, the document
        they are the events of (its ``meta.modules`` fold repeated module instances); None if
        collecting for it failed."""
        return dot_of(self.dot, self.state, modules_of(trace)).source if self.dot is not None else None

    def flush(self) -> None:
        if self.pending:
            self.next_seq = self.store.append_batch(self.run_id, self.next_seq, self.pending)
            self.pending = []
            self.on_append()


# --- waiting for news ----------------------------------------------------------------------------


class Watcher:
    """Wakes an async stream when its run changes. Producers are worker threads, so they set the
    event through the stream's loop (``call_soon_threadsafe``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()

    def notify(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting any more
            self.loop.call_soon_threadsafe(self.event.set)

    async def wait(self, timeout: float) -> None:
        """Until notified or ``timeout`` seconds (the stream then polls the store: a run written
        by another process, or a missed wake-up, is still seen)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), timeout)
        self.event.clear()


# --- the manager ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    trusted: bool
    backend: str  # "engine" or "torch" (trusted only)
    path: Path | None  # a bundled scenario (trusted)
    text: str  # the scenario's text (what an untrusted run executes)
    filename: str
    trace: dict[str, Any] | None = None  # an imported trace: nothing runs (app/imported.py)
    reuse_key: str | None = None  # None: always a new run (Note [Reusing a run] in app/store.py)
    fresh: bool = False  # a new run under ``reuse_key`` even if one could be reused
    # A bundled scenario's reused run: at most one per scenario and backend is ever pending, so
    # it does not count against ``Settings.max_pending`` (Note [A class on one server]).
    library: bool = False


class RunManager:
    """Creates runs, executes them on a thread pool, and tells streams when a run changes."""

    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        self.settings = settings
        self.store = store or Store(settings.database)
        self.in_process = threading.Lock()  # Note [One in-process run at a time]
        self._lock = threading.Lock()  # guards everything below
        self._executor: ThreadPoolExecutor | None = None
        self._futures: dict[str, Future[None]] = {}
        self._library: set[str] = set()  # the pending runs that max_pending does not count
        self._token = new_run_id()  # this manager, in the owner of its runs
        self.owner = ""  # set by start (Note [Who owns an unfinished run] in app/store.py)
        self._watchers: dict[str, set[Watcher]] = {}
        self.interrupted: list[str] = []
        self._opened = False

    # --- lifecycle ---

    def start(self) -> None:
        """Open the store and mark the runs a previous process left unfinished. Idempotent:
        called by the app's lifespan, and by the first request if there was none."""
        if self._executor is not None:  # started: every request asks, so no lock for the answer
            return  # (the executor is the last thing start sets; stop clears it under the lock)
        with self._lock:
            if self._executor is not None:
                return
            if not self._opened:  # once: a restart of this same manager has no orphans to mark
                self.store.open()
                self.interrupted = self.store.mark_interrupted()
                self._opened = True
            self.owner = claim_owner(self._token)
            if self.settings.reuse_runs:
                engine_fingerprint("engine")  # hashed now rather than in the first request

            self._executor = ThreadPoolExecutor(self.settings.workers, thread_name_prefix="autograd-lens-run")

    def stop(self) -> None:
        """Stop taking runs. Queued runs end as interrupted; running ones finish in their thread
        (an untrusted one within its wall-clock limit) and are stored as usual."""
        with self._lock:
            executor, self._executor = self._executor, None
            cancelled = [rid for rid, f in self._futures.items() if f.cancel()]
            for run_id in cancelled:
                del self._futures[run_id]
                self._library.discard(run_id)
        release_owner(self._token)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        for run_id in cancelled:
            self.store.finish(run_id, status="error", error=_error_dict("Interrupted", INTERRUPTED))
            self.notify(run_id)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._futures)

    # --- creating runs ---

    def create_bundled(self, scenario_id: str, backend: str = "engine", *, fresh: bool = False) -> RunRecord:
        """A run of a bundled scenario; the stored one when it may be reused, unless ``fresh``
        (``record.reused`` says which; Note [Reusing a run] in app/store.py)."""
        info = find_scenario(scenario_id)
        check_backend(backend, trusted=True)
        text = info.path.read_text(encoding="utf-8")
        name = display_name(info.path)
        key = self._reuse_key(text=text, filename=name, backend=backend, trusted=True)
        job = _Job(
            trusted=True,
            backend=backend,
            path=info.path,
            text=text,
            filename=name,
            reuse_key=key,
            fresh=fresh,
            library=key is not None and not fresh,
        )
        return self._create(job, scenario=info.id, title=info.title)

    def create_uploaded(
        self, source: str, filename: str | None, backend: str = "engine", *, fresh: bool = False
    ) -> RunRecord:
        """A sandboxed run of uploaded text; an identical upload's run when it may be reused,
        unless ``fresh``."""
        check_backend(backend, trusted=False)
        size = len(source.encode("utf-8"))
        if size > self.settings.max_upload_bytes:
            raise SourceTooLarge(
                f"the scenario is {size} bytes long; the limit is {self.settings.max_upload_bytes} bytes"
            )
        name = clean_filename(filename)
        key = self._reuse_key(text=source, filename=name, backend="engine", trusted=False)
        job = _Job(
            trusted=False, backend="engine", path=None, text=source, filename=name, reuse_key=key, fresh=fresh
        )
        return self._create(job, scenario=None, title=docstring_title(source) or name)

    def _reuse_key(self, *, text: str, filename: str, backend: str, trusted: bool) -> str | None:
        if not self.settings.reuse_runs:
            return None
        return reuse_key(text=text, filename=filename, backend=backend, trusted=trusted)

    def create_generated(
        self, text: str, filename: str, title: str, key: str, backend: str = "engine"
    ) -> RunRecord:
        """A run of a scenario text the server wrote itself (the compare page's models,
        app/compare.py): trusted like a bundled scenario, so it may run on torch. ``key`` names
        it in the run's ``scenario`` field (``compare/per_block/4``)."""
        check_backend(backend, trusted=True)
        job = _Job(trusted=True, backend=backend, path=None, text=text, filename=filename)
        return self._create(job, scenario=key, title=title)

    def create_imported(self, doc: dict[str, Any]) -> RunRecord:
        """A run of a trace document checked by ``app.imported.read_trace``: nothing executes, its
        events are annotated and stored like a run's (Note [Opening a trace file])."""
        info = describe(doc)
        job = _Job(
            trusted=False,
            backend=info.backend,
            path=None,
            text=info.source,
            filename=info.filename,
            trace=doc,
        )
        return self._create(job, scenario=None, title=docstring_title(info.source) or info.name)

    def _create(self, job: _Job, *, scenario: str | None, title: str) -> RunRecord:
        self.start()
        key = None if job.fresh else job.reuse_key
        if key is not None and (record := self._reused(key)) is not None and record.finished:
            # A finished run under the key answers without the lock below: it stays reusable
            # (only a run that ends in a limit or a fault loses its key, and this one has ended),
            # so a class opening stored runs is not served one request at a time.
            return record
        with self._lock:  # one lookup-and-create at a time: concurrent requests make one run
            if key is not None and (record := self._reused(key)) is not None:
                return record
            counted = len(self._futures) - len(self._library)
            if not job.library and counted >= self.settings.max_pending:
                raise ServerBusy(
                    f"{counted} runs are queued or running, the most this server takes; try again in a moment"
                )
            executor = self._executor
            if executor is None:
                raise ServerBusy("the server is shutting down")
            for _ in range(5):  # 64 random bits: a collision is a curiosity, not an event
                run_id = new_run_id()
                try:
                    record = self.store.create_run(
                        run_id,
                        scenario=scenario,
                        title=title,
                        filename=job.filename,
                        source=job.text,
                        trusted=job.trusted,
                        backend=job.backend,
                        imported=job.trace is not None,
                        reuse_key=job.reuse_key,
                        owner=self.owner,
                        fresh=job.fresh,
                    )
                    break
                except sqlite3.IntegrityError:
                    continue
            else:  # pragma: no cover
                raise RuntimeError("could not find a free run id")
            if record.reused:  # another server process made it in the meantime
                return record
            if job.library:
                self._library.add(run_id)
            self._futures[run_id] = executor.submit(self._execute, run_id, job)
        return record

    def _reused(self, key: str) -> RunRecord | None:
        """The run that answers a request for ``key`` (Note [Reusing a run]), marked reused."""
        found = self.store.reusable_run(key)
        record = self.store.get_run(found) if found else None
        if record is not None:
            record.reused = True
        return record

    def wait(self, run_id: str, timeout: float | None = None) -> None:
        """Until the run has finished in this process (at once if it is not running here);
        ``TimeoutError`` after ``timeout`` seconds."""
        with self._lock:
            future = self._futures.get(run_id)
        if future is not None:
            with contextlib.suppress(CancelledError):  # at shutdown; _execute itself never raises
                future.result(timeout)

    # --- executing ---

    def _execute(self, run_id: str, job: _Job) -> None:
        """The whole run, on a pool thread. Never raises: whatever fails ends the run as an error
        instead of leaving it ``running`` for ever."""
        try:
            writer = EventWriter(self.store, run_id, self.settings.batch_events, lambda: self.notify(run_id))
            with self.in_process if job.trusted else contextlib.nullcontext():
                self.store.set_running(run_id)
                self.notify(run_id)
                result = self._run(run_id, job, self._streamer(run_id, writer))
            self._store_result(run_id, result, writer)
        except Exception as e:
            log.exception("run %s failed inside the server", run_id)
            self.store.finish(
                run_id,
                status="error",
                error=_error_dict("InternalError", f"the server failed to run the scenario: {e!r}"),
            )
        finally:
            # Forgotten here rather than in a done-callback: once a caller sees the future done,
            # the run no longer counts against max_pending.
            with self._lock:
                self._futures.pop(run_id, None)
                self._library.discard(run_id)
            self.notify(run_id)
            self._prune()

    def _prune(self) -> None:
        """Keep the newest ``Settings.keep_runs`` finished runs (0: all of them)."""
        if self.settings.keep_runs:
            try:
                deleted = self.store.prune(self.settings.keep_runs)
            except sqlite3.Error:  # the next finished run tries again
                log.exception("deleting old runs failed")
                return
            if deleted:
                log.info(
                    "deleted %d old runs (AUTOGRAD_LENS_KEEP_RUNS=%d)", len(deleted), self.settings.keep_runs
                )

    def _streamer(self, run_id: str, writer: EventWriter) -> Callable[[list[Event]], None]:
        """``on_events`` of a run: store each batch as it comes (Note [Events while running])."""

        def on_events(batch: list[Event]) -> None:
            if writer.broken:
                return
            try:
                writer.add(batch)
                writer.flush()
            except Exception:
                writer.broken = True
                log.exception("run %s: storing events while it runs failed; the rest come at its end", run_id)

        return on_events

    def _run(self, run_id: str, job: _Job, on_events: Callable[[list[Event]], None]) -> RunResult:
        def on_progress(n: int) -> None:
            self.store.set_progress(run_id, n)
            self.notify(run_id)

        if job.trace is not None:
            return imported_result(job.trace)
        limits = self.settings.limits
        if job.trusted:
            # A bundled scenario's file, or a text the server wrote (``create_generated``).
            return run_scenario(
                job.path if job.path is not None else job.text,
                backend=job.backend,
                trusted=True,
                limits=limits,
                on_progress=on_progress,
                on_events=on_events,
                filename=None if job.path is not None else job.filename,
            )
        return run_scenario(
            job.text,
            trusted=False,
            limits=limits,
            on_progress=on_progress,
            filename=job.filename,
            on_events=on_events,
        )

    def _store_result(self, run_id: str, result: RunResult, writer: EventWriter) -> None:
        with gc_paused():  # Note [Pausing the collector] (app/_gc.py)
            self._finish(run_id, result, writer)

    def _finish(self, run_id: str, result: RunResult, writer: EventWriter) -> None:
        trace = result.trace or {}
        events: list[Event] = list(trace.get("events") or [])
        if writer.broken:
            writer.resume(events)
        writer.add(events[writer.count :])
        writer.flush()
        try:
            dot: str | None = writer.graph_dot(trace)
        except Exception:  # a drawing bug must not lose the run; graph.dot then says so
            log.exception("run %s: to_dot failed", run_id)
            dot = None
        error = asdict(result.error) if result.error is not None else None
        if not result.ok and error is None:
            error = _error_dict("Error", "the run failed")
        documents: dict[str, str] = {}  # Note [Documents ready at done]
        if (story := writer.story_json(events)) is not None:
            documents["story"] = story
        try:
            documents["memory"] = derive_json("memory", events, trace.get("meta") or {})
        except Exception:  # derived when asked for, as before, where its error is reported
            log.exception("run %s: its memory report failed; it is derived when asked for", run_id)
        self.store.finish(
            run_id,
            status="done" if result.ok else "error",
            error=error,
            stdout=result.stdout,
            meta=trace.get("meta"),
            sources=trace.get("sources"),
            dot=dot,
            trace_json=to_json(trace) if trace else None,
            documents=documents,
            grads=grads if isinstance(grads := result.extra.get("grads"), dict) else None,
        )

    # --- telling streams ---

    @contextlib.contextmanager
    def watch(self, run_id: str) -> Iterator[Watcher]:
        """A ``Watcher`` notified whenever the run changes, for the duration of a stream."""
        watcher = Watcher(asyncio.get_running_loop())
        with self._lock:
            self._watchers.setdefault(run_id, set()).add(watcher)
        try:
            yield watcher
        finally:
            with self._lock:
                watchers = self._watchers.get(run_id)
                if watchers is not None:
                    watchers.discard(watcher)
                    if not watchers:
                        del self._watchers[run_id]

    def notify(self, run_id: str) -> None:
        """Wake the streams of a run: its status or its stored events changed."""
        with self._lock:
            watchers = list(self._watchers.get(run_id, ()))
        for watcher in watchers:
            watcher.notify()


def _error_dict(type_: str, message: str) -> dict[str, Any]:
    """A run's error not tied to a scenario line, as the store keeps it."""
    return asdict(RunError(type_, message))
