"""``engine.utils.checkpoint``, non-reentrant: when tensors are recomputed, held and freed, and
which saved-tensor hooks are installed. From test/test_autograd.py ``TestAutograd`` (upstream
assertions; CUDA memory becomes holders / recomputed tensors alive) and 2.8's behaviours.
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from typing import Any

import pytest

import engine
import engine.utils.checkpoint as cp
from engine.utils.checkpoint import checkpoint

pytestmark = pytest.mark.usefixtures("engine_seed")


# === test/test_autograd.py: TestAutograd =========================================================


def test_access_saved_tensor_twice_without_recomputation_works() -> None:
    count = [0]

    def foo(a: Any) -> Any:
        count[0] += 1
        b = a * a
        _c = a * b
        d = engine.exp(a)
        return d

    a = engine.randn(5, requires_grad=True)
    d = checkpoint(foo, a, use_reentrant=False)
    assert count[0] == 1
    # Recomputed variables only persist within a particular backward call.
    # If _saved_result is accessed outside of a backward, it will trigger
    # a recompute. And afterwards, those recomputed results are immediately
    # cleared.
    d.grad_fn._saved_result
    assert count[0] == 2
    # Second access will trigger another recompute
    d.grad_fn._saved_result
    assert count[0] == 3
    # Backward clears the saved variable
    d.sum().backward()
    assert count[0] == 4
    # Now it raises an error
    with pytest.raises(
        RuntimeError, match="or directly access saved tensors after they have already been freed"
    ):
        d.grad_fn._saved_result


@pytest.mark.parametrize(
    ("use_checkpoint", "retain_graph", "should_free"),
    [(False, False, True), (False, True, False), (True, False, True), (True, True, True)],
)
def test_checkpointing_without_reentrant_early_free(
    monkeypatch: pytest.MonkeyPatch, use_checkpoint: bool, retain_graph: bool, should_free: bool
) -> None:
    # Upstream uses GPU memory as a proxy; here: tensors still held for backward (recomputed
    # tensors held by checkpoint frames, or tensors the plain graph saved), measured by weakref.
    frames: list[weakref.ref[Any]] = []
    saved: list[weakref.ref[Any]] = []
    original_frame = cp._CheckpointFrame

    class Frame(original_frame):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            frames.append(weakref.ref(self))

    monkeypatch.setattr(cp, "_CheckpointFrame", Frame)

    def held() -> int:
        recomputed = sum(len(d) for r in frames if (f := r()) is not None for d in f.recomputed.values())
        return recomputed + sum(1 for r in saved if r() is not None)

    stats: list[int] = []

    def track(x: Any, idx: int) -> None:
        def hook(_unused: Any) -> None:
            assert len(stats) == idx
            stats.append(held())
            if idx > 0:
                if should_free:
                    assert stats[idx] < stats[idx - 1]
                else:
                    assert stats[idx] == stats[idx - 1]

        x.register_hook(hook)

    def test_fn(x: Any) -> Any:
        # multiple operations that save tensors, in a chain
        x = x**2
        track(x, 2)
        x = x**2
        track(x, 1)
        x = x**2
        track(x, 0)
        x = x**2
        return x.sum()

    def pack(t: Any) -> Any:
        saved.append(weakref.ref(t))
        return t

    x = engine.zeros(10, requires_grad=True)
    hooks: Any = (
        contextlib.nullcontext()
        if use_checkpoint
        else engine.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    )
    with hooks:
        out = checkpoint(test_fn, x, use_reentrant=False) if use_checkpoint else test_fn(x)
    del x
    with gc_disabled():
        out.backward(retain_graph=retain_graph)
    assert len(stats) == 3


@contextlib.contextmanager
def gc_disabled() -> Any:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# === texts, 2.8 behaviours and the engine's additions ===============================================


def test_exception_in_forward_keeps_hooks_until_traceback_is_released() -> None:
    # 2.8: the checkpoint's generator is left suspended inside its hooks' ``with`` block.
    from engine._C import _tls

    x = engine.randn(3, requires_grad=True)
    runs = [0]

    def f(t: Any) -> Any:
        runs[0] += 1
        t.sin()
        raise ValueError("boom")

    depth = len(_tls.saved_tensors_hooks)
    try:
        checkpoint(f, x, use_reentrant=False)
    except ValueError as e:
        assert str(e) == "boom"
        assert len(_tls.saved_tensors_hooks) == depth + 1
        z = x.exp()  # packed by the failed checkpoint
        with pytest.raises(ValueError, match="boom"):
            z.grad_fn._saved_result  # unpacking re-runs the failed function
    assert len(_tls.saved_tensors_hooks) == depth
    assert runs[0] == 2


def test_no_grad_mode_installs_nothing() -> None:
    x = engine.randn(3, requires_grad=True)
    seen = []

    def f(t: Any) -> Any:
        from engine._C import _tls

        seen.append(len(_tls.saved_tensors_hooks))
        return t.sin()

    with engine.no_grad():
        out = checkpoint(f, x, use_reentrant=False)
    assert seen == [0]
    assert not out.requires_grad


def test_inner_inputs_are_saved_by_the_parent_dummy_first() -> None:
    # Rule 2, as 2.8 does it: the parent packs the inner checkpoint's dummy, then its tensor input
    shapes: list[list[int]] = []

    def pack(t: Any) -> Any:
        shapes.append(list(t.shape))
        return t

    x = engine.randn(2, requires_grad=True)
    with engine.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        checkpoint(engine.sin, x, use_reentrant=False)
    assert shapes == [[0], [2]]


def test_recomputed_tensors_are_cleared_on_unpack_even_with_retain_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames: list[Any] = []
    original_frame = cp._CheckpointFrame

    class Frame(original_frame):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            frames.append(self)

    monkeypatch.setattr(cp, "_CheckpointFrame", Frame)
    x = engine.randn(3, requires_grad=True)
    runs = [0]

    def f(t: Any) -> Any:
        runs[0] += 1
        return t.sin().exp().cos()

    out = checkpoint(f, x, use_reentrant=False)
    (frame,) = frames
    alive = [w for w in frame.weak_holders if w() is not None]
    assert len(alive) == 3
    for i in range(3):
        out.sum().backward(retain_graph=True)
        assert sum(len(d) for d in frame.recomputed.values()) == 0  # Rule 4
        assert len([w for w in frame.weak_holders if w() is not None]) == 3  # the graph keeps them
        assert runs[0] == 2 + i
    out.sum().backward()
    assert all(w() is None for w in frame.weak_holders)
