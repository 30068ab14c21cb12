"""The sandbox worker: ``python -m app._worker`` runs one untrusted scenario and exits.

The job arrives on stdin as JSON (``{"text", "filename", "limits"}``). stdout carries JSON lines:
``{"events": [...]}`` batches of final events while the scenario runs, then the answer, a
``RunResult.to_dict()`` whose trace holds the events not sent before (``extra.delivered`` says
how many were). stderr carries ``progress N`` lines
(the event count, a few times a second) and, if the worker itself breaks, its traceback.

Order matters here:
1. import everything the run can need (the engine and the standard modules it loads lazily):
   after the privilege drop the interpreter's own directory may be unreadable;
2. compile the text with RestrictedPython;
3. install the tensor-size guard, the resource limits and the CPU-limit handler;
4. drop privileges (root -> nobody);
5. run the scenario, then answer.
"""

from __future__ import annotations

import importlib
import io
import json
import linecache
import os
import pkgutil
import resource
import signal
import sys
import threading
from collections.abc import Callable
from types import CodeType
from typing import Any

import engine
from app.runner import RunError, RunResult, error_of, execute, syntax_error
from app.sandbox import (
    LimitExceeded,
    Limits,
    ScenarioSyntaxError,
    compile_untrusted,
    redact_host_paths,
    restricted_globals,
)

NOBODY = 65534

# Standard modules the engine or the runner may import lazily, loaded while they are readable.
_LAZY_STDLIB = ("uuid", "traceback", "linecache", "copy", "functools", "weakref", "contextlib", "json")


def _preimport() -> None:
    for name in _LAZY_STDLIB:
        importlib.import_module(name)
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        importlib.import_module(info.name)


# --- the tensor-size guard -----------------------------------------------------------------------

# Factories allocate before any op runs, so they are checked from their arguments; everything else
# is checked on the op's output by a dispatch mode (RLIMIT_AS stops what is too big to allocate).
_SIZED_FACTORIES = ("zeros", "ones", "empty", "rand", "randn", "full", "randint")


def _numel(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _shape_args(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    if "size" in kwargs:
        size = kwargs["size"]
        return tuple(size) if isinstance(size, (tuple, list)) else (size,)
    if name == "full":
        args = args[:1]
    elif name == "randint":
        # randint(high, size) or randint(low, high, size): the size is the tuple argument.
        args = tuple(a for a in args if isinstance(a, (tuple, list)))
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(a for a in args if isinstance(a, int) and not isinstance(a, bool))


def _too_big(numel: int, limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        "max_tensor_numel",
        f"tensor size limit exceeded: {numel} elements > {limits.max_tensor_numel} (max_tensor_numel)",
    )


def _guard_factory(name: str, fn: Callable[..., Any], limits: Limits) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if name in _SIZED_FACTORIES:
            try:
                numel = _numel(_shape_args(name, args, kwargs))
            except (TypeError, ValueError, OverflowError):
                numel = 0  # the factory reports bad arguments itself
            if numel > limits.max_tensor_numel:
                raise _too_big(numel, limits)
        out = fn(*args, **kwargs)
        # The others (tensor, arange, linspace, eye, *_like...) are checked once made.
        if isinstance(out, engine.Tensor) and out.numel() > limits.max_tensor_numel:
            raise _too_big(out.numel(), limits)
        return out

    guarded.__name__ = getattr(fn, "__name__", name)
    guarded.__qualname__ = getattr(fn, "__qualname__", name)
    guarded.__module__ = getattr(fn, "__module__", "engine")
    guarded.__doc__ = getattr(fn, "__doc__", None)
    return guarded


def _install_tensor_guard(limits: Limits) -> None:
    from engine import _factories

    for name in _factories.__all__:
        fn = getattr(engine, name, None)
        if fn is not None:
            setattr(engine, name, _guard_factory(name, fn, limits))

    class TensorSizeGuard(engine.ops.DispatchMode):
        """Checks every op's outputs (broadcasts, ``expand(...).contiguous()``, ``repeat``...)."""

        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, engine.Tensor) and t.numel() > limits.max_tensor_numel:
                    raise _too_big(t.numel(), limits)
            return out

    # Entered for the life of the process: the guard sits at the bottom of the dispatch-mode
    # stack, below any mode a scenario enters (selective checkpointing's, debug logging's).
    TensorSizeGuard().__enter__()


# --- limits and privileges -----------------------------------------------------------------------


def _on_xcpu(limits: Limits) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        # One shot: the remaining seconds before the hard limit are for writing the answer.
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        raise LimitExceeded("cpu_seconds", f"CPU time limit of {limits.cpu_seconds:g} s exceeded")

    return handler


def _set_limits(limits: Limits) -> None:
    cpu = max(1, int(limits.cpu_seconds + 0.999))
    used = int(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]))  # imports count too
    resource.setrlimit(resource.RLIMIT_CPU, (used + cpu, used + cpu + 2))
    mem = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXCPU, _on_xcpu(limits))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing


