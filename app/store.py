"""Runs and their events in an embedded SQLite database (WAL mode), so a run survives a restart
and its id is a permanent link.

Note [Event batches]
~~~~~~~~~~~~~~~~~~~~
A run's events are stored as batches: one row per ``(run_id, first_seq, last_seq)`` holding the
JSON list of ``{"event", "changes", "caption"}`` items for seqs ``first_seq..last_seq``,
zlib-compressed (the reducer's changes repeat the same keys; a batch shrinks about tenfold).
Compressed at ``ZLIB_LEVEL`` 1, the fastest: a server stores events as fast as it annotates
them, and a 100k-event run's batches took 0.64 s at zlib's default level 6 against 0.21 s at 1,
for 4.4 MB against 7.3 MB (docs/performance.md, "Storing and streaming a run").

Note [Encoding batches]
~~~~~~~~~~~~~~~~~~~~~~~
Encoding a batch's items is the largest part of storing them (json.dumps: 1.2 s for the batches
of a 100k-event run, orjson: 0.2 s), so ``dumps_batch`` uses orjson. It writes the document
``dumps`` writes, parsed alike: compact, NaN and infinities as null, tuples as lists; only its
text may differ (non-ASCII characters as UTF-8 rather than escapes, floats in another
shortest form). What orjson refuses (a string with a lone surrogate, which UTF-8 cannot encode,
an integer beyond 64 bits, a key that is not a string) goes through ``dumps`` instead, so a
batch never fails to store where it stored before. Batches are read back as UTF-8.

- Batches of a run are contiguous and never overlap: batch k+1 starts at batch k's
  ``last_seq + 1``. ``append_batch`` checks this, so a writer bug cannot leave a hole that a
  streaming client would skip over silently.
- A batch is what one SSE message carries, so a stream serves stored rows without re-encoding.
  Resuming after seq N (``Last-Event-ID``) is the indexed query ``last_seq > N``; only the first
  row can start at or before N, and only that one is cut (``items_after``).
- Appending a batch and raising ``runs.n_events`` happen in one transaction: a reader never sees
  a count its batches do not back, and a run still executing can be appended to batch by batch.

Note [Schema migrations]
~~~~~~~~~~~~~~~~~~~~~~~~
``PRAGMA user_version`` is the schema's version. A database of an older version is brought up to
date when opened: ``CREATE TABLE IF NOT EXISTS`` leaves an existing ``runs`` table as it was, so
each column added since version 1 (``_ADDED_COLUMNS``) is added with ``ALTER TABLE ... ADD
COLUMN`` if missing, with a default that is true of the old rows (a run stored before backends
existed ran on the engine). A database newer than this server is refused rather than guessed at.

Note [Reusing a run]
~~~~~~~~~~~~~~~~~~~~
A scenario run is deterministic: the same text, under the same file name, on the same backend and
the same engine gives the same trace (timings aside). So a run may carry a ``reuse_key`` (a hash
of those, ``app.runs.reuse_key``) and a request for the same key is answered with that run instead
of a new one: finished ``done``, still queued or running (two hundred viewers opening one card
make one run), or an ``error`` the scenario itself raised. An error that depends on the moment
does not say anything about the text, and must not be served again: a sandbox limit (wall clock,
CPU, memory, events...), a worker that died, a restart that interrupted the run, a failure of the
server. ``finish`` and ``mark_interrupted`` clear the key of such a run (``reusable_error``), so
the next request for it runs the scenario again. Looking the key up and inserting a new run happen
in one write transaction: two requests, or two server processes, never both make the run.

Note [Who owns an unfinished run]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A run that is queued or running lives in one server process's thread pool; if that process dies
the run never finishes. Each run records its ``owner``: ``host:pid:start:token``, the process (its
pid and its start time, so a reused pid is not mistaken for it) and the ``RunManager`` within it.
A run is orphaned when its owner is gone: no owner (a run stored by an older server, or by hand),
another host (SQLite in WAL mode is shared by processes of one machine only, so a run of another
host name is one a previous container left), a dead process of this host, or a manager of this
process that has stopped. At startup a server marks only the orphans as interrupted, never the
runs another live process is executing, so several processes can serve one database.

Each call opens its own connection: callers are worker threads and the server's thread pool, and
SQLite connections are cheap to open (WAL lets readers run alongside the one writer).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import os
import socket
import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from app.runner import BACKENDS, RunError

SCHEMA_VERSION = 5
SHARED_ID_LENGTH = 12  # base32 characters of the hash: 60 bits, no collision in any one server's life
FINISHED = ("done", "error")
INTERRUPTED = "interrupted by a server restart"
ZLIB_LEVEL = 1  # Note [Event batches]
# Documents a run stores when it finishes, each a column of ``runs`` (Note [Documents ready at
# done] in app/runs.py; how each is built: app/documents.py).
STORED_DOCUMENTS = ("story", "memory")
# Errors that depend on the moment, not on the scenario's text (Note [Reusing a run]); a run that
# stopped at a sandbox limit has ``error.limit`` set as well.
TRANSIENT_ERRORS = ("Interrupted", "InternalError", "WorkerError")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id          TEXT PRIMARY KEY,
    status      TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'error')),
    scenario    TEXT,              -- the bundled scenario's id, NULL for uploaded text
    title       TEXT NOT NULL,
    filename    TEXT NOT NULL,
    source      TEXT NOT NULL,
    trusted     INTEGER NOT NULL,
    backend     TEXT NOT NULL DEFAULT 'engine',   -- what recorded the trace: 'engine' or 'torch'
    imported    INTEGER NOT NULL DEFAULT 0,  -- 1: a trace file opened here (POST /api/traces)
    error       TEXT,              -- JSON {"type", "message", "file", "line", "limit"} or NULL
    n_events    INTEGER NOT NULL DEFAULT 0,   -- events stored (what a stream can send now)
    progress    INTEGER NOT NULL DEFAULT 0,   -- events recorded so far by the runner
    stdout      TEXT NOT NULL DEFAULT '',
    meta        TEXT,              -- JSON: the trace document's "meta", once finished
    sources     TEXT,              -- JSON: the trace document's "sources", once finished
    dot         TEXT,              -- the graph as DOT source, once finished
    trace       BLOB,              -- zlib(the trace document as JSON), once finished
    grads       TEXT,              -- JSON {name: nested list}: the final gradients, once finished
    story       BLOB,              -- zlib(its story document as JSON), once finished (app/runs.py)
    memory      BLOB,              -- zlib(its memory report as JSON), once finished (app/runs.py)
    reuse_key   TEXT,              -- what another request for the same run asks for (Note [Reusing a run])
    owner       TEXT,              -- the process running it (Note [Who owns an unfinished run])
    created_at  TEXT NOT NULL,
    started_at  TEXT,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS shared (   -- scenario texts behind a permalink, /s/<id>; never pruned
    id          TEXT PRIMARY KEY,   -- a hash of filename and text: sharing the same text twice gives one id
    filename    TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batches (
    run_id    TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    first_seq INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    data      BLOB NOT NULL,       -- zlib(JSON list of {"event", "changes", "caption"})
    PRIMARY KEY (run_id, first_seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS batches_resume ON batches (run_id, last_seq);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
"""

