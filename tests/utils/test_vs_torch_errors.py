"""Differential tests against torch 2.8.0: exceptions, determinism checks, every
``CheckpointError``, bad arguments and backwards through freed graphs.

Scenarios are written once for ``torch`` and the engine and compared event by event against
torch 2.8.0; the harness (and what is compared) is in ``_vs_torch.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tests.utils._ckpt_probe import Probe
from tests.utils._vs_torch import A, T, compare, err, grads_or_error, scenario, scenario_names, variants

# --- exceptions in the checkpointed function -----------------------------------------------------


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
    result = grads_or_error(out, x)
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


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.oracle
@pytest.mark.parametrize("name", scenario_names(__name__))
def test_engine_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    compare(name, torch_oracle)
