"""Running untrusted scenario text: RestrictedPython in a separate, limited worker process.

Defence in depth, from the outside in:

1. **A separate process** (``python -m app._worker``) in its own session, so the parent can kill
   it and everything it started with one ``killpg``. The parent enforces a wall-clock timeout
   and a cap on the bytes it reads back, and never blocks on the child otherwise.
2. **Resource limits** set in the worker before the scenario runs (``resource.setrlimit``): CPU
   seconds, address space, file size 0, a handful of file descriptors, no core dumps.
3. **No privileges**: when the worker starts as root it drops to ``nobody`` once its imports are
   done (the interpreter lives under ``/root``, which ``nobody`` cannot read, so the drop cannot
   happen before ``exec``). Its working directory is an empty temporary directory it cannot write.
4. **RestrictedPython**: the text is compiled with ``compile_restricted`` (no names or attributes
   starting with ``_`` except ``__init__``, no ``exec``/``eval``, no frame/code attributes), and
   runs with guarded builtins: ``import`` of ``engine`` (and its public submodules) and ``math``
   only; attribute reads refuse other modules, raw NumPy objects (``.numpy()``, ``.tofile``,
   ``.dump``...) and the dangerous builtins.
5. **Engine-level caps** installed by the worker: a maximum number of trace events and a maximum
   tensor size, each a clear error naming the limit.

``compile_untrusted`` and ``restricted_globals`` are used by the worker; ``run_in_worker`` is the
parent side. Layer 4 (compiling, the guards, the globals a scenario runs with) is
``app/_sandbox_policy.py``; its names that the worker and the tests use are imported here. This
module keeps the limits and everything the parent does: ``run_in_worker`` and its helpers read
their module globals (``_worker_env``, ``_kill``, ``_outcome``, ``PROJECT_ROOT``...) from here at
call time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app._sandbox_policy import ScenarioSyntaxError, compile_untrusted, restricted_globals

__all__ = [
    "PROJECT_ROOT",
    "LimitExceeded",
    "Limits",
    "ScenarioSyntaxError",
    "compile_untrusted",
    "redact_host_paths",
    "restricted_globals",
    "run_in_worker",
]

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Note [No server paths in a run's answer]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# What an uploaded scenario gets back must not tell where the server keeps its files: ``print``
# of a module shows its file (``<module 'engine' from '/srv/app/engine/__init__.py'>``), and an
# error or a warning can quote one. The worker writes its answer and its event batches through
# ``redact_host_paths``, and the parent its report of a worker that died: every directory of the
# project and of the Python installation reads ``<server>``. Frames are dropped at their source
# (anomaly mode keeps the recorded code's frames only, engine/autograd/anomaly_mode.py).
_HOST_DIRS = sorted(
    {
        d
        for base in (
            str(PROJECT_ROOT),
            sys.prefix,
            sys.exec_prefix,
            sysconfig.get_paths()["stdlib"],
            sysconfig.get_paths()["platstdlib"],
            sysconfig.get_paths()["purelib"],
        )
        for d in (base, os.path.realpath(base))
        if len(d) > 1
    },
    key=len,
    reverse=True,  # the longest first: a venv inside the project reads as one directory
)


def redact_host_paths(text: str) -> str:
    """``text`` with the server's own directories replaced by ``<server>`` (Note [No server
    paths in a run's answer])."""
    for directory in _HOST_DIRS:
        text = text.replace(directory + "/", "<server>/")
    return text


