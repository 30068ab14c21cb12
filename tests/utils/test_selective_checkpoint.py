"""PyTorch's ``TestSelectiveActivationCheckpoint`` (test/test_autograd.py), ported to the engine.

Ops are the engine's op objects (``engine.ops.mm`` for ``torch.ops.aten.mm.default``). CUDA memory
and FLOP counters become a dispatch mode that counts the ``mm`` calls of the backward, and the
number of entries in SAC's cache. Upstream's tests that need tensor subclasses, ``var_mean`` or
custom ops are replaced by the nearest engine equivalent (``max.dim`` for a two-output op).
"""

from __future__ import annotations

import functools
import gc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import engine
from engine._C import _tls
from engine.ops import DispatchMode
from engine.utils.checkpoint import (
    CheckpointPolicy,
    SelectiveCheckpointContext,
    _CachedTorchDispatchMode,
    _CachingTorchDispatchMode,
    checkpoint,
    create_selective_checkpoint_contexts,
)

pytestmark = pytest.mark.usefixtures("engine_seed")


@contextmanager
def disable_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _current_dispatch_mode() -> DispatchMode | None:
    return _tls.dispatch_modes[-1] if _tls.dispatch_modes else None


class MmCounterMode(DispatchMode):
    """Counts the ``mm`` kernels that run (upstream uses FlopCounterMode). Entered before
    backward, it sits below SAC's recompute mode, so it only sees the ops SAC lets through."""

    def __init__(self) -> None:
        self.count = 0

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if func is engine.ops.mm:
            self.count += 1
        return func(*args, **(kwargs or {}))


def _mm_policy(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    if op == engine.ops.mm:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def _mm_policy_bool(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> bool:
    return op == engine.ops.mm


@pytest.mark.parametrize(
    ("context", "bw_mms", "cached"),
    [
        (None, 2, 0),  # no checkpoint: the two mm of mm's backward
        ("ac", 3, 0),  # plain checkpoint: the forward mm is re-run
        ([engine.ops.mm], 2, 1),  # SAC, op list: mm comes from the cache
        (_mm_policy, 2, 1),  # SAC, policy function
        (_mm_policy_bool, 2, 1),  # SAC, policy returning a bool
    ],
    ids=["no_ac", "ac", "sac_list", "sac_policy", "sac_bool_policy"],
)
def test_flops_and_mem(context: Any, bw_mms: int, cached: int) -> None:
    x = engine.randn(8, 8, requires_grad=True)
    y = engine.randn(8, 8, requires_grad=True)

    def fn(x: Any, y: Any) -> Any:
        return engine.mm(x.cos(), y).sin().sum()

    storage: dict[Any, list[Any]] = {}
    if context is None:
        out = fn(x, y)
    elif context == "ac":
        out = checkpoint(fn, x, y, use_reentrant=False)
    else:
        fwd, recompute = create_selective_checkpoint_contexts(context)
        storage = fwd.storage
        out = checkpoint(fn, x, y, use_reentrant=False, context_fn=lambda: (fwd, recompute))
    assert sum(len(v) for v in storage.values()) == cached
    with MmCounterMode() as counter:
        out.backward()
    assert counter.count == bw_mms
    # the cache is consumed by the recomputation
    assert sum(len(v) for v in storage.values()) == 0


def test_output_already_has_autograd_meta() -> None:
    # View of tensor of non-differentiable dtype
    def fn(x: Any, y: Any) -> tuple[Any, Any]:
        return x.view(-1), y.sin().cos()

    x = engine.tensor([1, 2, 3], dtype=engine.int64)
    y = engine.randn(3, requires_grad=True)

    context_fn = functools.partial(create_selective_checkpoint_contexts, [engine.ops.view])
    out = checkpoint(fn, x, y, use_reentrant=False, context_fn=context_fn)
    out[1].sum().backward()
    assert y.grad is not None


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="Expected op in `op_list` to be an OpOverload"):
        create_selective_checkpoint_contexts([2])

    # engine.ops.sum stands for several overloads, like torch.ops.aten.sin (an OpOverloadPacket)
    with pytest.raises(ValueError, match="update the OpOverloadPacket to a specific OpOverload"):
        create_selective_checkpoint_contexts([engine.ops.sum])

    with pytest.raises(TypeError, match=r"either a function or a list of ops\."):
        create_selective_checkpoint_contexts(2)  # type: ignore[arg-type]


def test_bad_inputs_messages() -> None:
    with pytest.raises(ValueError) as info:
        create_selective_checkpoint_contexts([2])
    assert (
        str(info.value) == "Expected op in `op_list` to be an OpOverload but got: 2 of type <class 'int'>. "
    )
    with pytest.raises(ValueError) as info:
        create_selective_checkpoint_contexts([engine.ops.sum])
    assert str(info.value) == (
        "Expected op in `op_list` to be an OpOverload but got: engine.ops.sum of type "
        "<class 'engine.ops._dispatch.CompositeOp'>. Please update the OpOverloadPacket to a specific "
        "OpOverload.For example, if you have `torch.ops.aten.mm`, change it to `torch.ops.aten.mm.default`."
    )
    # an overload is fine
    create_selective_checkpoint_contexts([engine.ops.sum_default, engine.ops.mm])


def test_policy_with_state() -> None:
    # If I have a stateful callable, state is shared between the original
    # forward and the recompute.
    counters: list[int] = []

    class Policy:
        def __init__(self) -> None:
            self.counter = [0]
            self.recompute_counter = [0]

        def __call__(
            self, ctx: SelectiveCheckpointContext, func: Any, *args: Any, **kwargs: Any
        ) -> CheckpointPolicy:
            counter = self.recompute_counter if ctx.is_recompute else self.counter
            counter[0] += 1
            counters.append(counter[0])
            if counter == 1 and func is engine.ops.mm:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

    def fn(x: Any) -> Any:
        return x.sin().sin().sin()

    x = engine.randn(3, requires_grad=True)
    context_fn = functools.partial(
        create_selective_checkpoint_contexts, Policy(), allow_cache_entry_mutation=True
    )
    out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)
    out.sum().backward()
    # 1. counter properly reset to 0 for the recompute
    # 2. due to early-stop we do not recompute the final op
    # (2.8 calls the policy again during recomputation; 2.9+ gives [1, 2, 3])
    assert counters == [1, 2, 3, 1, 2]


