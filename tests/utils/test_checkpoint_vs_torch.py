"""Differential tests: each scenario runs in torch 2.8.0 and in the engine, instrumented the same way.

A scenario is written once against ``lib`` (``torch`` or ``engine``) and ``cp`` (its checkpoint
module); ``Probe`` (``_ckpt_probe.py``) patches ``cp``'s internals to record frames, packs, unpacks,
recomputations, early stops and holder deaths. Compared, for every scenario:

- the ordered list of checkpoint events (holder GCs excluded) and body marks;
- the holder GCs between each pair of consecutive events, as multisets (two holders released by
  the same node may die in either order);
- the counts derived from them and the number of runs of each checkpointed body;
- what the scenario returns: gradients (NumPy arrays), error types and texts (``torch`` replaced
  by ``engine``), flags.

Scenarios run with the cyclic garbage collector disabled: every holder death must come from
reference counting alone, at the moment the graph releases it, in both libraries.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import re
import warnings
from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
import engine.utils.checkpoint as engine_cp
from tests.utils._ckpt_probe import Probe

Scenario = Callable[[ModuleType, ModuleType, Probe], dict[str, Any]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


def variants(**cases: dict[str, Any]) -> Callable[[Callable[..., dict[str, Any]]], None]:
    """Register one scenario per keyword: ``name=dict(of keyword arguments)``."""

    def register(fn: Callable[..., dict[str, Any]]) -> None:
        for suffix, kwargs in cases.items():
            SCENARIOS[f"{fn.__name__}[{suffix}]"] = functools.partial(fn, **kwargs)

    return register


# --- helpers usable from both libraries ----------------------------------------------------------


def T(lib: ModuleType, shape: tuple[int, ...], seed: int, requires_grad: bool = True) -> Any:  # noqa: N802
    rng = np.random.default_rng(seed)
    return lib.tensor(rng.uniform(-1.0, 1.0, shape), dtype=lib.float64, requires_grad=requires_grad)


def A(t: Any) -> np.ndarray | None:  # noqa: N802
    return None if t is None else np.array(t.detach().numpy(), copy=True)


def err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def op_name(func: Any) -> str:
    """``aten.mul.Tensor`` (torch) and ``engine.ops.mul`` (engine) are both ``mul``."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return str(schema.name).split("::")[-1]
    return str(func.name).split(".")[0]


def rng_state_key(lib: ModuleType) -> str:
    state = lib.get_rng_state()
    return repr(state.numpy().tobytes()) if hasattr(state, "numpy") else repr(state)


def _normalize(text: str) -> str:
    text = re.sub(r"aten\.(\w+)\.\w+", r"engine.ops.\1", text)
    return text.replace("torch", "engine")


# --- running and comparing -----------------------------------------------------------------------


class Run:
    def __init__(self, probe: Probe, result: dict[str, Any], frames_alive: int) -> None:
        self.probe = probe
        self.result = result
        # Checkpoint frames still alive once the scenario returned (the cyclic GC still off).
        self.frames_alive = frames_alive


def run(fn: Scenario, lib: ModuleType, cp: ModuleType) -> Run:
    probe = Probe(cp)
    gc.disable()
    try:
        with probe.installed(), warnings.catch_warnings():
            warnings.simplefilter("error")
            result = fn(lib, cp, probe)
        frames_alive = sum(1 for f in probe._frames if f() is not None)
    finally:
        gc.enable()
    return Run(probe, result, frames_alive)


def gc_segments(timeline: list[str]) -> list[Counter[str]]:
    """The holder deaths between consecutive non-GC events."""
    segments: list[Counter[str]] = [Counter()]
    for ev in timeline:
        if ev.startswith("gc "):
            segments[-1][ev] += 1
        else:
            segments.append(Counter())
    return segments


def assert_same(ours: Any, theirs: Any, what: str) -> None:
    if isinstance(theirs, np.ndarray) or isinstance(ours, np.ndarray):
        assert isinstance(ours, np.ndarray) and isinstance(theirs, np.ndarray), what
        assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != torch {theirs.shape}"
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12, err_msg=what)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys(), what
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{what}.{k}")
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), f"{what}: {ours} != {theirs}"
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{what}[{i}]")
    elif isinstance(theirs, str):
        assert ours == _normalize(theirs), f"{what}:\n engine: {ours!r}\n torch:  {_normalize(theirs)!r}"
    else:
        assert ours == theirs, f"{what}: engine {ours!r} != torch {theirs!r}"


