"""``engine.utils.checkpoint``: PyTorch's own checkpoint tests, ported, plus the texts of 2.8.

- The ``TestAutograd`` checkpoint tests of test/test_autograd.py and ``TestCheckpoint`` of
  test/test_utils.py, with the upstream assertions. Sizes are smaller (NumPy), ``nn.Linear`` is
  the engine's, CUDA memory becomes holders / recomputed tensors alive.
- Exact error and warning texts (PyTorch 2.8's with ``torch`` replaced by ``engine``).
- The 2.9+ features the engine adds (``early_stop=``, ``GraphExecGroup``), with the values torch
  2.13.0 gives.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import random
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import engine
import engine.nn as nn
import engine.utils.checkpoint as cp
from engine.ops import DispatchMode
from engine.utils.checkpoint import (
    CheckpointError,
    GraphExecGroup,
    checkpoint,
    checkpoint_sequential,
    set_checkpoint_debug_enabled,
    set_checkpoint_early_stop,
)

TIP = (
    "\nTip: To see a more detailed error message, either pass `debug=True` to\n"
    "`engine.utils.checkpoint.checkpoint(...)` or wrap the code block\n"
    "with `with engine.utils.checkpoint.set_checkpoint_debug_enabled(True):` to\n"
    "enable checkpoint\u2011debug mode globally.\n"
)
USE_REENTRANT_WARNING = (
    "engine.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.5 "
    "we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but "
    "if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to "
    "docs for more details on the differences between the two variants."
)


@pytest.fixture(autouse=True)
def _seed() -> None:
    engine.manual_seed(0)


def assert_equal(a: Any, b: Any) -> None:
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def get_non_det_fn(orig_fn: Callable[[Any], Any], recompute_fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    counter = [0]

    def fn(x: Any) -> Any:
        if counter[0] == 0:
            counter[0] += 1
            return orig_fn(x)
        return recompute_fn(x)

    return fn


def save_3_tensors(x: Any) -> Any:
    out = x.sin().exp()
    return out.sin()


def save_2_tensors(x: Any) -> Any:
    return x.sin().exp()


def save_2_tensors_alt(x: Any) -> Any:
    return x.sin() * engine.tensor([1.0, 2.0])


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


def test_checkpoint_sequential_warns_if_use_reentrant_not_passed_explcitly() -> None:
    a = engine.randn(3, requires_grad=True)
    modules_list = [nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 3)]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint_sequential(modules_list, 3, a, use_reentrant=False)

    with pytest.warns(
        UserWarning, match=".*the use_reentrant parameter should be passed explicitly.*"
    ) as record:
        checkpoint_sequential(modules_list, 3, a)
    assert str(record[0].message) == USE_REENTRANT_WARNING.replace(
        "engine.utils.checkpoint:", "engine.utils.checkpoint.checkpoint_sequential:"
    )


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
        "engine.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
        "Performing two backward calls that overlap (i.e. require the same saved activation in order to "
        "compute gradients) is not allowed while under the engine.utils.checkpoint.GraphExecGroup context. "
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


def test_checkpoint_detects_non_determinism() -> None:
    a = engine.randn(1, requires_grad=True)

    # Save fewer tensors during recompute
    fn = get_non_det_fn(orig_fn=save_3_tensors, recompute_fn=save_2_tensors)
    with pytest.raises(RuntimeError, match="A different number of tensors was saved"):
        out = checkpoint(fn, a, use_reentrant=False)
        out.backward()

    # Save more tensors during recompute
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    with (
        set_checkpoint_early_stop(False),
        pytest.raises(RuntimeError, match="trying to save more tensors during recomputation"),
    ):
        out = checkpoint(fn, a, use_reentrant=False)
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    # If early stopping is enabled, we would not raise (the results would be correct anyway)
    out = checkpoint(fn, a, use_reentrant=False)
    out.backward()

    # Save the same number of tensors but the shape is different
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with pytest.raises(RuntimeError, match="tensors have different metadata"):
        out = checkpoint(fn, a, use_reentrant=False)
        out.backward()

    # Get the debug message if debug=True
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with pytest.raises(
        RuntimeError, match="You are seeing this error because you passed `debug=True` to checkpoint"
    ):
        out = checkpoint(fn, a, use_reentrant=False, debug=True)
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with (
        pytest.raises(
            RuntimeError, match="You are seeing this error because you passed `debug=True` to checkpoint"
        ),
        set_checkpoint_debug_enabled(True),
    ):
        out = checkpoint(fn, a, use_reentrant=False, debug=False)
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with (
        pytest.raises(RuntimeError, match="Recomputed values for the following tensors have different"),
        set_checkpoint_debug_enabled(False),
    ):
        out = checkpoint(fn, a, use_reentrant=False, debug=True)
        out.backward()


def test_access_saved_tensor_twice_without_recomputation_works() -> None:
    count = [0]

    def foo(a: Any) -> Any:
        count[0] += 1
        b = a * a
        _c = a * b
        d = engine.exp(a)
        return d

    a = engine.randn(5, requires_grad=True)
    d = checkpoint(foo, a, use_reentrant=False)
    assert count[0] == 1
    # Recomputed variables only persist within a particular backward call.
    # If _saved_result is accessed outside of a backward, it will trigger
    # a recompute. And afterwards, those recomputed results are immediately
    # cleared.
    d.grad_fn._saved_result
    assert count[0] == 2
    # Second access will trigger another recompute
    d.grad_fn._saved_result
    assert count[0] == 3
    # Backward clears the saved variable
    d.sum().backward()
    assert count[0] == 4
    # Now it raises an error
    with pytest.raises(
        RuntimeError, match="or directly access saved tensors after they have already been freed"
    ):
        d.grad_fn._saved_result


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


def test_checkpoint_valid_reset_on_error() -> None:
    a = engine.randn(2, 2, requires_grad=True)

    with pytest.raises(Exception, match=r"engine\.utils\.checkpoint is incompatible"):
        b = checkpoint(engine.exp, a, use_reentrant=True).sum()
        engine.autograd.grad(b, (a,))

    c = checkpoint(engine.exp, a, use_reentrant=True).sum()
    c.backward()
    assert_equal(a.grad, a.exp())


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


# === test/test_utils.py: TestCheckpoint ============================================================


def _check_checkpoint_sequential(
    model: nn.Module,
    module_lists_to_compare: list[Any],
    num_chunks: int,
    input: Any,
    use_reentrant: bool,  # noqa: A002
) -> None:
    # not checkpointed
    out = model(input)
    out_not_checkpointed = out.detach().clone()
    model.zero_grad()
    out.sum().backward()
    grad_not_checkpointed = {name: param.grad.detach().clone() for name, param in model.named_parameters()}
    input_grad_not_checkpointed = input.grad.detach().clone()
    for model_to_compare in module_lists_to_compare:
        # checkpointed model by passing list of modules
        detached = input.detach()
        detached.requires_grad = True

        # pass list of modules to checkpoint
        out = checkpoint_sequential(model_to_compare, num_chunks, detached, use_reentrant=use_reentrant)
        out_checkpointed = out.detach().clone()
        model.zero_grad()
        out.sum().backward()
        grad_checkpointed = {name: param.grad.detach().clone() for name, param in model.named_parameters()}
        input_grad_checkpointed = detached.grad.detach().clone()
        # compare outputs as well as the gradients of input and parameters
        assert_equal(out_checkpointed, out_not_checkpointed)
        assert_equal(input_grad_not_checkpointed, input_grad_checkpointed)
        for name in grad_checkpointed:
            assert_equal(grad_checkpointed[name], grad_not_checkpointed[name])


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_trigger(use_reentrant: bool) -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.counter = 0

        def forward(self, input_var: Any) -> Any:
            self.counter += 1
            # For reentrant, need to have autograd actually
            # pack a tensor to trigger recomp
            return input_var * engine.tensor(2.0)

    modules = [Net() for _ in range(10)]
    for m in modules:
        assert m.counter == 0
    input_var = engine.randn(3, 4, requires_grad=True)
    out = checkpoint_sequential(modules, 2, input_var, use_reentrant=use_reentrant)
    for m in modules:
        assert m.counter == 1
    out.sum().backward()
    for m in modules[: (len(modules) // 2)]:
        assert m.counter == 2
    for m in modules[(len(modules) // 2) :]:
        assert m.counter == 1


def _mlp() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(100, 50), nn.ReLU(), nn.Linear(50, 20), nn.ReLU(), nn.Linear(20, 5), nn.ReLU()
    )


def test_checkpoint_valid() -> None:
    model = _mlp()
    input_var = engine.randn(1, 100, requires_grad=True)

    # checkpointed
    chunks = 2
    modules = list(model.children())
    out = checkpoint_sequential(modules, chunks, input_var, use_reentrant=True)
    with pytest.raises(RuntimeError, match=r"engine\.utils\.checkpoint is incompatible"):
        engine.autograd.grad(
            outputs=[out], grad_outputs=[engine.ones(1, 5)], inputs=[input_var], create_graph=True
        )
    # works with use_reentrant=False, and grads are the same
    out = model(input_var)
    grads_no_checkpoint = engine.autograd.grad(
        outputs=[out], grad_outputs=[engine.ones(1, 5)], inputs=[input_var], create_graph=True
    )
    out_checkpoint = checkpoint_sequential(modules, chunks, input_var, use_reentrant=False)
    # check outputs are the same
    assert_equal(out_checkpoint, out)
    grads_checkpoint = engine.autograd.grad(
        outputs=[out_checkpoint], grad_outputs=[engine.ones(1, 5)], inputs=[input_var], create_graph=True
    )
    assert_equal(grads_no_checkpoint[0], grads_checkpoint[0])


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint(use_reentrant: bool) -> None:
    model = _mlp()
    # Compare uncheckpointed model with its checkpointed counterparts
    # In addition to running checkpoint_sequential on the nn.Sequential
    # instance, we also run the function on the list of functions within
    # the module.
    _check_checkpoint_sequential(
        model,
        [list(model.children()), model],
        2,
        engine.randn(1, 100, requires_grad=True),
        use_reentrant=use_reentrant,
    )


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_module_list(use_reentrant: bool) -> None:
    class ModuleListNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module_list = nn.ModuleList(list(_mlp().children()))

        def forward(self, input: Any) -> Any:  # noqa: A002
            for layer in self.module_list:
                input = layer(input)
            return input

    model = ModuleListNet()
    # Compare uncheckpointed model with its checkpointed counterparts.
    _check_checkpoint_sequential(
        model,
        [list(model.module_list.children()), model.module_list],
        2,
        engine.randn(1, 100, requires_grad=True),
        use_reentrant=use_reentrant,
    )


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_deprecated_multiple_args(use_reentrant: bool) -> None:
    class Two(nn.Module):
        def forward(self, a: Any, b: Any) -> Any:
            return a, b

    model = nn.Sequential(Two())
    a = engine.randn(1, 100, requires_grad=True)
    b = engine.randn(1, 100, requires_grad=True)
    with pytest.raises(TypeError):
        checkpoint_sequential(model, 1, a, b, use_reentrant=use_reentrant)  # type: ignore[misc]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_deprecated_no_args(use_reentrant: bool) -> None:
    class Noop(nn.Module):
        def forward(self) -> None:
            pass

    model = nn.Sequential(Noop())
    with pytest.raises(TypeError):
        checkpoint_sequential(model, 1, use_reentrant=use_reentrant)  # type: ignore[call-arg]


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


@pytest.mark.parametrize(
    ("use_checkpoint", "retain_graph", "should_free"),
    [(False, False, True), (False, True, False), (True, False, True), (True, True, True)],
)
def test_checkpointing_without_reentrant_early_free(
    monkeypatch: pytest.MonkeyPatch, use_checkpoint: bool, retain_graph: bool, should_free: bool
) -> None:
    # Upstream uses GPU memory as a proxy; here: tensors still held for backward (recomputed
    # tensors held by checkpoint frames, or tensors the plain graph saved), measured by weakref.
    frames: list[weakref.ref[Any]] = []
    saved: list[weakref.ref[Any]] = []
    original_frame = cp._CheckpointFrame

    class Frame(original_frame):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            frames.append(weakref.ref(self))

    monkeypatch.setattr(cp, "_CheckpointFrame", Frame)

    def held() -> int:
        recomputed = sum(len(d) for r in frames if (f := r()) is not None for d in f.recomputed.values())
        return recomputed + sum(1 for r in saved if r() is not None)

    stats: list[int] = []

    def track(x: Any, idx: int) -> None:
        def hook(_unused: Any) -> None:
            assert len(stats) == idx
            stats.append(held())
            if idx > 0:
                if should_free:
                    assert stats[idx] < stats[idx - 1]
                else:
                    assert stats[idx] == stats[idx - 1]

        x.register_hook(hook)

    def test_fn(x: Any) -> Any:
        # multiple operations that save tensors, in a chain
        x = x**2
        track(x, 2)
        x = x**2
        track(x, 1)
        x = x**2
        track(x, 0)
        x = x**2
        return x.sum()

    def pack(t: Any) -> Any:
        saved.append(weakref.ref(t))
        return t

    x = engine.zeros(10, requires_grad=True)
    hooks: Any = (
        contextlib.nullcontext()
        if use_checkpoint
        else engine.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    )
    with hooks:
        out = checkpoint(test_fn, x, use_reentrant=False) if use_checkpoint else test_fn(x)
    del x
    with gc_disabled():
        out.backward(retain_graph=retain_graph)
    assert len(stats) == 3


@contextlib.contextmanager
def gc_disabled() -> Any:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# === texts, 2.8 behaviours and the engine's additions ===============================================


def test_error_texts() -> None:
    a = engine.randn(1, requires_grad=True)

    fn = get_non_det_fn(orig_fn=save_3_tensors, recompute_fn=save_2_tensors)
    out = checkpoint(fn, a, use_reentrant=False)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    assert str(info.value) == (
        "engine.utils.checkpoint: A different number of tensors was saved during the original forward and "
        "recomputation.\nNumber of tensors saved during forward: 3\nNumber of tensors saved during "
        "recomputation: 2.\n" + TIP
    )

    # determinism_check="none" still counts
    fn = get_non_det_fn(orig_fn=save_3_tensors, recompute_fn=save_2_tensors)
    out = checkpoint(fn, a, use_reentrant=False, determinism_check="none")
    with pytest.raises(CheckpointError, match="A different number of tensors was saved"):
        out.backward()

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    out = checkpoint(fn, a, use_reentrant=False)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    meta = "{{'shape': engine.Size([{}]), 'dtype': engine.float32, 'device': device(type='cpu')}}"
    assert str(info.value) == (
        "engine.utils.checkpoint: Recomputed values for the following tensors have different metadata than "
        "during the forward pass.\n"
        f"tensor at position 1:\nsaved metadata: {meta.format(1)}\nrecomputed metadata: {meta.format(2)}\n"
        ".\n" + TIP
    )

    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    with set_checkpoint_early_stop(False):
        out = checkpoint(fn, a, use_reentrant=False)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    assert str(info.value) == (
        "engine.utils.checkpoint: trying to save more tensors during recomputation than during the "
        "original forward pass.\n" + TIP
    )


def test_argument_errors() -> None:
    x = engine.randn(2, requires_grad=True)
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=False, determinism_check="bogus")
    assert str(info.value) == "determinism_check should be one of ['default', 'none'], but got bogus"
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=False, debug=True, context_fn=lambda: cp.noop_context_fn())
    assert str(info.value) == "debug=True is incompatible with non-default context_fn"
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=True, a=1, b=2)
    assert str(info.value) == "Unexpected keyword arguments: a,b"
    with pytest.raises(ValueError) as info:
        checkpoint(engine.sin, x, use_reentrant=True, debug=True)
    assert str(info.value) == "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
    with pytest.raises(RuntimeError) as info:
        cp.detach_variable([x])  # type: ignore[arg-type]
    assert str(info.value) == "('Only tuple of tensors is supported. Got Unsupported input type: ', 'list')"


def test_reentrant_incompatible_with_grad_and_inputs() -> None:
    x = engine.randn(2, requires_grad=True)
    expected = (
        "When use_reentrant=True, engine.utils.checkpoint is incompatible with .grad() or passing an `inputs` "
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


def test_debug_log() -> None:
    a = engine.randn(1, requires_grad=True)
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    out = checkpoint(fn, a, use_reentrant=False, debug=True)
    with pytest.raises(CheckpointError) as info:
        out.backward()
    text = str(info.value)
    assert text.startswith(
        " An error happened while unpacking tensors; dumping logs of latest computation\n"
        "because you passed `debug=True` to `engine.utils.checkpoint.checkpoint()`.\n"
    )
    forward_ops = "$1: f32[1] = engine.ops.sin($0)\n$2: f32[1] = engine.ops.exp($1)"
    assert f"Operations executed during the original forward:\n\n{forward_ops}\n\n" in text
    # the recomputation: sin's pack of its input (detached by the recomputation pack hook), sin,
    # then mul's first save (the new constant) is the second one: early stop before mul's kernel
    recompute_ops = "$1: f32[1] = engine.ops.detach($0)\n$2: f32[1] = engine.ops.sin($0)"
    assert f"Operations executed during recomputation:\n\n{recompute_ops}\n\n" in text
    # stack traces: each op points at the line of the user's code that called it
    assert "(1 of 2 in original)" in text
    assert f"{__file__}:" in text and ":save_2_tensors\n" in text
    assert text.endswith(
        "4. Error message                                             <--- You are here\n" + "-" * 80 + "\n"
    )
    cause = info.value.__cause__
    assert isinstance(cause, CheckpointError)
    assert str(cause).startswith("engine.utils.checkpoint: Recomputed values for the following tensors")


def test_exception_in_forward_keeps_hooks_until_traceback_is_released() -> None:
    # 2.8: the checkpoint's generator is left suspended inside its hooks' ``with`` block.
    from engine._C import _tls

    x = engine.randn(3, requires_grad=True)
    runs = [0]

    def f(t: Any) -> Any:
        runs[0] += 1
        t.sin()
        raise ValueError("boom")

    depth = len(_tls.saved_tensors_hooks)
    try:
        checkpoint(f, x, use_reentrant=False)
    except ValueError as e:
        assert str(e) == "boom"
        assert len(_tls.saved_tensors_hooks) == depth + 1
        z = x.exp()  # packed by the failed checkpoint
        with pytest.raises(ValueError, match="boom"):
            z.grad_fn._saved_result  # unpacking re-runs the failed function
    assert len(_tls.saved_tensors_hooks) == depth
    assert runs[0] == 2


def test_no_grad_mode_installs_nothing() -> None:
    x = engine.randn(3, requires_grad=True)
    seen = []

    def f(t: Any) -> Any:
        from engine._C import _tls

        seen.append(len(_tls.saved_tensors_hooks))
        return t.sin()

    with engine.no_grad():
        out = checkpoint(f, x, use_reentrant=False)
    assert seen == [0]
    assert not out.requires_grad


def test_inner_inputs_are_saved_by_the_parent_dummy_first() -> None:
    # Rule 2, as 2.8 does it: the parent packs the inner checkpoint's dummy, then its tensor input
    shapes: list[list[int]] = []

    def pack(t: Any) -> Any:
        shapes.append(list(t.shape))
        return t

    x = engine.randn(2, requires_grad=True)
    with engine.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        checkpoint(engine.sin, x, use_reentrant=False)
    assert shapes == [[0], [2]]


def test_recomputed_tensors_are_cleared_on_unpack_even_with_retain_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames: list[Any] = []
    original_frame = cp._CheckpointFrame

    class Frame(original_frame):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            frames.append(self)

    monkeypatch.setattr(cp, "_CheckpointFrame", Frame)
    x = engine.randn(3, requires_grad=True)
    runs = [0]

    def f(t: Any) -> Any:
        runs[0] += 1
        return t.sin().exp().cos()

    out = checkpoint(f, x, use_reentrant=False)
    (frame,) = frames
    alive = [w for w in frame.weak_holders if w() is not None]
    assert len(alive) == 3
    for i in range(3):
        out.sum().backward(retain_graph=True)
        assert sum(len(d) for d in frame.recomputed.values()) == 0  # Rule 4
        assert len([w for w in frame.weak_holders if w() is not None]) == 3  # the graph keeps them
        assert runs[0] == 2 + i
    out.sum().backward()
    assert all(w() is None for w in frame.weak_holders)


def test_public_api() -> None:
    assert engine.utils.checkpoint is cp
    for name in cp.__all__:
        assert hasattr(cp, name), name
    assert cp._enable_checkpoint_early_stop is None  # 2.9+: defer to the early_stop argument
    assert issubclass(CheckpointError, RuntimeError)