# Columns added after version 1, for databases made before them (Note [Schema migrations]).
_ADDED_COLUMNS = {
    "backend": "TEXT NOT NULL DEFAULT 'engine'",  # every run of version 1 ran on the engine
    "grads": "TEXT",
    "imported": "INTEGER NOT NULL DEFAULT 0",  # version 3; every older run ran on this server
    "reuse_key": "TEXT",  # version 4; older runs are never reused (their engine is unknown)
    "owner": "TEXT",  # version 4; an older unfinished run has no owner: an orphan
    "story": "BLOB",  # version 5; an older run's story is derived when first asked for
    "memory": "BLOB",  # version 5; so is its memory report
}
# After the columns exist (an older database gets them in ``open``'s migration first).
_INDEXES = "CREATE INDEX IF NOT EXISTS runs_reuse ON runs (reuse_key) WHERE reuse_key IS NOT NULL"


def reusable_error(error: dict[str, Any] | None) -> bool:
    """Whether a run that ended with ``error`` may answer another request for it: an error of the
    scenario itself, not a limit, a dead worker, an interruption (Note [Reusing a run])."""
    return error is None or (not error.get("limit") and error.get("type") not in TRANSIENT_ERRORS)


# --- owners of unfinished runs (Note [Who owns an unfinished run]) --------------------------------

