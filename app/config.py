"""The web app's settings: environment variables with sane defaults.

| variable | default | what |
|---|---|---|
| ``AUTOGRAD_LENS_DATA_DIR`` | ``./data`` | where the database lives (created on startup) |
| ``AUTOGRAD_LENS_DB`` | ``$AUTOGRAD_LENS_DATA_DIR/runs.sqlite3`` | the SQLite database of runs |
| ``AUTOGRAD_LENS_HOST`` | ``127.0.0.1`` | where ``python -m app`` listens |
| ``AUTOGRAD_LENS_PORT`` | ``8000`` | |
| ``AUTOGRAD_LENS_WORKERS`` | ``2`` | runs executing at once (each untrusted one is a sandbox process) |
| ``AUTOGRAD_LENS_MAX_PENDING`` | ``16`` | runs queued or running before ``POST /api/runs`` answers 503 |
| ``AUTOGRAD_LENS_MAX_UPLOAD_BYTES`` | ``1000000`` | the longest scenario text accepted (UTF-8 bytes) |
| ``AUTOGRAD_LENS_MAX_TRACE_BYTES`` | ``100000000`` | the largest trace document ``POST /api/traces`` takes |
| ``AUTOGRAD_LENS_KEEP_RUNS`` | ``0`` | the newest finished runs kept, older ones deleted (0: all kept) |
| ``AUTOGRAD_LENS_BATCH_EVENTS`` | ``500`` | events per stored batch and per SSE message |
| ``AUTOGRAD_LENS_REUSE_RUNS`` | ``1`` | answer a request with the stored run of the same text and engine |
| ``AUTOGRAD_LENS_LIMIT_<FIELD>`` | ``Limits()`` | a field of ``app.sandbox.Limits`` (``..._CPU_SECONDS=2``) |

A malformed value stops the server at startup with a message naming the variable: a typo must
not silently become a default.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from app.sandbox import PROJECT_ROOT, Limits

PREFIX = "AUTOGRAD_LENS_"
DB_NAME = "runs.sqlite3"

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("data")
    db_path: Path | None = None  # None: DB_NAME in data_dir (see ``database``)
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 2
    max_pending: int = 16
    max_upload_bytes: int = 1_000_000
    max_trace_bytes: int = 100_000_000
    keep_runs: int = 0  # 0: keep every run
    batch_events: int = 500
    reuse_runs: bool = True  # Note [Reusing a run] in app/store.py
    access_log: bool = True  # uvicorn's line per request on stderr (off for a class: docs/api.md)
    limits: Limits = field(default_factory=Limits)
    templates_dir: Path = PROJECT_ROOT / "templates"
    static_dir: Path = PROJECT_ROOT / "static"

    def __post_init__(self) -> None:
        for name in ("workers", "max_pending", "max_upload_bytes", "max_trace_bytes", "batch_events"):
            if getattr(self, name) < 1:
                raise ValueError(f"Settings.{name} must be at least 1, not {getattr(self, name)}")
        if self.keep_runs < 0:
            raise ValueError(f"Settings.keep_runs must be 0 (keep every run) or more, not {self.keep_runs}")

    @property
    def database(self) -> Path:
        return self.db_path if self.db_path is not None else self.data_dir / DB_NAME

    @property
    def max_body_bytes(self) -> int:
        # The request body carries the text JSON-encoded: an escape takes up to 6 bytes per
        # character (\u00e9), so the cap on the body follows from the cap on the text. Anything
        # beyond it is refused before it is read into memory.
        return 6 * self.max_upload_bytes + 64 * 1024

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``AUTOGRAD_LENS_*`` variables (``os.environ`` by default); ``overrides``
        win over both the environment and the defaults."""
        env = os.environ if environ is None else environ

        def get(name: str, parse: Callable[[str], T], default: T) -> T:
            raw = env.get(PREFIX + name)
            if raw is None or raw.strip() == "":
                return default
            try:
                return parse(raw.strip())
            except ValueError as e:
                raise ValueError(f"{PREFIX}{name}={raw!r} is not valid: {e}") from None

        defaults = cls()
        limit_values: dict[str, Any] = {}
        for f in dataclasses.fields(Limits):
            default = getattr(defaults.limits, f.name)
            parse_limit: Callable[[str], Any] = float if isinstance(default, float) else int
            limit_values[f.name] = get(f"LIMIT_{f.name.upper()}", parse_limit, default)
        values: dict[str, Any] = {
            "data_dir": get("DATA_DIR", Path, defaults.data_dir),
            "db_path": get("DB", Path, defaults.db_path),
            "host": get("HOST", str, defaults.host),
            "port": get("PORT", _port, defaults.port),
            "workers": get("WORKERS", int, defaults.workers),
            "max_pending": get("MAX_PENDING", int, defaults.max_pending),
            "max_upload_bytes": get("MAX_UPLOAD_BYTES", int, defaults.max_upload_bytes),
            "max_trace_bytes": get("MAX_TRACE_BYTES", int, defaults.max_trace_bytes),
            "keep_runs": get("KEEP_RUNS", int, defaults.keep_runs),
            "batch_events": get("BATCH_EVENTS", int, defaults.batch_events),
            "reuse_runs": get("REUSE_RUNS", _flag, defaults.reuse_runs),
            "access_log": get("ACCESS_LOG", _flag, defaults.access_log),
            "limits": Limits(**limit_values),
        }
        values.update(overrides)
        return cls(**values)


def _flag(raw: str) -> bool:
    value = raw.lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError("a flag is 1, 0, true, false, yes, no, on or off")


def _port(raw: str) -> int:
    port = int(raw)
    if not 0 < port < 65536:
        raise ValueError("a port is between 1 and 65535")
    return port
