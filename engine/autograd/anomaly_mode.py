"""Anomaly detection: NaN checks in backward and the forward traceback of a failing node."""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from typing import TYPE_CHECKING, Any

from engine._C import _tls
from engine.autograd import graph

if TYPE_CHECKING:
    from engine._tensor import Tensor
    from engine.autograd.graph import Node

__all__ = ["detect_anomaly", "is_anomaly_check_nan_enabled", "is_anomaly_enabled", "set_detect_anomaly"]

_check_nan = [True]


def is_anomaly_enabled() -> bool:
    return graph._anomaly_enabled[0]


def is_anomaly_check_nan_enabled() -> bool:
    return _check_nan[0]


def _set(enabled: bool, check_nan: bool) -> None:
    graph._anomaly_enabled[0] = enabled
    _check_nan[0] = check_nan


class detect_anomaly:  # noqa: N801 - PyTorch's name
    """Context manager (and decorator) that enables anomaly detection.

    In backward, a node returning NaN raises at once, and an error raised by a node carries the
    traceback of the forward call that created it.
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.prev = is_anomaly_enabled()
        self.check_nan = check_nan
        self.prev_check_nan = is_anomaly_check_nan_enabled()
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should "
            "only be enabled for debugging.",
            stacklevel=2,
        )

    def __enter__(self) -> None:
        _set(True, self.check_nan)

    def __exit__(self, *args: object) -> None:
        _set(self.prev, self.prev_check_nan)

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:  # noqa: N801
    """Turn anomaly detection on or off (at once; also usable as a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = is_anomaly_enabled()
        self.prev_check_nan = is_anomaly_check_nan_enabled()
        _set(mode, check_nan)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *args: object) -> None:
        _set(self.prev, self.prev_check_nan)


_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record_forward_trace(node: Node) -> None:
    """Remember where ``node`` was created (and, inside a backward, which node ran then)."""
    # PyTorch records the Python stack from C++, so it ends at the user's line; the engine's own
    # frames (op dispatch, Function.apply) are dropped to give the same trace.
    frames = [
        f
        for f in traceback.extract_stack()[:-1]
        if not os.path.abspath(f.filename).startswith(_ENGINE_DIR + os.sep)
    ]
    node._anomaly_trace = traceback.format_list(_from_recorded_code(frames))
    node._anomaly_parent = _tls.current_node


def _from_recorded_code(frames: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """While ``engine.trace.record()`` records a program, its forward traceback starts at the
    program's outermost frame: the frames below it belong to whatever runs the program (the CLI's
    runner, the web app's sandbox worker), which ``python program.py`` does not have, and which
    must not show in a trace served to others."""
    from engine.trace.record import recorded_files

    files = recorded_files()
    for i, f in enumerate(frames):
        if f.filename in files:
            return frames[i:]
    return frames


def report_failure(node: Node, error: BaseException) -> None:
    """Warn with the forward traceback of the node that failed, then (one warning each) with the
    traceback of every node whose backward created it, as PyTorch's ``print_stack`` does. The
    same text is attached to the error as a note."""
    if node._anomaly_trace is None:
        messages = [
            f"Error detected in {node.name()}. No forward pass information available. Enable detect anomaly "
            "during forward pass for more information."
        ]
    else:
        messages = [
            f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n"
            + "".join(node._anomaly_trace)
        ]
        parent = node._anomaly_parent
        while parent is not None:
            messages.append(
                f"\n\nPrevious calculation was induced by {parent.name()}. Traceback of forward call that "
                "induced the previous calculation:\n" + "".join(parent._anomaly_trace or [])
            )
            parent = parent._anomaly_parent
    for msg in messages:
        try:
            warnings.warn(msg, UserWarning, stacklevel=2)
        except Exception as warning_error:  # noqa: BLE001 - a warning filter set to "error"
            # An exception is already on its way: like PyTorch's PyWarningHandler, print the
            # warning that was turned into an error (PyErr_Print) and let the original through.
            traceback.print_exception(warning_error, file=sys.stderr)
    error.add_note("".join(messages))
    error._anomaly_reported = True  # type: ignore[attr-defined]


def check_nan(fn: Node, outputs: list[Tensor | None]) -> None:
    if not _check_nan[0]:
        return
    import numpy as np

    for i, out in enumerate(outputs):
        if out is not None and np.isnan(out._data).any():
            raise RuntimeError(f"Function '{fn.name()}' returned nan values in its {i}th output.")
