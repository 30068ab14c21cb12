"""``engine.utils.checkpoint``: non-determinism detection, ``CheckpointError`` and argument
errors, and the ``debug=True`` log, with PyTorch 2.8's exact texts (``torch`` replaced by
``engine``). ``test_checkpoint_detects_non_determinism`` is test/test_autograd.py's, with the
upstream assertions.

The non-deterministic functions are defined here: ``test_debug_log`` checks that the log's
stack traces point at this file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import engine
import engine.utils.checkpoint as cp
from engine.utils.checkpoint import (
    CheckpointError,
    checkpoint,
    set_checkpoint_debug_enabled,
    set_checkpoint_early_stop,
)

TIP = (
    "\nTip: To see a more detailed error message, either pass `debug=True` to\n"
    "`torch.utils.checkpoint.checkpoint(...)` or wrap the code block\n"
    "with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to\n"
    "enable checkpoint\u2011debug mode globally.\n"
)


pytestmark = pytest.mark.usefixtures("engine_seed")


def get_non_det_fn(orig_fn: Callable[[Any], Any], recompute_fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    counter = [0]

    def fn(x: Any) -> Any:
        if counter[0] == 0:
            counter[0] += 1
            return orig_fn(x)
        return recompute_fn(x)

    return fn


def save_3_tensors(x: Any) -> Any:
    out = x.sin().exp()
    return out.sin()


def save_2_tensors(x: Any) -> Any:
    return x.sin().exp()


def save_2_tensors_alt(x: Any) -> Any:
    return x.sin() * engine.tensor([1.0, 2.0])


# === test/test_autograd.py: TestAutograd =========================================================


def test_checkpoint_detects_non_determinism() -> None:
    a = engine.randn(1, requires_grad=True)

    # Save fewer tensors during recompute
    fn = get_non_det_fn(orig_fn=save_3_tensors, recompute_fn=save_2_tensors)
    with pytest.raises(RuntimeError, match="A different number of tensors was saved"):
        out = checkpoint(fn, a, use_reentrant=False)
        out.backward()

    # Save more tensors during recompute
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    with (
        set_checkpoint_early_stop(False),
        pytest.raises(RuntimeError, match="trying to save more tensors during recomputation"),
    ):
        out = checkpoint(fn, a, use_reentrant=False)
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    # If early stopping is enabled, we would not raise (the results would be correct anyway)
    out = checkpoint(fn, a, use_reentrant=False)
    out.backward()

    # Save the same number of tensors but the shape is different
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with pytest.raises(RuntimeError, match="tensors have different metadata"):
        out = checkpoint(fn, a, use_reentrant=False)
        out.backward()

    # Get the debug message if debug=True
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with pytest.raises(
        RuntimeError, match="You are seeing this error because you passed `debug=True` to checkpoint"
    ):
        out = checkpoint(fn, a, use_reentrant=False, debug=True)
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with (
        pytest.raises(
            RuntimeError, match="You are seeing this error because you passed `debug=True` to checkpoint"
        ),
        set_checkpoint_debug_enabled(True),
    ):
        out = checkpoint(fn, a, use_reentrant=False, debug=False)
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with (
        pytest.raises(RuntimeError, match="Recomputed values for the following tensors have different"),
        set_checkpoint_debug_enabled(False),
    ):
        out = checkpoint(fn, a, use_reentrant=False, debug=True)
        out.backward()


# === texts, 2.8 behaviours and the engine's additions ===============================================


def test_error_texts() -> None:
    a = engine.randn(1, requires_grad=True)

    fn = get_non_det_fn(orig_fn=save_3_tensors, recompute_fn=save_2_tensors)
    out = checkpoint(fn, a, use_reentrant=False)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    assert str(info.value) == (
        "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
        "recomputation.\nNumber of tensors saved during forward: 3\nNumber of tensors saved during "
        "recomputation: 2.\n" + TIP
    )

    # determinism_check="none" still counts
    fn = get_non_det_fn(orig_fn=save_3_tensors, recompute_fn=save_2_tensors)
    out = checkpoint(fn, a, use_reentrant=False, determinism_check="none")
    with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    out = checkpoint(fn, a, use_reentrant=False)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    meta = "{{'shape': engine.Size([{}]), 'dtype': engine.float32, 'device': device(type='cpu')}}"
    assert str(info.value) == (
        "torch.utils.checkpoint: Recomputed values for the following tensors have different metadata than "
        "during the forward pass.\n"
        f"tensor at position 1:\nsaved metadata: {meta.format(1)}\nrecomputed metadata: {meta.format(2)}\n"
        ".\n" + TIP
    )

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    with set_checkpoint_early_stop(False):
        out = checkpoint(fn, a, use_reentrant=False)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    assert str(info.value) == (
        "torch.utils.checkpoint: trying to save more tensors during recomputation than during the "
        "original forward pass.\n" + TIP
    )


def test_argument_errors() -> None:
    x = engine.randn(2, requires_grad=True)
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=False, determinism_check="bogus")
    assert str(info.value) == "determinism_check should be one of ['default', 'none'], but got bogus"
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=False, debug=True, context_fn=lambda: cp.noop_context_fn())
    assert str(info.value) == "debug=True is incompatible with non-default context_fn"
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=True, a=1, b=2)
    assert str(info.value) == "Unexpected keyword arguments: a,b"
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=True, debug=True)
    assert str(info.value) == "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
    with pytest.raises(RuntimeError) as info:
        cp.detach_variable([x])  # type: ignore[arg-type]
    assert str(info.value) == "('Only tuple of tensors is supported. Got Unsupported input type: ', 'list')"


def test_debug_log() -> None:
    a = engine.randn(1, requires_grad=True)
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    out = checkpoint(fn, a, use_reentrant=False, debug=True)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    text = str(info.value)
    assert text.startswith(
        " An error happened while unpacking tensors; dumping logs of latest computation\n"
        "because you passed `debug=True` to `torch.utils.checkpoint.checkpoint()`.\n"
    )
    forward_ops = "$1: f32[1] = engine.ops.sin($0)\n$2: f32[1] = engine.ops.exp($1)"
    assert f"Operations executed during the original forward:\n\n{forward_ops}\n\n" in text
    # the recomputation: sin's pack of its input (detached by the recomputation pack hook), sin,
    # then mul's first save (the new constant) is the second one: early stop before mul's kernel
    recompute_ops = "$1: f32[1] = engine.ops.detach($0)\n$2: f32[1] = engine.ops.sin($0)"
    assert f"Operations executed during recomputation:\n\n{recompute_ops}\n\n" in text
    # stack traces: each op points at the line of the user's code that called it
    assert "(1 of 2 in original)" in text
    assert f"{__file__}:" in text and ":save_2_tensors\n" in text
    assert text.endswith(
        "4. Error message                                             <--- You are here\n" + "-" * 80 + "\n"
    )
    cause = info.value.__cause__
    assert isinstance(cause, CheckpointError)
    assert str(cause).startswith("torch.utils.checkpoint: Recomputed values for the following tensors")
