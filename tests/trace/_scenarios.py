"""Scenarios recorded by tests/trace/test_record*.py (their lines are the traces' ``src``)."""

from __future__ import annotations

from typing import Any

import engine
from engine import trace
from engine.utils.checkpoint import CheckpointError, checkpoint


def full() -> dict[str, Any]:
    """Every event kind: nested checkpoints with early stop, retain_graph, Rule 6 without
    retain_graph (a skipped holder), an in-place op, user hooks, a caught checkpoint error, an
    unpack outside backward, and (last) an exception escaping the recorded block."""
    engine.manual_seed(0)
    x = engine.randn(2, 3, requires_grad=True)
    w1 = engine.randn(2, 3, requires_grad=True)
    w2 = engine.randn(2, 3, requires_grad=True)
    ws = [engine.randn(3, requires_grad=True) for _ in range(2)]

    def sub1(h: Any) -> Any:
        return (h * w1 + 1.0).tanh()

    def sub2(h: Any) -> Any:
        return (h * w2 + 1.0).tanh()

    def outer(h: Any) -> Any:
        h = h.exp()
        h = checkpoint(sub1, h, use_reentrant=False)
        h = checkpoint(sub2, h, use_reentrant=False)
        return h.sin()

    trace.mark("forward", step=1)
    out = checkpoint(outer, x, use_reentrant=False)
    loss = (out * ws[0].sum()).sum()
    trace.mark("backward")
    loss.backward(retain_graph=True)
    loss.backward()

    # Rule 6 without retain_graph: the inner grad() frees holders that the outer backward skips.
    def inner_grad(t: Any) -> Any:
        y = t.sin()
        z = y.cos()
        (gt,) = engine.autograd.grad(z.sum(), t)
        return t.cos() * gt

    v = engine.randn(3, requires_grad=True)
    r6 = checkpoint(inner_grad, v, use_reentrant=False)
    r6.sum().backward()

    # An in-place op, and user saved-tensor hooks.
    with engine.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        a = ws[1] * 2.0
        b = a.exp()
    a.add_(1.0)
    b.sum().backward()

    # Reading a checkpointed saved tensor outside backward recomputes under a temporary gid.
    d = checkpoint(lambda t: t.sin().exp(), v, use_reentrant=False)
    seen = d.grad_fn._saved_result

    # The same holder unpacked twice in one backward: a CheckpointError, caught.
    class Twice(engine.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: Any) -> Any:
            ctx.save_for_backward(t)
            return t * 2.0

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            ctx.saved_tensors
            ctx.saved_tensors
            return g * 2.0

    tw = checkpoint(lambda t: Twice.apply(t.sin()), v, use_reentrant=False)
    try:
        tw.sum().backward()
    except CheckpointError as e:
        caught = str(e)
    return {"out": out, "seen": seen, "caught": caught}


def mlp(seed: int = 0, dropout: float = 0.5) -> Any:
    """A small model with dropout, checkpointed per block (determinism and names)."""
    engine.manual_seed(seed)
    model = engine.nn.Sequential(engine.nn.Linear(4, 8), engine.nn.Tanh(), engine.nn.Dropout(dropout))
    head = engine.nn.Linear(8, 2)
    inp = engine.randn(3, 4)
    hidden = checkpoint(model, inp, use_reentrant=False)
    out = head(hidden).pow(2).mean()
    out.backward()
    return model, head


def chain(n: int = 3, retain: bool = False) -> None:
    """A chain of checkpointed blocks, one backward."""
    x = engine.randn(4, requires_grad=True)

    def block(t: Any) -> Any:
        return t.sin().exp().cos()

    h = x
    for _ in range(n):
        h = checkpoint(block, h, use_reentrant=False)
    h.sum().backward(retain_graph=retain)


def plain() -> None:
    """No checkpoint: saved tensors held by the graph, then released by backward."""
    x = engine.randn(5, requires_grad=True)
    y = x.sin()
    z = y.exp()
    loss = z.sum()
    loss.backward()
    del y, z
