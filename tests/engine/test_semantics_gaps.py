"""Semantics gaps against torch 2.8.0 (issue 13, parts 2 and 3): post-accumulate-grad hooks,
calling a ``grad_fn`` directly, ``.data =``, saved tensors after the graph was freed, ``numpy()`` /
``tolist()`` / ``item()`` under ``no_grad``, very deep re-entrant backward and very long graphs,
``checkpoint``'s keyword arguments, SAC's op-list errors, and torch's names in the engine's messages.

Each scenario runs in both libraries (``tests/engine/_autograd_diff.py``); the tests marked
"ported" adapt a test body of PyTorch's own test suite (test/test_autograd.py, test/test_utils.py).
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import threading
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from tests.engine._autograd_diff import BACKWARD_TWICE, _x, raises_same, run_both

pytestmark = pytest.mark.oracle

ENGINE_DIR = Path(engine.__file__).resolve().parent


def _cp(lib: ModuleType) -> Any:
    return importlib.import_module(f"{lib.__name__}.utils.checkpoint")


# --- 1. post-accumulate-grad hooks -------------------------------------------------------------


def test_post_accumulate_grad_hook_sees_accumulated_grad_once_per_backward(torch_oracle: ModuleType) -> None:
    """A leaf used twice: its gradients are summed first, then .grad accumulates once, then the
    hooks run in registration order, each seeing .grad already accumulated (also an old .grad)."""

    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        x.grad = lib.full((3,), 10.0, dtype=lib.float64)
        x.register_hook(lambda g: log.append(("tensor hook", g.clone())))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post 1", t.grad.clone())))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post 2", t.grad.clone(), t is x)))
        (x * 2 + x * x).sum().backward()
        (x * 3).sum().backward()
        return log, x.grad

    run_both(scenario, torch_oracle)


def test_post_accumulate_grad_hook_grad_mode_and_create_graph(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        x.register_post_accumulate_grad_hook(
            lambda t: log.append((lib.is_grad_enabled(), t.grad.requires_grad, t.grad.grad_fn is not None))
        )
        (x * 2).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (x * x).sum().backward(create_graph=True)
        return log

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize(
    ("returns", "expected"),
    [
        ("grad", "Tensor post accumulate grad hooks should return None."),
        ("detached", "Tensor post accumulate grad hooks should return None."),
        ("int", "expected Variable, but hook returned 'int'"),
        ("tuple", "expected Variable, but hook returned 'tuple'"),
        ("shape", "hook '<lambda>' has changed the size of value"),
        (
            "dtype",
            "hook '<lambda>' has changed the type of value (was torch.DoubleTensor got torch.FloatTensor)",
        ),
    ],
)
def test_post_accumulate_grad_hook_returning_a_value_raises(
    torch_oracle: ModuleType, returns: str, expected: str
) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        results = {
            "grad": lambda t: t.grad * 2,
            "detached": lambda t: t.detach(),
            "int": lambda t: 5,
            "tuple": lambda t: (t,),
            "shape": lambda t: lib.ones(4, dtype=lib.float64),
            "dtype": lambda t: lib.ones(3),
        }
        x.register_post_accumulate_grad_hook(results[returns])
        (x * 2).sum().backward()

    raises_same(scenario, torch_oracle, expected)


def test_post_accumulate_grad_hook_returned_value_feeds_the_next_hook(torch_oracle: ModuleType) -> None:
    """As torch's _call_hooks: the next hook gets what the previous one returned (here a tensor
    without .grad), all hooks run, then the error; returning the tensor itself is no change."""

    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        x.register_post_accumulate_grad_hook(lambda t: t)
        x.register_post_accumulate_grad_hook(lambda t: log.append(("first", t.grad.clone())) or t * 3)
        x.register_post_accumulate_grad_hook(lambda t: log.append(("second", t.grad, t.requires_grad)))
        try:
            (x * 2).sum().backward()
        except RuntimeError as e:
            log.append(str(e))
        return log, x.grad

    run_both(scenario, torch_oracle)


# Ported from test/test_autograd.py (test_post_accumulate_grad_hook_*).


def test_ported_post_accumulate_grad_hook_multiple_hooks(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        def hook1(tensor: Any) -> None:
            tensor.sub_(tensor.grad)

        def hook2(tensor: Any) -> None:
            tensor.mul_(4.0)

        tensor = lib.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
        tensor_ref = tensor.clone().detach()
        tensor.register_post_accumulate_grad_hook(hook1)
        tensor.register_post_accumulate_grad_hook(hook2)
        tensor.sum().backward()
        # both hooks should be called, in order
        return tensor.detach(), 4.0 * (tensor_ref - 1.0)

    ours = run_both(scenario, torch_oracle)
    np.testing.assert_allclose(ours[0].numpy(), ours[1].numpy())


def test_ported_post_accumulate_grad_hook_multiple_tensors(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        def hook(tensor: Any) -> None:
            tensor.sub_(tensor.grad)

        tensor1 = lib.tensor(np.linspace(0, 1, 9).reshape(3, 3), requires_grad=True)
        tensor1_ref = tensor1.clone().detach()
        tensor2 = lib.tensor(np.linspace(1, 2, 5), requires_grad=True)
        tensor2_ref = tensor2.clone().detach()
        tensor1.register_post_accumulate_grad_hook(hook)
        tensor2.register_post_accumulate_grad_hook(hook)
        tensor2.detach().mul_(2.0)
        (tensor1.sum() + tensor2.sum()).backward()
        return tensor1.detach() - (tensor1_ref - 1.0), tensor2.detach() - (tensor2_ref * 2.0 - 1.0)

    ours = run_both(scenario, torch_oracle)
    assert not ours[0].any() and not ours[1].any()


def test_ported_post_accumulate_grad_hook_returns_not_none(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        def bad_hook(tensor: Any) -> Any:
            return tensor.grad

        tensor = lib.ones(2, 3, requires_grad=True)
        tensor.register_post_accumulate_grad_hook(bad_hook)
        tensor.sum().backward()

    raises_same(scenario, torch_oracle, "Tensor post accumulate grad hooks should return None.")


def test_ported_post_accumulate_grad_hook_e2e(torch_oracle: ModuleType) -> None:
    """The optimizer step inside the hook (test_post_accumulate_grad_hook_e2e, with a Linear)."""

    def scenario(lib: ModuleType) -> Any:
        lib.manual_seed(0)
        w = lib.tensor(np.linspace(-1, 1, 12).reshape(4, 3), requires_grad=True)
        b = lib.tensor(np.linspace(0, 1, 4), requires_grad=True)
        optims = {w: lib.optim.SGD([w], lr=0.1), b: lib.optim.SGD([b], lr=0.1)}

        def optim_step_hook(param: Any) -> None:
            optims[param].step()
            optims[param].zero_grad()

        for p in (w, b):
            p.register_post_accumulate_grad_hook(optim_step_hook)
        x = lib.tensor(np.linspace(-2, 2, 6).reshape(2, 3))
        for _ in range(3):
            (x @ w.t() + b).pow(2).sum().backward()
        return w.detach(), b.detach(), w.grad, b.grad

    run_both(scenario, torch_oracle)


def test_ported_post_accumulate_grad_hook_on_non_leaf(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        (_x(lib) * 2).register_post_accumulate_grad_hook(lambda t: None)

    raises_same(scenario, torch_oracle, "post accumulate grad hooks cannot be registered on non-leaf tensors")


# --- 2. calling a grad_fn ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("sin_two", "expected 1 arguments, got 2 instead"),
        ("sin_zero", "expected 1 arguments, got 0 instead"),
        ("mul_two", "expected 1 arguments, got 2 instead"),
        ("unbind_one", "expected 3 arguments, got 1 instead"),
        ("acc_zero", "expected 1 arguments, got 0 instead"),
        ("acc_two", "expected 1 arguments, got 2 instead"),
        ("keyword", "keyword arguments are not supported"),
        ("not_a_tensor", "argument 0 is not a Variable"),
        ("custom", "'FBackward' object is not callable"),
    ],
)
def test_calling_grad_fn_with_wrong_arguments(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        g = lib.ones(3, dtype=lib.float64)
        sin = x.sin().grad_fn
        acc = sin.next_functions[0][0]

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                return a * 2

            @staticmethod
            def backward(ctx: Any, go: Any) -> Any:
                return go * 2

        calls = {
            "sin_two": lambda: sin(g, g),
            "sin_zero": lambda: sin(),
            "mul_two": lambda: (x * _x(lib)).grad_fn(g, g),
            "unbind_one": lambda: x.unbind()[0].grad_fn(lib.ones((), dtype=lib.float64)),
            "acc_zero": lambda: acc(),
            "acc_two": lambda: acc(g, g),
            "keyword": lambda: sin(grad=g),
            "not_a_tensor": lambda: sin(1.0),
            "custom": lambda: F.apply(x).grad_fn(g),
        }
        calls[case]()

    raises_same(scenario, torch_oracle, expected)


def test_calling_grad_fn_with_the_right_arguments(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (2.0, 3.0, 4.0))
        g = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)
        u = x.unbind()
        one = lib.ones((), dtype=lib.float64)
        with lib.no_grad():
            no_graph = x.sin().grad_fn(g)
        return (
            x.sin().grad_fn(g),
            x.sin().grad_fn(None),
            (x * w).grad_fn(g),
            u[0].grad_fn(one, None, one),
            x.sin().grad_fn.next_functions[0][0](g),
            x.sin().grad_fn(g).requires_grad,
            no_graph.requires_grad,
        )

    run_both(scenario, torch_oracle)


# --- 3. .data = ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "int_on_leaf",
            "data set to a tensor that requires gradients must be floating point or complex dtype",
        ),
        (
            "bool_on_leaf",
            "data set to a tensor that requires gradients must be floating point or complex dtype",
        ),
        (
            "int_on_non_leaf",
            "data set to a tensor that requires gradients must be floating point or complex dtype",
        ),
        ("list", "Variable data has to be a tensor, but got list"),
        ("ndarray", "Variable data has to be a tensor, but got numpy.ndarray"),
    ],
)
def test_set_data_errors(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        values = {
            "int_on_leaf": (x, lib.tensor([1, 2, 3])),
            "bool_on_leaf": (x, lib.tensor([True, False, True])),
            "int_on_non_leaf": (x * 2, lib.tensor([1, 2, 3])),
            "list": (x, [1.0, 2.0, 3.0]),
            "ndarray": (x, np.ones(3)),
        }
        target, value = values[case]
        target.data = value

    raises_same(scenario, torch_oracle, expected)


def test_set_data_other_dtype_and_shape(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        def state(t: Any) -> Any:
            return t.detach().clone(), str(t.dtype), tuple(t.shape), t.requires_grad, t.is_leaf, t._version

        out = []
        # float64 data on a float32 leaf that requires grad; its .grad keeps its own dtype
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.grad = lib.ones(2)
        x.data = lib.tensor([3.0, 4.0], dtype=lib.float64)
        out += [state(x), x.grad]
        x.grad = None
        (x * 2).sum().backward()
        out += [x.grad]
        # a graph built before the dtype change keeps the old AccumulateGrad; a new one gets a new one
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        old = x * 3
        x.data = lib.tensor([3.0, 4.0], dtype=lib.float64)
        (x * 2).sum().backward()
        out += [x.grad, old.grad_fn.next_functions[0][0] is not (x * 1).grad_fn.next_functions[0][0]]
        # integer data on a tensor that does not require grad, complex data on one that does
        y = lib.tensor([1.0, 2.0])
        y.data = lib.tensor([3, 4])
        z = lib.tensor([1.0, 2.0], requires_grad=True)
        z.data = lib.tensor([1 + 1j, 2j])
        out += [state(y), state(z)]
        # another shape: the next backward uses it; a graph built before sees the new data
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.data = lib.ones(2, 3)
        (x * 2).sum().backward()
        out += [state(x), x.grad]
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * x
        x.data = lib.ones(3)
        try:
            y.sum().backward()
        except RuntimeError as e:
            out.append(str(e))
        # storage is shared, the version counter is not
        d = lib.tensor([5.0, 6.0])
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.data = d
        d.add_(1)
        out += [state(x), d._version]
        return out

    run_both(scenario, torch_oracle)


# --- 4. saved tensors after the graph was freed -------------------------------------------------


def test_saved_tensors_after_free(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                ctx.save_for_backward(a)
                return a * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (a,) = ctx.saved_tensors
                return g * a

        def attempt(f: Any) -> Any:
            try:
                return f()
            except RuntimeError as e:
                return "raised: " + str(e)

        x = _x(lib)
        y = F.apply(x)
        y.sum().backward()
        out = [attempt(lambda: y.grad_fn.saved_tensors), attempt(lambda: y.sum().backward())]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out.append(attempt(lambda: y.grad_fn.saved_variables))
        out.append([(w.category.__name__, str(w.message)) for w in caught])
        y = F.apply(x)
        y.sum().backward(retain_graph=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out += [y.grad_fn.saved_tensors, y.grad_fn.saved_variables]
        # built-in nodes: a saved tensor raises, a saved non-tensor stays, an unsaved one is None
        for make, attr in [
            (lambda: x.sin(), "_saved_self"),
            (lambda: x.exp(), "_saved_result"),
            (lambda: x.pow(2), "_saved_exponent"),
            (lambda: x.sum(0), "_saved_self_sym_sizes"),
            (lambda: x * 3, "_saved_other"),
            (lambda: x * 3, "_saved_self"),
        ]:
            z = make()
            z.sum().backward()
            out.append(attempt(lambda z=z, attr=attr: getattr(z.grad_fn, attr)))
        return out

    ours = run_both(scenario, torch_oracle)
    assert ours[0] == "raised: " + BACKWARD_TWICE


def test_saved_tensors_read_in_a_second_backward(torch_oracle: ModuleType) -> None:
    """A custom Function's backward reads ctx.saved_tensors; the second backward through the freed
    graph raises from there (the first one freed them)."""

    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                ctx.save_for_backward(a)
                return a.exp()

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                log.append("backward")
                (a,) = ctx.saved_tensors
                return g * a.exp()

        x = _x(lib)
        y = F.apply(x).sin()
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        try:
            y.sum().backward()
        except RuntimeError as e:
            log.append(str(e))
        return log, x.grad

    run_both(scenario, torch_oracle)


# --- 5. numpy(), tolist(), item() ---------------------------------------------------------------


def test_numpy_tolist_item_of_a_tensor_that_requires_grad(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        def attempt(f: Any) -> Any:
            try:
                value = f()
            except (RuntimeError, TypeError) as e:
                return type(e).__name__ + ": " + str(e)
            return value.tolist() if isinstance(value, np.ndarray) else value

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        out = [attempt(lambda: x.numpy()), attempt(lambda: (x * 2).numpy())]
        with lib.no_grad():
            out += [attempt(lambda: x.numpy()), attempt(lambda: (x * 2).numpy())]
            out += [attempt(lambda: x.tolist()), attempt(lambda: x[0].item())]
        with lib.inference_mode():
            out += [attempt(lambda: x.numpy())]
        with lib.enable_grad():
            out += [attempt(lambda: x.numpy(force=True)), attempt(lambda: x.numpy(True))]
        out += [attempt(lambda: x.tolist()), attempt(lambda: x[1].item()), attempt(lambda: x.item())]
        # numpy() returns a new array each call, sharing the tensor's memory
        a, b = x.numpy(force=True), x.numpy(force=True)
        a[0] = 7.0
        out += [a is b, np.shares_memory(a, b), x.detach().clone()]
        p = lib.tensor([1.0, 2.0])
        out += [p.numpy() is p.numpy(), np.shares_memory(p.numpy(), p.numpy())]
        return out

    run_both(scenario, torch_oracle)


# --- 6. very deep re-entrant backward, very long graphs -----------------------------------------


def _deep_reentrant_threads(lib: ModuleType, levels: int) -> Any:
    """A custom Function whose backward runs backward() on a new graph, ``levels`` deep. Returns
    the thread pattern (a thread's index of first appearance, per level), the packs counted by
    saved-tensor hooks set around the outermost backward, and the gradient."""
    threads: list[int] = []
    packs = [0]

    class Deep(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, n: int) -> Any:
            ctx.n = n
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            threads.append(threading.get_ident())
            if ctx.n > 0:
                with lib.enable_grad():
                    y = lib.ones(1, requires_grad=True)
                    (Deep.apply(y, ctx.n - 1) * y).sum().backward()
            return g * 2, None

    def pack(t: Any) -> Any:
        packs[0] += 1
        return t

    x = lib.ones(1, requires_grad=True)
    out = Deep.apply(x, levels)
    with lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out.sum().backward()
    order: dict[int, int] = {}
    return [order.setdefault(t, len(order)) for t in threads], packs[0], x.grad


def test_deep_reentrant_backward_moves_to_new_threads_as_torch(torch_oracle: ModuleType) -> None:
    """Note [Deep re-entrant backward]: 2000 levels; the thread changes at the same levels as in
    torch (every 61 backward calls: MAX_DEPTH = 60 nested ones per thread)."""
    ours = run_both(functools.partial(_deep_reentrant_threads, levels=2000), torch_oracle)
    pattern = ours[0]
    assert len(pattern) == 2001 and max(pattern) == 2001 // 61
    assert [i for i in range(1, len(pattern)) if pattern[i] != pattern[i - 1]][:2] == [61, 122]


def test_shallow_reentrant_backward_stays_on_the_thread(torch_oracle: ModuleType) -> None:
    ours = run_both(functools.partial(_deep_reentrant_threads, levels=59), torch_oracle)
    assert set(ours[0]) == {0}


def test_deep_reentrant_backward_error_reaches_the_caller(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class Deep(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, n: int) -> Any:
                ctx.n = n
                return x.clone()

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                if ctx.n == 0:
                    raise ValueError("deepest level failed")
                with lib.enable_grad():
                    y = lib.ones(1, requires_grad=True)
                    Deep.apply(y, ctx.n - 1).sum().backward()
                return g, None

        x = lib.ones(1, requires_grad=True)
        Deep.apply(x, 300).sum().backward()

    raises_same(scenario, torch_oracle, "deepest level failed")


def test_ported_deep_reentrant(torch_oracle: ModuleType) -> None:
    """test/test_autograd.py: test_deep_reentrant (Variable(...) written as detach().requires_grad_())."""

    def scenario(lib: ModuleType) -> Any:
        class DeepReentrant(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                with lib.enable_grad():
                    ctx.x = x.detach().requires_grad_(True)
                    ctx.x = ctx.x - 1
                return ctx.x.detach()

            @staticmethod
            def backward(ctx: Any, x: Any) -> Any:
                if ctx.x < 0:
                    return x
                with lib.enable_grad():
                    DeepReentrant.apply(ctx.x).sum().backward()
                return x

        # Test stack overflow escape mechanism
        v = lib.tensor(2000.0, requires_grad=True)
        # This will cause stack overflow if reentrant calls are handled
        # in the same thread recursively
        DeepReentrant.apply(v).sum().backward()
        # Test stack overflow escape mechanism multiple times
        # to ensure reusing workers in the pool works fine
        v2 = lib.tensor(200.0, requires_grad=True)
        DeepReentrant.apply(v2).sum().backward()
        return v.grad, v2.grad

    run_both(scenario, torch_oracle)


def test_ported_reentrant_priority(torch_oracle: ModuleType) -> None:
    """test/test_autograd.py: test_reentrant_priority."""

    def scenario(lib: ModuleType) -> Any:
        order: list[str] = []

        class MyFunction(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x

            @staticmethod
            def backward(ctx: Any, x: Any) -> Any:
                order.append("MyFunction")
                return x

        class Reentrant(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                with lib.enable_grad():
                    ctx.x = x.detach().requires_grad_(True)
                    ctx.x = ctx.x - 1
                return ctx.x.detach()

            @staticmethod
            def backward(ctx: Any, x: Any) -> Any:
                order.append("Reentrant")
                if ctx.x < 0:
                    return x
                with lib.enable_grad():
                    Reentrant.apply(ctx.x).backward()
                return x

        a = MyFunction.apply(lib.tensor(6.0, requires_grad=True))
        b = Reentrant.apply(lib.tensor(9.0, requires_grad=True))
        v = a * b
        v.backward()
        return order

    order = run_both(scenario, torch_oracle)
    assert len(order) == 11 and order.count("Reentrant") == 10 and order[-1] == "MyFunction"


def test_very_long_graph(torch_oracle: ModuleType) -> None:
    """20,000 ops in a chain: backward, grad() and freeing the graph stay iterative."""

    def scenario(lib: ModuleType) -> Any:
        x = lib.tensor([0.5, -1.0], dtype=lib.float64, requires_grad=True)
        y = x
        for i in range(20000):
            y = y * 1.0001 if i % 2 else y + 0.001
        y.sum().backward(retain_graph=True)
        (g,) = lib.autograd.grad(y.sum(), x)
        del y
        z = x
        for _ in range(20000):
            z = z.sin()
        del z
        return x.grad, g

    run_both(scenario, torch_oracle)


# --- 7. checkpoint's keyword arguments ----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "preserve",
        "args",
        "kwargs",
        "context_fn_x",
        "gen",
        "ret",
        "self",
        "mode",
        "frame",
        "unpack_error_cb",
        "forward_context",
        "had_device_in_fwd",
        "device_type",
    ],
)
@pytest.mark.parametrize("traced", [False, True])
def test_checkpoint_hands_any_other_keyword_to_the_function(
    torch_oracle: ModuleType, name: str, traced: bool
) -> None:
    """Keywords that are not checkpoint's own reach the function, whatever their name, also while
    the engine's trace records (its wrapper takes ``mode`` and ``fn`` positionally only)."""

    def scenario(lib: ModuleType) -> Any:
        def fn(x: Any, **kw: Any) -> Any:
            return x.sin() * 2, sorted(kw.items())

        x = _x(lib)
        out, seen = _cp(lib).checkpoint(fn, x, use_reentrant=False, **{name: 7})
        out.sum().backward()
        return seen, x.grad

    if traced:
        # The engine side runs under the trace recorder; torch's run is the same scenario.
        from engine.trace import record

        theirs = scenario(torch_oracle)
        with record():
            ours = scenario(engine)
        assert ours[0] == theirs[0]
        np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy())
    else:
        run_both(scenario, torch_oracle)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        # torch 2.8's own collisions: checkpoint's first parameter, and its generator's.
        ({"function": 1}, "checkpoint() got multiple values for argument 'function'"),
        ({"fn": 1}, "_checkpoint_without_reentrant_generator() got multiple values for argument 'fn'"),
        ({"determinism_check": 1}, "determinism_check should be one of ['default', 'none'], but got 1"),
        (
            {"x": 1},
            "test_checkpoint_keyword_collisions_match_torch_2_8.<locals>.scenario.<locals>.fn() got multiple "
            "values for argument 'x'",
        ),
    ],
)
def test_checkpoint_keyword_collisions_match_torch_2_8(
    torch_oracle: ModuleType, kwargs: dict[str, Any], expected: str
) -> None:
    def scenario(lib: ModuleType) -> Any:
        def fn(x: Any, **kw: Any) -> Any:
            return x * 2

        _cp(lib).checkpoint(fn, _x(lib), use_reentrant=False, **kwargs)

    raises_same(scenario, torch_oracle, expected)


