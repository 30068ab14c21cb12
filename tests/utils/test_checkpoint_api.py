"""``engine.utils.checkpoint``, non-reentrant: the ``TestAutograd`` checkpoint tests of
test/test_autograd.py, PyTorch's RNG tests of test/test_utils.py ``TestCheckpoint``, the 2.9+
``GraphExecGroup`` the engine adds (with the values torch 2.13.0 gives) and the public API.

Ported from PyTorch with the upstream assertions; sizes are smaller (NumPy), ``nn.Linear`` is the
engine's, CUDA memory becomes holders / recomputed tensors alive. The other
``test_checkpoint_*.py`` files cover the rest of ``engine.utils.checkpoint``.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import numpy as np
import pytest

import engine
import engine.nn as nn
import engine.utils.checkpoint as cp
from engine.ops import DispatchMode
from engine.utils.checkpoint import CheckpointError, GraphExecGroup, checkpoint
from tests.utils._checkpoint_helpers import assert_equal

pytestmark = pytest.mark.usefixtures("engine_seed")


# === test/test_autograd.py: TestAutograd =========================================================


def test_checkpointing_without_reentrant_custom_function_works() -> None:
    msg = "Unpack is being triggered for a tensor that was already unpacked once"
    raised = []

    class MyFunc(engine.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any, z: Any) -> Any:
            w = x * y * z
            out = w + w
            ctx.save_for_backward(x, y, z, w, out)
            return out

        @staticmethod
        def backward(ctx: Any, grad_out: Any) -> Any:
            x, y, z, _w, _out = ctx.saved_tensors
            # Accessing the saved Tensors a second time will raise because
            # recomputed tensors get cleared as soon as they are unpacked.
            # A recomputation is only triggered if your backward has a new
            # graph-task id.
            with pytest.raises(RuntimeError, match=msg):
                ctx.saved_tensors
            raised.append(True)
            return x, y, z

    x = engine.tensor(1.0, requires_grad=True)
    y = engine.tensor(2.0, requires_grad=True)
    z = engine.tensor(3.0, requires_grad=True)

    def foo(x: Any, y: Any, z: Any) -> Any:
        x = x * y * z
        y = y * y * z
        z = z * z
        return MyFunc.apply(x, y, z)

    out = checkpoint(foo, x, y, z, use_reentrant=False)
    out.sum().backward()
    assert raised == [True]


def test_checkpointing_without_reentrant_with_context_fn() -> None:
    class VerboseDispatchMode(DispatchMode):
        def __init__(self) -> None:
            self.operators: list[str] = []

        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            self.operators.append(func.name)
            return func(*args, **(kwargs or {}))

    x = engine.tensor(1.0, requires_grad=True)
    verbose_mode = VerboseDispatchMode()

    def context_fn() -> Any:
        return verbose_mode, contextlib.nullcontext()

    out = checkpoint(lambda x: x.exp(), x, use_reentrant=False, context_fn=context_fn)
    assert verbose_mode.operators == ["exp"]

    verbose_mode.operators = []

    def context_fn2() -> Any:
        return contextlib.nullcontext(), verbose_mode

    out = checkpoint(lambda x: x.exp(), x, use_reentrant=False, context_fn=context_fn2)
    out.backward()
    # the detach is the recomputation pack hook's
    assert verbose_mode.operators == ["exp", "detach"]

    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(lambda x: x.sin(), x, use_reentrant=True, context_fn=context_fn2)


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_checkpointing_without_reentrant(input_requires_grad: bool) -> None:
    num_inp, nz_inp, nz_bottleneck = 20, 10, 50
    module = nn.Sequential(nn.Linear(nz_inp, nz_bottleneck), nn.ReLU(), nn.Linear(nz_bottleneck, nz_inp))

    # Module holder for testing activation checkpointing with no_reentrant
    # supports kwargs.
    class MyModule(nn.Module):
        def __init__(self, mod: nn.Module) -> None:
            super().__init__()
            self.module = mod

        def forward(self, data: Any) -> Any:
            return self.module(data)

    module = MyModule(mod=module)
    # Run model with and without checkpointing and verify gradients are
    # equivalent, regardless of if inputs require grads or not.
    module_copy = copy.deepcopy(module)

    feat_combined = []
    feat_combined_no_checkpoint = []
    for _ in range(num_inp):
        data_r = engine.rand(1, nz_inp)
        data_r.requires_grad = input_requires_grad
        feat_r = checkpoint(module, data=data_r, use_reentrant=False)
        feat_combined.append(feat_r)
        feat_combined_no_checkpoint.append(module_copy(data_r))

    mean_combined = engine.stack(feat_combined).mean()
    mean_combined.backward()
    mean_combined_no_checkpoint = engine.stack(feat_combined_no_checkpoint).mean()
    mean_combined_no_checkpoint.backward()

    for checkpoint_param, param in zip(module.parameters(), module_copy.parameters(), strict=True):
        assert_equal(checkpoint_param.grad, param.grad)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpointing_without_reentrant_detached_tensor(use_reentrant: bool) -> None:
    class NoGradModule(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 2, bias=False)
            self.lin2 = nn.Linear(2, 2, bias=False)

        def forward(self, x: Any) -> Any:
            with engine.no_grad():
                return self.lin2(self.linear(x))

    module = NoGradModule()
    a = engine.randn(2, 2, requires_grad=True)
    for _ in range(3):
        err_ctx: Any = (
            pytest.raises(RuntimeError, match="none of output has requires_grad=True")
            if use_reentrant
            else contextlib.nullcontext()
        )
        with err_ctx:
            # out does not require grad
            out = checkpoint(module, a, use_reentrant=use_reentrant)
            # Make loss require grad, otherwise we would run into
            # "element 0 of tensors does not require grad and does not have a grad_fn"
            out += a
            out.sum().backward()


def test_checkpointing_without_reentrant_saved_object_identity() -> None:
    x_backward = None

    class Test(engine.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any) -> Any:
            ctx.save_for_backward(y)
            return x

        @staticmethod
        def backward(ctx: Any, x: Any) -> Any:
            nonlocal x_backward
            (x_backward,) = ctx.saved_tensors
            return x, None

    a = engine.tensor(1.0, requires_grad=True)
    b = engine.tensor(1.0, requires_grad=False)

    Test.apply(a, b).backward()
    assert b is x_backward

    x_backward = None
    checkpoint(Test.apply, a, b, use_reentrant=False).backward()
    # the recomputation pack hook does not detach a tensor that does not require grad
    assert b is x_backward


def test_checkpointing_without_reentrant_correct_grad() -> None:
    a = engine.randn(2, 2, requires_grad=True)

    b = engine.exp(a).sum()
    b.backward()
    b_grad = a.grad

    a.grad = None
    c = checkpoint(engine.exp, a, use_reentrant=False).sum()
    c.backward()
    c_grad = a.grad

    a.grad = None
    d = checkpoint(engine.exp, a, use_reentrant=False).sum()
    (d_grad,) = engine.autograd.grad(d, (a,))

    assert_equal(b_grad, c_grad)
    assert_equal(b_grad, d_grad)


def test_checkpointing_without_reentrant_parameter_used_in_an_out() -> None:
    w = engine.randn(10, 10, requires_grad=True)
    count = 0

    def hook(grad: Any) -> None:
        nonlocal count
        count += 1

    w.register_hook(hook)
    x = engine.rand(10, 10, requires_grad=True)
    h = w * x  # Using w outside the checkpoint
    out = checkpoint(lambda x: w * x, h, use_reentrant=False)  # Using w inside the checkpoint

    out.sum().backward()
    # should only call hook once
    assert count == 1


def test_checkpointing_without_reentrant_arbitrary_input_output() -> None:
    class MyModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(5, 5, bias=False)

        def forward(self, dict_input: dict[str, Any]) -> dict[str, Any]:
            tensor = dict_input["tensor"]
            return {"result": self.layer(tensor)}

    model_no_checkpoint = MyModel()
    model_checkpoint_without_reentrant = copy.deepcopy(model_no_checkpoint)

    inp = {"tensor": engine.randn(5, 5)}

    out_no_checkpoint = model_no_checkpoint(inp)["result"].sum()
    out_checkpoint = checkpoint(model_checkpoint_without_reentrant, inp, use_reentrant=False)["result"].sum()
    assert_equal(out_checkpoint, out_no_checkpoint)

    out_no_checkpoint.backward()
    out_checkpoint.backward()

    for param, checkpoint_param in zip(
        model_no_checkpoint.parameters(), model_checkpoint_without_reentrant.parameters(), strict=True
    ):
        assert_equal(param.grad, checkpoint_param.grad)


def test_checkpoint_graph_execution_group() -> None:
    # GraphExecGroup is PyTorch 2.9+; the counts are torch 2.13.0's.
    def run(use_graph_execution_group: bool) -> int:
        counter = [0]

        def fn(x: Any) -> tuple[Any, Any]:
            counter[0] += 1
            y = x.sin().cos()
            z = y.sin().cos()
            return y, z

        x = engine.randn(3, 3, requires_grad=True)
        y, z = checkpoint(fn, x, use_reentrant=False)
        group = GraphExecGroup()
        ctx: Any = group if use_graph_execution_group else contextlib.nullcontext()
        with ctx:
            (grad_y,) = engine.autograd.grad(z, inputs=(y,), grad_outputs=(engine.ones(3, 3),))
            engine.autograd.grad(y, inputs=(x,), grad_outputs=(grad_y,))
        return counter[0]

    assert run(use_graph_execution_group=True) == 2
    assert run(use_graph_execution_group=False) == 3

    # Test the not actually disjoint case (using retain_graph=True since
    # otherwise autograd itself will catch this)
    def fn(x: Any) -> Any:
        return x.sin().cos()

    x = engine.randn(3, 3, requires_grad=True)
    out = checkpoint(fn, x, use_reentrant=False)
    with GraphExecGroup():
        # Under this context, we will enforce that two backward are disjoint
        # even if retain_graph=True.
        out.sum().backward(retain_graph=True)
        with pytest.raises(RuntimeError, match="Performing two backward calls that overlap") as info:
            out.sum().backward()
    assert isinstance(info.value, CheckpointError)
    assert str(info.value) == (
        "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
        "Performing two backward calls that overlap (i.e. require the same saved activation in order to "
        "compute gradients) is not allowed while under the torch.utils.checkpoint.GraphExecGroup context. "
        "If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise please "
        "open an issue with details on your use case."
    )


def test_graph_exec_group_cannot_nest() -> None:
    outer = GraphExecGroup()
    with outer:
        with pytest.raises(RuntimeError) as info, GraphExecGroup():
            pass
        assert str(info.value) == f"GraphExecGroup contexts cannot be nested. Already inside group {outer!r}"
        assert GraphExecGroup._get_current_group() is outer
    assert GraphExecGroup._get_current_group() is None


# === test/test_utils.py: TestCheckpoint ============================================================


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_rng_cpu(use_reentrant: bool) -> None:
    # upstream: reentrant only, 20000 elements
    for _ in range(5):
        inp = engine.randn(2000).requires_grad_()
        phase1 = nn.Dropout()
        phase2 = nn.Dropout()

        def run_fn(input: Any) -> Any:  # noqa: A002
            return phase2(input)

        state = engine.get_rng_state()

        out = phase1(inp)
        out = checkpoint(run_fn, out, use_reentrant=use_reentrant)
        out.sum().backward()
        grad_with_checkpointing = inp.grad

        engine.set_rng_state(state)

        inp.grad = None

        out = phase1(inp)
        out = run_fn(out)
        out.sum().backward()
        grad_no_checkpointing = inp.grad

        assert_equal(grad_with_checkpointing, grad_no_checkpointing)


def test_checkpoint_not_preserve_rng_state_and_without_reentrant() -> None:
    inp = engine.randn(2000).requires_grad_()
    layer = nn.Dropout()

    def run_fn(input: Any) -> Any:  # noqa: A002
        return layer(input)

    state = engine.get_rng_state()
    out = checkpoint(run_fn, inp, use_reentrant=False, preserve_rng_state=False)
    out.sum().backward()
    # This should run without error; the recomputation drew a new mask, so the gradient is not
    # the forward's mask (silently wrong, as in PyTorch) and the global RNG moved on.
    engine.set_rng_state(state)
    mask = run_fn(engine.ones(2000))
    assert not np.allclose(inp.grad.numpy(), mask.numpy())


# === the engine's additions ========================================================================


def test_public_api() -> None:
    assert engine.utils.checkpoint is cp
    for name in cp.__all__:
        assert hasattr(cp, name), name
    assert cp._enable_checkpoint_early_stop is None  # 2.9+: defer to the early_stop argument
    assert issubclass(CheckpointError, RuntimeError)