def compare(name: str, torch_mod: ModuleType) -> tuple[Run, Run]:
    torch_cp = importlib.import_module("torch.utils.checkpoint")
    theirs = run(SCENARIOS[name], torch_mod, torch_cp)
    ours = run(SCENARIOS[name], engine, engine_cp)
    assert ours.probe.events == theirs.probe.events
    assert gc_segments(ours.probe.timeline) == gc_segments(theirs.probe.timeline)
    assert ours.probe.counts() == theirs.probe.counts()
    assert ours.probe.body_runs == theirs.probe.body_runs
    assert ours.frames_alive == theirs.frames_alive == 0
    assert_same(ours.result, theirs.result, "result")
    return ours, theirs


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
def exception_in_forward(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (3,), 0)
    seen: list[str] = []

    @probe.body
    def f(t: Any) -> Any:
        t.sin()
        raise ValueError("boom")

    try:
        cp.checkpoint(f, x, use_reentrant=False)
    except ValueError as e:
        seen.append(err(e))
        # 2.8: the failed checkpoint's hooks are still active here.
        z = x.exp()
        try:
            z.grad_fn._saved_result
            seen.append("read inside except: ok")
        except ValueError as e2:
            seen.append(f"read inside except: {err(e2)}")
    probe.set_phase("after except")
    z2 = x.exp()
    seen.append(f"read after except: {A(z2.grad_fn._saved_result) is not None}")
    z2.sum().backward()
    probe.set_phase("end")
    return {"seen": seen, "gx": A(x.grad)}


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


# --- randomness ----------------------------------------------------------------------------------


@variants(preserve={"preserve": True}, no_preserve={"preserve": False})
def dropout(lib: ModuleType, cp: ModuleType, probe: Probe, preserve: bool) -> dict[str, Any]:
    # The two libraries draw different masks, so values are compared within each library (with
    # and without checkpoint); what is compared across libraries are these facts and the events.
    def f(t: Any) -> Any:
        return lib.nn.functional.dropout(t.sin(), 0.5, True).exp()

    lib.manual_seed(0)
    x_ref = T(lib, (32,), 0)
    f(x_ref).sum().backward()
    ref_state = rng_state_key(lib)

    lib.manual_seed(0)
    x = T(lib, (32,), 0)
    out = cp.checkpoint(probe.body(f), x, use_reentrant=False, preserve_rng_state=preserve)
    before = rng_state_key(lib)
    probe.set_phase("backward")
    out.sum().backward()
    probe.set_phase("end")
    return {
        "grads_equal_no_checkpoint": bool(np.allclose(A(x.grad), A(x_ref.grad))),
        "rng_after_forward_as_without_checkpoint": before == ref_state,
        "backward_advanced_rng": rng_state_key(lib) != before,
    }


# --- in-place ops --------------------------------------------------------------------------------


@variants(
    after_last_save_early_stop={"case": "after_last_save", "early_stop": True},
    after_last_save_no_early_stop={"case": "after_last_save", "early_stop": False},
    save_after_inplace={"case": "save_after", "early_stop": True},
    no_checkpoint_reference={"case": "no_checkpoint", "early_stop": True},
)
def inplace_inside(
    lib: ModuleType, cp: ModuleType, probe: Probe, case: str, early_stop: bool
) -> dict[str, Any]:
    x = T(lib, (4,), 0)

    @probe.body
    def f(t: Any) -> Any:
        a = t * 2.0
        b = a.sin()
        if case == "save_after":
            c = a.cos()
            a.add_(1.0)
            return b * a.exp() + c
        a.add_(1.0)
        return b + a

    with cp.set_checkpoint_early_stop(early_stop):
        out = f(x) if case == "no_checkpoint" else cp.checkpoint(f, x, use_reentrant=False)
    probe.set_phase("backward")
    try:
        out.sum().backward()
        result: Any = A(x.grad)
    except RuntimeError as e:
        result = err(e)
    probe.set_phase("end")
    return {"result": result}


@variants(checkpoint_input={"leaf": False}, leaf_inside={"leaf": True})
def inplace_outside(lib: ModuleType, cp: ModuleType, probe: Probe, leaf: bool) -> dict[str, Any]:
    x = T(lib, (4,), 0)

    @probe.body
    def f(t: Any) -> Any:
        if leaf:
            t.add_(1.0)
        return t.sin()

    seen = []
    try:
        c = x * 2.0
        out = cp.checkpoint(f, x if leaf else c, use_reentrant=False)
        c.add_(1.0)
        probe.set_phase("backward")
        out.sum().backward()
    except RuntimeError as e:
        seen.append(err(e))
    probe.set_phase("end")
    return {"seen": seen}


# --- determinism checks and every CheckpointError --------------------------------------------------


@variants(
    fewer_saves={"case": "fewer", "check": "default", "early_stop": True},
    fewer_saves_check_none={"case": "fewer", "check": "none", "early_stop": True},
    more_saves_early_stop_off={"case": "more", "check": "default", "early_stop": False},
    more_saves_early_stop_on={"case": "more", "check": "default", "early_stop": True},
    shape_mismatch={"case": "shape", "check": "default", "early_stop": True},
    shape_mismatch_check_none={"case": "shape", "check": "none", "early_stop": True},
    dtype_mismatch={"case": "dtype", "check": "default", "early_stop": True},
)
def determinism(
    lib: ModuleType, cp: ModuleType, probe: Probe, case: str, check: str, early_stop: bool
) -> dict[str, Any]:
    x = T(lib, (1,), 0)
    runs = [0]

    @probe.body
    def f(t: Any) -> Any:
        runs[0] += 1
        first = runs[0] == 1
        if case == "fewer":
            y = t.sin()
            return y.exp() if first else y
        if case == "more":
            y = t.sin()
            return y if first else y.exp()
        if case == "shape":
            scale = (
                lib.tensor([2.0], dtype=lib.float64) if first else lib.tensor([2.0, 3.0], dtype=lib.float64)
            )
            return (t * scale).sin()
        return (t if first else t.to(lib.float32)).sin()

    with cp.set_checkpoint_early_stop(early_stop):
        out = cp.checkpoint(f, x, use_reentrant=False, determinism_check=check)
    probe.set_phase("backward")
    try:
        out.sum().backward()
        result: Any = A(x.grad)
    except RuntimeError as e:
        result = err(e)
    probe.set_phase("end")
    return {"result": result}