def _drop_privileges() -> bool:
    """Become ``nobody`` if running as root; False if not root or not allowed (a container without
    CAP_SETUID): the other layers still apply, and the answer says whether it happened."""
    if os.geteuid() != 0:
        return False
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except OSError:
        return False
    return True


# --- the run -------------------------------------------------------------------------------------


def _answer(result: RunResult, out: Any) -> None:
    """The last line on stdout. Its trace holds only the events not already sent as batches."""
    out.write(redact_host_paths(json.dumps(result.to_dict())) + "\n")
    out.flush()


def _sender(out: Any) -> Callable[[list[dict[str, Any]]], None]:
    """Final events while the scenario runs: one ``{"events": [...]}`` line per batch."""

    def send(batch: list[dict[str, Any]]) -> None:
        out.write(redact_host_paths(json.dumps({"events": batch})) + "\n")
        out.flush()

    return send


def compile_job(text: str, filename: str) -> CodeType | RunResult:
    """Step 2: the scenario's code, or the ``RunResult`` of its syntax error (naming the line)."""
    # Tracebacks and the recorder read the scenario's lines from linecache: it has no file.
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    try:
        return compile_untrusted(text, filename)
    except ScenarioSyntaxError as e:
        return RunResult(False, None, syntax_error(e, filename), filename=filename)


def confine(limits: Limits) -> bool:
    """Steps 3 and 4: the tensor-size guard, the resource limits, then the privilege drop. True if
    privileges were dropped. Once per process: the limits hold for everything run after it."""
    _install_tensor_guard(limits)
    _set_limits(limits)
    return _drop_privileges()


def run_compiled(
    code: CodeType,
    text: str,
    filename: str,
    limits: Limits,
    on_events: Callable[[list[dict[str, Any]]], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> RunResult:
    """Step 5: run compiled scenario code with the restricted globals; never raises for what it
    does. With ``on_events``, the result's trace holds only the events not delivered."""
    printer: dict[str, Callable[[str], None]] = {}
    namespace = restricted_globals(lambda s: printer["sink"](s))
    try:
        result = execute(
            code,
            namespace,
            filename=filename,
            text=text,
            limits=limits,
            on_progress=on_progress,
            set_print=lambda sink: printer.__setitem__("sink", sink),
            on_events=on_events,
        )
        if result.trace is not None and on_events is not None:
            # The parent puts the batches back in front of these.
            result.trace["events"] = result.trace["events"][result.extra["delivered"] :]
    except LimitExceeded as e:  # hit outside the scenario's code (e.g. while serializing)
        result = RunResult(False, None, RunError("LimitExceeded", str(e), filename, None, e.limit))
    except KeyboardInterrupt as e:  # let through by ``execute``; no terminal sends one here
        result = RunResult(False, None, error_of(e, filename))
    return result


def answer(result: RunResult, limits: Limits, out: Any) -> None:
    """Write the answer; a trace too big to serialize within the limits is left out of it."""
    try:
        _answer(result, out)
    except (MemoryError, LimitExceeded):
        n = len(result.trace["events"]) if result.trace else 0
        message = (
            f"the trace ({n} events) is too large to return within the memory limit of {limits.memory_mb} MB"
        )
        result.trace = None
        _answer(RunResult(False, None, RunError("LimitExceeded", message, None, None, "memory_mb")), out)


# Note [A worker dies with its server]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A server killed with SIGKILL cannot kill its workers, and they would run on until their CPU
# limit with nobody to answer. Linux's PR_SET_PDEATHSIG asks the kernel for a SIGKILL when the
# thread that started the worker ends: a server thread that waits for the worker until it ends
# (app/sandbox.py), so only the server's death sends it. Set before the job is read; if the server
# is already gone by then (the parent is no longer the one that started us), stop at once.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the wall-clock limit still ends the worker
        return
    if os.getppid() != parent:
        os._exit(1)


def main() -> None:
    _die_with_parent()
    real_stdout = sys.stdout
    # Nothing but the answer may reach stdout; stray output of the worker goes to a buffer.
    sys.stdout = io.StringIO()
    job = json.loads(sys.stdin.read())
    text, filename = job["text"], job["filename"]
    limits = Limits.from_dict(job["limits"])
    _preimport()
    code = compile_job(text, filename)
    if isinstance(code, RunResult):
        _answer(code, real_stdout)
        return
    dropped = confine(limits)
    stderr = sys.stderr

    def progress(n: int) -> None:
        stderr.write(f"progress {n}\n")
        stderr.flush()

    result = run_compiled(code, text, filename, limits, _sender(real_stdout), progress)
    result.extra["privileges_dropped"] = dropped
    answer(result, limits, real_stdout)


if __name__ == "__main__":
    threading.current_thread().name = "autograd-lens-worker"
    main()
