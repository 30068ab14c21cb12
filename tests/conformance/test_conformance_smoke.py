"""The conformance harness itself (scripts/conformance.py), on a few fast PyTorch tests, and its
static rules (tests/conformance/rules.py). The whole run is `make conformance`, not part of `make test`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conformance.rules import RULES, classify

ROOT = Path(__file__).resolve().parents[2]

# Checkpoint, hook and saved-tensor tests that are quick on both backends and pass on both.
SMOKE = [
    "TestCheckpoint.test_checkpoint",
    "TestCheckpoint.test_checkpoint_non_tensor",
    "TestCheckpoint.test_checkpoint_partial_grad",
    "TestCheckpoint.test_checkpoint_rng_cpu",
    "TestCheckpoint.test_checkpoint_valid",
    "TestNestedCheckpoint.test_nested_checkpoint_kwargs_early_stop_True",
    "TestNestedCheckpoint.test_nested_checkpoint_same_graph_early_stop_False",
    "TestNestedCheckpoint.test_nested_checkpoint_set_early_stop",
    "TestSelectiveActivationCheckpoint.test_policy_with_state",
    "TestSelectiveActivationCheckpoint.test_version_counter",
    "TestAutograd.test_checkpointing_without_reentrant_correct_grad",
    "TestAutograd.test_checkpoint_detects_non_determinism",
    "TestAutograd.test_hooks",
    "TestAutograd.test_tensor_hooks_inplace",
    "TestAutograd.test_saved_tensor_hooks_custom_function_intermediates",
]


@pytest.mark.oracle
def test_smoke_tests_pass_on_torch_and_on_the_engine(torch_oracle: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "outcomes.json"
    done = subprocess.run(
        [
            sys.executable,
            "scripts/conformance.py",
            "--no-report",
            "--json",
            str(out),
            "-j",
            "2",
            "--tests",
            *SMOKE,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    outcomes = {t["id"]: t for t in json.loads(out.read_text())}
    assert sorted(outcomes) == sorted(SMOKE)
    bad = {
        i: (t["outcome"], t["na"], t["torch"], t["engine"])
        for i, t in outcomes.items()
        if t["outcome"] != "pass"
    }
    assert not bad
    assert f"{len(SMOKE)}/{len(SMOKE)} PyTorch tests pass on the engine" in done.stdout


def test_shim_names_what_the_engine_lacks() -> None:
    """A missing name is lenient while a test file is imported, then raises EngineLacks when used;
    EngineLacks is no RuntimeError, so `assertRaises(RuntimeError)` cannot pass on it."""
    from tests.conformance import shim

    missing = shim.Missing("torch.autograd.forward_ad")
    shim.IMPORTING = True
    try:
        assert isinstance(missing.dual_level(), shim.Missing)
        assert not missing
    finally:
        shim.IMPORTING = False
    with pytest.raises(shim.EngineLacks, match=r"engine lacks torch\.autograd\.forward_ad\.dual_level"):
        missing.dual_level()
    assert not issubclass(shim.EngineLacks, RuntimeError)

    class Sub(shim.Missing("torch.utils._python_dispatch.TorchDispatchMode")):  # type: ignore[misc]
        pass

    with pytest.raises(shim.EngineLacks):
        Sub()


@pytest.mark.parametrize(
    ("source", "name", "reason"),
    [
        ("def test_x(self):\n    x = torch.ones(2, device='cuda')", "test_x", "accelerator"),
        ("@slowTest\ndef test_x(self):\n    pass", "test_x", "slow test"),
        ("def test_x(self):\n    torch.compile(f)(x)", "test_x", "torch.compile"),
        (
            "def test_x(self):\n    with torch.autograd.forward_ad.dual_level(): pass",
            "test_x",
            "forward-mode",
        ),
        ("def test_x(self):\n    class M(TorchDispatchMode): pass", "test_x", "Python dispatch"),
        ("def test_x(self):\n    x.to_sparse()", "test_x", "sparse"),
        ("def test_x(self):\n    threading.Thread(target=f)", "test_x", "threads"),
        ("def test_x(self):\n    with profile() as p: pass", "test_x", "profiler"),
        ("def test_x(self):\n    torch._C._functions.AccumulateGrad", "test_x", "internal C++"),
        ("def test_x(self, ctors):\n    ctors.ones(2)", "test_x_logging_tensor", "tensor subclasses"),
    ],
)
def test_rules_name_their_reason(source: str, name: str, reason: str) -> None:
    why = classify(source, name)
    assert why is not None and reason in why


@pytest.mark.parametrize(
    "source",
    [
        # What the engine claims: checkpoint, hooks, grad(), the torch._C names it mirrors.
        "def test_x(self):\n    y = checkpoint(f, x, use_reentrant=False)\n    y.sum().backward()",
        "def test_x(self):\n    x.register_hook(lambda g: g * 2)\n    torch.autograd.grad(y, x)",
        "def test_x(self):\n    torch._C._current_graph_task_id()",
        # Complex numbers are claimed (engine/ops/complex.py): no rule excludes them.
        "def test_x(self):\n    torch.randn(2, dtype=torch.cdouble).conj()",
        # A comment mentioning CUDA is no use of CUDA.
        "def test_x(self):\n    x = torch.ones(2)  # works on cuda too",
    ],
)
def test_rules_leave_what_the_engine_claims(source: str) -> None:
    assert classify(source, "test_x") is None


def test_rules_each_have_a_reason() -> None:
    assert len({r.reason for r in RULES if r.on == "source"}) == len([r for r in RULES if r.on == "source"])
    assert all(r.reason and r.pattern.pattern for r in RULES)
