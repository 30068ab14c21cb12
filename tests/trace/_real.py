"""Traces of real engine runs, recorded with ``engine.trace.record()``: ``real_trace(name)``, and
``with_real(traces)`` to run a test on the synthetic traces and the real ones alike."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import engine
from engine import trace
from engine.utils.checkpoint import checkpoint


def nested_early_stop() -> None:
    """The seed's OuterBlock/SubBlock shape: two checkpointed sub-blocks inside a checkpoint."""
    engine.manual_seed(0)
    w1, w2 = engine.randn(3, 3, requires_grad=True), engine.randn(3, 3, requires_grad=True)

    def sub1(h: Any) -> Any:
        return (h @ w1).tanh()

    def sub2(h: Any) -> Any:
        return (h @ w2).tanh()

    def outer(h: Any) -> Any:
        return checkpoint(sub2, checkpoint(sub1, h, use_reentrant=False), use_reentrant=False)

    x = engine.randn(2, 3, requires_grad=True)
    out = checkpoint(outer, x, use_reentrant=False)
    out.sum().backward()


def retain_graph_double_backward() -> None:
    """Two backwards through one checkpoint: the first keeps the graph, so each recomputes (Rule 4)."""
    engine.manual_seed(0)
    x = engine.randn(4, requires_grad=True)
    out = checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False)
    loss = out.sum()
    loss.backward(retain_graph=True)
    loss.backward()


def rule6_no_retain_graph() -> None:
    """Rule 6 with retain_graph=False and early stop off: dead holders are skipped."""
    from engine.utils.checkpoint import set_checkpoint_early_stop

    engine.manual_seed(0)

    def fn(x: Any) -> Any:
        y = x.sin()
        z = y.cos()
        (gx,) = engine.autograd.grad(z.sum(), x)
        return x.cos() * gx

    inp = engine.randn(3, requires_grad=True)
    with set_checkpoint_early_stop(False):
        out = checkpoint(fn, inp, use_reentrant=False)
    out.sum().backward()


REAL_TRACES: dict[str, Callable[[], None]] = {
    "nested_early_stop": nested_early_stop,
    "retain_graph_double_backward": retain_graph_double_backward,
    "rule6_no_retain_graph": rule6_no_retain_graph,
}


@functools.cache
def _record(name: str) -> tuple[dict[str, Any], ...]:
    with trace.record() as tr:
        REAL_TRACES[name]()
    return tuple(tr.events)


def real_trace(name: str) -> list[dict[str, Any]]:
    return list(_record(name))


def with_real(traces: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``traces`` (the synthetic ones, by name), then every real trace as ``real:NAME``."""
    return {**traces, **{f"real:{name}": real_trace(name) for name in REAL_TRACES}}
