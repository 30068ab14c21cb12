"""Differential tests against torch 2.8.0: nested checkpoints, double backward, and backward
inside the checkpointed function (Rule 6).

Scenarios are written once for ``torch`` and the engine and compared event by event against
torch 2.8.0; the harness (and what is compared) is in ``_vs_torch.py``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.utils._ckpt_probe import Probe
from tests.utils._vs_torch import A, T, compare, scenario, scenario_names, variants

# --- scenarios: nested checkpoints ---------------------------------------------------------------


def _nested(lib: ModuleType, cp: ModuleType, probe: Probe, ops_around: bool) -> dict[str, Any]:
    x = T(lib, (2, 3), 0)
    w1, w2 = T(lib, (2, 3), 1), T(lib, (2, 3), 2)

    @probe.body
    def sub1(h: Any) -> Any:
        return (h * w1 + 1.0).tanh()

    @probe.body
    def sub2(h: Any) -> Any:
        return (h * w2 + 1.0).tanh()

    @probe.body
    def outer(h: Any) -> Any:
        if ops_around:
            h = h.exp()
        h = cp.checkpoint(sub1, h, use_reentrant=False)
        h = cp.checkpoint(sub2, h, use_reentrant=False)
        return h.sin() if ops_around else h

    out = cp.checkpoint(outer, x, use_reentrant=False)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"gx": A(x.grad), "gw1": A(w1.grad), "gw2": A(w2.grad)}


@variants(
    plain={"ops_around": False, "early_stop": True},
    ops_before_after={"ops_around": True, "early_stop": True},
    plain_early_stop_off={"ops_around": False, "early_stop": False},
    ops_before_after_early_stop_off={"ops_around": True, "early_stop": False},
)
def nested_two_children(
    lib: ModuleType, cp: ModuleType, probe: Probe, ops_around: bool, early_stop: bool
) -> dict[str, Any]:
    with cp.set_checkpoint_early_stop(early_stop):
        return _nested(lib, cp, probe, ops_around)


@scenario
def nested_inner_without_tensor_args(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (2,), 0)
    w = T(lib, (2,), 1)

    @probe.body
    def inner() -> Any:
        return w.sin()

    @probe.body
    def outer(t: Any) -> Any:
        a = cp.checkpoint(inner, use_reentrant=False)
        return (a * t).cos()

    out = cp.checkpoint(outer, x, use_reentrant=False)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"gx": A(x.grad), "gw": A(w.grad)}


@variants(plain={"nested": False}, nested={"nested": True})
def double_backward(lib: ModuleType, cp: ModuleType, probe: Probe, nested: bool) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def inner(t: Any) -> Any:
        return t.sin().exp()

    @probe.body
    def f(t: Any) -> Any:
        h = cp.checkpoint(inner, t, use_reentrant=False) if nested else inner(t)
        return h.cos() * t

    out = cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("grad create_graph")
    (g,) = lib.autograd.grad(out.sum(), x, create_graph=True)
    probe.set_phase("backward of grad")
    (g * g).sum().backward()
    probe.set_phase("end")
    return {"g": A(g), "gx": A(x.grad)}


# --- Rule 6: backward inside the checkpointed function -------------------------------------------


@variants(
    retain_early_stop_on={"retain": True, "early_stop": True},
    retain_early_stop_off={"retain": True, "early_stop": False},
    no_retain_early_stop_on={"retain": False, "early_stop": True},
    no_retain_early_stop_off={"retain": False, "early_stop": False},
)
def backward_inside_checkpoint(
    lib: ModuleType, cp: ModuleType, probe: Probe, retain: bool, early_stop: bool
) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def fn(t: Any) -> Any:
        y = t.sin()
        z = y.cos()
        probe.mark("inner grad")
        (gx,) = lib.autograd.grad(z.sum(), t, retain_graph=retain)
        probe.mark("inner grad done")
        if retain:
            return gx, z
        return t.cos() * gx

    with cp.set_checkpoint_early_stop(early_stop):
        out = cp.checkpoint(fn, x, use_reentrant=False)
    probe.set_phase("backward")
    if retain:
        (out[0].sum() + out[1].sum()).backward()
    else:
        out.sum().backward()
    probe.set_phase("end")
    return {"gx": A(x.grad)}


# --- the reference scenarios of torch_2_8_vs_2_13.md, with matrix products ---------------------


@variants(c1={"ops_around": False}, c2={"ops_around": True})
def nested_linear_blocks(lib: ModuleType, cp: ModuleType, probe: Probe, ops_around: bool) -> dict[str, Any]:
    """outer(x) = checkpoint(sub2, checkpoint(sub1, x)), sub_i(h) = tanh(h @ W_i + b_i)."""
    x = T(lib, (2, 3), 0)
    params = [(T(lib, (3, 3), 2 * i + 1), T(lib, (3,), 2 * i + 2)) for i in range(2)]

    @probe.body
    def sub1(h: Any) -> Any:
        return (h @ params[0][0] + params[0][1]).tanh()

    @probe.body
    def sub2(h: Any) -> Any:
        return (h @ params[1][0] + params[1][1]).tanh()

    @probe.body
    def outer(h: Any) -> Any:
        if ops_around:
            h = h.exp()
        h = cp.checkpoint(sub2, cp.checkpoint(sub1, h, use_reentrant=False), use_reentrant=False)
        return h.sin() if ops_around else h

    out = cp.checkpoint(outer, x, use_reentrant=False)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"gx": A(x.grad), "grads": [[A(w.grad), A(b.grad)] for w, b in params]}


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.oracle
@pytest.mark.parametrize("name", scenario_names(__name__))
def test_engine_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    compare(name, torch_oracle)
