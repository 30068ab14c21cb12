"""The backward engine against torch 2.8.0 (ported from test/test_autograd.py): the order nodes
run in, final callbacks, re-entrant backward, graph-task ids, multithreaded backward, and anomaly
mode. Grad modes are in test_autograd_grad_mode.py."""

from __future__ import annotations

import random
import threading
import warnings
from types import ModuleType
from typing import Any

import pytest

from tests.engine._autograd_diff import BACKWARD_TWICE, _x, raises_same, run_both

pytestmark = pytest.mark.oracle


# --- execution order ---------------------------------------------------------------------------


def _record_order(lib: ModuleType, roots: list[Any], leaves: list[Any]) -> list[str]:
    """Run backward from ``roots``, logging each node as it starts (a pre-hook on every node of
    the graph) and each leaf's tensor hook. Nodes are named by name and discovery index."""
    log: list[str] = []
    index: dict[Any, int] = {}

    def visit(fn: Any) -> None:
        if fn is None or fn in index:
            return
        index[fn] = len(index)
        fn.register_prehook(lambda go, fn=fn: log.append(f"{fn.name()}#{index[fn]}"))
        for nxt, _ in fn.next_functions:
            visit(nxt)

    for r in roots:
        visit(r.grad_fn)
    for i, leaf in enumerate(leaves):
        if leaf.requires_grad:
            leaf.register_hook(lambda g, i=i: log.append(f"leaf {i}"))
    lib.autograd.backward(roots)
    return log