def test_storage_lifetime() -> None:
    def policy_fn(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        return CheckpointPolicy.MUST_SAVE

    ref: weakref.ref[Any] | None = None

    def fn(x: Any) -> Any:
        nonlocal ref
        mode = _current_dispatch_mode()
        assert isinstance(mode, (_CachingTorchDispatchMode, _CachedTorchDispatchMode))

        out = x.cos().exp()

        if isinstance(mode, _CachingTorchDispatchMode):
            raw_val = mode.storage[engine.ops.exp][0].val
            # ref should've been detached
            # to avoid graph -> the saved variable hooks -> recompute_context -> storage -> graph
            assert not raw_val.requires_grad
            ref = weakref.ref(raw_val)

        # Careful for early-stop
        return out.sin()

    with disable_gc():
        # Case 1: If graph goes away without backward, make sure there's no reference cycle
        #         keeping storage alive.
        x = engine.randn(3, requires_grad=True)
        context_fn = functools.partial(create_selective_checkpoint_contexts, policy_fn)
        out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)
        assert ref is not None and ref() is not None
        del out
        assert ref() is None

        # Case 2: After backward, even if retain_graph=True, the storage should go away
        x = engine.randn(3, requires_grad=True)
        context_fn = functools.partial(create_selective_checkpoint_contexts, policy_fn)
        out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)
        assert ref() is not None
        out.sum().backward(retain_graph=True)
        # The dispatch mode's storage should still be alive, but the entries should've
        # been cleared.
        assert ref() is None


def test_version_counter() -> None:
    def policy_fn(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if op == engine.ops.sin:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    def fn(x: Any) -> Any:
        return x.sin().mul_(2).cos().exp()

    x = engine.randn(3, requires_grad=True)
    context_fn = functools.partial(create_selective_checkpoint_contexts, policy_fn)
    out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)

    # 1) Error because the output of sin is saved and mutated by mul_
    with pytest.raises(
        RuntimeError, match=r"^Tensor cached during selective activation checkpoint has been mutated$"
    ):
        out.sum().backward()

    x = engine.randn(3, requires_grad=True)
    context_fn = functools.partial(
        create_selective_checkpoint_contexts, policy_fn, allow_cache_entry_mutation=True
    )
    out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)

    # 2) No longer should be an error because of allow_cache_entry_mutation
    out.sum().backward()
    # ... but, as in PyTorch, the gradient is silently wrong: the recomputation takes the mutated
    # cached value and runs mul_ on it once more, so cos sees 4 * sin(x).
    with engine.no_grad():
        m = 4 * x.sin()
        wrong = m.cos().exp() * -m.sin() * 2 * x.cos()
    np.testing.assert_allclose(x.grad.numpy(), wrong.numpy(), rtol=1e-5)


