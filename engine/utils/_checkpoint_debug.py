"""Checkpoint's debug mode: ``checkpoint(..., debug=True)`` / ``set_checkpoint_debug_enabled(True)``.

In debug mode, checkpoint's ``context_fn`` records an op log of the original forward and of every
recomputation, with the stack trace of each op; when unpacking raises a ``CheckpointError`` (a
determinism check failed), ``unpack_error_cb`` replaces it by a long message with both logs
(``_checkpoint_error_template``), chaining the original error as ``__cause__``.

PyTorch borrows the log from ``torch/testing/_internal/logging_tensor.py``: ``LoggingTensorMode``,
a dispatch mode that writes one line per op such as ``$1: f32[2] = torch._ops.aten.sin.default($0)``,
and ``capture_logs``. This module has the engine's version of both, built on
``engine.ops.DispatchMode`` (lines read ``$1: f32[2] = engine.ops.sin($0)``), then PyTorch's
template and ``_get_debug_context_and_cb`` as they are in ``torch/utils/checkpoint.py``.
"""

from __future__ import annotations

import contextlib
import traceback
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NoReturn

from engine._tensor import Tensor
from engine.ops import DispatchMode, Op

if TYPE_CHECKING:
    from engine.utils.checkpoint import CheckpointError

__all__ = ["LoggingTensorMode", "capture_logs"]

# ``logging_tensor._dtype_abbrs``: the short dtype names of the log lines.
_dtype_abbrs: dict[str, str] = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "b8",
}

# A stack frame as the checkpoint error message prints it: ``filename:line:name``.
TracebackLine = dict[str, Any]


