"""``gradcheck`` / ``gradgradcheck`` against torch 2.8.0 (ported from test/test_autograd.py's
gradcheck tests): what passes, what fails, and the exact ``GradcheckError`` messages."""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import pytest

import engine
from engine.autograd.gradcheck import GradcheckError
from tests.engine._autograd_diff import Raised, run_both

pytestmark = pytest.mark.oracle


def _x(lib: ModuleType, values: Any = (0.5, 1.5)) -> Any:
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=True)


def _z(lib: ModuleType) -> Any:
    return lib.tensor([1 + 2j, 0.5 - 1j], dtype=lib.complex128, requires_grad=True)


def _scaled(
    lib: ModuleType, scale: float = 1.0, ignore_grad_output: bool = False, detach_in_backward: bool = False
) -> Any:
    """y = x * x.sum() (a dense Jacobian) with a backward that can be wrong on purpose: scaled, off
    by a constant far below the tolerances (so only a zero grad_output reveals it), or computed
    from a detached x (so the gradient's own gradient with respect to x is lost). It is wrong for
    complex inputs in any case: the conjugates are missing."""

    class TimesSum(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x.sum()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            if detach_in_backward:
                x = x.detach()
            offset = 1e-12 if ignore_grad_output else 0.0
            return (g * x.sum() + (g * x).sum()) * scale + offset

    return TimesSum


def _check(lib: ModuleType, fn: Any, inputs: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            result: Any = lib.autograd.gradcheck(fn, inputs, **kwargs)
        except Exception as e:  # noqa: BLE001 - compared
            result = Raised(type(e).__name__, str(e))
    return result, [str(m.message) for m in w]


def test_gradcheck_passes(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, y = _x(lib), lib.tensor([[1.0], [2.0]], dtype=lib.float64, requires_grad=True)
        return (
            _check(lib, lambda x: x * x.sin(), (x,)),
            _check(lib, lambda x, y: (x * y, (x + y).exp().sum()), (x, y)),
            _check(lib, lambda x, k: x**k, (x, 3)),  # non-tensor arguments are passed through
            _check(lib, _scaled(lib).apply, (x,)),
            _check(lib, lambda x, y: (x * y, x.sin()), (x, y), fast_mode=True),
            _check(lib, lambda x: x.detach() * 0, (x,)),  # no differentiable output, zero numerical gradient
        )

    assert run_both(scenario, torch_oracle) == tuple((True, []) for _ in range(6))


def test_gradcheck_jacobian_mismatch_message(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, y = _x(lib), _x(lib, (2.0, -1.5))
        return (
            _check(lib, _scaled(lib, 1.1).apply, (x,)),
            _check(lib, lambda x, y: (x * y, _scaled(lib, 1.1).apply(y)), (x, y)),
            _check(lib, _scaled(lib, 1.1).apply, (x,), raise_exception=False),
        )

    (single, _), (second_output, _), no_raise = run_both(scenario, torch_oracle)
    assert single == Raised(
        "GradcheckError",
        "Jacobian mismatch for output 0 with respect to input 0,\n"
        "numerical:tensor([[2.5000, 1.5000],\n        [0.5000, 3.5000]], dtype=engine.float64)\n"
        "analytical:tensor([[2.7500, 1.6500],\n        [0.5500, 3.8500]], dtype=engine.float64)\n",
    )
    assert second_output.message.startswith("Jacobian mismatch for output 1 with respect to input 1,\n")
    assert no_raise == (False, [])


def test_gradcheck_other_failures(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        import random

        class Noisy(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x * 2

            @staticmethod
            def backward(ctx: Any, g: Any) -> Any:
                return g * 2 + random.random() * 1e-3

        stride0 = lib.tensor([0.5], dtype=lib.float64).expand(3).requires_grad_()
        return (
            _check(lib, _scaled(lib, ignore_grad_output=True).apply, (_x(lib),)),
            _check(lib, Noisy.apply, (_x(lib),))[0].message.split("\n")[0],
            _check(lib, lambda x: x * 2, (_x(lib).detach(),)),
            _check(lib, lambda x: x * x, (stride0,)),
            _check(lib, lambda x: (x * 2).detach(), (_x(lib),)),
            _check(
                lib, lambda x: x * x, (lib.tensor([0.5, 1.0], requires_grad=True),), raise_exception=False
            ),
        )

    ignores, noisy, no_input, stride0, nondiff, single = run_both(scenario, torch_oracle)
    assert ignores == (Raised("GradcheckError", "backward not multiplied by grad_output"), [])
    assert noisy.startswith(
        "Backward is not reentrant, i.e., running backward with same input and grad_output"
    )
    assert no_input[0].type == "ValueError" and stride0[0].type == "RuntimeError"
    assert nondiff[0] == Raised("GradcheckError", "Numerical gradient for function expected to be zero")
    assert single[1][0].startswith("Input #0 requires gradient and is not a double precision floating point")


def _undefined(lib: ModuleType, zero_when_undefined: bool) -> Any:
    class TwoOut(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.set_materialize_grads(False)
            ctx.save_for_backward(x)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx: Any, g1: Any, g2: Any) -> Any:
            (x,) = ctx.saved_tensors
            out = x * 0 if zero_when_undefined or g1 is not None or g2 is not None else x * 0 + 1
            if g1 is not None:
                out = out + g1 * 2
            if g2 is not None:
                out = out + g2 * 3
            return out

    return TwoOut


def test_gradcheck_undefined_output_grads(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        return (
            _check(lib, _undefined(lib, True).apply, (x,)),
            _check(lib, _undefined(lib, False).apply, (x,)),
            _check(lib, _undefined(lib, False).apply, (x,), check_undefined_grad=False),
        )

    ok, bad, unchecked = run_both(scenario, torch_oracle)
    assert ok == (True, []) and unchecked == (True, [])
    assert bad[0] == Raised(
        "GradcheckError",
        "Expected all input grads to be undefined or zero when all output grads are undefined or zero. Please look "
        'at "Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"',
    )
    assert bad[1][0].startswith("Backwards compatibility: New undefined gradient support checking feature")


def test_gradcheck_complex(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        z, w = _z(lib), lib.tensor([0.3 + 1j, 2 - 1j], dtype=lib.complex128)
        wrong, _ = _check(lib, _scaled(lib).apply, (z,))  # the conjugates are missing
        return (
            _check(lib, lambda z: z * w * z, (z,)),  # C -> C, checked through real and imaginary parts
            _check(lib, lambda z: (z * z.conj()).sum(), (z,)),  # C -> C with a real-valued result
            _check(lib, lambda z: z * w * z, (z,), fast_mode=True),
            # Up to the matrices, which print differently (see the report on complex formatting).
            wrong.message.split("\n")[0],
        )

    *ok, wrong = run_both(scenario, torch_oracle)
    assert ok == [(True, [])] * 3
    assert wrong == (
        "While considering the imaginary part of complex outputs only, Jacobian mismatch for output 0 with "
        "respect to input 0,"
    )


def test_fast_mode_failure_recomputes_in_slow_mode(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        result, _ = _check(lib, _scaled(lib, 1.1).apply, (_x(lib),), fast_mode=True)
        first_line = result.message.split("\n")[0]
        # The v^T J u scalars use random vectors (not torch's), so only the slow-mode part is compared.
        slow = result.message[result.message.index("Below, we recompute") :]
        return result.type, first_line, slow

    _, first_line, slow = run_both(scenario, torch_oracle)
    assert first_line == "Jacobian mismatch for output 0 with respect to input 0,"
    assert slow.startswith(
        "Below, we recompute numerical and analytical jacobians in slow mode:\n\nNumerical:\n"
    )
    assert "The max per-element difference (slow mode) is: 0.350000000" in slow


def test_gradgradcheck(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, go = _x(lib), _x(lib, (1.0, -0.5))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.manual_seed(0)
            random_grad_outputs = lib.autograd.gradgradcheck(lambda x: x**3 * x.sin(), (x,))
        try:
            lib.autograd.gradgradcheck(_scaled(lib, detach_in_backward=True).apply, (x,), (go,))
            wrong: Any = None
        except Exception as e:  # noqa: BLE001 - compared
            wrong = Raised(type(e).__name__, str(e))
        return (
            lib.autograd.gradgradcheck(lambda x: x**3 * x.sin(), (x,), (go,)),
            lib.autograd.gradgradcheck(_scaled(lib).apply, (x,), (go,), fast_mode=True),
            random_grad_outputs,
            wrong,
            lib.autograd.gradgradcheck(
                _scaled(lib, detach_in_backward=True).apply, (x,), (go,), raise_exception=False
            ),
        )

    *passed, wrong, no_raise = run_both(scenario, torch_oracle)
    assert passed == [True, True, True] and no_raise is False
    assert wrong == Raised(
        "GradcheckError",
        "Jacobian mismatch for output 0 with respect to input 0,\n"
        "numerical:tensor([[ 2.0000,  0.5000],\n        [ 0.5000, -1.0000]], dtype=engine.float64)\n"
        "analytical:tensor([[0., 0.],\n        [0., 0.]], dtype=engine.float64)\n",
    )


def test_gradcheck_is_importable_like_torch() -> None:
    import engine.autograd.gradcheck as gradcheck_fn  # the function shadows the module, as in torch
    from engine.autograd import gradcheck as module_attr

    assert gradcheck_fn is module_attr is engine.autograd.gradcheck
    assert issubclass(GradcheckError, RuntimeError)
    with pytest.raises(NotImplementedError, match="forward-mode AD or vmap"):
        engine.autograd.gradcheck(lambda x: x, (_x(engine),), check_forward_ad=True)
