"""Differential tests against torch 2.8.0: dropout and the preserved RNG state, in-place ops
inside and outside the checkpointed function.

Scenarios are written once for ``torch`` and the engine and compared event by event against
torch 2.8.0; the harness (and what is compared) is in ``_vs_torch.py``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.utils._ckpt_probe import Probe
from tests.utils._vs_torch import A, T, compare, err, grads_or_error, rng_state_key, scenario_names, variants

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
    result = grads_or_error(out, x)
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


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.oracle
@pytest.mark.parametrize("name", scenario_names(__name__))
def test_engine_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    compare(name, torch_oracle)
