"""Differential tests against torch 2.8.0: single checkpoints, chains, early stop, partial and
repeated backwards, non-tensor arguments, hooks, lifetimes and mixed ops.

Scenarios are written once for ``torch`` and the engine and compared event by event against
torch 2.8.0; the harness (and what is compared) is in ``_vs_torch.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tests.utils._ckpt_probe import Probe
from tests.utils._vs_torch import A, T, compare, err, scenario, scenario_names, variants

# --- scenarios: the basics -----------------------------------------------------------------------


@scenario
def single(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (2, 3), 0)

    @probe.body
    def f(t: Any) -> Any:
        return t.sin().exp()

    out = cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"out": A(out), "gx": A(x.grad)}


@scenario
def chain_of_blocks(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (2, 3), 0)
    ws = [T(lib, (3,), i + 1) for i in range(4)]

    @probe.body
    def block(h: Any, w: Any) -> Any:
        return (h * w).sin().tanh()

    h = x
    for w in ws:
        h = cp.checkpoint(block, h, w, use_reentrant=False)
    probe.set_phase("backward")
    h.sum().backward()
    probe.set_phase("end")
    return {"gx": A(x.grad), "gw": [A(w.grad) for w in ws]}


@variants(on={"early_stop": True}, off={"early_stop": False})
def early_stop(lib: ModuleType, cp: ModuleType, probe: Probe, early_stop: bool) -> dict[str, Any]:
    x = T(lib, (4,), 0)

    @probe.body
    def f(t: Any) -> Any:
        probe.mark("step sin")
        a = t.sin()
        probe.mark("step cos")
        b = a.cos()
        probe.mark("step exp")
        return b.exp()

    with cp.set_checkpoint_early_stop(early_stop):
        out = cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"gx": A(x.grad)}


@variants(
    on_grad_a={"early_stop": True, "how": "grad_a"},
    off_grad_a={"early_stop": False, "how": "grad_a"},
    on_inputs_y={"early_stop": True, "how": "inputs_y"},
    on_grad_then_full={"early_stop": True, "how": "grad_then_full"},
)
def partial_backward(
    lib: ModuleType, cp: ModuleType, probe: Probe, early_stop: bool, how: str
) -> dict[str, Any]:
    x, y = T(lib, (3,), 0), T(lib, (3,), 1)

    @probe.body
    def f(a: Any, b: Any) -> tuple[Any, Any]:
        return a.sin(), (b.cos() * a).exp()

    with cp.set_checkpoint_early_stop(early_stop):
        u, v = cp.checkpoint(f, x, y, use_reentrant=False)
    probe.set_phase("backward")
    result: dict[str, Any] = {}
    if how == "grad_a":
        (result["gx"],) = (A(g) for g in lib.autograd.grad(u.sum(), x))
    elif how == "inputs_y":
        (u.sum() + v.sum()).backward(inputs=[y])
        result["gx"], result["gy"] = A(x.grad), A(y.grad)
    else:
        (result["gx_partial"],) = (A(g) for g in lib.autograd.grad(u.sum(), x, retain_graph=True))
        probe.set_phase("backward 2")
        (u.sum() + v.sum()).backward()
        result["gx"], result["gy"] = A(x.grad), A(y.grad)
    probe.set_phase("end")
    return result


@scenario
def three_backwards_retain_graph(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def f(t: Any) -> Any:
        return t.sin().exp().cos()

    out = cp.checkpoint(f, x, use_reentrant=False)
    grads = []
    for i, retain in enumerate((True, True, False)):
        probe.set_phase(f"backward {i + 1}")
        out.sum().backward(retain_graph=retain)
        grads.append(A(x.grad))
    probe.set_phase("backward 4")
    try:
        out.sum().backward()
    except RuntimeError as e:
        grads.append(err(e))
    probe.set_phase("end")
    return {"grads": grads}


@scenario
def grad_wrt_intermediates(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def f(h: Any) -> tuple[Any, Any]:
        a = h.sin()
        return a, (a * h).exp()

    h = x.exp()
    a, b = cp.checkpoint(f, h, use_reentrant=False)
    probe.set_phase("grad")
    ga, gh = lib.autograd.grad(b.sum(), [a, h], retain_graph=True)
    probe.set_phase("grad 2")
    (gx,) = lib.autograd.grad((a * b).sum(), [x])
    probe.set_phase("end")
    return {"ga": A(ga), "gh": A(gh), "gx": A(gx)}


@scenario
def non_tensor_args_and_kwargs(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    a, b, c = T(lib, (3,), 0), T(lib, (3,), 1), T(lib, (3,), 2)

    @probe.body
    def fn(
        k: int, t: Any, u: Any, f: Callable[[Any], Any], *, scale: float, blah: Any
    ) -> tuple[Any, int, str]:
        return f(k * t * u.exp()) * blah * scale, 1, "abcd"

    out, one, s = cp.checkpoint(fn, 2, a, b, lambda t: t.sin(), use_reentrant=False, scale=0.5, blah=c)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"one": one, "s": s, "grads": [A(a.grad), A(b.grad), A(c.grad)]}


@scenario
def no_grad_mode(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def f(t: Any) -> Any:
        return t.sin().exp()

    with lib.no_grad():
        out = cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("end")
    return {"requires_grad": out.requires_grad, "out": A(out)}


@scenario
def body_saves_nothing(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def f(t: Any) -> Any:
        return (t.clone() + 1.0).reshape(3, 1)

    out = cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("backward")
    (out * 2.0).sum().backward()
    probe.set_phase("end")
    return {"gx": A(x.grad)}


@scenario
def saved_reads_outside_backward(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def f(t: Any) -> Any:
        return t.sin().exp()

    d = cp.checkpoint(f, x, use_reentrant=False)
    reads = []
    for i in range(2):
        probe.set_phase(f"read {i + 1}")
        reads.append(A(d.grad_fn._saved_result))
    probe.set_phase("backward")
    d.sum().backward()
    probe.set_phase("read after backward")
    try:
        d.grad_fn._saved_result
    except RuntimeError as e:
        reads.append(err(e))
    probe.set_phase("end")
    return {"reads": reads, "gx": A(x.grad)}


@scenario
def user_hooks_around_checkpoint(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (2,), 0)
    packed: list[list[int]] = []
    unpacked: list[list[int]] = []

    def pack(t: Any) -> Any:
        packed.append(list(t.shape))
        return t

    def unpack(t: Any) -> Any:
        unpacked.append(list(t.shape))
        return t

    @probe.body
    def f(t: Any) -> Any:
        return t.sin()

    with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"packed": packed, "unpacked": unpacked, "gx": A(x.grad)}


# --- lifetimes -----------------------------------------------------------------------------------


@variants(
    plain={"ckpt": False, "retain": False},
    plain_retain_graph={"ckpt": False, "retain": True},
    checkpoint={"ckpt": True, "retain": False},
    checkpoint_retain_graph={"ckpt": True, "retain": True},
)
def early_free(lib: ModuleType, cp: ModuleType, probe: Probe, ckpt: bool, retain: bool) -> dict[str, Any]:
    """test_checkpointing_without_reentrant_early_free with holder deaths and recomputed tensors
    instead of GPU memory: at each step of the backward, Rule 4 frees what was just used."""
    x = T(lib, (10,), 0)

    def track(t: Any, idx: int) -> None:
        t.register_hook(lambda _: probe.mark(f"step {idx} recomputed_alive={probe.recomputed_alive()}"))

    @probe.body
    def test_fn(t: Any) -> Any:
        t = t**2
        track(t, 2)
        t = t**2
        track(t, 1)
        t = t**2
        track(t, 0)
        t = t**2
        return t.sum()

    out = cp.checkpoint(test_fn, x, use_reentrant=False) if ckpt else test_fn(x)
    probe.set_phase("backward")
    out.backward(retain_graph=retain)
    probe.mark(f"after backward recomputed_alive={probe.recomputed_alive()}")
    probe.set_phase("end")
    return {"gx": A(x.grad)}


@scenario
def mixed_ops(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x, w = T(lib, (2, 3), 0), T(lib, (3, 2), 1)

    @probe.body
    def f(t: Any, u: Any) -> Any:
        h = (t @ u).relu().pow(2)
        h = h.reshape(4).view(2, 2).clone()
        h.add_(1.0)
        h = h.tanh() * h.sigmoid()
        return h.sum(dim=0).exp().mean()

    out = cp.checkpoint(f, x, w, use_reentrant=False)
    probe.set_phase("backward")
    out.backward()
    probe.set_phase("end")
    return {"gx": A(x.grad), "gw": A(w.grad)}


@scenario
def no_input_requires_grad(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (2, 3), 0, requires_grad=False)
    w = T(lib, (3, 3), 1)

    @probe.body
    def f(t: Any) -> Any:
        return (t @ w).tanh().sin()

    out = cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"requires_grad": out.requires_grad, "gw": A(w.grad)}


@scenario
def tensors_in_containers(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    a, b = T(lib, (3,), 0), T(lib, (3,), 1)

    @probe.body
    def f(pair: list[Any], named: dict[str, Any]) -> dict[str, Any]:
        return {"result": (pair[0] * pair[1]).sin() * named["t"].exp()}

    out = cp.checkpoint(f, [a, b], {"t": a}, use_reentrant=False)["result"]
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"ga": A(a.grad), "gb": A(b.grad)}


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.oracle
@pytest.mark.parametrize("name", scenario_names(__name__))
def test_engine_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    compare(name, torch_oracle)