class _LogCapture:
    """One ``capture_logs`` block: the log lines, their stack traces, and the ``$n`` ids.

    Ids are handed out per capture, in order of first appearance, so the forward's log and the
    recomputation's log both start at ``$0`` for the checkpoint's first input.
    """

    def __init__(self, with_tracebacks: bool) -> None:
        self.logs: list[str] = []
        self.tracebacks: list[list[TracebackLine]] | None = [] if with_tracebacks else None
        # id(tensor) -> (weak reference, short id). A plain dict keyed by id because a tensor's
        # ``__eq__`` is elementwise (PyTorch uses a WeakTensorKeyDictionary for the same reason).
        self._memo: dict[int, tuple[weakref.ref[Tensor], int]] = {}
        self._next_id = 0

    def _shortid(self, t: Tensor) -> int:
        entry = self._memo.get(id(t))
        if entry is None or entry[0]() is not t:
            entry = (weakref.ref(t), self._next_id)
            self._memo[id(t)] = entry
            self._next_id += 1
        return entry[1]

    def _fmt(self, a: Any, with_type: bool = False) -> str:
        if isinstance(a, Tensor):
            maybe_type = ""
            if with_type:
                maybe_type = (
                    f": {_dtype_abbrs.get(a.dtype.name, a.dtype.name)}[{', '.join(map(str, a.shape))}]"
                )
            return f"${self._shortid(a)}{maybe_type}"
        if isinstance(a, (list, tuple)):
            return str(type(a)(self._fmt(x, with_type) for x in a))
        return repr(a)

    def emit(self, func: Op, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        fmt_args = ", ".join(
            [self._fmt(a) for a in args] + [f"{k}={self._fmt(v)}" for k, v in kwargs.items()]
        )
        fmt_rets = self._fmt(out, with_type=True)
        self.logs.append(f"{fmt_rets} = {func!r}({fmt_args})")
        if self.tracebacks is not None:
            self.tracebacks.append(_gather_traceback())


def _gather_traceback() -> list[TracebackLine]:
    # Innermost frame first, like the symbolized tracebacks PyTorch records: the error message
    # prints the frames that come after ``__torch_dispatch__``, i.e. the op's callers.
    frames = traceback.extract_stack()[:-2]  # drop _gather_traceback and emit
    return [{"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(frames)]


_active_captures: list[_LogCapture] = []


class LoggingTensorMode(DispatchMode):
    """Logs every op to the innermost ``capture_logs`` block, then runs it."""

    def __torch_dispatch__(
        self,
        func: Op,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _active_captures:
            _active_captures[-1].emit(func, args, kwargs, out)
        return out


@contextlib.contextmanager
def capture_logs(
    with_tracebacks: bool = False,
) -> Iterator[tuple[list[str], list[list[TracebackLine]] | None]]:
    """Collect the lines (and, with ``with_tracebacks``, the stack traces) that
    ``LoggingTensorMode`` writes inside the block."""
    capture = _LogCapture(with_tracebacks)
    _active_captures.append(capture)
    try:
        yield capture.logs, capture.tracebacks
    finally:
        _active_captures.remove(capture)


_checkpoint_error_template = """ \
An error happened while unpacking tensors; dumping logs of latest computation
because you passed `debug=True` to `torch.utils.checkpoint.checkpoint()`.
Scroll all the way down for guidance on how to navigate these logs.

+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+
|        1. Stack traces of the operators that ran in the original forward     |
+------------------------------------------------------------------------------+

{forward_traces}
+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+
|        2. Stack traces of the operators that ran during recomputation        |
+------------------------------------------------------------------------------+

{recompute_traces}
+~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~+
|       3. Log of operators in the original forward and recomputation          |
+------------------------------------------------------------------------------+
(Scroll up to correlate stack traces with each operation listed below. This
 helps identify their source in the code.)

IMPORTANT: Differences in "detach" calls between the original forward and the
           recomputation are expected. They are introduced by the checkpointing
           mechanism and can be ignored.

Operations executed during the original forward:

{forward_ops}

Operations executed during recomputation:

{recompute_ops}

+------------------------------------------------------------------------------+
 ERROR: Detected non-determinism while running activation checkpointing

 You are seeing this error because you passed `debug=True` to checkpoint and
 tensors to be saved during the original forward and differ between those saved
 during recomputation. This can happen if different operators were ran in the
 original forward and in the recomputation.

 To identify where the mismatch may be coming from, you can do the following:

 1) Compare the operators ran during original forward and recomputation to
    see where they differ. These operators are printed above in the order they
    were executed.

 2) Review the stack trace for each operator to locate its invocation source.
    Each operator's stack trace is printed in their execution order.

 Note that the logs can be quite long. Here's how they are structured:
 (Tip: you can Ctrl-f for these headers)

 1. Stack traces of the operators that ran in the original forward
 2. Stack traces of the operators that ran during recomputation
 3. Log of operators in the original forward and recomputation
 4. Error message                                             <--- You are here
--------------------------------------------------------------------------------
"""


# What ``checkpoint``'s ``context_fn`` is: the forward's context and the recomputation's.
ContextFn = Callable[[], tuple[AbstractContextManager[Any], AbstractContextManager[Any]]]


def _get_debug_context_and_cb() -> tuple[ContextFn, Callable[[CheckpointError], NoReturn]]:
    # This function returns the context_fn and error_cb to be used by the
    # checkpointing mechanism. error_cb is invoked when an error is detected
    # during unpack.

    class CaptureLogs:
        def __init__(self) -> None:
            self.logs: list[str] | None = None
            self.tbs: list[list[TracebackLine]] | None = None

        def get_context_manager(self) -> AbstractContextManager[Any]:
            @contextlib.contextmanager
            def logging_mode() -> Iterator[Any]:
                with LoggingTensorMode(), capture_logs(with_tracebacks=True) as logs_and_tb:
                    self.logs, self.tbs = logs_and_tb
                    yield logs_and_tb

            return logging_mode()

    capture_logs_fwd = CaptureLogs()
    capture_logs_recompute = CaptureLogs()

    def unpack_error_cb(e: CheckpointError) -> NoReturn:
        def get_str_tb(label: str, capture_logs: CaptureLogs) -> str:
            out = ""
            assert capture_logs.logs is not None and capture_logs.tbs is not None
            total_len = len(capture_logs.logs)
            for i, (log, tb) in enumerate(zip(capture_logs.logs, capture_logs.tbs, strict=False)):
                out += f"{log}   ({i + 1} of {total_len} in {label})\n\n"
                found_torch_dispatch = False
                for line in tb:
                    # Start printing stack trace only after __torch_dispatch__ is found
                    is_torch_dispatch = line["name"] == "__torch_dispatch__"
                    if not found_torch_dispatch and not is_torch_dispatch:
                        continue
                    elif is_torch_dispatch:
                        found_torch_dispatch = True
                        continue
                    out += f"{line['filename']}:{line['line']}:{line['name']}\n"
                out += "\n\n"
            return out

        # (imported here: engine.utils.checkpoint imports this module)
        from engine.utils.checkpoint import CheckpointError

        assert capture_logs_fwd.logs is not None
        assert capture_logs_recompute.logs is not None
        raise CheckpointError(
            _checkpoint_error_template.format(
                forward_traces=get_str_tb("original", capture_logs_fwd),
                recompute_traces=get_str_tb("recompute", capture_logs_recompute),
                forward_ops="\n".join(capture_logs_fwd.logs),
                recompute_ops="\n".join(capture_logs_recompute.logs),
            )
        ) from e

    def context_fn() -> tuple[AbstractContextManager[Any], AbstractContextManager[Any]]:
        return capture_logs_fwd.get_context_manager(), capture_logs_recompute.get_context_manager()

    return context_fn, unpack_error_cb