_HOST = socket.gethostname().replace(":", "_")
_live_tokens: set[str] = set()  # the tokens of this process's running managers


def _start_time(pid: int) -> str:
    """When a process started (clock ticks since boot, /proc/PID/stat field 22), or "" where
    there is no /proc. Raises ``OSError`` when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            raise ProcessLookupError(pid) from None
        os.kill(pid, 0)  # no /proc: only whether the pid exists
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def claim_owner(token: str) -> str:
    """The owner of the runs a manager creates: this process and ``token`` (the manager)."""
    _live_tokens.add(token)
    return f"{_HOST}:{os.getpid()}:{_start_time(os.getpid())}:{token}"


def release_owner(token: str) -> None:
    """The manager stopped: a later one sees its unfinished runs as orphans."""
    _live_tokens.discard(token)


def owner_alive(owner: str | None) -> bool:
    """Whether the owner of an unfinished run may still finish it."""
    parts = (owner or "").split(":")
    if len(parts) != 4 or parts[0] != _HOST or not parts[1].isdigit():
        return False
    _, pid, start, token = parts
    if int(pid) == os.getpid():
        return token in _live_tokens
    try:
        return _start_time(int(pid)) == start
    except PermissionError:  # a process of another user: it exists
        return True
    except OSError:
        return False


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def dumps(value: Any) -> str:
    """Compact JSON that a browser's ``JSON.parse`` accepts: ASCII only (no lone surrogates can
    break the UTF-8 encoding of a response) and no ``NaN``/``Infinity`` (written as null)."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(_finite(value), separators=(",", ":"), allow_nan=False)


def _compressed(text: str | None) -> bytes | None:
    return zlib.compress(text.encode("utf-8"), ZLIB_LEVEL) if text is not None else None


def _decompressed(blob: bytes | None) -> str | None:
    return zlib.decompress(blob).decode("utf-8") if blob is not None else None


def dumps_batch(items: list[dict[str, Any]]) -> bytes:
    """A batch's items as UTF-8 JSON, the same document ``dumps`` writes (Note [Encoding
    batches])."""
    try:
        return orjson.dumps(items, default=_tuple_as_list)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits, non-str keys
        return dumps(items).encode("ascii")


def _tuple_as_list(value: Any) -> Any:
    # orjson writes tuples but not their subclasses: the reducer's changes are named tuples.
    if isinstance(value, tuple):
        return list(value)
    raise TypeError


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


@dataclass
class RunRecord:
    id: str
    status: str
    scenario: str | None
    title: str
    filename: str
    source: str
    trusted: bool
    backend: str
    imported: bool  # opened from a trace file: nothing ran on this server
    error: dict[str, Any] | None
    n_events: int
    progress: int
    stdout: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    reused: bool = False  # not stored: ``create_run`` answered with an existing run

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass(frozen=True)
class Batch:
    first_seq: int
    last_seq: int
    data: str  # the JSON list of items, as stored


_RUN_COLUMNS = (
    "id, status, scenario, title, filename, source, trusted, backend, error, n_events, progress, stdout, "
    "created_at, started_at, finished_at, imported"
)


