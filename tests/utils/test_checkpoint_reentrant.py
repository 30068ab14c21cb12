"""``engine.utils.checkpoint`` with ``use_reentrant=True`` (and the warning when it is not passed):
the reentrant tests of test/test_autograd.py ``TestAutograd`` and test/test_utils.py
``TestCheckpoint``, plus PyTorch 2.8's exact error and warning texts (``torch`` replaced by
``engine``).

Ported from PyTorch with the upstream assertions; sizes are smaller (NumPy), ``nn.Linear`` is the
engine's, CUDA memory becomes holders / recomputed tensors alive. The other
``test_checkpoint_*.py`` files cover the rest of ``engine.utils.checkpoint``.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import pytest

import engine
import engine.nn as nn
from engine.utils.checkpoint import checkpoint
from tests.utils._checkpoint_helpers import USE_REENTRANT_WARNING, assert_equal

pytestmark = pytest.mark.usefixtures("engine_seed")


# === test/test_autograd.py: TestAutograd =========================================================


def test_checkpointing() -> None:
    # reentrant smoke test (upstream: 2000 inputs and a 1000-wide bottleneck)
    num_inp, nz_inp, nz_bottleneck = 50, 10, 100
    module = nn.Sequential(nn.Linear(nz_inp, nz_bottleneck), nn.ReLU(), nn.Linear(nz_bottleneck, nz_inp))
    feat_combined = []
    for _ in range(num_inp):
        data_r = engine.rand(1, nz_inp)
        data_r.requires_grad = True
        feat_r = checkpoint(module, data_r, use_reentrant=True)
        feat_combined.append(feat_r)
    mean_combined = engine.stack(feat_combined).mean()
    mean_combined.backward()
    assert all(p.grad is not None for p in module.parameters())


def test_checkpoint_warns_if_use_reentrant_not_passed_explcitly() -> None:
    a = engine.randn(1, requires_grad=True)

    # Passing explicitly should not warn
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(lambda x: x, a, use_reentrant=False)

    # Not passing explicitly warns
    with pytest.warns(UserWarning) as record:
        checkpoint(lambda x: x, a)
    assert [str(w.message) for w in record] == [USE_REENTRANT_WARNING]
    assert record[0].filename == __file__  # stacklevel=2: the caller's line


def test_checkpoint_valid_reset_on_error() -> None:
    a = engine.randn(2, 2, requires_grad=True)

    with pytest.raises(Exception, match=r"torch\.utils\.checkpoint is incompatible"):
        b = checkpoint(engine.exp, a, use_reentrant=True).sum()
        engine.autograd.grad(b, (a,))

    c = checkpoint(engine.exp, a, use_reentrant=True).sum()
    c.backward()
    assert_equal(a.grad, a.exp())


# === test/test_utils.py: TestCheckpoint ============================================================


def test_checkpoint_non_tensor() -> None:
    def run_fn(tensor1: Any, tensor2: Any) -> Any:
        if tensor2 is None:
            return tensor1
        return tensor1 + tensor2

    input_var = engine.randn(1, 100, requires_grad=True)
    out = checkpoint(run_fn, input_var, None, use_reentrant=True)
    out.sum().backward()
    assert_equal(input_var.grad, engine.ones(1, 100))


def test_checkpoint_non_tensor_inputs_outputs() -> None:
    def foo(t1: Any, t2: Any, scale: int, t3: Any) -> tuple[Any, ...]:
        t4 = t1 + t2 * t3
        t5 = t1 * t2 + t3
        t4 *= scale
        t5 *= scale
        return scale, t4, None, True, t5, "bar", t1

    t1 = engine.rand(10, requires_grad=True)
    t2 = engine.rand(10, requires_grad=True)
    t3 = engine.rand(10)
    scale = random.randint(0, 10)
    res = checkpoint(foo, t1, t2, scale, t3, use_reentrant=True)
    assert scale == res[0]
    assert_equal((t1 + t2 * t3) * scale, res[1])
    assert res[2] is None
    assert res[3] is True
    assert_equal((t1 * t2 + t3) * scale, res[4])
    assert res[5] == "bar"
    assert_equal(t1, res[6])

    # Validate running backward.
    res[1].sum().backward(retain_graph=True)
    res[4].sum().backward(retain_graph=True)
    res[6].sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        res[6].sum().backward()
    t1_grad = t1.grad
    t2_grad = t2.grad

    # Reset grads, run without checkpoint and validate we receive same grads.
    t1.grad = None
    t2.grad = None
    res = foo(t1, t2, scale, t3)
    engine.autograd.backward([res[1].sum(), res[4].sum(), res[6].sum()])
    assert_equal(t1.grad, t1_grad)
    assert_equal(t2.grad, t2_grad)


def test_checkpoint_no_tensors() -> None:
    def foo(t1: float, t2: float, scale: int, t3: float) -> tuple[Any, ...]:
        t4 = t1 + t2 * t3
        t5 = t1 * t2 + t3
        t4 *= scale
        t5 *= scale
        return scale, t4, None, True, t5, "bar", t1

    t1 = random.random()
    t2 = random.random()
    t3 = random.random()
    scale = random.randint(0, 10)
    with pytest.warns(
        UserWarning, match="^None of the inputs have requires_grad=True. Gradients will be None$"
    ):
        res = checkpoint(foo, t1, t2, scale, t3, use_reentrant=True)
    assert res == (scale, (t1 + t2 * t3) * scale, None, True, (t1 * t2 + t3) * scale, "bar", t1)


def test_checkpoint_partial_grad() -> None:
    def run_fn(tensor1: Any, tensor2: Any) -> tuple[Any, Any]:
        # tensor 2 is used for other application logic
        return tensor1, tensor2

    input_var = engine.randn(1, 4, requires_grad=True)
    input_var2 = engine.randn(1, 4, requires_grad=False)
    out = checkpoint(run_fn, input_var, input_var2, use_reentrant=True)
    out[0].sum().backward()

    def run_fn2(tensor1: Any, tensor2: Any) -> Any:
        return tensor1

    input_var = engine.randn(1, 4, requires_grad=False)
    input_var2 = engine.randn(1, 4, requires_grad=True)
    with pytest.raises(
        RuntimeError, match=r"^none of output has requires_grad=True, this checkpoint\(\) is not necessary$"
    ):
        out = checkpoint(run_fn2, input_var, input_var2, use_reentrant=True)
        out.sum().backward()


# === texts, 2.8 behaviours and the engine's additions ===============================================


def test_reentrant_incompatible_with_grad_and_inputs() -> None:
    x = engine.randn(2, requires_grad=True)
    expected = (
        "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an `inputs` "
        "parameter to .backward(). To resolve this error, you can either set use_reentrant=False, or call "
        ".backward() without passing the `inputs` argument."
    )
    out = checkpoint(engine.exp, x, use_reentrant=True)
    with pytest.raises(RuntimeError) as info:
        out.sum().backward(inputs=[x])
    assert str(info.value) == expected
    out = checkpoint(engine.exp, x, use_reentrant=True)
    with pytest.raises(RuntimeError) as info:
        engine.autograd.grad(out.sum(), x)
    assert str(info.value) == expected