GRAPHS = {
    "branches": lambda lib, x, w: (x.sin() * w.cos() + x.sin().exp()).sum(),
    "shared_intermediate": lambda lib, x, w: ((x * w).sin() * (x * w).cos() + x.exp() * w).sum(),
    "chain_of_tanh": lambda lib, x, w: sum((w + x * i).tanh() for i in range(4)).sum(),
    "expand_and_view": lambda lib, x, w: (
        (x.exp().view(3, 1).expand(3, 2) * w.view(3, 1)).sum() + x.exp().sum()
    ),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_execution_order(torch_oracle: ModuleType, name: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (1.0, 2.0, 3.0))
        log = _record_order(lib, [GRAPHS[name](lib, x, w)], [x, w])
        return log, x.grad, w.grad

    run_both(scenario, torch_oracle)


def test_execution_order_ties_between_many_leaves(torch_oracle: ModuleType) -> None:
    # Every AccumulateGrad has sequence_nr UINT64_MAX: their order comes from the heap's tie-breaking.
    def scenario(lib: ModuleType) -> Any:
        xs = [lib.ones(2, dtype=lib.float64, requires_grad=True) for _ in range(9)]
        prod = xs[0] * 1
        for x in xs[1:]:
            prod = prod * x
        stacked = lib.stack(xs).sum()
        return _record_order(lib, [prod.sum() + sum(xs).sum(), stacked], xs)

    run_both(scenario, torch_oracle)


def _random_graph(lib: ModuleType, seed: int) -> tuple[list[Any], list[Any]]:
    rng = random.Random(seed)
    leaves = [
        lib.ones(3, dtype=lib.float64, requires_grad=rng.random() < 0.8) for _ in range(rng.randint(1, 4))
    ]
    leaves[0].requires_grad_()
    values = list(leaves)
    for _ in range(rng.randint(2, 12)):
        k, a, b = rng.random(), rng.choice(values), rng.choice(values)
        if k < 0.3:
            v = a * b
        elif k < 0.5:
            v = a + b
        elif k < 0.65:
            v = a.sin()
        elif k < 0.8:
            v = a.exp()
        elif k < 0.9:
            v = a.view(3, 1).expand(3, 2).sum(1)
        else:
            v = a * 2
        values.append(v)
    outs = rng.sample(values[len(leaves) :], k=min(len(values) - len(leaves), rng.randint(1, 3)))
    return [o.sum() for o in outs if o.requires_grad], leaves


@pytest.mark.parametrize("seed", range(0, 200, 8))
def test_execution_order_random_graphs(torch_oracle: ModuleType, seed: int) -> None:
    def scenario(lib: ModuleType) -> Any:
        logs = []
        for s in range(seed, seed + 8):
            roots, leaves = _random_graph(lib, s)
            if roots:
                logs.append((_record_order(lib, roots, leaves), [leaf.grad for leaf in leaves]))
        return logs

    run_both(scenario, torch_oracle)


# --- final callbacks ---------------------------------------------------------------------------


def test_queue_callback(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        eng = lib.autograd.Variable._execution_engine
        x = _x(lib)
        y = x * 2

        def second() -> None:
            log.append(("second", lib._C._current_graph_task_id() >= 0))

        def first() -> None:
            log.append(("first", x.grad))  # runs after every gradient was accumulated
            eng.queue_callback(second)  # a callback may queue more callbacks

        def hook(g: Any) -> None:
            log.append("hook")
            eng.queue_callback(first)

        y.register_hook(hook)
        y.sum().backward()
        return log

    run_both(scenario, torch_oracle)
    raises_same(
        lambda lib: lib.autograd.Variable._execution_engine.queue_callback(lambda: None),
        torch_oracle,
        "Final callbacks can only be installed during backward pass.",
    )


# --- re-entrant backward -----------------------------------------------------------------------


def test_reentrant_backward_from_a_hook(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []
        eng = lib.autograd.Variable._execution_engine
        x, w = _x(lib), _x(lib, (3.0, 4.0, 5.0))
        y = x * 2

        def hook(g: Any) -> Any:
            outer = lib._C._current_graph_task_id()
            eng.queue_callback(lambda: log.append("outer callback"))
            with lib.enable_grad():  # hooks run with grad mode off
                inner = w * w
                inner.register_hook(lambda g: eng.queue_callback(lambda: log.append("inner callback")))
                inner.register_hook(
                    lambda g: log.append(("inner task", lib._C._current_graph_task_id() != outer))
                )
                inner.sum().backward()
            log.append(("back in outer", lib._C._current_graph_task_id() == outer))
            return g * 10

        y.register_hook(hook)
        y.sum().backward()
        return log, x.grad, w.grad

    run_both(scenario, torch_oracle)


def test_reentrant_backward_from_a_custom_function(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[str] = []

        class Reentrant(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any, depth: int) -> Any:
                ctx.save_for_backward(a)
                ctx.depth = depth
                return a * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                (a,) = ctx.saved_tensors
                log.append(f"start {ctx.depth}")
                with lib.enable_grad():
                    a2 = a.detach().requires_grad_()
                    inner = (a2**3).sum() if ctx.depth == 0 else Reentrant.apply(a2, ctx.depth - 1).sum()
                    (ga,) = lib.autograd.grad(inner, a2)
                log.append(f"end {ctx.depth}")
                return g * ga, None

        x = _x(lib)
        e, c = x.exp(), x.cos()
        e.grad_fn.register_prehook(lambda go: log.append("exp"))
        c.grad_fn.register_prehook(lambda go: log.append("cos"))
        (Reentrant.apply(e, 3).sum() + c.sum()).backward()
        return log, x.grad

    run_both(scenario, torch_oracle)


def test_error_in_reentrant_backward_propagates(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = x * 2

        def hook(g: Any) -> None:
            with lib.enable_grad():
                z = _x(lib).exp().sum()
                z.backward()
                z.backward()

        y.register_hook(hook)
        y.sum().backward()

    raises_same(scenario, torch_oracle, BACKWARD_TWICE)


def test_caught_error_in_reentrant_backward_leaves_outer_order_intact(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[str] = []
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        outer = [x * i for i in range(2, 6)]
        for i, v in enumerate(outer):
            v.grad_fn.register_prehook(lambda g, i=i: log.append(f"outer {i}"))

        def hook(g: Any) -> Any:
            with lib.enable_grad():
                w = lib.ones(2, dtype=lib.float64, requires_grad=True)
                inner = [w * i for i in range(1, 6)]
                for i, v in enumerate(inner):
                    v.grad_fn.register_prehook(lambda g, i=i: log.append(f"inner {i}"))
                inner[2].register_hook(lambda g: 1 / 0)
                try:
                    sum(v.sum() for v in inner).backward()
                except ZeroDivisionError:
                    log.append("caught")  # the failed backward's pending nodes must not run
            return g

        outer[1].register_hook(hook)
        sum(v.sum() for v in outer).backward()
        return log, x.grad

    run_both(scenario, torch_oracle)


# --- graph-task ids and threads ----------------------------------------------------------------


def test_current_graph_task_id(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        ids: list[int] = []
        x = _x(lib)
        y = x * 2
        y.register_hook(lambda g: ids.append(lib._C._current_graph_task_id()))
        x.register_hook(lambda g: ids.append(lib._C._current_graph_task_id()))
        outside = lib._C._current_graph_task_id()
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        return outside, ids[0] >= 0, ids[0] == ids[1], ids[1] != ids[2], ids[2] == ids[3]

    assert run_both(scenario, torch_oracle) == (-1, True, True, True, True)


def test_backward_on_separate_graphs_from_two_threads(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        results: dict[str, Any] = {}
        barrier = threading.Barrier(2, timeout=30)

        def run(name: str, power: int) -> None:
            x = _x(lib)
            y = x**power
            ids: list[int] = []

            def hook(g: Any) -> Any:
                ids.append(lib._C._current_graph_task_id())
                barrier.wait()  # both backwards are running at this point
                return g

            y.register_hook(hook)
            y.sum().backward()
            results[name] = (x.grad, ids[0])

        threads = [threading.Thread(target=run, args=("a", 2)), threading.Thread(target=run, args=("b", 3))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results["a"][0], results["b"][0], results["a"][1] != results["b"][1]

    assert run_both(scenario, torch_oracle)[2] is True


def test_backward_on_a_shared_graph_from_two_threads(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = (x**2).sum()
        threads = [threading.Thread(target=lambda: y.backward(retain_graph=True)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return x.grad

    run_both(scenario, torch_oracle)


# --- anomaly mode -------------------------------------------------------------------------------


def _nan_backward(lib: ModuleType) -> Any:
    class NaN(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            return a * b

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, g * float("nan")

    return NaN


def test_anomaly_mode_detects_nan(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                try:
                    _nan_backward(lib).apply(x, x).sum().backward()
                except RuntimeError as e:
                    err = str(e)
        return err, [str(m.message).split("\n")[0] for m in w]

    err, messages = run_both(scenario, torch_oracle)
    assert err == "Function 'NaNBackward' returned nan values in its 1th output."
    assert messages[1] == "Error detected in NaNBackward. Traceback of forward call that caused the error:"


def test_anomaly_mode_nan_check_of_builtin_node(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = lib.tensor([0.0, 1.0], dtype=lib.float64, requires_grad=True)
        with pytest.warns(UserWarning), lib.autograd.detect_anomaly():
            (x.sqrt() * 0).sum().backward()

    raises_same(scenario, torch_oracle, "Function 'SqrtBackward0' returned nan values in its 0th output.")


def test_anomaly_mode_without_nan_check_and_off(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        flags = [(lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled())]
        x = _x(lib)
        with pytest.warns(UserWarning), lib.autograd.detect_anomaly(check_nan=False):
            flags.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
            _nan_backward(lib).apply(x, x).sum().backward()
        with lib.autograd.set_detect_anomaly(True, check_nan=False):
            flags.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
        flags.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))
        return flags, x.grad

    run_both(scenario, torch_oracle)


def test_anomaly_mode_shows_forward_traceback(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                y = x.exp()  # the line the traceback must end with
                y.mul_(2)
                try:
                    y.sum().backward()
                except RuntimeError:
                    pass
        lines = [line for line in str(w[1].message).split("\n") if line.strip()]
        return lines[0], lines[-2].strip() if "Triggered internally" in lines[-1] else lines[-1].strip()

    assert run_both(scenario, torch_oracle) == (
        "Error detected in ExpBackward0. Traceback of forward call that caused the error:",
        "y = x.exp()  # the line the traceback must end with",
    )


def test_anomaly_mode_traceback_of_nested_backward(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class Outer(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                return a * 1

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return Fail.apply(g)

        class Fail(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                return a * 1

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                raise ValueError("boom")

        x = _x(lib)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with lib.autograd.detect_anomaly():
                go = lib.ones(3, dtype=lib.float64, requires_grad=True)
                y = Outer.apply(x)  # kept alive: PyTorch reads OuterBackward's forward traceback
                (g,) = lib.autograd.grad(y, x, go, create_graph=True)
                try:
                    g.sum().backward()
                except ValueError as e:
                    err = str(e)
        messages = [str(m.message) for m in w[1:]]  # w[0]: "Anomaly Detection has been enabled."
        return err, [line for m in messages for line in m.split("\n") if line and not line.startswith(" ")]

    err, headers = run_both(scenario, torch_oracle)
    assert err == "boom"
    assert headers[:2] == [
        "Error detected in FailBackward. Traceback of forward call that caused the error:",
        "Previous calculation was induced by OuterBackward. Traceback of forward call that induced the "
        "previous calculation:",
    ]
