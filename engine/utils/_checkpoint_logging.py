"""The op log behind ``checkpoint(..., debug=True)``.

PyTorch's debug mode borrows ``LoggingTensorMode`` and ``capture_logs`` from
``torch/testing/_internal/logging_tensor.py``: a dispatch mode that writes one line per op, such as
``$1: f32[2] = torch._ops.aten.sin.default($0)``, and records the stack trace of each call. This
module is the engine's version of those two pieces, built on ``engine.ops.DispatchMode``; the
lines read ``$1: f32[2] = engine.ops.sin($0)``.
"""

from __future__ import annotations

import contextlib
import traceback
import weakref
from collections.abc import Iterator
from typing import Any

from engine._tensor import Tensor
from engine.ops import DispatchMode, Op

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
                maybe_type = f": {_dtype_abbrs.get(a.dtype.name, a.dtype.name)}[{', '.join(map(str, a.shape))}]"
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
    return [
        {"filename": f.filename, "line": f.lineno, "name": f.name} for f in reversed(frames)
    ]


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
