"""Checks torch makes and engine bugs found by PyTorch's own tests (tests/conformance/report.md,
groups 3, 4, 6 and 7), each against torch 2.8.0: custom Functions (mark_dirty, views they
return, a ctx that outlives its graph, instantiating a Function), saved tensors detached in
place, ``create_graph`` warnings, ``autograd.functional``'s strict mode, anomaly mode, whether
AccumulateGrad steals the gradient, the saved-tensor hooks stack during backward, and deep
graphs."""

from __future__ import annotations

import gc
import io
import sys
import warnings
from types import ModuleType
from typing import Any

import pytest

import engine
from tests.engine._autograd_diff import BACKWARD_TWICE, raises_same, run, run_both

pytestmark = pytest.mark.oracle


def _both(torch: ModuleType) -> tuple[ModuleType, ModuleType]:
    return torch, engine


# --- custom Functions -------------------------------------------------------------------------


def _adder(lib: ModuleType) -> Any:
    class MyOutPlaceAdder(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            a.add_(b)
            ctx.mark_dirty(a)
            return a.clone(), a + b

        @staticmethod
        def backward(ctx: Any, ga: Any, gab: Any) -> Any:
            return ga + gab, ga + 2 * gab

    return MyOutPlaceAdder


def test_mark_dirty_input_not_returned(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        a = lib.ones(2, requires_grad=True)
        b = lib.ones(2, requires_grad=True)
        return _adder(lib).apply(a.clone().view_as(a), b)

    raises_same(
        scenario,
        torch_oracle,
        "Some elements marked as dirty during the forward method were not returned as output. The "
        "inputs that are modified inplace must all be outputs of the Function.",
    )


def _view_fn(lib: ModuleType) -> Any:
    class MyFn(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, inp: Any) -> Any:
            return inp.view_as(inp)

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            return grad

    return MyFn


@pytest.mark.parametrize("write", ["add_", "copy_"])
def test_inplace_on_view_returned_by_custom_function(torch_oracle: ModuleType, write: str) -> None:
    # The view was made in forward (no_grad) of an input that needs no grad: the message says both.
    def scenario(lib: ModuleType) -> Any:
        view_a = _view_fn(lib).apply(lib.rand(1, 2))
        b = lib.rand(1, requires_grad=True)
        return getattr(view_a, write)(b)

    raises_same(
        scenario,
        torch_oracle,
        "A view was created in no_grad mode and is being modified inplace with grad mode enabled. This "
        "view was created inside a custom Function (or because an input was returned as-is) and the "
        "autograd logic to handle view+inplace would override the custom backward associated with the "
        "custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix this "
        "by cloning the output of the custom Function.",
    )


def test_custom_function_returns_view_modified_in_forward(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class MyFn(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, inp: Any, inplace: bool) -> Any:
                view = inp.clone()[:3]
                if inplace:
                    view += 2
                return view

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                return grad, None

        base = lib.rand(10, requires_grad=True)
        foo = MyFn.apply(base, True)
        foo.sum().backward()
        return foo.grad_fn.name(), type(foo.grad_fn).__name__, base.grad

    run_both(scenario, torch_oracle)


def test_ctx_outlives_its_graph(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        saved_ctx: list[Any] = []

        class Id(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx: Any, grad_x: Any) -> Any:
                saved_ctx.append(ctx)
                return ctx.saved_tensors

        p = lib.zeros(1, requires_grad=True)
        loss = Id.apply(p)
        loss.backward(retain_graph=True)
        alive = len(saved_ctx[0].saved_tensors)  # the graph still holds the node
        del loss
        gc.collect()
        return alive, run(lib, lambda _: saved_ctx[0].saved_tensors)

    assert run_both(scenario, torch_oracle)[1].message == BACKWARD_TWICE


def test_metadata_of_a_dead_custom_node(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class MyFunction(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g

        y = MyFunction.apply(lib.zeros(1, requires_grad=True))
        y.backward()
        y.grad_fn.metadata["k"] = 1
        g = y.grad_fn
        del y
        return g.metadata

    raises_same(
        scenario,
        torch_oracle,
        "You attempted to access the anomaly metadata of a custom autograd function but the underlying "
        "PyNode has already been deallocated.  The most likely reason this occurred is because you "
        "assigned x.grad_fn to a local variable and then let the original variable get deallocated.  "
        "Don't do that!  If you really have no way of restructuring your code so this is the case, "
        "please file an issue reporting that you are affected by this.",
    )


def _instance_record(lib: ModuleType) -> list[Any]:
    class Id(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, grad_x: Any) -> Any:
            return grad_x

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f = Id()
    record: list[Any] = [[(x.category.__name__, str(x.message)) for x in w], isinstance(f, Id)]
    t = lib.ones(1, requires_grad=True)
    t._backward_hooks = {}  # as PyTorch's test does: torch crashes without it
    for access in (
        lambda: f._register_hook_dict(t),
        lambda: f.register_hook(lambda x, y: None),
        lambda: f.register_prehook(lambda x: None),
        lambda: f.next_functions,
        lambda: f.name(),
        lambda: f._sequence_nr(),
        lambda: f.metadata,
    ):
        try:
            access()
            record.append(None)
        except RuntimeError as e:  # the message is compared as is: it cites a URL, not a type
            record.append(str(e))
    return record


def test_instantiating_a_function(torch_oracle: ModuleType) -> None:
    theirs, ours = _instance_record(torch_oracle), _instance_record(engine)
    assert ours == theirs
    assert "should not be instantiated" in theirs[0][0][1]


# --- saved tensors ----------------------------------------------------------------------------


def test_saved_input_detached_in_place(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        a = lib.tensor(1.0, requires_grad=True).clone()
        b = a.sin()
        a.detach_()
        b.backward()

    raises_same(
        scenario,
        torch_oracle,
        "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not "
        "supported, please use out-of-place `.detach()` instead",
    )

    def output_saved(lib: ModuleType) -> Any:
        leaf = lib.tensor(1.0, requires_grad=True)
        a = leaf.clone()
        b = a.exp()
        a.detach_()
        b.backward()
        return leaf.grad

    run_both(output_saved, torch_oracle)


def _hooks_stack_after_backward(lib: ModuleType, extra: str) -> Any:
    """A saved tensor's unpack hook enters or exits a hooks context during backward; afterwards,
    is the stack back as it was (a new saved tensor takes hooks only if the stack is empty)?"""
    log: list[str] = []

    def unpack(x: Any) -> Any:
        if extra == "exit":
            ctx_1.__exit__()
        else:
            ctx_1.__enter__()
        log.append("unpack")
        return x

    ctx_1 = lib.autograd.graph.saved_tensors_hooks(lambda x: x, unpack)
    x = lib.randn(3, 3, requires_grad=True)
    if extra == "enter":
        with ctx_1:
            x.sin().sum().backward()
    else:
        with lib.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
            ctx_1.__enter__()
            x.sin().sum().backward()
        ctx_1.__exit__()  # the exit in backward only popped the backward's copy of the stack
    a = lib.tensor(1.0, requires_grad=True)
    y = a.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)  # no hooks left
    return log


@pytest.mark.parametrize("extra", ["enter", "exit"])
def test_saved_tensor_hooks_stack_restored_after_each_node(torch_oracle: ModuleType, extra: str) -> None:
    run_both(lambda lib: _hooks_stack_after_backward(lib, extra), torch_oracle)


# --- warnings ---------------------------------------------------------------------------------


def test_create_graph_warning_every_time_with_warn_always(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        counts = []
        previous = lib.is_warn_always_enabled()
        lib.set_warn_always(True)
        try:
            for _ in range(2):
                b = lib.randn(3, requires_grad=True, dtype=lib.double)
                with warnings.catch_warnings(record=True) as ws:
                    warnings.simplefilter("always")
                    (b * b).backward(lib.ones(3, dtype=lib.double), create_graph=True)
                counts.append(sum("Using backward() with create_graph=True" in str(w.message) for w in ws))
        finally:
            lib.set_warn_always(previous)
        return counts

    assert run_both(scenario, torch_oracle) == [1, 1]


def test_anomaly_warning_raised_as_error_goes_to_stderr(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        stderr, sys.stderr = sys.stderr, io.StringIO()
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with lib.autograd.detect_anomaly():
                    warnings.simplefilter("error")
                    a = lib.randn(5, requires_grad=True)
                    d1 = a + 1
                    d2 = d1**2
                    d1 += 1
                    error = run(lib, lambda _: lib.autograd.grad(d2.sum(), a))
            captured = sys.stderr.getvalue()
        finally:
            sys.stderr = stderr
        return (
            error.type,
            error.message.startswith("one of the variables needed for gradient computation"),
            [str(x.message).startswith("Anomaly Detection has been enabled") for x in w],
            "UserWarning: Error detected in PowBackward0" in captured,
        )

    assert run_both(scenario, torch_oracle)[-1] is True


# --- autograd.functional: strict ---------------------------------------------------------------


def _unconnected(a: Any) -> Any:
    # A non-leaf that requires grad but is not connected to the input.
    return a.long().float().requires_grad_().clone()


@pytest.mark.parametrize(
    ("name", "func", "expected"),
    [
        ("vjp", _unconnected, "The output of the user-provided function is independent of input 0"),
        ("jvp", _unconnected, "The output of the user-provided function is independent of input 0"),
        ("jacobian", _unconnected, "Output 0 of the user-provided function is independent of input 0"),
        ("hvp", lambda a: _unconnected(a).sum(), "The output of the user-provided function is independent"),
        ("vhp", lambda a: _unconnected(a).sum(), "The output of the user-provided function is independent"),
        ("hvp", lambda a: (3 * a).sum(), "jacobian of the user-provided function with respect to input 0"),
        ("vjp", lambda a: a.detach(), "Output 0 of the user-provided function does not require gradients"),
    ],
)
def test_functional_strict(torch_oracle: ModuleType, name: str, func: Any, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        inp = lib.rand(4)
        fn = getattr(lib.autograd.functional, name)
        if name == "jacobian":
            return fn(func, inp, strict=True)
        return fn(func, inp, lib.rand(4), strict=True)

    theirs, ours = run(torch_oracle, scenario), run(engine, scenario)
    assert expected in theirs.message
    assert (ours.type, ours.message) == (theirs.type, theirs.message)


# --- anomaly mode and expanded tensors ----------------------------------------------------------


def test_anomaly_nan_from_a_write_into_an_expanded_gradient(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class MyFunc(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, inp1: Any, inp2: Any, fail_0th: bool) -> Any:
                ctx.fail_0th = fail_0th
                return inp1.sum(0, keepdim=True)

            @staticmethod
            def backward(ctx: Any, g_o: Any) -> Any:
                g_i = g_o.clone().expand(10)
                g_i[0] = 0
                g_i[0] /= 0  # every element is the same memory: all become nan
                return (g_i, None, None) if ctx.fail_0th else (None, g_i, None)

        inp = lib.rand(10, requires_grad=True)
        MyFunc.apply(inp, inp, True).backward()
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                error = run(lib, lambda _: MyFunc.apply(inp, inp, False).backward())
        return error, inp.grad.isnan().all()

    record = run_both(scenario, torch_oracle)
    assert record[0].message == "Function 'MyFuncBackward' returned nan values in its 1th output."


@pytest.mark.parametrize("op", ["mul_", "copy_", "exp_", "fill_", "zero_"])
def test_inplace_on_expanded_tensor(torch_oracle: ModuleType, op: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = lib.ones(1).expand(3)
        args = {"mul_": (2.0,), "copy_": (lib.ones(3),), "fill_": (2.0,)}.get(op, ())
        getattr(x, op)(*args)
        return x

    run_both(scenario, torch_oracle)


# --- AccumulateGrad: stealing the gradient -------------------------------------------------------


def test_post_accumulate_grad_hook_ordering(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        tensor = lib.rand(3, requires_grad=True)
        acc_grad = tensor.view_as(tensor).grad_fn.next_functions[0][0]
        tensor.register_hook(lambda grad: grad.sub(2.0))
        acc_grad.register_prehook(lambda grad_out: (grad_out[0].div(5.0),))
        tensor.register_post_accumulate_grad_hook(lambda t: t.grad.add_(0.5))

        def acc_grad_node_post_hook(grad_in: Any, grad_out: Any) -> None:
            tensor.grad = grad_out[0].mul(10)

        acc_grad.register_hook(acc_grad_node_post_hook)
        tensor.sum().backward()
        return tensor.grad  # ((1 - 2) / 5 + 0.5) * 10: .grad is the tensor the prehook returned

    run_both(scenario, torch_oracle)


def test_accumulate_grad_copies_only_when_shared(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class MyFunc(lib.autograd.Function):
            grad_ptr = None

            @staticmethod
            def forward(ctx: Any, inp1: Any, inp2: Any) -> Any:
                return inp1 + inp2

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                MyFunc.grad_ptr = grad.data_ptr()
                return grad, grad

        class NonContGradFunc(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, inp1: Any) -> Any:
                ctx.size = inp1.size()
                return lib.tensor([1.0])

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                return lib.ones(1).expand(ctx.size)

        a = lib.randn(5, 6, requires_grad=True)
        b = lib.randn(5, 6, requires_grad=True)
        NonContGradFunc.apply(MyFunc.apply(a, b)).backward()  # an expanded gradient is copied
        expanded = (a.grad.data_ptr() == MyFunc.grad_ptr, b.grad.data_ptr() == MyFunc.grad_ptr)
        a.grad = b.grad = None
        MyFunc.apply(a, b)[1][0].backward()  # one gradient for both: the second one steals it
        p_g, p_a, p_b = MyFunc.grad_ptr, a.grad.data_ptr(), b.grad.data_ptr()
        return expanded, p_a == p_b, sorted([p_a == p_g, p_b == p_g])

    assert run_both(scenario, torch_oracle)[2] == [False, True]


# --- factories and deep graphs -------------------------------------------------------------------


def test_randint_high_and_size(torch_oracle: ModuleType) -> None:
    run_both(
        lambda lib: (tuple(lib.randint(2, [4, 2]).shape), str(lib.randint(2, [4, 2]).dtype)), torch_oracle
    )


@pytest.mark.parametrize("kind", ["chain", "inplace_chain", "custom_function"])
def test_free_deep_graph(kind: str) -> None:
    # PyTorch's test_free_deep_graph*: building and dropping a long chain must not recurse.
    class MyOp(engine.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            return a + b

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            return grad_output, grad_output

    x = engine.randn(1, requires_grad=True)
    y = x.clone()
    for _ in range(20000):
        if kind == "chain":
            y = y + y * 0.000001
        elif kind == "inplace_chain":
            y += y * 0.000001
        else:
            y = MyOp.apply(y, y)
    del y
