"""Hooks against torch 2.8.0 (ported from test/test_autograd.py): tensor hooks, node pre- and
post-hooks, ``retain_grad``, post-accumulate-grad hooks, multi-grad hooks, what hooks may return,
and the grad mode hooks run in. Each scenario logs the hook calls; the logs must be identical."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.engine._autograd_diff import _x, raises_same, run_both

pytestmark = pytest.mark.oracle


# --- tensor hooks -------------------------------------------------------------------------------


def test_leaf_hooks_order_replace_and_remove(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        x.register_hook(lambda g: log.append(("h1", g.clone())))
        h2 = x.register_hook(lambda g: g * 2)
        x.register_hook(lambda g: log.append(("h3", g.clone())))
        (x * 3).sum().backward()
        h2.remove()
        h2.remove()  # removing twice is a no-op
        (x * 3).sum().backward()
        return log, x.grad

    run_both(scenario, torch_oracle)


def test_non_leaf_hooks(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        y = x * 2
        y.register_hook(lambda g: log.append(("y", g.clone())))
        y.register_hook(lambda g: g + 1)  # replaces the gradient flowing on to x
        z = y.sin()
        z.register_hook(lambda g: log.append(("z", g.clone())))
        z.sum().backward()
        return log, x.grad

    run_both(scenario, torch_oracle)


def test_hooks_registered_before_and_after_inplace(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        y = x * 2
        y.register_hook(lambda g: log.append(("before", g.clone())) or g * 10)
        y.mul_(3)
        y.register_hook(lambda g: log.append(("after", g.clone())) or g * 100)
        y.sum().backward()
        return log, x.grad, y.grad_fn.name()

    run_both(scenario, torch_oracle)


def test_hook_on_output_that_gets_no_gradient_sees_none(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []

        class Two(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx: Any, g1: Any, g2: Any) -> Any:
                return g1 * 2

        x = _x(lib)
        p, q = Two.apply(x)
        q.register_hook(lambda g: log.append(("q", g)))
        p.register_hook(lambda g: log.append(("p", g)))
        q.retain_grad()
        p.sum().backward()
        return log, q.grad, x.grad

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize(
    ("case", "expected", "error"),
    [
        ("not_tensor", "expected Variable, but hook returned 'float'", "TypeError"),
        ("shape", "hook '<lambda>' has changed the size of value", "RuntimeError"),
        ("dtype", "hook 'to_double' has changed the type of value (was torch.FloatTensor got torch.DoubleTensor)",
         "RuntimeError"),
        ("no_grad", "cannot register a hook on a tensor that doesn't require gradient", "RuntimeError"),
        ("retain_no_grad", "can't retain_grad on Tensor that has requires_grad=False", "RuntimeError"),
        ("pag_non_leaf", "post accumulate grad hooks cannot be registered on non-leaf tensors", "RuntimeError"),
    ],
)  # fmt: skip
def test_tensor_hook_errors(torch_oracle: ModuleType, case: str, expected: str, error: str) -> None:
    def to_double(g: Any) -> Any:
        return g.double()

    def scenario(lib: ModuleType) -> Any:
        x = lib.ones(3, requires_grad=True)
        if case == "not_tensor":
            x.register_hook(lambda g: 1.0)
        elif case == "shape":
            x.register_hook(lambda g: lib.ones(4))
        elif case == "dtype":
            x.register_hook(to_double)
        elif case == "no_grad":
            lib.ones(3).register_hook(lambda g: g)
        elif case == "retain_no_grad":
            lib.ones(3).retain_grad()
        else:
            (x * 2).register_post_accumulate_grad_hook(lambda t: None)
        (x * 2).sum().backward()

    raises_same(scenario, torch_oracle, expected)


# --- node hooks ---------------------------------------------------------------------------------


def test_node_pre_and_post_hooks(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        y = x.sin()
        z = y * 2
        fn = y.grad_fn
        fn.register_prehook(lambda go: log.append(("pre", go)))
        fn.register_hook(lambda gi, go: log.append(("post", gi, go)))
        y.register_hook(lambda g: log.append(("tensor", g.clone())))
        acc = fn.next_functions[0][0]
        acc.register_prehook(lambda go: log.append(("acc pre", go)))
        acc.register_hook(lambda gi, go: log.append(("acc post", gi, go)))
        x.register_hook(lambda g: log.append(("x tensor", g.clone())))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("x post acc", t.grad.clone())))
        z.sum().backward()
        return log, acc.name(), fn.name()

    run_both(scenario, torch_oracle)


def test_node_hooks_replace_gradients(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (2.0, 3.0, 4.0))
        y = x * w
        y.grad_fn.register_prehook(lambda go: (go[0] * 3,))
        y.grad_fn.register_hook(lambda gi, go: (gi[0] * 5, None))  # None keeps w's gradient
        y.sum().backward()
        h = y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[1] * 0))
        h.remove()
        y2 = x.exp()
        y2.grad_fn.register_prehook(lambda go: None)
        y2.sum().backward()
        return x.grad, w.grad

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("pre_count", "hook '<lambda>' has returned an incorrect number of values (got 2, but expected 1)"),
        ("pre_type", "expected tuple, but hook returned 'Tensor'"),
        ("post_none", "can't replace a None gradient with a non-None value"),
        ("post_count", "hook 'post' has returned an incorrect number of values (got 1, but expected 2)"),
    ],
)
def test_node_hook_errors(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def post(gi: Any, go: Any) -> Any:
        return (gi[0],)

    def scenario(lib: ModuleType) -> Any:
        x = lib.ones(3, requires_grad=True)
        y = x * lib.ones(3)
        if case == "pre_count":
            y.grad_fn.register_prehook(lambda g: (lib.ones(3), lib.ones(3)))
        elif case == "pre_type":
            y.grad_fn.register_prehook(lambda g: g[0])
        elif case == "post_none":
            y.grad_fn.register_hook(lambda gi, go: (gi[0], lib.ones(3)))
        else:
            y.grad_fn.register_hook(post)
        y.sum().backward()

    raises_same(scenario, torch_oracle, expected)


# --- retain_grad and post-accumulate-grad hooks ------------------------------------------------


def test_retain_grad(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = x * 2
        y.register_hook(lambda g: g * 5)  # retain_grad sees the gradient after tensor hooks
        y.retain_grad()
        y.register_hook(lambda g: g * 7)
        z = y.exp()
        z.retain_grad()
        z.sum().backward(retain_graph=True)
        first = y.grad
        z.sum().backward()
        x.retain_grad()  # a no-op on a leaf
        return first is y.grad, y.grad, z.grad, x.grad, y.retains_grad, x.retains_grad

    run_both(scenario, torch_oracle)


def test_retain_grad_follows_inplace_and_views(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        y = x * 2
        y.retain_grad()
        y.mul_(3)
        a = x * 1
        v = a[0]
        v.retain_grad()
        v.mul_(2)
        (y.sum() + a.sum()).backward()
        return y.grad, v.grad, x.grad

    run_both(scenario, torch_oracle)


def test_post_accumulate_grad_hook(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        h = x.register_post_accumulate_grad_hook(lambda t: log.append(t.grad.clone()))
        (x * 2).sum().backward()
        (x * 3).sum().backward()
        h.remove()
        (x * 5).sum().backward()
        lib.autograd.grad((x * 7).sum(), x)  # grad() does not accumulate, so no hook
        return log, x.grad

    run_both(scenario, torch_oracle)


# --- register_multi_grad_hook ------------------------------------------------------------------


def test_multi_grad_hook_all(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x, w, u = _x(lib), _x(lib), _x(lib)
        a, b = x * 2, x * 3
        h = lib.autograd.graph.register_multi_grad_hook((x, w, u, a, b), lambda gs: log.append(list(gs)))
        (x * 2 + w * 3 + a * b).sum().backward(retain_graph=True)
        (u * 5).sum().backward()
        (a * b).sum().backward(inputs=(x,))
        h.remove()
        (x * 2).sum().backward()
        return log

    run_both(scenario, torch_oracle)


def test_multi_grad_hook_any_and_order(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x, w = _x(lib), _x(lib)
        lib.autograd.graph.register_multi_grad_hook(
            (x, w), lambda g: log.append(("any", g.clone())), mode="any"
        )
        lib.autograd.graph.register_multi_grad_hook((x, w), lambda gs: log.append(("all", len(gs))))
        x.register_hook(lambda g: log.append("x"))
        w.register_hook(lambda g: log.append("w"))
        x.register_post_accumulate_grad_hook(lambda t: log.append("x acc"))
        (x * 2 + w * 3).sum().backward()
        (w * 5).sum().backward()
        return log

    run_both(scenario, torch_oracle)


def test_multi_grad_hook_errors(torch_oracle: ModuleType) -> None:
    raises_same(
        lambda lib: lib.autograd.graph.register_multi_grad_hook((_x(lib),), lambda g: None, mode="some"),
        torch_oracle,
        "Expects mode to be one of ('all', 'any') but got some",
    )

    def grad_of_leaf(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib)
        lib.autograd.graph.register_multi_grad_hook((x, w), lambda gs: None)
        lib.autograd.grad((x * w).sum(), [x])

    raises_same(
        grad_of_leaf,
        torch_oracle,
        "A leaf node was passed to _will_engine_execute_node but we are currently running autograd.grad(). "
        "This is currently not supported.",
    )


def test_will_engine_execute_node(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        a, b, c = x * 2, x * 3, x * 4
        unrelated = (x * 5).grad_fn

        def hook(g: Any) -> None:
            will = lib._C._will_engine_execute_node
            log.append((will(a.grad_fn), will(b.grad_fn), will(c.grad_fn), will(unrelated)))

        a.register_hook(hook)
        (a * b + c).sum().backward(retain_graph=True)
        (a * b + c).sum().backward(inputs=[b])
        lib.autograd.grad((a * c).sum(), [a])
        return log

    run_both(scenario, torch_oracle)
    raises_same(
        lambda lib: lib._C._will_engine_execute_node((_x(lib) * 2).grad_fn),
        torch_oracle,
        "_get_should_execute_nodes should only be called during the backward pass",
    )


# --- grad mode inside hooks ------------------------------------------------------------------------


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("outer", ["enabled", "no_grad"])
def test_hooks_run_in_the_graph_task_grad_mode(
    torch_oracle: ModuleType, create_graph: bool, outer: str
) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        x = _x(lib)
        y = x * 2
        mode = lib.is_grad_enabled
        eng = lib.autograd.Variable._execution_engine
        y.register_hook(lambda g: log.append(("tensor", mode())))
        y.grad_fn.register_prehook(lambda g: log.append(("pre", mode())))
        y.grad_fn.register_hook(lambda gi, go: log.append(("post", mode())))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("post acc", mode())))
        y.register_hook(lambda g: eng.queue_callback(lambda: log.append(("callback", mode()))))
        ctx = lib.no_grad() if outer == "no_grad" else lib.enable_grad()
        with ctx:
            lib.autograd.grad((y * 3).sum(), [x], create_graph=create_graph)
        log.append(("after", mode()))
        return log

    run_both(scenario, torch_oracle)
