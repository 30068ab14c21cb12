"""Differential test: each bundled scenario's checkpoint events, engine vs torch 2.8.0.

The engine side is the scenario's trace (``run_scenario``), reduced to the checkpoint events
(``checkpoint_events`` of ``tests/trace/_probe_view.py``). The torch side runs the same file
against real torch: the scenario imports ``engine``, and a small import shim hands it ``torch``
instead (``engine.utils.checkpoint`` becomes ``torch.utils.checkpoint``, and so on), while
``tests/utils/_ckpt_probe.py`` instruments torch's checkpoint internals. Both sides are written in the probe's notation (``frame f#0``,
``pack f#0[1] [3]``, ``unpack``, ``recompute``, ``rpack``, ``early_stop``, ``recompute_end``) and
must be equal, in order. Holder deaths are left out: their order among other events may differ.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import importlib
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app.runner import ScenarioInfo, list_scenarios, run_scenario
from tests.trace._probe_view import checkpoint_events
from tests.utils._ckpt_probe import Probe

pytestmark = pytest.mark.oracle

SCENARIOS = list_scenarios()


def _engine_as(lib: str) -> Callable[..., ModuleType]:
    """An ``__import__`` that resolves ``engine`` and ``engine.*`` to ``lib`` and ``lib.*``."""
    real_import = builtins.__import__

    def shim(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> ModuleType:
        if level == 0 and (name == "engine" or name.startswith("engine.")):
            module = importlib.import_module(lib + name[len("engine") :])
            return module if fromlist else importlib.import_module(lib)
        return real_import(name, globals, locals, fromlist, level)

    return shim


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    # As in tests/utils: holders die by reference counting only, at the same points in both runs.
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def torch_checkpoint_events(path: Path) -> tuple[list[str], str | None]:
    """Run a scenario file against real torch; its checkpoint events and the error it raised."""
    cp = importlib.import_module("torch.utils.checkpoint")
    probe = Probe(cp)
    scenario_builtins = dict(vars(builtins))
    scenario_builtins["__import__"] = _engine_as("torch")
    scenario_builtins["print"] = lambda *args, **kwargs: None
    namespace = {"__name__": "__main__", "__file__": str(path), "__builtins__": scenario_builtins}
    code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
    error = None
    with _no_cyclic_gc(), probe.installed(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(code, namespace)
        except Exception as e:
            error = type(e).__name__
        namespace.clear()
    return probe.events, error


@pytest.mark.parametrize("info", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_checkpoint_events_match_torch(info: ScenarioInfo, torch_oracle: ModuleType) -> None:
    theirs, torch_error = torch_checkpoint_events(info.path)
    result = run_scenario(info.path, trusted=True)
    assert result.trace is not None, result.error
    ours = checkpoint_events(result.trace["events"])
    assert (result.error.type if result.error else None) == torch_error
    if ours != theirs:
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None)
        first = min(len(ours), len(theirs)) if first is None else first
        lo = max(0, first - 3)
        pytest.fail(
            f"{info.id}: checkpoint events differ at {first} (engine {len(ours)}, torch {len(theirs)})\n"
            f"  engine: {ours[lo : first + 4]}\n  torch:  {theirs[lo : first + 4]}"
        )


def test_every_scenario_but_the_baseline_checkpoints(torch_oracle: ModuleType) -> None:
    # The comparison above is only meaningful if the scenarios produce checkpoint events.
    empty = []
    for info in SCENARIOS:
        events, _ = torch_checkpoint_events(info.path)
        if not any(e.startswith("frame ") for e in events):
            empty.append(info.id)
    # No frames by design: no checkpoint at all, and a reentrant checkpoint only (it has none).
    assert empty == ["mlp_memory_none", "pitfall_no_grad_inputs_broken"]


def test_the_notation_names_frames_in_creation_order() -> None:
    events = [
        {"kind": "frame_new", "frame": 0, "label": "outer", "created_in": "forward"},
        {"kind": "pack", "frame": 0, "index": 0, "shape": [0]},
        {"kind": "recompute_start", "frame": 0},
        {"kind": "frame_new", "frame": 1, "label": "inner", "created_in": {"recompute": 0}},
        {"kind": "rpack", "frame": 0, "index": 0, "outcome": "skip", "shape": None},
        {"kind": "rpack", "frame": 0, "index": 1, "outcome": "extra", "shape": [2]},
        {"kind": "early_stop", "frame": 0, "count": 1, "total": 1},
        {"kind": "recompute_end", "frame": 0},
        {"kind": "holder_gc", "frame": 0, "index": 0},
    ]
    assert checkpoint_events(events) == [
        "frame outer#0",
        "pack outer#0[0] [0]",
        "recompute outer#0",
        "frame inner#1 in_recompute(outer#0)",
        "rpack outer#0[0] skip",
        "rpack outer#0[extra] [2]",
        "early_stop outer#0 1/1",
        "recompute_end outer#0",
    ]
