"""``engine.autograd.functional`` against torch 2.8.0 (ported from test/autograd/test_functional.py):
vjp, jvp, jacobian, hessian, vhp and hvp, with tuples, create_graph and strict mode."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from tests.engine._autograd_diff import raises_same, run_both

pytestmark = pytest.mark.oracle


def _t(lib: ModuleType, values: Any) -> Any:
    return lib.tensor(values, dtype=lib.float64)


def poly_sin(x: Any) -> Any:
    return x**3 * x.sin()


def two_in_two_out(x: Any, y: Any) -> Any:
    return x * y, (x + y).exp().sum()


def scalar_of_two(x: Any, y: Any) -> Any:
    return (x**2 * y.exp()).sum() + (x * y).sin().sum()


@pytest.mark.parametrize("name", ["vjp", "jvp"])
def test_vjp_and_jvp(torch_oracle: ModuleType, name: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        fn = getattr(lib.autograd.functional, name)
        single = fn(poly_sin, _t(lib, [0.5, 1.0, -2.0]), _t(lib, [1.0, 2.0, 3.0]))
        xy = (_t(lib, [0.5, 1.0]), _t(lib, [1.0, 2.0]))
        v = (
            (_t(lib, [1.0, 2.0]), _t(lib, 3.0))
            if name == "vjp"
            else (_t(lib, [1.0, 2.0]), _t(lib, [3.0, 4.0]))
        )
        pair = fn(two_in_two_out, xy, v)
        scalar = fn(lambda x: (x**2).sum() if name == "vjp" else x**2, _t(lib, [2.0]))
        return single, pair, scalar

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize("name", ["vjp", "jvp", "vhp", "hvp"])
def test_create_graph_keeps_the_result_differentiable(torch_oracle: ModuleType, name: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _t(lib, [0.5, 1.0]).requires_grad_()
        fn = getattr(lib.autograd.functional, name)
        f = poly_sin if name in ("vjp", "jvp") else (lambda x: poly_sin(x).sum())
        out, res = fn(f, x, _t(lib, [1.0, -2.0]), create_graph=True)
        res.sum().backward()
        _, plain = fn(f, x, _t(lib, [1.0, -2.0]))
        return out.requires_grad, res.requires_grad, x.grad, plain.requires_grad, plain

    run_both(scenario, torch_oracle)


def test_jacobian(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        jac = lib.autograd.functional.jacobian
        x, y = _t(lib, [0.5, 1.0, 2.0]), _t(lib, [[1.0], [2.0]])
        return (
            jac(lambda x: x**2 * x.sum(), x),
            jac(lambda x, y: (x * y, x.exp()), (x, y)),
            jac(lambda x, y: (x * y, x.exp()), (x, y), vectorize=True),
            jac(lambda x: (x**3).sum(), x),
            jac(lambda x, y: x * 2, (x, y)),  # y unused: zeros
        )

    run_both(scenario, torch_oracle)


def test_jacobian_create_graph(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _t(lib, [0.5, 1.0]).requires_grad_()
        j = lib.autograd.functional.jacobian(lambda x: x**3, x, create_graph=True)
        j.sum().backward()
        return j, j.requires_grad, x.grad

    run_both(scenario, torch_oracle)


def test_hessian_vhp_hvp(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        fn = lib.autograd.functional
        x, y = _t(lib, [0.5, 1.0]), _t(lib, [1.0, 2.0])
        v = (_t(lib, [1.0, -1.0]), _t(lib, [2.0, 0.5]))
        return (
            fn.hessian(lambda x: poly_sin(x).sum(), x),
            fn.hessian(scalar_of_two, (x, y)),
            fn.hessian(lambda x: (x * 2).sum(), x),  # linear: zero Hessian
            fn.vhp(scalar_of_two, (x, y), v),
            fn.hvp(scalar_of_two, (x, y), v),
            fn.hvp(lambda x: (x**3).sum(), _t(lib, [2.0])),  # v may be omitted for one element
        )

    run_both(scenario, torch_oracle)


def test_no_grad_mode_around_the_call(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        with lib.no_grad():
            out, g = lib.autograd.functional.vjp(lambda x: x**2, _t(lib, [1.0]), _t(lib, [1.0]))
        return out.requires_grad, g.requires_grad, g

    run_both(scenario, torch_oracle)


STRICT = [
    ("vjp_independent_input", "The output of the user-provided function is independent of input 1. This is not "
     "allowed in strict mode."),
    ("vjp_output_no_grad", "Output 0 of the user-provided function does not require gradients. The outputs must "
     "be computed in a differentiable manner from the input when running in strict mode."),
    ("jvp_constant", "Output 0 of the user-provided function does not require gradients. The outputs must be "
     "computed in a differentiable manner from the input when running in strict mode."),
    ("jvp_independent_input", "The output of the user-provided function is independent of input 1. This is not "
     "allowed in strict mode."),
    ("jacobian_independent", "Output 0 of the user-provided function is independent of input 1. This is not "
     "allowed in strict mode."),
    ("jacobian_vectorize", "torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
     "supported together. Please either set `strict=False` or `vectorize=False`."),
    ("hessian_linear", "While computing the hessian, found that the jacobian of the user-provided function with "
     "respect to input 0 is independent of the input. This is not allowed in strict mode. You should ensure "
     "that your function is twice differentiable and that the jacobian depends on the inputs (this would be "
     "violated by a linear function for example)."),
    ("hvp_linear", "While computing the hessian, found that the jacobian of the user-provided function with "
     "respect to input 0 is independent of the input. This is not allowed in strict mode. You should ensure "
     "that your function is twice differentiable and that the jacobian depends on the inputs (this would be "
     "violated by a linear function for example)."),
]  # fmt: skip


@pytest.mark.parametrize(("case", "expected"), STRICT)
def test_strict_mode_errors(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        fn = lib.autograd.functional
        x, y, v = _t(lib, [0.5, 1.0]), _t(lib, [1.0, 2.0]), _t(lib, [1.0, 1.0])
        if case == "vjp_independent_input":
            fn.vjp(lambda x, y: x * 2, (x, y), v, strict=True)
        elif case == "vjp_output_no_grad":
            fn.vjp(lambda x: x.detach() * 2, x, v, strict=True)
        elif case == "jvp_constant":
            fn.jvp(lambda x: x.detach() + 1, x, v, strict=True)
        elif case == "jvp_independent_input":
            fn.jvp(lambda x, y: x * 3, (x, y), (v, v), strict=True)
        elif case == "jacobian_independent":
            fn.jacobian(lambda x, y: x * 2, (x, y), strict=True)
        elif case == "jacobian_vectorize":
            fn.jacobian(lambda x: x * 2, x, strict=True, vectorize=True)
        elif case == "hessian_linear":
            fn.hessian(lambda x: (x * 2).sum(), x, strict=True)
        else:
            fn.hvp(lambda x: (x * 2).sum(), x, v, strict=True)

    raises_same(scenario, torch_oracle, expected)


ARGUMENTS = [
    ("v_none", "The vector v can only be None if the user-provided function returns a single Tensor with a single "
     "element."),
    ("v_size", "v has invalid size: should be torch.Size([2]) but got torch.Size([3])."),
    ("v_tuple_length", "v is a tuple of invalid length: should be 2 but got 1."),
    ("v_single", "The given v should contain a single Tensor."),
    ("inputs_type", "The inputs given to vjp must be either a Tensor or a tuple of Tensors but the given inputs "
     "has type <class 'list'>."),
    ("inputs_tuple_type", "The inputs given to vjp must be either a Tensor or a tuple of Tensors but the value at "
     "index 1 has type <class 'int'>."),
    ("hessian_not_scalar", "The Tensor returned by the function given to hessian should contain a single element"),
    ("hessian_tuple", "The function given to hessian should return a single Tensor"),
    ("hvp_not_scalar", "The Tensor returned by the function given to hvp should contain a single element"),
    ("jvp_v_none", "The vector v can only be None if the input to the user-provided function is a single Tensor "
     "with a single element."),
]  # fmt: skip


@pytest.mark.parametrize(("case", "expected"), ARGUMENTS)
def test_argument_errors(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        fn = lib.autograd.functional
        x = _t(lib, [0.5, 1.0])
        if case == "v_none":
            fn.vjp(lambda x: x * 2, x)
        elif case == "v_size":
            fn.vjp(lambda x: x * 2, x, _t(lib, [1.0, 1.0, 3.0]))
        elif case == "v_tuple_length":
            fn.vjp(lambda x: (x * 2, x), x, x)
        elif case == "v_single":
            fn.vjp(lambda x: x * 2, x, (x, x))
        elif case == "inputs_type":
            fn.vjp(lambda x: x * 2, [1.0, 2.0])
        elif case == "inputs_tuple_type":
            fn.vjp(lambda x, y: x * 2, (x, 3))
        elif case == "hessian_not_scalar":
            fn.hessian(lambda x: x**2, x)
        elif case == "hessian_tuple":
            fn.hessian(lambda x: (x.sum(), x.sum()), x)
        elif case == "hvp_not_scalar":
            fn.hvp(lambda x: x**2, x, x)
        else:
            fn.jvp(lambda x: x**2, x)

    raises_same(scenario, torch_oracle, expected)


def test_forward_mode_strategy_is_not_supported(torch_oracle: ModuleType) -> None:
    import engine

    raises_same(
        lambda lib: lib.autograd.functional.jacobian(
            lambda x: x, _t(lib, [1.0]), strategy="forward-mode", create_graph=True
        ),
        torch_oracle,
        'torch.autograd.functional.jacobian: `create_graph=True` and `strategy="forward-mode"` are not supported '
        'together (yet). Please either set `create_graph=False` or `strategy="reverse-mode"`.',
    )
    # The engine has no forward-mode AD: a clear error where torch would use it.
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        engine.autograd.functional.jacobian(lambda x: x, _t(engine, [1.0]), strategy="forward-mode")