def test_function_with_more_than_one_output() -> None:
    # upstream uses var_mean; max.dim also returns two tensors (values, indices)
    counter = [0]

    def policy_fn(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if op == engine.ops.max_dim:
            counter[0] += 1
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    def fn(x: Any) -> Any:
        a, b = x.max(dim=1)
        return a * b

    x = engine.randn(3, 4, requires_grad=True)
    context_fn = functools.partial(create_selective_checkpoint_contexts, policy_fn)
    out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)
    x_grad = engine.autograd.grad(out.sum(), (x,))
    x_grad_ref = engine.autograd.grad(fn(x).sum(), (x,))
    np.testing.assert_allclose(x_grad[0].numpy(), x_grad_ref[0].numpy())
    # called in the forward and again in the recomputation (2.8)
    assert counter[0] == 2


def test_can_only_trigger_recompute_once() -> None:
    def policy_fn(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if op == engine.ops.sin:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    def fn(x: Any) -> Any:
        return x.sin().cos().exp()

    x = engine.randn(3, requires_grad=True)
    context_fn = functools.partial(create_selective_checkpoint_contexts, policy_fn)
    out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)
    out.sum().backward(retain_graph=True)

    with pytest.raises(RuntimeError, match="Trying to backward an extra time"):
        out.sum().backward(retain_graph=True)


def test_cached_ops_skip_their_kernel() -> None:
    """The reference run's o1: mm cached, tanh re-run, mm cached, sin never reached."""
    ran: list[str] = []

    class KernelLog(DispatchMode):
        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            ran.append(func.name)
            return func(*args, **(kwargs or {}))

    x, w = engine.randn(2, 3, requires_grad=True), engine.randn(3, 3, requires_grad=True)
    recompute_log = KernelLog()
    fwd, recompute = create_selective_checkpoint_contexts([engine.ops.mm])

    @contextmanager
    def logged_recompute() -> Iterator[None]:
        # the log sits below the cached mode: it sees only the kernels that really run
        with recompute_log, recompute:
            yield

    out = checkpoint(
        lambda a, b: ((a @ b).tanh() @ b).sin(),
        x,
        w,
        use_reentrant=False,
        context_fn=lambda: (fwd, logged_recompute()),
    )
    out.sum().backward()
    assert [name for name in ran if name != "detach"] == ["tanh"]


def test_selective_checkpoint_context() -> None:
    ctx = SelectiveCheckpointContext(is_recompute=True)
    assert ctx.is_recompute is True
    assert [p.name for p in CheckpointPolicy] == [
        "MUST_SAVE",
        "PREFER_SAVE",
        "MUST_RECOMPUTE",
        "PREFER_RECOMPUTE",
    ]


def _policy_calls(policy: Callable[..., Any]) -> list[tuple[str, bool]]:
    calls: list[tuple[str, bool]] = []

    def recording(ctx: SelectiveCheckpointContext, op: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((op.name, ctx.is_recompute))
        return policy(ctx, op, *args, **kwargs)

    x, w = engine.randn(2, 3, requires_grad=True), engine.randn(3, 3, requires_grad=True)
    context_fn = functools.partial(create_selective_checkpoint_contexts, recording)
    out = checkpoint(
        lambda a, b: ((a @ b).tanh() @ b).sin(), x, w, use_reentrant=False, context_fn=context_fn
    )
    out.sum().backward()
    return calls


def test_policy_is_called_again_on_recompute() -> None:
    # 2.8: the policy sees every op of the recomputation too, with is_recompute=True
    assert _policy_calls(_mm_policy) == [
        ("mm", False),
        ("tanh", False),
        ("mm", False),
        ("sin", False),
        ("mm", True),
        ("tanh", True),
        ("mm", True),
    ]
