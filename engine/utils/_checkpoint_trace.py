"""What non-reentrant checkpoint reports to ``engine.trace`` around calls: the engine's addition.

Part of ``engine/utils/checkpoint.py``; PyTorch's file has no counterpart. Most events are emitted
inline, next to the code they report (``if emit.enabled: emit.emit(...)`` in the hooks and the
generator); the two wrappers here bracket whole calls:

- ``_traced_call``: a run of the checkpointed function, forward or recomputation, between
  ``fn_start`` and ``fn_end``;
- ``_reporting_errors``: ``_checkpoint_hook``'s unpack hook, reporting what escapes it as
  ``checkpoint_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine._tensor import Tensor
from engine.trace import emit
from engine.utils._checkpoint_frame import _CheckpointFrame, _Holder, _StopRecomputationError


def _reporting_errors(
    frame: _CheckpointFrame, unpack_hook: Callable[[_Holder], Tensor]
) -> Callable[[_Holder], Tensor]:
    """``unpack_hook``, reporting to the trace (``checkpoint_error``) any exception that escapes
    it: a CheckpointError, the version-counter error of the frame's saved inputs, an SAC error, an
    error inside the recomputation."""

    def unpack_hook_reporting_errors(holder: _Holder) -> Tensor:
        try:
            return unpack_hook(holder)
        except _StopRecomputationError:
            raise
        except BaseException as e:
            if emit.enabled:
                emit.emit("checkpoint_error", frame=frame, error=e)
            raise

    return unpack_hook_reporting_errors


def _traced_call(mode: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` between the trace's ``fn_start`` and ``fn_end``; only called while
    recording. The recorder knows the frame: the one just created (``mode="forward"``) or the one
    being recomputed (``recompute_fn`` is made before its frame and must not reference it).
    ``mode`` and ``fn`` are positional-only: every keyword belongs to the checkpointed function
    (a keyword named ``mode`` or ``fn`` must reach it, as it does without recording)."""
    emit.emit("fn_start", mode=mode)
    try:
        out = fn(*args, **kwargs)
    except _StopRecomputationError:
        if emit.enabled:
            emit.emit("fn_end", outcome="early_stop")
        raise
    except BaseException as e:
        if emit.enabled:
            emit.emit("fn_end", outcome="raised", error=type(e).__name__)
        raise
    if emit.enabled:
        emit.emit("fn_end", outcome="returned")
    return out
