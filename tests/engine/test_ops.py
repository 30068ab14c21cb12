"""The op table against torch 2.8.0: one test per (op, sample) for everything an entry promises.

For each sample, both libraries get the same input arrays and the same cotangents. Compared:
forward values and dtypes, the grad_fn name, which outputs require grad, first- and second-order
gradients, and the saved tensors: how many, their values, in which order they were packed and
in which order backward unpacked them (see Note [Saved variable order]).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import engine
from engine.ops import OPS
from engine.ops._dispatch import Op
from tests.engine._oracle import make_arrays, run, torch_callable

CASES = [
    pytest.param(name, i, id=f"{name}-{i}" + (f"-{s.note.replace(' ', '_')}" if s.note else ""))
    for name, entry in sorted(OPS.items())
    if entry.samples is not None
    for i, s in enumerate(entry.samples())
]


def _tol(a: np.ndarray) -> dict[str, float]:
    if a.dtype in (np.float32, np.complex64):
        return {"rtol": 1e-5, "atol": 1e-5}
    return {"rtol": 1e-10, "atol": 1e-10}


def _close(ours: np.ndarray | None, theirs: np.ndarray | None, what: str) -> None:
    if theirs is None or ours is None:
        assert ours is None and theirs is None, f"{what}: engine {ours is None}, torch {theirs is None}"
        return
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != torch {theirs.shape}"
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != torch {theirs.dtype}"
    np.testing.assert_allclose(ours, theirs, err_msg=what, **_tol(theirs))


def test_every_op_has_samples() -> None:
    missing = [n for n, e in OPS.items() if e.samples is None and isinstance(e, Op) and not _internal(n)]
    assert not missing, f"ops without sample inputs (so untested): {missing}"


def _internal(name: str) -> bool:
    # Backward helpers exist for double backward; they are tested through the ops that use them.
    return name.endswith("_backward") or name.startswith("_") or name.endswith("_") or "_." in name


@pytest.mark.oracle
@pytest.mark.parametrize(("name", "index"), CASES)
def test_op_matches_torch(name: str, index: int, torch_oracle: ModuleType) -> None:
    entry = OPS[name]
    assert entry.samples is not None
    sample = entry.samples()[index]
    arrays = make_arrays(sample, seed=index)
    ours = run(engine, entry, sample, arrays, seed=index)
    theirs = run(torch_oracle, torch_callable(torch_oracle, entry), sample, arrays, seed=index)
    if theirs.error and not ours.error:
        pytest.fail(f"torch raised {theirs.error} but the engine did not")
    assert (ours.error is None) == (theirs.error is None), f"engine: {ours.error}; torch: {theirs.error}"
    assert len(ours.outputs) == len(theirs.outputs)
    for i, (a, b) in enumerate(zip(ours.outputs, theirs.outputs, strict=True)):
        _close(a, b, f"output {i}")
    expected_name = theirs.grad_fn.replace("torch::", "engine::") if theirs.grad_fn else None
    assert ours.grad_fn == expected_name
    assert ours.requires_grad == theirs.requires_grad
    assert len(ours.grads) == len(theirs.grads)
    for i, (a, b) in enumerate(zip(ours.grads, theirs.grads, strict=True)):
        _close(a, b, f"gradient of input {i}")
    if theirs.gradgrads is not None:
        assert ours.gradgrads is not None, "torch supports double backward here, the engine did not"
        for i, (a, b) in enumerate(zip(ours.gradgrads, theirs.gradgrads, strict=True)):
            _close(a, b, f"second-order gradient of input {i}")
    assert len(ours.packs) == len(theirs.packs), (
        f"saved {len(ours.packs)} tensors, torch saved {len(theirs.packs)}"
    )
    for i, (a, b) in enumerate(zip(ours.packs, theirs.packs, strict=True)):
        _close(a, b, f"saved tensor {i} (pack order)")
    assert ours.unpacks == theirs.unpacks, "unpack order"
