"""Grad modes against torch 2.8.0 (ported from test/test_autograd.py): no_grad, enable_grad,
set_grad_enabled and inference_mode as context managers and decorators, and their
thread-locality."""

from __future__ import annotations

import threading
import warnings
from types import ModuleType
from typing import Any

import pytest

from tests.engine._autograd_diff import raises_same, run_both

pytestmark = pytest.mark.oracle


def _x(lib: ModuleType) -> Any:
    return lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)


def test_context_managers(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        log = []
        with lib.no_grad():
            log.append(((x * 2).requires_grad, lib.is_grad_enabled()))
            with lib.enable_grad():
                log.append(((x * 2).requires_grad, lib.is_grad_enabled()))
            with lib.set_grad_enabled(True):
                log.append((x * 2).requires_grad)
        with lib.set_grad_enabled(False):
            log.append((x * 2).requires_grad)
        lib.set_grad_enabled(False)  # takes effect at once, outside a with
        log.append(lib.is_grad_enabled())
        lib.set_grad_enabled(True)
        log.append((lib.is_grad_enabled(), str(lib.set_grad_enabled(True)), repr(lib.set_grad_enabled(True))))
        return log

    run_both(scenario, torch_oracle)


def test_decorators(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        @lib.no_grad()
        def f(x: Any) -> Any:
            return (x * 2).requires_grad, lib.is_grad_enabled()

        @lib.no_grad
        def f_bare(x: Any) -> Any:
            return lib.is_grad_enabled()

        @lib.enable_grad()
        def g(x: Any) -> Any:
            return (x * 2).requires_grad

        @lib.set_grad_enabled(False)
        def h(x: Any) -> Any:
            return (x * 2).requires_grad

        @lib.inference_mode()
        def i(x: Any) -> Any:
            return (x * 2).requires_grad, (x * 2).is_inference(), lib.is_inference_mode_enabled()

        @lib.inference_mode
        def i_bare(x: Any) -> Any:
            return lib.is_inference_mode_enabled()

        x = _x(lib)
        with lib.no_grad():
            in_no_grad = g(x)
        return f(x), f_bare(x), in_no_grad, h(x), i(x), i_bare(x), lib.is_grad_enabled(), f.__name__

    run_both(scenario, torch_oracle)


def test_decorated_generator(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        @lib.no_grad()
        def gen() -> Any:
            received = yield lib.is_grad_enabled()
            yield (received, lib.is_grad_enabled())

        it = gen()
        first = next(it)
        between = lib.is_grad_enabled()
        second = it.send("sent")
        return first, between, second

    assert run_both(scenario, torch_oracle) == (False, True, ("sent", False))


def test_decorating_a_class_is_deprecated(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")

            @lib.no_grad()
            class A:
                def __init__(self) -> None:
                    self.mode = lib.is_grad_enabled()

        return str(w[0].message), w[0].category.__name__, A().mode

    run_both(scenario, torch_oracle)


def test_inference_mode(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        with lib.inference_mode():
            x = lib.ones(2)
        y = _x(lib)
        with lib.no_grad(), lib.inference_mode(False):
            inner = lib.is_grad_enabled()  # inference_mode(False) turns grad mode on
        z = x * y
        z.sum().backward()
        return x.is_inference(), x.requires_grad, z.requires_grad, y.grad, inner

    run_both(scenario, torch_oracle)
    raises_same(
        lambda lib: _inference_tensor(lib).add_(1),
        torch_oracle,
        "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a "
        "normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.",
    )


def _inference_tensor(lib: ModuleType) -> Any:
    with lib.inference_mode():
        return lib.ones(2)


def test_grad_mode_is_thread_local(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        results: dict[str, Any] = {}
        entered, checked = threading.Event(), threading.Event()

        def in_no_grad() -> None:
            with lib.no_grad():
                entered.set()
                checked.wait(timeout=30)  # stay inside no_grad while the other thread runs
                results["no_grad thread"] = ((_x(lib) * 2).requires_grad, lib.is_grad_enabled())

        def other() -> None:
            entered.wait(timeout=30)
            results["other thread"] = ((_x(lib) * 2).requires_grad, lib.is_grad_enabled())
            checked.set()

        threads = [threading.Thread(target=in_no_grad), threading.Thread(target=other)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    assert run_both(scenario, torch_oracle) == {
        "no_grad thread": (False, False),
        "other thread": (True, True),
    }


def test_new_thread_starts_with_grad_enabled(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        seen: list[bool] = []
        with lib.no_grad():
            t = threading.Thread(target=lambda: seen.append(lib.is_grad_enabled()))
            t.start()
            t.join()
        return seen

    assert run_both(scenario, torch_oracle) == [True]
