"""Custom autograd Functions against torch 2.8.0 (ported from test/test_autograd.py): old- and
new-style forward, what can be saved, ctx flags, mark_dirty / mark_non_differentiable,
set_materialize_grads, once_differentiable, non-tensor arguments and outputs, and the errors."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest

from tests.engine._autograd_diff import BACKWARD_TWICE, _x, raises_same, run_both

pytestmark = pytest.mark.oracle


def _exp(lib: ModuleType) -> Any:
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, i: Any) -> Any:
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            (result,) = ctx.saved_tensors
            return grad_output * result

    return Exp


def test_old_style_forward_with_ctx(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = _exp(lib).apply(x)
        y.sum().backward()
        fn = y.grad_fn
        return (
            x.grad,
            fn.name(),
            type(fn).__name__,
            fn.next_functions[0][0].name(),
            y.requires_grad,
            y.is_leaf,
        )

    assert run_both(scenario, torch_oracle)[1] == "ExpBackward"


def test_setup_context_and_saved_tensors_read_twice(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(a: Any, b: Any, k: float) -> Any:
                return a * b * k

            @staticmethod
            def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
                a, b, k = inputs
                ctx.save_for_backward(a, b, output)
                ctx.k = k

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                first = ctx.saved_tensors
                a2, b2, _ = ctx.saved_tensors  # each read unpacks again
                assert first[0] is a2
                return g * b2 * ctx.k, g * a2 * ctx.k, None

        x, w = _x(lib), _x(lib, (3.0, 4.0, 5.0))
        y = Mul.apply(x, w, 2.0)
        saved = y.grad_fn.saved_tensors
        info = (saved[0] is x, saved[2] is y, saved[2].grad_fn is y.grad_fn)
        y.sum().backward()
        return x.grad, w.grad, y.grad_fn.name(), info

    assert run_both(scenario, torch_oracle)[3] == (True, False, True)


def test_save_intermediate(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class SinTwice(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                s = a.sin()
                r = s * 2
                ctx.save_for_backward(a, s, r)
                return r

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                a, _, _ = ctx.saved_tensors
                return g * 2 * a.cos()

        x = _x(lib)
        y = SinTwice.apply(x)
        a, s, r = y.grad_fn.saved_tensors
        info = (a is x, r is y, r.grad_fn is y.grad_fn, s.requires_grad, s.grad_fn, s)
        y.sum().backward()
        return info, x.grad

    run_both(scenario, torch_oracle)


def test_needs_input_grad_and_non_tensor_args(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        seen: list[Any] = []

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any, b: Any, k: int, name: str) -> Any:
                seen.append(("forward", ctx.needs_input_grad, lib.is_grad_enabled()))
                return a * b * k

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                seen.append(("backward", ctx.needs_input_grad))
                return g * 3, None, None, None

        x = _x(lib)
        F.apply(x, lib.ones(3, dtype=lib.float64), 3, "s").sum().backward()
        with lib.no_grad():
            out = F.apply(x, x, 1, "t")
        return seen, x.grad, out.requires_grad, out.grad_fn

    run_both(scenario, torch_oracle)


def test_mark_dirty(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        class Double(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                a.mul_(2)
                ctx.mark_dirty(a)
                return a

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g * 2

        x = _x(lib)
        y = x.clone()
        before = y._version
        z = Double.apply(y)
        z.sum().backward()
        return z is y, y.grad_fn.name(), x.grad, before, y._version, y

    assert run_both(scenario, torch_oracle)[4] == 2  # the mul_ in forward, then mark_dirty
    raises_same(
        lambda lib: _dirty_leaf(lib),
        torch_oracle,
        "a leaf Variable that requires grad has been used in an in-place operation.",
    )


def _dirty_leaf(lib: ModuleType) -> Any:
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    return F.apply(_x(lib))


def test_mark_non_differentiable_and_non_tensor_outputs(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        seen: list[Any] = []

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any, k: int) -> Any:
                b, c = a * 2, a * 3
                ctx.mark_non_differentiable(c)
                return b, k + 1, a > 0, c, "label"

            @staticmethod
            def backward(ctx: Any, gb: Any, gk: Any, gmask: Any, gc: Any, gs: Any) -> Any:
                seen.append((gb, gk, gmask, gc, gs))
                return gb * 2, None

        x = _x(lib)
        b, k, mask, c, s = F.apply(x, 3)
        b.sum().backward()
        return seen, x.grad, (b.requires_grad, mask.requires_grad, c.requires_grad), k, s

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize("materialize", [True, False])
def test_set_materialize_grads(torch_oracle: ModuleType, materialize: bool) -> None:
    def scenario(lib: ModuleType) -> Any:
        seen: list[Any] = []

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                ctx.set_materialize_grads(materialize)
                b = a * 3
                ctx.mark_non_differentiable(b)
                ctx._materialize_non_diff_grads = False
                return a * 2, a.exp(), b

            @staticmethod
            def backward(ctx: Any, g1: Any, g2: Any, g3: Any) -> Any:
                seen.append((g1, g2, g3))
                return g1 * 2 if g1 is not None else None

        x = _x(lib)
        a, _, _ = F.apply(x)
        a.sum().backward()
        return seen, x.grad

    run_both(scenario, torch_oracle)


def test_once_differentiable(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        od = importlib.import_module(lib.__name__ + ".autograd.function").once_differentiable

        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                ctx.save_for_backward(a)
                return a**2

            @staticmethod
            @od
            def backward(ctx: Any, g: Any) -> Any:
                (a,) = ctx.saved_tensors
                return g * 2 * a

        x = _x(lib)
        go = lib.ones(3, dtype=lib.float64, requires_grad=True)
        # A grad_output that does not require grad: the result is returned as is.
        (plain,) = lib.autograd.grad(Square.apply(x).sum(), x, create_graph=True)
        (g,) = lib.autograd.grad(Square.apply(x), x, go, create_graph=True)
        info = (plain.requires_grad, g, g.grad_fn.name(), type(g.grad_fn).__name__, g.is_leaf)
        next_fn = g.grad_fn.next_functions[0][0]
        try:
            g.sum().backward()
        except RuntimeError as e:
            return info, next_fn.name(), str(e), go.grad
        return None

    assert run_both(scenario, torch_oracle)[2] == (
        "trying to differentiate twice a function that was marked with @once_differentiable"
    )


def test_returning_an_input_as_is(torch_oracle: ModuleType) -> None:
    def identity(lib: ModuleType) -> Any:
        class Identity(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                return a

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g * 5

        return Identity

    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = identity(lib).apply(x)
        y.sum().backward()
        return y is x, y._base is x, y.grad_fn.name(), x.grad, x.grad_fn, y.is_leaf

    run_both(scenario, torch_oracle)

    def inplace_on_result(lib: ModuleType) -> Any:
        identity(lib).apply(_x(lib) * 1).mul_(2)

    raises_same(
        inplace_on_result,
        torch_oracle,
        "Output 0 of IdentityBackward is a view and is being modified inplace. This view was created inside a "
        "custom Function (or because an input was returned as-is) and the autograd logic to handle view+inplace "
        "would override the custom backward associated with the custom Function, leading to incorrect gradients. "
        "This behavior is forbidden. You can fix this by cloning the output of the custom Function.",
    )


def _returning(lib: ModuleType, grads: Any, n_inputs: int = 1, k: bool = False) -> Any:
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            return args[0] * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return grads(lib, g)

    x = lib.ones(2, requires_grad=True)
    args = (x,) * n_inputs + ((3,) if k else ())
    F.apply(*args).sum().backward()
    return x.grad


@pytest.mark.parametrize(
    ("grads", "n_inputs", "k", "expected"),
    [
        (lambda lib, g: g, 2, False, "function FBackward returned an incorrect number of gradients (expected 2, "
         "got 1)"),
        (lambda lib, g: (g, g, g), 1, False, "function FBackward returned an incorrect number of gradients "
         "(expected 1, got 3)"),
        (lambda lib, g: (g, g), 1, True, "function FBackward returned a gradient different than None at position "
         "2, but the corresponding forward input was not a Variable"),
        (lambda lib, g: lib.ones(5), 1, False, "Function FBackward returned an invalid gradient at index 0 - got "
         "[5] but expected shape compatible with [2]"),
        (lambda lib, g: "g", 1, False, "expected Variable or None (got str)"),
        (lambda lib, g: g * (1 + 1j), 1, False, "Expected isFloatingType(grad.scalar_type()) || (input_is_complex "
         "== grad_is_complex) to be true, but got false.  (Could this error message be improved?  If so, please "
         "report an enhancement request to PyTorch.)"),
    ],
)  # fmt: skip
def test_backward_return_errors(
    torch_oracle: ModuleType, grads: Any, n_inputs: int, k: bool, expected: str
) -> None:
    raises_same(lambda lib: _returning(lib, grads, n_inputs, k), torch_oracle, expected)


def test_extra_trailing_none_gradients_are_allowed(torch_oracle: ModuleType) -> None:
    run_both(lambda lib: _returning(lib, lambda lib, g: (g, None, None)), torch_oracle)


def test_ctx_errors(torch_oracle: ModuleType) -> None:
    def save_non_tensor(lib: ModuleType) -> Any:
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                ctx.save_for_backward(a, 3)
                return a * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g

        F.apply(_x(lib))

    raises_same(
        save_non_tensor,
        torch_oracle,
        "save_for_backward can only save variables, but argument 1 is of type int",
    )

    def saved_after_backward(lib: ModuleType) -> Any:
        y = _exp(lib).apply(_x(lib))
        y.sum().backward()
        return y.grad_fn.saved_tensors

    raises_same(saved_after_backward, torch_oracle, BACKWARD_TWICE)

    def no_backward(lib: ModuleType) -> Any:
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                return a * 2

        F.apply(_x(lib)).sum().backward()

    raises_same(
        no_backward,
        torch_oracle,
        "You must implement either the backward or vjp method for your custom autograd.Function to use it with "
        "backward mode AD.",
    )


def test_custom_function_version_counter_error(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = _exp(lib).apply(x * 1)
        y.add_(1)
        y.sum().backward()

    raises_same(
        scenario,
        torch_oracle,
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.DoubleTensor [3]], which is output 0 of ExpBackward, is at version 1; expected version 0 instead. "
        "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
        "torch.autograd.set_detect_anomaly(True).",
    )


def test_apply_arguments_and_vjp(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        seen: list[Any] = []

        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(a: Any, k: float = 2.0) -> Any:
                return a * k

            @staticmethod
            def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
                seen.append((len(inputs), inputs[1], ctx.needs_input_grad))  # defaults are filled in
                ctx.k = inputs[1]

            @staticmethod
            def vjp(ctx: Any, g: Any) -> Any:  # vjp is backward's alias
                return g * ctx.k, None

        x = _x(lib)
        Scale.apply(x).sum().backward()
        return seen, x.grad

    run_both(scenario, torch_oracle)

    def with_kwargs(lib: ModuleType) -> Any:
        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(a: Any, k: float = 2.0) -> Any:
                return a * k

            @staticmethod
            def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
                pass

        Scale.apply(_x(lib), k=3.0)

    raises_same(with_kwargs, torch_oracle, "apply() takes no keyword arguments")

    def backward_and_vjp(lib: ModuleType) -> Any:
        class Both(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: Any) -> Any:
                return a * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g

            @staticmethod
            def vjp(ctx: Any, g: Any) -> Any:
                return g

        Both.apply(_x(lib)).sum().backward()

    raises_same(
        backward_and_vjp,
        torch_oracle,
        "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should only implement "
        "one of them.",
    )