def test_checkpoint_own_keywords_are_not_handed_on(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        def fn(x: Any, **kw: Any) -> Any:
            return x.exp(), sorted(kw)

        x = _x(lib)
        out, seen = _cp(lib).checkpoint(
            fn, x, use_reentrant=False, preserve_rng_state=False, debug=False, determinism_check="none", a=1
        )
        out.sum().backward()
        return seen, x.grad

    run_both(scenario, torch_oracle)


def test_ported_checkpoint_kwargs(torch_oracle: ModuleType) -> None:
    """test/test_utils.py and test_autograd.py's checkpoint keyword tests: the reentrant variant
    refuses keywords; the non-reentrant one hands them on, and gradients equal the plain run's."""

    def scenario(lib: ModuleType) -> Any:
        cp = _cp(lib)

        def fn(a: Any, b: Any, *, scale: Any, shift: float = 0.0) -> Any:
            return (a * b * scale).sin() + shift

        a, b, s = _x(lib), _x(lib, (1.0, 2.0, 3.0)), _x(lib, (0.1, 0.2, 0.3))
        try:
            cp.checkpoint(fn, a, b, use_reentrant=True, scale=s, shift=1.0)
        except ValueError as e:
            refused = str(e)
        cp.checkpoint(fn, a, b, use_reentrant=False, scale=s, shift=1.0).sum().backward()
        grads = (a.grad, b.grad, s.grad)
        a.grad = b.grad = s.grad = None
        fn(a, b, scale=s, shift=1.0).sum().backward()
        return refused, grads, (a.grad, b.grad, s.grad)

    ours = run_both(scenario, torch_oracle)
    assert ours[0] == "Unexpected keyword arguments: scale,shift"


# --- 8. SAC: an OpOverloadPacket in the op list -------------------------------------------------

PACKET_HINT = (
    "Please update the OpOverloadPacket to a specific OpOverload.For example, if you have "
    "`torch.ops.aten.mm`, change it to `torch.ops.aten.mm.default`."
)


@pytest.mark.parametrize("name", ["mm", "sin", "sum"])
def test_sac_op_list_with_an_overload_packet(torch_oracle: ModuleType, name: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        _cp(lib).create_selective_checkpoint_contexts([getattr(lib.ops.aten, name)])

    theirs_type = "<class 'torch._ops.OpOverloadPacket'>"
    ours_type = "<class 'engine.ops._aten.OpOverloadPacket'>"  # the engine's own type name
    msg = f"Expected op in `op_list` to be an OpOverload but got: aten.{name} of type {{}}. {PACKET_HINT}"
    with pytest.raises(ValueError) as theirs:
        scenario(torch_oracle)
    assert str(theirs.value) == msg.format(theirs_type)
    with pytest.raises(ValueError) as ours:
        scenario(engine)
    assert str(ours.value) == msg.format(ours_type)


def test_sac_policy_and_op_list_overloads_still_work(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        cp = _cp(lib)
        x = lib.tensor(np.linspace(-1, 1, 9).reshape(3, 3), requires_grad=True)
        context_fn = functools.partial(cp.create_selective_checkpoint_contexts, [lib.ops.aten.mm.default])
        cp.checkpoint(lambda t: (t @ t).sin(), x, use_reentrant=False, context_fn=context_fn).sum().backward()
        try:
            cp.create_selective_checkpoint_contexts(["mm"])
        except ValueError as e:
            return x.grad, str(e)
        return x.grad, None

    run_both(scenario, torch_oracle)


# --- 9. torch's names in the engine's messages --------------------------------------------------

# A message that names one of torch's modules or functions must name it as torch does
# ("torch.utils.checkpoint: ...", "torch.autograd.set_detect_anomaly(True)"): the spec's rule.
# Reprs and type names are the engine's own ("engine.nn.Parameter", "engine._C._autograd...").
_ENGINE_NAME = re.compile(r"(?<![A-Za-z_])engine\.[A-Za-z_]")

# (file under engine/, a piece of the message) -> why it keeps "engine."
ALLOWED: dict[tuple[str, str], str] = {
    ("autograd/functional.py", 'engine.autograd.functional.jacobian: strategy="forward-mode" needs'): (
        "the engine's own notice: forward-mode AD is not implemented (torch has no such message)"
    ),
    ("autograd/gradcheck.py", "engine.autograd.gradcheck: check_forward_ad"): (
        "the engine's own notice: forward-mode AD and vmap are not implemented"
    ),
    ("autograd/graph.py", "engine._C._autograd.SavedTensor"): (
        "a type name inside pybind11's signature text: the engine's own Python identity"
    ),
    ("nn/modules/module.py", "(engine.nn.Parameter or None required)"): "a type name (the engine's class)",
    ("nn/modules/module.py", "(engine.nn.Parameter or None expected)"): "a type name (the engine's class)",
    ("nn/modules/module.py", "(engine.nn.Module or None expected)"): "a type name (the engine's class)",
    ("nn/modules/module.py", "(engine.nn.Buffer, engine.Tensor or None expected)"): (
        "type names (the engine's classes)"
    ),
    (
        "ops/__init__.py",
        "module 'engine.ops' has no attribute",
    ): "Python's AttributeError text for this module",
    ("utils/__init__.py", "module 'engine.utils' has no attribute"): (
        "Python's AttributeError text for this module"
    ),
    ("trace/_core.py", "engine.trace: unknown event kind"): "engine.trace has no torch counterpart",
    (
        "trace/record.py",
        "engine.trace.record() calls cannot be nested",
    ): "engine.trace has no torch counterpart",
    ("utils/data/dataloader.py", "engine.utils.data.DataLoader: num_workers="): (
        "the engine's own notice: worker processes are not implemented"
    ),
}


def _message_strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _messages(tree: ast.AST) -> list[tuple[int, str]]:
    """String pieces of every raise, every ``warnings.warn`` / ``warn`` call, and every value
    assigned to a name that holds a message (``msg``, ``*_msg``, ``*_template``, ``message``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        parts: ast.AST | None = None
        if isinstance(node, ast.Raise):
            parts = node.exc
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "warn":
                parts = node
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if any(n == "msg" or n.endswith(("_msg", "_template", "message")) for n in names):
                parts = node.value
        if parts is not None:
            found += [(getattr(node, "lineno", 0), s) for s in _message_strings(parts)]
    return found


def test_engine_messages_name_torch_as_torch_does() -> None:
    offending, used = [], set()
    for path in sorted(ENGINE_DIR.rglob("*.py")):
        rel = path.relative_to(ENGINE_DIR).as_posix()
        for line, text in _messages(ast.parse(path.read_text(encoding="utf-8"))):
            if not _ENGINE_NAME.search(text):
                continue
            key = next((k for k in ALLOWED if k[0] == rel and k[1] in text), None)
            if key is None:
                offending.append(f"engine/{rel}:{line}: {text!r}")
            else:
                used.add(key)
    assert not offending, "messages naming engine.* where torch's name torch.*:\n" + "\n".join(offending)
    assert used == set(ALLOWED), f"allow-list entries that match nothing any more: {set(ALLOWED) - used}"


def test_messages_fixed_to_torch_names(torch_oracle: ModuleType) -> None:
    """A few of the fixed messages, end to end."""

    def anomaly_hint(lib: ModuleType) -> Any:
        x = _x(lib)
        y = x.exp()
        y.add_(1)
        y.sum().backward()

    def reentrant_grad(lib: ModuleType) -> Any:
        x = _x(lib)
        out = _cp(lib).checkpoint(lambda t: t.sin(), x, use_reentrant=True)
        lib.autograd.grad(out.sum(), x)

    def deprecated_only_inputs(lib: ModuleType) -> Any:
        x = _x(lib)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.autograd.grad((x * 2).sum(), x, only_inputs=False)
        return [str(w.message) for w in caught]

    run_both(anomaly_hint, torch_oracle)
    run_both(reentrant_grad, torch_oracle)
    ours = run_both(deprecated_only_inputs, torch_oracle)
    assert "please use torch.autograd.backward." in ours[0]