@dataclass(frozen=True)
class Limits:
    """What one scenario run may use. Each limit, when hit, is an error that names it."""

    cpu_seconds: float = 5.0  # RLIMIT_CPU of the worker (untrusted runs only)
    wall_seconds: float = 15.0  # the parent kills the worker's process group after this
    memory_mb: int = 1024  # RLIMIT_AS of the worker, imports included (about 150 MB)
    # Trace length; recording stops with an error beyond it, and the trace up to it is kept. A
    # recorded event costs about 2.5 KB in the worker and 0.3 KB of JSON. The sandbox worker
    # records about 43,000 events a second (bench/bench_limit.py, a training-step loop): a run
    # into this limit takes 2.6 s end to end, half the CPU budget, so a machine half as fast fits.
    max_events: int = 100_000
    max_tensor_numel: int = 1_000_000  # elements of any one tensor a scenario creates
    max_output_mb: int = 256  # bytes the parent accepts back from the worker
    max_open_files: int = 16  # RLIMIT_NOFILE of the worker
    max_file_bytes: int = 0  # RLIMIT_FSIZE of the worker: no file may grow
    max_source_bytes: int = 1_000_000  # the scenario text itself

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class LimitExceeded(BaseException):  # noqa: N818 - reads as "the CPU limit exceeded"
    """A sandbox limit was hit. A ``BaseException``, so ``except Exception`` in a scenario
    cannot swallow it; ``limit`` names the limit (``"cpu_seconds"``, ``"max_events"``...)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


# --- the parent side -----------------------------------------------------------------------------


def _worker_env(workdir: str) -> dict[str, str]:
    # A minimal environment: no secrets inherited, one BLAS thread (threads cost address space).
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(PROJECT_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _limit_error(limit: str, message: str) -> dict[str, Any]:
    return {"ok": False, "trace": None, "stdout": "", "error": _error_dict("LimitExceeded", message, limit)}


def _error_dict(type_: str, message: str, limit: str | None = None) -> dict[str, Any]:
    return {"type": type_, "message": message, "file": None, "line": None, "limit": limit}


def run_in_worker(
    text: str,
    filename: str,
    limits: Limits,
    on_progress: Callable[[int], None] | None = None,
    on_events: Callable[[list[dict[str, Any]]], None] | None = None,
) -> dict[str, Any]:
    """Run scenario text in a fresh worker process; return ``RunResult.to_dict()``'s shape.

    ``on_events(batch)`` gets the worker's batches of final events as they arrive (on a reader
    thread); the answer's trace holds every event, those batches included.

    Never raises for anything the scenario does and never waits longer than
    ``limits.wall_seconds`` (plus the time to kill and reap the worker).
    """
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_source_bytes:
        return _limit_error(
            "max_source_bytes", f"the scenario is longer than {limits.max_source_bytes} bytes"
        )
    job = json.dumps({"text": text, "filename": filename, "limits": limits.to_dict()}).encode()
    max_out = limits.max_output_mb * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="autograd-lens-") as workdir:
        os.chmod(workdir, 0o755)  # the worker may enter it; as nobody it cannot write to it
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "app._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=_worker_env(workdir),
            start_new_session=True,  # its own process group: killpg takes everything it started
            close_fds=True,
        )
        out = bytearray()  # the answer, the last line
        streamed: list[dict[str, Any]] = []  # the events of the batch lines before it
        err_tail: list[str] = []
        overflow = threading.Event()

        def read_stdout() -> None:
            assert proc.stdout is not None
            total = 0
            # readline with a limit: a line longer than what is left of max_out is not buffered
            # whole before it is refused.
            while line := proc.stdout.readline(max_out - total + 1):
                total += len(line)
                if total > max_out:
                    overflow.set()
                    _kill(proc)
                    return
                if line.startswith(b'{"events": ') and line.endswith(b"\n"):
                    batch = json.loads(line)["events"]
                    streamed.extend(batch)
                    if on_events is not None:
                        on_events(batch)
                else:
                    out.extend(line)

        def read_stderr() -> None:
            # Progress lines ("progress N") are the worker's heartbeat; the rest is kept for errors.
            assert proc.stderr is not None
            for raw in proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("progress ") and line[9:].isdigit():
                    if on_progress is not None:
                        on_progress(int(line[9:]))
                    continue
                err_tail.append(line)
                del err_tail[:-40]

        readers = [
            threading.Thread(target=read_stdout, daemon=True),
            threading.Thread(target=read_stderr, daemon=True),
        ]
        for t in readers:
            t.start()
        timed_out = False
        try:
            assert proc.stdin is not None
            proc.stdin.write(job)
            proc.stdin.close()
        except BrokenPipeError:  # the worker died before reading its job; its exit code says why
            pass
        try:
            proc.wait(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(proc)
            proc.wait()
        # The readers end at the pipes' end of file, once the worker is gone; read_stdout also
        # stores each batch (on_events), which takes a while on a loaded machine: wait for it, or
        # the answer below would be built while batches are still arriving. Only something else
        # holding the pipes open (nothing the sandbox lets a scenario start) would keep them.
        for t in readers:
            t.join(timeout=60)
            if t.is_alive():
                _kill(proc)
                t.join(timeout=5)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    elapsed = time.monotonic() - started
    result = _outcome(proc.returncode, bytes(out), err_tail, limits, timed_out, overflow.is_set(), elapsed)
    if streamed:
        if isinstance(result.get("trace"), dict):
            result["trace"]["events"] = streamed + list(result["trace"].get("events") or [])
        else:  # the worker died or was killed: what it sent is still the trace up to there
            result["trace"] = _partial_trace(streamed, result.get("error"), {filename: text})
    return result


def _partial_trace(
    events: list[dict[str, Any]], error: dict[str, Any] | None, sources: dict[str, str]
) -> dict[str, Any]:
    """The trace document of a worker that never answered: the events it sent before it died."""
    from engine.trace.record import SCHEMA, VERSION

    meta = {
        "reference": "torch 2.8.0",
        "source_files": list(sources),
        "n_events": len(events),
        "truncated": True,
        "error": {"type": error["type"], "message": error["message"]} if error else None,
    }
    return {"schema": SCHEMA, "version": VERSION, "meta": meta, "sources": sources, "events": events}


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone
        pass


def _outcome(
    rc: int,
    out: bytes,
    err_tail: list[str],
    limits: Limits,
    timed_out: bool,
    overflow: bool,
    elapsed: float = float("inf"),
) -> dict[str, Any]:
    """The run's answer from how its worker ended; ``elapsed``: the worker's wall-clock seconds."""
    if timed_out:
        return _limit_error("wall_seconds", f"wall-clock time limit of {limits.wall_seconds:g} s exceeded")
    if overflow:
        return _limit_error("max_output_mb", f"output size limit of {limits.max_output_mb} MB exceeded")
    if rc == 0:
        try:
            result = json.loads(out)
        except ValueError:
            return {
                "ok": False,
                "trace": None,
                "stdout": "",
                "error": _error_dict("WorkerError", "the worker's answer is not valid JSON"),
            }
        if isinstance(result, dict) and "ok" in result:
            return result
    if rc == -signal.SIGKILL and elapsed < limits.cpu_seconds + 2:
        # Not the kernel at the hard CPU limit: that takes at least cpu_seconds + 2 s of CPU time
        # (the worker sets it so, and catches the soft one itself), so more wall time than this.
        return {
            "ok": False,
            "trace": None,
            "stdout": "",
            "error": _error_dict(
                "WorkerError",
                "the scenario worker was killed (signal SIGKILL) from outside, after "
                f"{elapsed:.1f} s: by the system's out-of-memory killer or an operator, "
                "not by a limit of the run",
            ),
        }
    if rc in (-signal.SIGXCPU, -signal.SIGKILL):
        # SIGKILL without our timeout after that long: the kernel at the hard CPU limit.
        return _limit_error("cpu_seconds", f"CPU time limit of {limits.cpu_seconds:g} s exceeded")
    if rc == -signal.SIGXFSZ:
        return _limit_error("max_file_bytes", f"file size limit of {limits.max_file_bytes} bytes exceeded")
    detail = redact_host_paths("\n".join(err_tail[-10:]))
    why = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
    return {
        "ok": False,
        "trace": None,
        "stdout": "",
        "error": _error_dict(
            "WorkerError", f"the scenario worker died ({why})" + (f":\n{detail}" if detail else "")
        ),
    }
