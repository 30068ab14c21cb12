"""Differential tests against torch 2.8.0: selective activation checkpointing, the reentrant
variant and ``checkpoint_sequential``.

Scenarios are written once for ``torch`` and the engine and compared event by event against
torch 2.8.0; the harness (and what is compared) is in ``_vs_torch.py``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tests.utils._ckpt_probe import Probe
from tests.utils._vs_torch import (
    A,
    T,
    compare,
    err,
    grads_or_error,
    op_name,
    scenario,
    scenario_names,
    variants,
)

# --- selective activation checkpointing ----------------------------------------------------------


def _sac_policy(
    cp: ModuleType, calls: list[str], save: str, flip_after_forward: bool = False
) -> Callable[..., Any]:
    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        name = op_name(func)
        wants = name == save
        if flip_after_forward and ctx.is_recompute:
            wants = not wants
        calls.append(f"{name} recompute={ctx.is_recompute} save={wants}")
        return cp.CheckpointPolicy.MUST_SAVE if wants else cp.CheckpointPolicy.PREFER_RECOMPUTE

    return policy


@variants(
    policy_fn={"how": "policy"},
    op_list={"how": "list"},
    bool_policy={"how": "bool"},
    save_then_recompute={"how": "flip_save_first"},
    recompute_then_save={"how": "flip_recompute_first"},
)
def sac(lib: ModuleType, cp: ModuleType, probe: Probe, how: str) -> dict[str, Any]:
    x, w = T(lib, (3,), 0), T(lib, (3,), 1)
    calls: list[str] = []
    if how == "list":
        mul = lib.ops.aten.mul.Tensor if hasattr(lib.ops, "aten") else lib.ops.mul
        context_fn = functools.partial(cp.create_selective_checkpoint_contexts, [mul])
    elif how == "bool":

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> bool:
            calls.append(f"{op_name(func)} recompute={ctx.is_recompute}")
            return op_name(func) == "mul"

        context_fn = functools.partial(cp.create_selective_checkpoint_contexts, policy)
    else:
        save = "tanh" if how == "flip_recompute_first" else "mul"
        policy = _sac_policy(cp, calls, save, flip_after_forward=how.startswith("flip"))
        if how == "flip_recompute_first":
            # Saves everything but tanh in the forward, then flips: mul is looked up and missing.
            policy = _sac_policy(cp, calls, "tanh", flip_after_forward=True)
        context_fn = functools.partial(cp.create_selective_checkpoint_contexts, policy)

    @probe.body
    def f(a: Any, b: Any) -> Any:
        return ((a * b).tanh() * b).sin()

    out = cp.checkpoint(f, x, w, use_reentrant=False, context_fn=context_fn)
    probe.set_phase("backward")
    result = grads_or_error(out, x, w)
    probe.set_phase("end")
    return {"calls": calls, "result": result}


@scenario
def sac_backward_twice(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (3,), 0)
    calls: list[str] = []
    context_fn = functools.partial(cp.create_selective_checkpoint_contexts, _sac_policy(cp, calls, "sin"))

    @probe.body
    def f(t: Any) -> Any:
        return t.sin().exp().cos()

    out = cp.checkpoint(f, x, use_reentrant=False, context_fn=context_fn)
    seen = []
    for i in range(2):
        probe.set_phase(f"backward {i + 1}")
        try:
            out.sum().backward(retain_graph=True)
            seen.append(A(x.grad))
        except RuntimeError as e:
            seen.append(err(e))
    probe.set_phase("end")
    return {"calls": calls, "seen": seen}


@variants(forbidden={"allow": False}, allowed={"allow": True})
def sac_cached_output_mutated(lib: ModuleType, cp: ModuleType, probe: Probe, allow: bool) -> dict[str, Any]:
    x = T(lib, (3,), 0)
    calls: list[str] = []
    context_fn = functools.partial(
        cp.create_selective_checkpoint_contexts,
        _sac_policy(cp, calls, "sin"),
        allow_cache_entry_mutation=allow,
    )

    @probe.body
    def f(t: Any) -> Any:
        return t.sin().mul_(2.0).exp()

    out = cp.checkpoint(f, x, use_reentrant=False, context_fn=context_fn)
    probe.set_phase("backward")
    result = grads_or_error(out, x)
    probe.set_phase("end")
    return {"calls": calls, "result": result}


# --- the reference scenarios of torch_2_8_vs_2_13.md, with matrix products ---------------------


@variants(policy_fn={"how": "policy"}, op_list={"how": "list"})
def sac_mm(lib: ModuleType, cp: ModuleType, probe: Probe, how: str) -> dict[str, Any]:
    """MUST_SAVE for mm, PREFER_RECOMPUTE otherwise; f(x, W) = (tanh(x @ W) @ W).sin()."""
    x, w = T(lib, (2, 3), 0), T(lib, (3, 3), 1)
    calls: list[str] = []
    if how == "list":
        mm = lib.ops.aten.mm.default if hasattr(lib.ops, "aten") else lib.ops.mm
        context_fn = functools.partial(cp.create_selective_checkpoint_contexts, [mm])
    else:
        context_fn = functools.partial(cp.create_selective_checkpoint_contexts, _sac_policy(cp, calls, "mm"))

    @probe.body
    def f(a: Any, b: Any) -> Any:
        return ((a @ b).tanh() @ b).sin()

    out = cp.checkpoint(f, x, w, use_reentrant=False, context_fn=context_fn)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"calls": calls, "gx": A(x.grad), "gw": A(w.grad)}


# --- reentrant -----------------------------------------------------------------------------------


@variants(
    backward={"how": "backward"},
    grad_then_backward={"how": "grad"},
    backward_inputs={"how": "inputs"},
    output_without_grad={"how": "output_without_grad"},
    input_without_grad={"how": "input_without_grad"},
    no_use_reentrant={"how": "warn"},
)
def reentrant(lib: ModuleType, cp: ModuleType, probe: Probe, how: str) -> dict[str, Any]:
    x = T(lib, (3,), 0, requires_grad=how != "input_without_grad")
    y = T(lib, (3,), 1, requires_grad=False)
    w = T(lib, (3,), 2)
    seen: list[Any] = []

    @probe.body
    def f(t: Any, u: Any) -> Any:
        if how == "output_without_grad":
            return u * 2.0
        return (t * w).sin().exp() + u

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if how == "warn":
            out = cp.checkpoint(f, x, y)
        else:
            out = cp.checkpoint(f, x, y, use_reentrant=True)
    seen.extend(f"warning: {w_.message}" for w_ in caught)
    seen.append(f"out.requires_grad={out.requires_grad}")
    probe.set_phase("backward")
    try:
        if how == "grad":
            lib.autograd.grad(out.sum(), x)
        elif how == "inputs":
            out.sum().backward(inputs=[x])
        else:
            out.sum().backward()
    except RuntimeError as e:
        seen.append(err(e))
    if how == "grad":
        probe.set_phase("backward after error")
        out2 = cp.checkpoint(f, x, y, use_reentrant=True)
        out2.sum().backward()
    probe.set_phase("end")
    return {"seen": seen, "gx": A(x.grad), "gw": A(w.grad)}


@scenario
def reentrant_non_tensor_inputs_outputs(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    a, b = T(lib, (3,), 0), T(lib, (3,), 1)

    @probe.body
    def foo(t1: Any, t2: Any, scale: int, t3: Any) -> tuple[Any, ...]:
        d = scale * t1 * t2
        e = d * t3
        return 1, d, None, True, e, "bar", t1

    res = cp.checkpoint(foo, a, b, 2, a, use_reentrant=True)
    seen: list[Any] = [res[0], res[2], res[3], res[5]]
    probe.set_phase("backward 1")
    res[1].sum().backward(retain_graph=True)
    seen.append([A(a.grad), A(b.grad)])
    probe.set_phase("backward 2")
    res[4].sum().backward(retain_graph=True)
    seen.append([A(a.grad), A(b.grad)])
    probe.set_phase("backward 3")
    try:
        res[6].sum().backward()
    except RuntimeError as e:
        seen.append(err(e))
    probe.set_phase("end")
    return {"seen": seen}


# --- checkpoint_sequential -----------------------------------------------------------------------


@variants(non_reentrant={"use_reentrant": False}, reentrant={"use_reentrant": True})
def sequential(lib: ModuleType, cp: ModuleType, probe: Probe, use_reentrant: bool) -> dict[str, Any]:
    x = T(lib, (3,), 0)
    counters = [0] * 10

    def make(i: int) -> Callable[[Any], Any]:
        def fn(t: Any) -> Any:
            counters[i] += 1
            return (t * 2.0).sin() if i % 2 else t.exp()

        fn.__name__ = f"f{i}"
        return probe.body(fn)

    out = cp.checkpoint_sequential([make(i) for i in range(10)], 2, x, use_reentrant=use_reentrant)
    after_forward = list(counters)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {"after_forward": after_forward, "after_backward": counters, "gx": A(x.grad)}


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.oracle
@pytest.mark.parametrize("name", scenario_names(__name__))
def test_engine_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    compare(name, torch_oracle)
