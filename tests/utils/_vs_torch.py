"""The harness of the differential tests ``test_vs_torch_*.py``: each scenario runs in torch 2.8.0
and in the engine, instrumented the same way.

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

import engine
import engine.utils.checkpoint as engine_cp
from tests.utils._ckpt_probe import Probe

Scenario = Callable[[ModuleType, ModuleType, Probe], dict[str, Any]]
SCENARIOS: dict[str, Scenario] = {}
# The test module that registered each scenario: each ``test_vs_torch_*.py`` runs its own.
_MODULES: dict[str, str] = {}


def _register(name: str, fn: Scenario, module: str) -> None:
    assert name not in SCENARIOS, f"scenario {name} registered twice"
    SCENARIOS[name] = fn
    _MODULES[name] = module


def scenario(fn: Scenario) -> Scenario:
    _register(fn.__name__, fn, fn.__module__)
    return fn


def variants(**cases: dict[str, Any]) -> Callable[[Callable[..., dict[str, Any]]], None]:
    """Register one scenario per keyword: ``name=dict(of keyword arguments)``."""

    def register(fn: Callable[..., dict[str, Any]]) -> None:
        for suffix, kwargs in cases.items():
            _register(f"{fn.__name__}[{suffix}]", functools.partial(fn, **kwargs), fn.__module__)

    return register


def scenario_names(module: str) -> list[str]:
    """The scenarios registered by the test module ``module`` (its ``__name__``), sorted."""
    return sorted(name for name, registered_by in _MODULES.items() if registered_by == module)


# --- helpers usable from both libraries ----------------------------------------------------------


def T(lib: ModuleType, shape: tuple[int, ...], seed: int, requires_grad: bool = True) -> Any:  # noqa: N802
    rng = np.random.default_rng(seed)
    return lib.tensor(rng.uniform(-1.0, 1.0, shape), dtype=lib.float64, requires_grad=requires_grad)


def A(t: Any) -> np.ndarray | None:  # noqa: N802
    return None if t is None else np.array(t.detach().numpy(), copy=True)


def err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def grads_or_error(out: Any, *inputs: Any) -> Any:
    """``out.sum().backward()``, then the gradient of the one input (a list for several), or the
    error's text if the backward raised a ``RuntimeError``."""
    try:
        out.sum().backward()
    except RuntimeError as e:
        return err(e)
    grads = [A(t.grad) for t in inputs]
    return grads[0] if len(inputs) == 1 else grads


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
        # Both sides: the engine's messages cite torch's modules as torch does ("torch.utils.checkpoint:
        # ..."), while its reprs and type names are its own ("engine.float32").
        assert _normalize(ours) == _normalize(theirs), (
            f"{what}:\n engine: {ours!r}\n torch:  {_normalize(theirs)!r}"
        )
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