class Store:
    """The SQLite database of runs. ``open()`` creates the file and the schema; nothing touches
    the disk before it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            # WAL is a property of the database file: set once, every later connection uses it.
            conn.execute("PRAGMA journal_mode=WAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} has schema version {version}, this server knows {SCHEMA_VERSION}"
                )
            conn.executescript(_SCHEMA)
        with self._write() as conn:  # one transaction: two servers opening the file never both add
            have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
            for name, declaration in _ADDED_COLUMNS.items():
                if name not in have:
                    conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {declaration}")
            conn.execute(_INDEXES)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # isolation_level=None: no implicit transactions; writers use explicit BEGIN IMMEDIATE
        # (take the write lock up front instead of failing to upgrade a read lock).
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoints; safe with WAL
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # --- runs ------------------------------------------------------------------------------------

    def create_run(
        self,
        run_id: str,
        *,
        scenario: str | None,
        title: str,
        filename: str,
        source: str,
        trusted: bool,
        backend: str = "engine",
        imported: bool = False,
        reuse_key: str | None = None,
        owner: str | None = None,
        fresh: bool = False,
    ) -> RunRecord:
        """A new queued run, or, given a ``reuse_key``, the run already stored under it if it may
        be reused (Note [Reusing a run]); the record says which (``reused``). ``fresh``: a new run
        under the key all the same, which later requests then reuse."""
        if backend not in BACKENDS:
            raise ValueError(f"a run's backend is one of {BACKENDS}, not {backend!r}")
        created = now_iso()
        with self._write() as conn:
            existing = self._reusable(conn, reuse_key) if reuse_key is not None and not fresh else None
            if existing is None:
                conn.execute(
                    "INSERT INTO runs (id, status, scenario, title, filename, source, trusted, backend, "
                    "imported, reuse_key, owner, created_at) "
                    "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        scenario,
                        title,
                        filename,
                        source,
                        int(trusted),
                        backend,
                        int(imported),
                        reuse_key,
                        owner,
                        created,
                    ),
                )
        record = self.get_run(existing or run_id)
        assert record is not None
        record.reused = existing is not None
        return record

    def reusable_run(self, reuse_key: str) -> str | None:
        """The id of the run stored under ``reuse_key`` that may answer a request for it."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT id, status, owner FROM runs WHERE reuse_key = ? ORDER BY created_at DESC LIMIT 1",
                (reuse_key,),
            ).fetchone()
        if row is None or (row[1] not in FINISHED and not owner_alive(row[2])):
            return None
        return str(row[0])

    def _reusable(self, conn: sqlite3.Connection, reuse_key: str) -> str | None:
        """``reusable_run`` inside a write transaction: an unfinished run under the key whose owner
        died is marked interrupted here (its key cleared), so a new run takes its place."""
        row = conn.execute(
            "SELECT id, status, owner FROM runs WHERE reuse_key = ? ORDER BY created_at DESC LIMIT 1",
            (reuse_key,),
        ).fetchone()
        if row is None:
            return None
        if row[1] not in FINISHED and not owner_alive(row[2]):
            self._interrupt(conn, [row[0]], INTERRUPTED)
            return None
        return str(row[0])

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._connect() as conn:
            row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return RunRecord(
            id=row[0],
            status=row[1],
            scenario=row[2],
            title=row[3],
            filename=row[4],
            source=row[5],
            trusted=bool(row[6]),
            backend=row[7],
            error=json.loads(row[8]) if row[8] else None,
            n_events=row[9],
            progress=row[10],
            stdout=row[11],
            created_at=row[12],
            started_at=row[13],
            finished_at=row[14],
            imported=bool(row[15]),
        )

    def prune(self, keep: int) -> list[str]:
        """Delete the finished runs older than the newest ``keep`` finished ones, with their
        events (``AUTOGRAD_LENS_KEEP_RUNS``). Runs still queued or running are never deleted.
        Returns the ids deleted. SQLite reuses the freed pages; the file does not shrink."""
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id FROM runs WHERE status IN ('done', 'error') "
                "ORDER BY created_at DESC, id DESC LIMIT -1 OFFSET ?",
                (keep,),
            ).fetchall()
            conn.executemany("DELETE FROM runs WHERE id = ?", rows)  # batches: ON DELETE CASCADE
        return [r[0] for r in rows]

    # --- shared scenarios (permalinks) --------------------------------------------------------

    def share(self, filename: str, source: str) -> str:
        """Keep a scenario text behind a permalink; returns its id. The id is a hash of the file
        name and the text, so sharing the same scenario again gives the same link."""
        digest = hashlib.sha256(f"{filename}\0{source}".encode("utf-8", "surrogatepass")).digest()
        shared_id = base64.b32encode(digest).decode()[:SHARED_ID_LENGTH].lower()
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO shared (id, filename, source, created_at) VALUES (?, ?, ?, ?)",
                (shared_id, filename, source, now_iso()),
            )
        return shared_id

    def shared(self, shared_id: str) -> tuple[str, str, str] | None:
        """(filename, source, created_at) of a shared scenario, or None."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT filename, source, created_at FROM shared WHERE id = ?", (shared_id,)
            ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def run_ids(self) -> list[str]:
        with self._connect() as conn:
            return [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY created_at, id")]

    def set_running(self, run_id: str) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE runs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued'",
                (now_iso(), run_id),
            )

    def set_progress(self, run_id: str, n: int) -> None:
        with self._write() as conn:
            conn.execute("UPDATE runs SET progress = MAX(progress, ?) WHERE id = ?", (n, run_id))

    def finish(
        self,
        run_id: str,
        *,
        status: str,
        error: dict[str, Any] | None,
        stdout: str = "",
        meta: dict[str, Any] | None = None,
        sources: dict[str, str] | None = None,
        dot: str | None = None,
        trace_json: str | None = None,
        grads: dict[str, Any] | None = None,
        documents: dict[str, str] | None = None,
    ) -> None:
        """End a run. ``trace_json``: the whole trace document, kept as is (compressed) because
        rebuilding it from the batches means parsing every event's changes too. ``grads``: the
        final gradients of the scenario's tensors (``RunResult.extra["grads"]``), for a diff.
        ``documents``: its story and memory report as JSON, by name, those that could be built
        (Note [Documents ready at done] in app/runs.py)."""
        documents = documents or {}
        if status not in FINISHED:
            raise ValueError(f"a run finishes as one of {FINISHED}, not {status!r}")
        with self._write() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, error = ?, stdout = ?, meta = ?, sources = ?, dot = ?, "
                "trace = ?, grads = ?, story = ?, memory = ?, finished_at = ?, "
                "progress = MAX(progress, n_events), "
                "reuse_key = CASE WHEN ? THEN reuse_key END WHERE id = ?",
                (
                    status,
                    dumps(error) if error is not None else None,
                    stdout,
                    dumps(meta) if meta is not None else None,
                    dumps(sources) if sources is not None else None,
                    dot,
                    _compressed(trace_json),
                    dumps(grads) if grads is not None else None,
                    *(_compressed(documents.get(name)) for name in STORED_DOCUMENTS),
                    now_iso(),
                    status == "done" or reusable_error(error),  # Note [Reusing a run]
                    run_id,
                ),
            )

    def mark_interrupted(self, message: str = INTERRUPTED) -> list[str]:
        """Runs left queued or running by a server process that is gone: they will never finish,
        so they end as errors (their stored events stay readable). Runs another live process
        owns are left to it (Note [Who owns an unfinished run]). Returns the ids marked."""
        with self._write() as conn:
            rows = conn.execute("SELECT id, owner FROM runs WHERE status IN ('queued', 'running')")
            ids = [run_id for run_id, owner in rows.fetchall() if not owner_alive(owner)]
            self._interrupt(conn, ids, message)
        return ids

    def _interrupt(self, conn: sqlite3.Connection, ids: list[str], message: str) -> None:
        error = dumps(asdict(RunError("Interrupted", message)))
        conn.executemany(
            "UPDATE runs SET status = 'error', error = ?, finished_at = ?, reuse_key = NULL "
            "WHERE id = ? AND status IN ('queued', 'running')",
            [(error, now_iso(), run_id) for run_id in ids],
        )

    def trace_parts(self, run_id: str) -> tuple[dict[str, Any], dict[str, str]] | None:
        """The trace document's ``meta`` and ``sources`` (once the run finished)."""
        with self._connect() as conn:
            row = conn.execute("SELECT meta, sources FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return (json.loads(row[0]) if row[0] else {}), (json.loads(row[1]) if row[1] else {})

    def _column(self, run_id: str, column: str) -> Any:
        """One column of a run's row; ``None`` when it is NULL or there is no such run."""
        with self._connect() as conn:
            row = conn.execute(f"SELECT {column} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def trace_json(self, run_id: str) -> str | None:
        """The trace document stored when the run finished, if it was."""
        blob = self._column(run_id, "trace")
        return _decompressed(blob)

    def grads(self, run_id: str) -> dict[str, Any] | None:
        """The final gradients stored when the run finished (``None``: none were reported)."""
        text = self._column(run_id, "grads")
        return dict(json.loads(text)) if text else None

    def document_json(self, run_id: str, name: str) -> str | None:
        """Document ``name`` (``story`` or ``memory``) stored when the run finished (Note
        [Documents ready at done] in app/runs.py), if it was."""
        if name not in STORED_DOCUMENTS:
            raise ValueError(f"no stored document {name!r} (stored: {', '.join(STORED_DOCUMENTS)})")
        blob = self._column(run_id, name)
        return _decompressed(blob)

    def dot(self, run_id: str) -> str | None:
        return self._column(run_id, "dot")  # type: ignore[no-any-return]

    # --- events ----------------------------------------------------------------------------------

    def append_batch(self, run_id: str, first_seq: int, items: list[dict[str, Any]]) -> int:
        """Store events ``first_seq .. first_seq + len(items) - 1`` of a run (Note [Event
        batches]); returns the run's new event count."""
        if not items:
            return first_seq
        last_seq = first_seq + len(items) - 1
        blob = zlib.compress(dumps_batch(items), ZLIB_LEVEL)
        with self._write() as conn:
            row = conn.execute("SELECT n_events FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"no run {run_id!r}")
            if row[0] != first_seq:
                raise ValueError(f"run {run_id}: a batch must start at seq {row[0]}, not {first_seq}")
            conn.execute(
                "INSERT INTO batches (run_id, first_seq, last_seq, data) VALUES (?, ?, ?, ?)",
                (run_id, first_seq, last_seq, blob),
            )
            conn.execute("UPDATE runs SET n_events = ? WHERE id = ?", (last_seq + 1, run_id))
        return last_seq + 1

    def batches_after(self, run_id: str, after_seq: int, limit: int = 16) -> list[Batch]:
        """Up to ``limit`` batches holding the events after seq ``after_seq``, in order. The first
        may start at or before ``after_seq``: cut it with ``items_after``."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT first_seq, last_seq, data FROM batches WHERE run_id = ? AND last_seq > ? "
                "ORDER BY last_seq LIMIT ?",
                (run_id, after_seq, limit),
            ).fetchall()
        return [Batch(r[0], r[1], _decompressed(r[2]) or "") for r in rows]

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """A run's events: from the trace document stored when it finished (a third of the JSON
        its batches hold, which carry each event's changes too), else from its batches."""
        text = self.trace_json(run_id)
        if text is not None:
            events = json.loads(text).get("events")
            if isinstance(events, list):
                return events
        return [item["event"] for item in self.items(run_id)]

    def items(self, run_id: str) -> Iterator[dict[str, Any]]:
        """Every stored ``{"event", "changes", "caption"}`` of a run, in order."""
        after = -1
        while batches := self.batches_after(run_id, after):
            for batch in batches:
                yield from json.loads(batch.data)
                after = batch.last_seq


def items_after(batch: Batch, after_seq: int) -> tuple[str, int]:
    """The JSON of a batch's items after seq ``after_seq``, and how many there are."""
    if batch.first_seq > after_seq:
        return batch.data, batch.last_seq - batch.first_seq + 1
    items = json.loads(batch.data)[after_seq - batch.first_seq + 1 :]
    return dumps(items), len(items)
