"""Shared helpers of the ``engine.nn`` tests: run the same code in the engine and in torch from
the same NumPy arrays, and compare values, backward graphs, gradients and errors."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine

TOL = {"rtol": 1e-10, "atol": 1e-12}


def _graph(t: Any) -> Any:
    """The backward graph below ``t`` as nested ``(name, children)``, in engine spelling."""

    def walk(fn: Any) -> Any:
        if fn is None:
            return None
        return (fn.name().replace("torch::", "engine::"), tuple(walk(f) for f, _ in fn.next_functions))

    return walk(t.grad_fn)


def _leaf(lib: ModuleType, a: np.ndarray, grad: bool = True) -> Any:
    t = lib.from_numpy(np.array(a, copy=True))
    return t.requires_grad_(grad) if grad and t.dtype.is_floating_point else t


def _np(t: Any) -> np.ndarray:
    return np.array(t.detach().numpy(), copy=True)


def _close(a: Any, b: Any, what: str = "") -> None:
    if a is None or b is None:
        assert a is None and b is None, what
        return
    np.testing.assert_allclose(_np(a), _np(b), err_msg=what, **TOL)


def _run(lib: ModuleType, fn: Callable[..., Any], arrays: list[Any], seed: int = 0) -> dict[str, Any]:
    """Call ``fn(lib, *tensors)`` and backward a fixed cotangent; float arrays become leaves."""
    inputs = [_leaf(lib, a) if isinstance(a, np.ndarray) else a for a in arrays]
    out = fn(lib, *inputs)
    rng = np.random.default_rng(seed)
    cot = lib.from_numpy(rng.uniform(-1, 1, tuple(out.shape)))
    leaves = [t for t in inputs if hasattr(t, "requires_grad") and t.requires_grad]
    grads = lib.autograd.grad(out, leaves, cot, allow_unused=True) if out.requires_grad else []
    return {"out": out, "graph": _graph(out), "grads": grads}


def _compare(fn: Callable[..., Any], arrays: list[Any], torch: ModuleType) -> dict[str, Any]:
    ours, theirs = _run(engine, fn, arrays), _run(torch, fn, arrays)
    _close(ours["out"], theirs["out"], "output")
    assert str(ours["out"].dtype).replace("engine", "torch") == str(theirs["out"].dtype)
    assert ours["graph"] == theirs["graph"]
    assert len(ours["grads"]) == len(theirs["grads"])
    for i, (a, b) in enumerate(zip(ours["grads"], theirs["grads"], strict=True)):
        _close(a, b, f"grad {i}")
    return ours


def _rand(*shape: int, seed: int = 0, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape)


def _error(fn: Callable[[], Any]) -> tuple[str, str]:
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type itself is compared
        fn()
    return type(info.value).__name__, str(info.value).replace("torch.", "engine.").replace(
        "torch ", "engine "
    )


def _twin(make: Callable[[ModuleType], Any], torch: ModuleType) -> tuple[Any, Any]:
    """The same module built in both libraries, float64, torch's weights copied from ours."""
    ours = make(engine).double()
    theirs = make(torch).double()
    theirs.load_state_dict({k: torch.from_numpy(_np(v)) for k, v in ours.state_dict().items()})
    return ours, theirs


def _compare_grads(ours: Any, theirs: Any) -> None:
    mine = dict(ours.named_parameters())
    other = dict(theirs.named_parameters())
    assert list(mine) == list(other)
    for name, p in other.items():
        _close(mine[name].grad, p.grad, f"grad of {name}")
