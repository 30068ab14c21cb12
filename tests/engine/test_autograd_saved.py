"""Saved tensors and nodes as objects, against torch 2.8.0 (ported from test/test_autograd.py):
``_saved_*`` / ``_raw_saved_*`` accessors, saved-tensor hooks with custom Functions, which saved
tensors a partial backward frees, calling a node directly, and assigning ``.grad``."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.engine._autograd_diff import raises_same, run_both

pytestmark = pytest.mark.oracle


def _x(lib: ModuleType, values: Any = (0.5, 1.5)) -> Any:
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=True)


def test_saved_accessors(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = x * 3  # ``other`` is a wrapped number; ``self`` is not saved (other needs no grad)
        a = x * 2
        s = a.sin()
        saved = s.grad_fn._saved_self
        return (
            y.grad_fn._saved_other,
            y.grad_fn._saved_self,
            saved is a,
            saved.grad_fn.name(),
            saved.output_nr,
        )

    run_both(scenario, torch_oracle)
    raises_same(
        lambda lib: (_x(lib) * 3).grad_fn._raw_saved_self.register_hooks(lambda v: v, lambda v: v),
        torch_oracle,
        "Calling register_hooks on a saved tensor with value None is forbidden",
    )


def test_raw_saved_tensor_hooks(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[str] = []
        x = _x(lib)
        y = x.sin()
        y.grad_fn._raw_saved_self.register_hooks(
            lambda v: log.append("pack") or v * 2, lambda v: log.append("unpack") or v / 2
        )
        log.append("backward")
        y.sum().backward()
        return log, x.grad

    run_both(scenario, torch_oracle)

    def twice(lib: ModuleType) -> Any:
        y = _x(lib).sin()
        y.grad_fn._raw_saved_self.register_hooks(lambda v: v, lambda v: v)
        y.grad_fn._raw_saved_self.register_hooks(lambda v: v, lambda v: v)

    raises_same(
        twice,
        torch_oracle,
        "Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only one pair of hooks "
        "is allowed at a time.",
    )

    def after_backward(lib: ModuleType) -> Any:
        y = _x(lib).sin()
        raw = y.grad_fn._raw_saved_self
        y.sum().backward()
        raw.register_hooks(lambda v: v, lambda v: v)

    raises_same(
        after_backward,
        torch_oracle,
        "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of the graph "
        "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
        "through the graph a second time or if you need to access saved variables after calling backward.",
    )


def test_saved_tensors_hooks_with_custom_function(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        log: list[Any] = []

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any, b: Any) -> Any:
                c = a * 2
                ctx.save_for_backward(a, b, c)
                return c * b

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                _, b, c = ctx.saved_tensors
                return g * b * 2, g * c

        def pack(v: Any) -> Any:
            log.append(("pack", v.clone().detach(), v.requires_grad))
            return v

        def unpack(v: Any) -> Any:
            log.append(("unpack", v.clone().detach()))
            return v

        x, w = _x(lib), _x(lib, (3.0, 4.0))
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = F.apply(x, w)
        log.append("backward")
        y.sum().backward()
        return log, x.grad, w.grad

    run_both(scenario, torch_oracle)


def test_saved_tensors_hooks_errors(torch_oracle: ModuleType) -> None:
    def disabled(lib: ModuleType) -> Any:
        with (
            lib.autograd.graph.disable_saved_tensors_hooks("no hooks here"),
            lib.autograd.graph.saved_tensors_hooks(lambda v: v, lambda v: v),
        ):
            pass

    raises_same(disabled, torch_oracle, "no hooks here")

    def unpack_returns_int(lib: ModuleType) -> Any:
        with lib.autograd.graph.saved_tensors_hooks(lambda v: v, lambda v: 3):
            y = _x(lib).sin()
        y.sum().backward()

    raises_same(
        unpack_returns_int,
        torch_oracle,
        "Output of saved tensor unpack_hook expected to be a Tensor but got result of type int",
    )


def test_partial_backward_frees_only_what_ran(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = x.exp()
        z = y.sin()
        (gy,) = lib.autograd.grad(z.sum(), y)  # runs SinBackward0 only: ExpBackward0 keeps its result
        (gx,) = lib.autograd.grad(y.sum(), x)
        try:
            z.sum().backward()
        except RuntimeError as e:
            return gy, gx, str(e).startswith("Trying to backward through the graph a second time")
        return None

    assert run_both(scenario, torch_oracle)[2] is True


def _double(lib: ModuleType) -> Any:
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            return a * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    return Double


def test_calling_nodes(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (3.0, 4.0))
        ones = lib.ones(2, dtype=lib.float64)
        custom = _double(lib).apply(x).grad_fn
        acc = (x * w).grad_fn.next_functions[0][0]
        return x.sin().grad_fn(ones), (x * w).grad_fn(ones), custom.apply(ones), acc(ones), x.grad

    run_both(scenario, torch_oracle)

    def call_custom(lib: ModuleType) -> Any:
        _double(lib).apply(_x(lib)).grad_fn(lib.ones(2))

    raises_same(call_custom, torch_oracle, "'DoubleBackward' object is not callable")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("list", "assigned grad expected to be a Tensor or None but got grad of type list"),
        ("float64", "attempting to assign a gradient with dtype 'double' to a tensor with dtype 'float'. Please "
         "ensure that the gradient and the tensor have the same dtype"),
        ("int64", "attempting to assign a gradient with dtype 'long int' to a tensor with dtype 'float'. Please "
         "ensure that the gradient and the tensor have the same dtype"),
        ("shape", "attempting to assign a gradient of size '[3, 2]' to a tensor of size '[2, 3]'. Please ensure "
         "that the gradient and the tensor are the same size"),
    ],
)  # fmt: skip
def test_assigning_grad(torch_oracle: ModuleType, value: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = lib.ones(2, 3, requires_grad=True)
        x.grad = {
            "list": [1.0],
            "float64": lib.ones(2, 3, dtype=lib.float64),
            "int64": lib.ones(2, 3, dtype=lib.int64),
            "shape": lib.ones(3, 2),
        }[value]

    raises_same(scenario, torch_oracle, expected)

    def accumulate_into_assigned(lib: ModuleType) -> Any:
        x = lib.ones(2, 3, requires_grad=True)
        g = lib.full((2, 3), 0.5)
        x.grad = g
        (x * 2).sum().backward()
        return x.grad is g, g

    run_both(accumulate_into_assigned, torch_oracle)
