"""Shared helpers of the in-place, view and indexing tests (``test_inplace_views.py``,
``test_indexing.py``): the NumPy arrays both libraries start from, and ``run_both``, which runs one
scenario with ``lib = engine`` and ``lib = torch`` and compares the records it returns."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

import engine

Record = dict[str, Any]
Scenario = Callable[[ModuleType], Record]

_RNG = np.random.default_rng(1234)
A = _RNG.uniform(0.5, 2.0, (3, 4))  # positive, so that pow/log formulas stay finite
B = _RNG.uniform(0.5, 2.0, (3, 4))
ROW = _RNG.uniform(-1.0, 1.0, 4)
G = _RNG.uniform(-1.0, 1.0, (3, 4))
MASK = _RNG.random((3, 4)) < 0.5
_RNG_PERM = _RNG.random((3, 4))
# The arrays of test_indexing.py, drawn here too: one generator in one order, so that no value
# depends on which test module is imported first.
X3 = _RNG.standard_normal((2, 3, 4))
_M = _RNG.random((3, 4)) < 0.5


def _graph(fn: Any, depth: int = 0) -> Any:
    """A grad_fn as nested (name, next_functions) tuples, with torch's C++ prefix normalised."""
    if fn is None:
        return None
    name = fn.name().replace("torch::", "engine::")
    if depth > 10:
        return name
    return (name, tuple((_graph(n, depth + 1), nr) for n, nr in fn.next_functions))


def _value(t: Any) -> Any:
    if t is None:
        return None
    a = t.detach().numpy()
    return (np.round(a, 12) if a.dtype.kind in "fc" else a).tolist()


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".replace("torch.", "engine.").replace("torch::", "engine::")


def run_both(scenario: Scenario, torch: ModuleType) -> None:
    ours, theirs = {}, {}
    for lib, rec in ((engine, ours), (torch, theirs)):
        try:
            rec.update(scenario(lib))
        except Exception as e:  # noqa: BLE001 - the error itself is compared
            rec["error"] = _error(e)
    assert ours.keys() == theirs.keys(), f"engine: {ours}\ntorch: {theirs}"
    for k in theirs:
        assert ours[k] == theirs[k], f"{k}:\n  engine: {ours[k]}\n  torch:  {theirs[k]}"


def _t(lib: ModuleType, a: np.ndarray, grad: bool = True) -> Any:
    return lib.tensor(a, dtype=lib.float64, requires_grad=grad)
