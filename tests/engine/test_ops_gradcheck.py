"""Every op of the op table against finite differences: ``gradcheck`` and ``gradgradcheck``.

This needs no torch: it checks the engine's derivative formulas against the engine's own forward
kernels, the way PyTorch's OpInfo tests run gradcheck over every op. Samples that declare
``gradgrad=False`` (ops whose gradient is not differentiable) skip the second-order check.
"""

from __future__ import annotations

from typing import Any

import pytest

import engine
from engine.autograd import gradcheck, gradgradcheck
from engine.ops import OPS
from tests.engine._oracle import build, make_arrays


def _differentiable_call(name: str, index: int) -> tuple[Any, list[Any], bool] | None:
    entry = OPS[name]
    assert entry.samples is not None
    sample = entry.samples()[index]
    arrays = make_arrays(sample, seed=index)
    args, kwargs, leaves = build(engine, sample, arrays)
    if (
        not sample.gradcheck
        or not leaves
        or any(leaf.dtype not in (engine.float64, engine.complex128) for leaf in leaves)
    ):
        return None
    positions = []
    for leaf in leaves:
        for i, a in enumerate(args):
            if a is leaf:
                positions.append(("arg", i, None))
                break
            if isinstance(a, list) and any(x is leaf for x in a):
                positions.append(("list", i, next(j for j, x in enumerate(a) if x is leaf)))
                break
        else:
            key = next(k for k, v in kwargs.items() if v is leaf)
            positions.append(("kw", key, None))

    def fn(*inputs: Any) -> Any:
        call_args = [list(a) if isinstance(a, list) else a for a in args]
        call_kwargs = dict(kwargs)
        for (kind, where, sub), value in zip(positions, inputs, strict=True):
            if kind == "arg":
                call_args[where] = value
            elif kind == "list":
                call_args[where][sub] = value
            else:
                call_kwargs[where] = value
        if getattr(entry, "is_inplace", False):
            # In-place ops cannot modify a leaf: differentiate through a copy of self.
            call_args[0] = call_args[0].clone()
        out = entry(*call_args, **call_kwargs)
        if isinstance(out, (tuple, list)):
            return tuple(o for o in out if isinstance(o, engine.Tensor) and o.requires_grad)
        return out

    try:
        probe = fn(*leaves)
    except (RuntimeError, IndexError, ValueError, TypeError):
        return None  # a sample that checks an error message (test_ops compares it with torch)
    outputs = probe if isinstance(probe, tuple) else (probe,)
    if not any(isinstance(o, engine.Tensor) and o.requires_grad for o in outputs):
        return None  # comparisons, argmax...: nothing to differentiate
    return fn, leaves, sample.gradgrad


# Only samples with something to differentiate: a float64/complex128 input that requires grad
# and an output that requires grad (comparisons, argmax and error samples are left out).
CASES = [
    pytest.param(name, i, id=f"{name}-{i}")
    for name, entry in sorted(OPS.items())
    if entry.samples is not None
    for i, _ in enumerate(entry.samples())
    if _differentiable_call(name, i) is not None
]


def test_most_samples_are_gradchecked() -> None:
    total = sum(len(e.samples()) for e in OPS.values() if e.samples is not None)
    assert len(CASES) > 0.6 * total, f"only {len(CASES)} of {total} samples are gradchecked"


@pytest.mark.parametrize(("name", "index"), CASES)
def test_op_gradient_matches_finite_differences(name: str, index: int) -> None:
    call = _differentiable_call(name, index)
    assert call is not None
    fn, leaves, check_second_order = call
    assert gradcheck(fn, tuple(leaves), raise_exception=True)
    if check_second_order:
        assert gradgradcheck(fn, tuple(leaves), raise_exception=True)