@scenario
def debug_mode_error(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (1,), 0)
    runs = [0]

    @probe.body
    def f(t: Any) -> Any:
        runs[0] += 1
        y = t.sin()
        return y.exp() if runs[0] == 1 else y

    out = cp.checkpoint(f, x, use_reentrant=False, debug=True)
    probe.set_phase("backward")
    try:
        out.sum().backward()
        head, cause = "no error", ""
    except RuntimeError as e:
        head = f"{type(e).__name__}: " + "\n".join(str(e).splitlines()[:3])
        cause = err(e.__cause__) if e.__cause__ is not None else ""
    probe.set_phase("end")
    return {"head": head, "cause": cause}


@scenario
def bad_arguments(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    x = T(lib, (2,), 0)
    seen = []

    def f(t: Any) -> Any:
        return t.sin()

    attempts: list[Callable[[], Any]] = [
        lambda: cp.checkpoint(f, x, use_reentrant=False, determinism_check="bogus"),
        lambda: cp.checkpoint(f, x, use_reentrant=False, debug=True, context_fn=lambda: cp.noop_context_fn()),
        lambda: cp.checkpoint(f, x, use_reentrant=True, debug=True),
        lambda: cp.checkpoint(f, x, use_reentrant=True, context_fn=lambda: cp.noop_context_fn()),
        lambda: cp.checkpoint(f, x, use_reentrant=True, a=1, b=2),
        lambda: cp.checkpoint_sequential([f, f], 2, x, use_reentrant=False, a=1),
        lambda: cp.detach_variable([x]),
    ]
    for attempt in attempts:
        try:
            attempt()
            seen.append("ok")
        except (ValueError, RuntimeError, TypeError) as e:
            seen.append(err(e))
    probe.set_phase("end")
    return {"seen": seen}


@scenario
def unpack_twice_in_custom_function(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    class Mul(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            a, b = ctx.saved_tensors
            probe.mark("second read")
            ctx.saved_tensors
            return g * b, g * a

    x, y = T(lib, (3,), 0), T(lib, (3,), 1)

    @probe.body
    def f(a: Any, b: Any) -> Any:
        return Mul.apply(a.sin(), b)

    out = cp.checkpoint(f, x, y, use_reentrant=False)
    probe.set_phase("backward")
    try:
        out.sum().backward()
        result = "ok"
    except RuntimeError as e:
        result = err(e)
    probe.set_phase("end")
    return {"result": result}


@variants(with_checkpoint={"ckpt": True}, without_checkpoint={"ckpt": False})
def backward_twice(lib: ModuleType, cp: ModuleType, probe: Probe, ckpt: bool) -> dict[str, Any]:
    x = T(lib, (3,), 0)

    @probe.body
    def f(t: Any) -> Any:
        return t.sin().exp()

    out = cp.checkpoint(f, x, use_reentrant=False) if ckpt else f(x)
    probe.set_phase("backward 1")
    out.sum().backward()
    probe.set_phase("backward 2")
    seen = []
    try:
        out.sum().backward()
    except RuntimeError as e:
        seen.append(err(e))
    probe.set_phase("end")
    return {"seen": seen, "gx": A(x.grad)}


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
    try:
        out.sum().backward()
        result: Any = [A(x.grad), A(w.grad)]
    except RuntimeError as e:
        result = err(e)
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
    try:
        out.sum().backward()
        result: Any = A(x.grad)
    except RuntimeError as e:
        result = err(e)
    probe.set_phase("end")
    return {"calls": calls, "result": result}


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


@scenario
def exception_swallowed_by_forward_context(lib: ModuleType, cp: ModuleType, probe: Probe) -> dict[str, Any]:
    """2.8 never shows the exception to the forward context: it propagates unchanged, and the
    context is only closed (with GeneratorExit, which it swallows too) when the traceback goes."""
    x = T(lib, (3,), 0)

    class Swallow:
        def __enter__(self) -> None:
            probe.mark("forward context enter")

        def __exit__(self, *exc: Any) -> bool:
            probe.mark(f"forward context exit {exc[0].__name__ if exc[0] else None}")
            return True

    @probe.body
    def f(t: Any) -> Any:
        t.sin()
        raise ValueError("boom")

    seen = []
    try:
        cp.checkpoint(f, x, use_reentrant=False, context_fn=lambda: (Swallow(), contextlib.nullcontext()))
    except ValueError as e:
        seen.append(err(e))
    probe.set_phase("end")
    return {"seen": seen}


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
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_engine_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    compare(name, torch_oracle)
