"""PyTorch's ``TestNestedCheckpoint`` (test/test_autograd.py), ported to the engine.

Every test runs with early stop on and off, as upstream does. The expected values are PyTorch's
(the assertions are the upstream ones); the ``test_vs_torch_*.py`` files compare the same kind of
scenarios event by event against torch 2.8.0.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import engine
from engine.ops import DispatchMode
from engine.utils.checkpoint import checkpoint, set_checkpoint_early_stop

pytestmark = pytest.mark.usefixtures("engine_seed")

Fn = Callable[[Any], Any]


def allclose(a: Any, b: Any) -> bool:
    return bool(np.allclose(a.detach().numpy(), b.detach().numpy()))


def grad(fn: Fn) -> Fn:
    def wrapper(x: Any) -> Any:
        with engine.enable_grad():
            out = fn(x)
            (grad_input,) = engine.autograd.grad(out, inputs=(x,), create_graph=True)
        return grad_input

    return wrapper


def sum_(fn: Fn) -> Fn:
    def wrapped(x: Any) -> Any:
        return fn(x).sum()

    return wrapped


def c(fn: Fn) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return checkpoint(fn, *args, use_reentrant=False, **kwargs)

    return wrapped


def get_tests(fn: Fn) -> tuple[tuple[Fn, tuple[Fn, ...]], ...]:
    # function <> tuple of function arbitrarily wrapped in checkpoint in various ways
    return (
        (fn, (c(fn), c(c(fn)))),
        (grad(fn), (grad(c(fn)), grad(c(c(fn))))),
        (grad(grad(fn)), (grad(c(grad(fn))), c(grad(grad(c(fn)))), grad(c(grad(c(fn)))))),
        (grad(grad(grad(fn))), (grad(c(grad(grad(c(fn))))), grad(c(grad(c(grad(c(fn)))))))),
    )


def check_graph_dies(fn: Fn) -> None:
    """No node of the graph built by ``fn`` outlives it (no reference cycle through the
    checkpoint's frames, hooks or holders)."""

    def iter_graph(roots: list[Any]) -> Iterator[Any]:
        seen = set()
        q: collections.deque[Any] = collections.deque()
        for node in roots:
            if node is not None:
                seen.add(node)
                q.append(node)
        while q:
            node = q.popleft()
            for next_fn, _idx in node.next_functions:
                if next_fn in seen or next_fn is None:
                    continue
                seen.add(next_fn)
                q.append(next_fn)
            yield node

    class Handle:
        def __init__(self, node_name: str) -> None:
            self.node_name = node_name

    def scope() -> list[weakref.ref[Handle]]:
        a = engine.randn((), requires_grad=True)
        out = fn(a)
        refs = []
        for node in iter_graph([out.grad_fn]):
            handle = Handle(node.name())
            refs.append(weakref.ref(handle))
            node.metadata["blah"] = handle
        return refs

    refs = scope()
    node_names = [h.node_name for ref in refs if (h := ref()) is not None]
    assert node_names == []


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint(early_stop: bool) -> None:
    with set_checkpoint_early_stop(early_stop):
        x = engine.randn((), requires_grad=True)

        def f(x: Any) -> Any:
            return x.sin().exp().sin()

        def g(x: Any) -> Any:
            a = x.sin().exp().sin()
            b = x.sin().exp().sin()
            (_ga,) = engine.autograd.grad(a, x)
            (_gb,) = engine.autograd.grad(b, x)
            return x.sin()

        for fn in (f, g):
            for expected_fn, actual_fns in get_tests(fn):
                expected = expected_fn(x)
                for actual_fn in actual_fns:
                    actual = actual_fn(x)
                    assert allclose(expected, actual)
                    check_graph_dies(actual_fn)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_two_children(early_stop: bool) -> None:
    with set_checkpoint_early_stop(early_stop):

        def f(x: Any) -> Any:
            return x.sin().exp().sin()

        def g(x: Any) -> Any:
            return x.cos().sin().exp()

        def hc(x: Any) -> Any:
            return c(g)(c(f)(x))

        def h(x: Any) -> Any:
            return g(f(x))

        a = engine.randn(3, 3, requires_grad=True)
        expected = grad(sum_(grad(sum_(h))))(a)
        actual = grad(sum_(grad(sum_(c(hc)))))(a)
        assert allclose(expected, actual)

        actual = grad(sum_(c(grad(sum_(c(hc))))))(a)
        assert allclose(expected, actual)

        check_graph_dies(grad(c(hc)))
        check_graph_dies(grad(sum_(grad(sum_(c(hc))))))
        check_graph_dies(grad(sum_(c(grad(sum_(c(hc)))))))


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_non_tensor_inputs_and_outputs(early_stop: bool) -> None:
    def fn(k: int, a: Any, b: Any, f: Fn) -> tuple[Any, int, str]:
        return f(k * a * b.exp()), 1, "abcd"

    k = 3
    a = engine.tensor(2.0, requires_grad=True)
    b = engine.tensor(3.0, requires_grad=True)

    def f(x: Any) -> Any:
        return x.sin()

    with set_checkpoint_early_stop(early_stop):
        out, unused1, unused2 = checkpoint(fn, k, a, b, f, use_reentrant=False)
    assert (unused1, unused2) == (1, "abcd")
    actual_grads = engine.autograd.grad(out, (a, b))

    out, _, _ = fn(k, a, b, f)
    expected_grads = engine.autograd.grad(out, (a, b))
    for actual, expected in zip(actual_grads, expected_grads, strict=True):
        assert allclose(actual, expected)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_kwargs(early_stop: bool) -> None:
    def fn(a: Any, blah: Any = None) -> Any:
        out = a.sin().exp()
        if blah is not None:
            out = out * blah
        return out.sin().exp()

    a = engine.tensor(2.0, requires_grad=True)
    b = engine.tensor(3.0, requires_grad=True)

    with set_checkpoint_early_stop(early_stop):
        out = checkpoint(fn, a, blah=b, use_reentrant=False)
        actual_grads = engine.autograd.grad(out, (a, b))

        out = fn(a, blah=b)
        expected_grads = engine.autograd.grad(out, (a, b))
        for actual, expected in zip(actual_grads, expected_grads, strict=True):
            assert allclose(actual, expected)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_same_graph(early_stop: bool) -> None:
    counter = [0]

    def hook(*_unused_args: Any) -> None:
        counter[0] += 1

    def fn(a: Any) -> Any:
        return a.sin().cos().sin()

    a = engine.tensor(1.0, requires_grad=True)

    with set_checkpoint_early_stop(early_stop):
        out = checkpoint(fn, a, use_reentrant=False)
    # The hook is registered on the original graph
    out.grad_fn.next_functions[0][0].register_hook(hook)
    # And backward is performed on the original graph
    out.backward()

    assert counter[0] == 1


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_reentrant_backwards(early_stop: bool) -> None:
    def fn(a: Any) -> tuple[Any, Any]:
        x = a.sin().cos()
        out = x.sin()
        return x, out

    calls = [0]

    def hook(*_unused_args: Any) -> None:
        # do backward again, but skip over the part of the graph where
        # the hook was registered
        calls[0] += 1
        x.backward(retain_graph=True)

    grads = []
    for ckpt in (True, False):
        a = engine.tensor(1.0, requires_grad=True)
        with set_checkpoint_early_stop(early_stop):
            x, out = checkpoint(fn, a, use_reentrant=False) if ckpt else fn(a)
        out.grad_fn.register_hook(hook)
        out.backward(retain_graph=True)
        grads.append(a.grad)
    assert calls[0] == 2
    # Both backwards (the outer one and the one started by the hook) accumulated into a.grad.
    assert allclose(grads[0], grads[1])


def test_nested_checkpoint_set_early_stop() -> None:
    counter = [0]

    def clone(x: Any) -> Any:
        counter[0] += 1
        return x.clone()

    def fn(x: Any) -> Any:
        # Since clone does not save anything, it is not recomputed iff
        # early stop is enabled.
        return clone(x.sin().cos())

    def run(**kwargs: Any) -> int:
        counter[0] = 0
        a = engine.tensor(1.0, requires_grad=True)
        out = checkpoint(fn, a, use_reentrant=False, **kwargs)
        out.backward()
        return counter[0]

    # Early stopping is enabled by default
    assert run() == 1
    # Local setting (the early_stop argument: PyTorch 2.9+)
    assert run(early_stop=False) == 2
    assert run(early_stop=True) == 1

    # The context manager applies to checkpoints run under it, even though it is no longer
    # active when backward/recomputation is performed.
    counter[0] = 0
    a = engine.tensor(1.0, requires_grad=True)
    with set_checkpoint_early_stop(False):
        out = checkpoint(fn, a, use_reentrant=False)
    out.backward()
    assert counter[0] == 2

    with set_checkpoint_early_stop(True):
        assert run() == 1

    # Context manager nesting: the innermost wins, and it wins over the argument
    with set_checkpoint_early_stop(False), set_checkpoint_early_stop(True):
        assert run(early_stop=False) == 1

    # Precedence: the context manager over the argument
    with set_checkpoint_early_stop(False):
        assert run(early_stop=True) == 2
    with set_checkpoint_early_stop(True):
        assert run(early_stop=False) == 1


def test_nested_checkpoint_set_early_stop_no_recompution_needed() -> None:
    # Case 1: We have one tensor saved and its the input

    # We have two different counters here because in this case we actually
    # do call into x.sin() at the python level during recomputation whether
    # or not early stop is enabled. This is because the early stopping
    # only happens at the autograd level (preventing us from reaching the
    # backend).
    counter = [0]

    class SinCounterMode(DispatchMode):
        def __init__(self) -> None:
            self.count = 0

        def __torch_dispatch__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            kwargs = {} if kwargs is None else kwargs
            if func is engine.ops.sin:
                self.count += 1
            return func(*args, **kwargs)

    def fn(x: Any) -> Any:
        counter[0] += 1
        return x.sin()

    # With early stopping (enabled by default)
    a = engine.tensor(1.0, requires_grad=True)
    with SinCounterMode() as python_dispatch_counter:
        out = checkpoint(fn, a, use_reentrant=False)
        out.backward()
    assert counter[0] == 2
    assert python_dispatch_counter.count == 1

    # Without early stopping
    counter = [0]
    a = engine.tensor(1.0, requires_grad=True)
    with SinCounterMode() as python_dispatch_counter:
        with set_checkpoint_early_stop(False):
            out = checkpoint(fn, a, use_reentrant=False)
        out.backward()
    assert counter[0] == 2
    assert python_dispatch_counter.count == 2

    # Case 2: Forward saves no tensors

    # Since unpack isn't even called, counter is 1 whether or not early stop
    # is enabled!
    counter = [0]

    def fn2(x: Any) -> Any:
        counter[0] += 1
        return x.clone()

    # With early stopping (enabled by default)
    a = engine.tensor(1.0, requires_grad=True)
    out = checkpoint(fn2, a, use_reentrant=False)
    out.backward()
    assert counter[0] == 1

    # Without early stopping
    counter = [0]
    a = engine.tensor(1.0, requires_grad=True)
    with set_checkpoint_early_stop(False):
        out = checkpoint(fn2, a, use_reentrant=False)
    out.backward()
    assert counter[0] == 1
