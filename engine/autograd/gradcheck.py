"""``gradcheck`` and ``gradgradcheck``: analytical gradients against finite differences.

A port of the backward-mode part of ``torch/autograd/gradcheck.py``, slow and fast mode, with the
same checks in the same order and the same ``GradcheckError`` messages. The Jacobians themselves
are built in ``_gradcheck_jacobian.py``, fast mode lives in ``_gradcheck_fast.py``.

# Note [Complex gradcheck]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# For a complex input z = x + iy, autograd returns the conjugate Wirtinger derivative scaled so
# that, for a real output s, grad = ds/dx + i ds/dy. Finite differences measure exactly that: one
# column perturbs x by eps, another y by eps (the input moves by i*eps), and the numerical
# entry is ds_dx + 1j * ds_dy. A complex output has no such single gradient, so, as the
# "Autograd mechanics" notes explain, gradcheck checks two real functions instead: the real part
# and the imaginary part of every complex output (imaginary first), each against its analytical
# gradient. A failure message then starts "While considering the real (imaginary) part of
# complex outputs only, ...".
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import engine
from engine._tensor import Tensor
from engine.autograd._gradcheck_jacobian import (
    GradcheckError,
    _allclose_with_type_promotion,
    _as_tuple,
    _check_analytical_jacobian_attributes,
    _differentiable_outputs,
    _get_notallclose_msg,
    _get_numerical_jacobian,
    _iter_tensors,
    _np,
    _transpose,
    get_numerical_jacobian_wrt_specific_input,
)
from engine.autograd.function import Function

__all__ = ["GradcheckError", "get_numerical_jacobian_wrt_specific_input", "gradcheck", "gradgradcheck"]


# --- the checks ---------------------------------------------------------------------------------


def _check_inputs(tupled_inputs: tuple[Any, ...]) -> bool:
    any_input_requiring_grad = False
    for idx, inp in enumerate(tupled_inputs):
        if isinstance(inp, Tensor) and inp.requires_grad:
            if inp.dtype not in (engine.float64, engine.complex128):
                warnings.warn(
                    f"Input #{idx} requires gradient and is not a double precision floating point or "
                    "complex. This check will likely fail if all the inputs are not of double precision "
                    "floating point or complex. ",
                    stacklevel=4,
                )
            if not all(st > 0 or sz <= 1 for st, sz in zip(inp.stride(), inp.size(), strict=True)):
                raise RuntimeError(
                    f"The {idx}th input has a dimension with stride 0. gradcheck only supports inputs "
                    "that are non-overlapping to be able to compute the numerical gradients correctly. You "
                    "should call .contiguous on the input before passing it to gradcheck."
                )
            any_input_requiring_grad = True
    if not any_input_requiring_grad:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of the them have "
            "requires_grad=True."
        )
    return True


def _check_no_differentiable_outputs(
    func: Callable[..., Any], inputs: tuple[Any, ...], func_out: tuple[Any, ...], eps: float
) -> bool:
    # Without differentiable outputs, the numerical gradient must be zero.
    for jacobians in _get_numerical_jacobian(func, inputs, func_out, eps=eps):
        for jacobian in jacobians:
            if np.count_nonzero(_np(jacobian)) > 0:
                raise GradcheckError("Numerical gradient for function expected to be zero")
    return True


def _slow_gradcheck(
    func: Callable[..., Any],
    func_out: Any,
    tupled_inputs: tuple[Any, ...],
    outputs: tuple[Tensor, ...],
    eps: float,
    rtol: float,
    atol: float,
    check_grad_dtypes: bool,
    nondet_tol: float,
    *,
    complex_indices: list[int] | None = None,
    test_imag: bool = False,
    masked: bool | None = False,
) -> bool:
    func_out = _as_tuple(func_out)
    if not outputs:
        return _check_no_differentiable_outputs(func, tupled_inputs, func_out, eps=eps)
    numerical = _transpose(_get_numerical_jacobian(func, tupled_inputs, func_out, eps=eps))
    # The numerical side covers every output; only the differentiable ones are compared.
    numerical = [nj for o, nj in zip(func_out, numerical, strict=False) if o.requires_grad]
    for i, o in enumerate(outputs):
        analytical = _check_analytical_jacobian_attributes(tupled_inputs, o, nondet_tol, check_grad_dtypes)
        for j, (a, n) in enumerate(zip(analytical, numerical[i], strict=False)):
            if not _allclose_with_type_promotion(a, _np(n), rtol, atol):
                raise GradcheckError(_get_notallclose_msg(a, _np(n), i, j, complex_indices, test_imag))
    return True


def _test_backward_mul_by_grad_output(
    outputs: tuple[Tensor, ...], inputs: tuple[Any, ...], masked: bool | None
) -> bool:
    # A zero grad_output must give zero input gradients: backward uses grad_output at all.
    diff_input_list = list(_iter_tensors(inputs, True))
    if not diff_input_list:
        raise GradcheckError("no Tensors requiring grad found in input")
    grads_input = engine.autograd.grad(
        outputs, diff_input_list, [engine.zeros_like(o) for o in outputs], allow_unused=True
    )
    for gi, di in zip(grads_input, diff_input_list, strict=True):
        if gi is None:
            continue
        if masked:
            if not np.allclose(_np(gi), 0):
                raise GradcheckError("backward not multiplied by grad_output")
        elif not (_np(gi) == 0).all():
            raise GradcheckError("backward not multiplied by grad_output")
        if gi.dtype != di.dtype:
            raise GradcheckError("grad is incorrect type")
        if gi.size() != di.size():
            raise GradcheckError("grad is incorrect size")
    return True


class _UndefinedGrad(Function):
    """PyTorch's ``torch._C._functions.UndefinedGrad``: an identity whose backward sends an
    undefined (None) gradient upstream, whatever it receives."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> None:
        return None


def _test_undefined_backward_mode(
    func: Callable[..., Any], outputs: tuple[Tensor, ...], inputs: tuple[Any, ...]
) -> bool:
    diff_input_list = list(_iter_tensors(inputs, True))
    if not diff_input_list:
        raise GradcheckError("no Tensors requiring grad found in input")

    def warn_bc_breaking() -> None:
        warnings.warn(
            "Backwards compatibility: New undefined gradient support checking feature is enabled by default, "
            "but it may break existing callers of this function. If this is true for you, you can call this "
            'function with "check_undefined_grad=False" to disable the feature',
            stacklevel=4,
        )

    def check_undefined_grad_support(output_to_check: list[Tensor]) -> bool:
        grads_output = [engine.zeros_like(o) for o in output_to_check]
        try:
            grads_input = engine.autograd.grad(
                output_to_check, diff_input_list, grads_output, allow_unused=True
            )
        except RuntimeError as e:
            warn_bc_breaking()
            raise GradcheckError(
                "Expected backward function to handle undefined output grads. Please look at "
                '"Notes about undefined output gradients" in "tools/autograd/derivatives.yaml"'
            ) from e
        for gi in grads_input:
            if gi is not None and not (_np(gi) == 0).all():
                warn_bc_breaking()
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when all output grads are undefined or "
                    'zero. Please look at "Notes about undefined output gradients" in '
                    '"tools/autograd/derivatives.yaml"'
                )
        return True

    # Every backward must accept all-undefined output grads, and, with several outputs, one
    # undefined output grad at a time.
    outputs_to_check = [
        [_UndefinedGrad.apply(o) for o in _differentiable_outputs(func(*inputs)) if isinstance(o, Tensor)]
    ]
    if len(outputs_to_check[0]) > 1:
        for undef_grad_idx in range(len(outputs)):
            output_to_check = _differentiable_outputs(func(*inputs))
            outputs_to_check.append(
                [
                    _UndefinedGrad.apply(o) if idx == undef_grad_idx else o
                    for idx, o in enumerate(output_to_check)
                ]
            )
    return all(check_undefined_grad_support(output) for output in outputs_to_check)


def _real_and_imag_output(fn: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``real(fn)`` and ``imag(fn)``: ``fn`` with its complex outputs replaced by their real
    (imaginary) parts (see Note [Complex gradcheck])."""
    from engine.ops.complex import imag, real  # here: the op modules build on engine.autograd

    def apply_to_c_outs(part: Callable[[Tensor], Tensor]) -> Callable[..., Any]:
        def wrapped_fn(*inputs: Any) -> tuple[Any, ...]:
            outs = _as_tuple(fn(*inputs))
            return tuple(part(o) if o.is_complex() else o for o in outs)

        return wrapped_fn

    return apply_to_c_outs(real), apply_to_c_outs(imag)


def _gradcheck_real_imag(
    gradcheck_fn: Callable[..., bool],
    func: Callable[..., Any],
    func_out: Any,
    tupled_inputs: tuple[Any, ...],
    outputs: tuple[Tensor, ...],
    eps: float,
    rtol: float,
    atol: float,
    check_grad_dtypes: bool,
    nondet_tol: float,
) -> None:
    complex_out_indices = [i for i, o in enumerate(outputs) if o.is_complex()]
    if any(o.is_complex() for o in _as_tuple(func_out)):
        # See Note [Complex gradcheck]: the imaginary parts first, then the real parts.
        real_fn, imag_fn = _real_and_imag_output(func)
        imag_func_out = imag_fn(*tupled_inputs)
        gradcheck_fn(
            imag_fn,
            imag_func_out,
            tupled_inputs,
            _differentiable_outputs(imag_func_out),
            eps,
            rtol,
            atol,
            check_grad_dtypes,
            nondet_tol,
            complex_indices=complex_out_indices,
            test_imag=True,
        )
        real_func_out = real_fn(*tupled_inputs)
        gradcheck_fn(
            real_fn,
            real_func_out,
            tupled_inputs,
            _differentiable_outputs(real_func_out),
            eps,
            rtol,
            atol,
            check_grad_dtypes,
            nondet_tol,
            complex_indices=complex_out_indices,
        )
    else:
        gradcheck_fn(func, func_out, tupled_inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Check the gradients of ``func`` at ``inputs`` against central finite differences.

    For every input of floating point or complex type with ``requires_grad=True`` and every
    differentiable output, the analytical Jacobian (from backward) must be ``allclose`` to the
    numerical one with ``rtol``/``atol``. Also checked: backward is deterministic (within
    ``nondet_tol``), a zero grad_output gives zero gradients, and (``check_undefined_grad``)
    backward accepts undefined output gradients. ``fast_mode`` compares ``v^T J u`` for random
    ``u``, ``v`` instead of whole Jacobians. Complex outputs are checked through their real and
    imaginary parts (Note [Complex gradcheck]). The defaults suit float64 inputs.

    Returns ``True``, or raises ``GradcheckError`` (returns ``False`` if not ``raise_exception``).

    Example::

        >>> import engine
        >>> x = engine.tensor([0.5, 1.5], dtype=engine.float64, requires_grad=True)
        >>> engine.autograd.gradcheck(lambda t: (t * t.sin()).sum(), (x,))
        True
    """
    assert check_forward_ad or check_backward_ad, (
        "Expected at least one of check_forward_ad or check_backward_ad to be True"
    )
    assert not (check_batched_grad and not check_backward_ad), (
        "Setting check_batched_grad=True requires check_backward_ad to be True"
    )
    assert not (check_batched_forward_grad and not check_forward_ad), (
        "Setting check_batched_forward_grad=True requires check_forward_ad to be True"
    )
    if check_forward_ad or check_batched_grad or check_batched_forward_grad:
        raise NotImplementedError(
            "engine.autograd.gradcheck: check_forward_ad, check_batched_grad and check_batched_forward_grad "
            "need forward-mode AD or vmap, which the engine does not implement"
        )
    try:
        return _gradcheck_helper(
            func,
            inputs,
            eps,
            atol,
            rtol,
            nondet_tol,
            check_undefined_grad,
            check_grad_dtypes,
            fast_mode,
            masked,
        )
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _gradcheck_helper(
    func: Callable[..., Any],
    inputs: Any,
    eps: float,
    atol: float,
    rtol: float,
    nondet_tol: float,
    check_undefined_grad: bool,
    check_grad_dtypes: bool,
    fast_mode: bool,
    masked: bool | None,
) -> bool:
    tupled_inputs = _as_tuple(inputs)
    _check_inputs(tupled_inputs)
    func_out = func(*tupled_inputs)
    outputs = _differentiable_outputs(func_out)
    if fast_mode:
        from engine.autograd._gradcheck_fast import _fast_gradcheck

        gradcheck_fn = functools.partial(_fast_gradcheck, masked=masked)
    else:
        gradcheck_fn = functools.partial(_slow_gradcheck, masked=masked)
    _gradcheck_real_imag(
        gradcheck_fn, func, func_out, tupled_inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol
    )
    _test_backward_mul_by_grad_output(outputs, tupled_inputs, masked)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, outputs, tupled_inputs)
    return True


def gradgradcheck(
    func: Callable[..., Any],
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Check second-order gradients: ``gradcheck`` of the function
    ``(inputs, grad_outputs) -> autograd.grad(func(inputs), inputs, grad_outputs, create_graph=True)``.

    Without ``grad_outputs``, random ones in [-1, 1) are drawn (from the global generator, like
    PyTorch's ``make_tensor``), and they require grad, so the check also covers the gradient's
    linearity in ``grad_outputs``.
    """
    assert check_fwd_over_rev or check_rev_over_rev, (
        "Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True"
    )
    assert not (check_undefined_grad and not check_rev_over_rev), (
        "Setting check_undefined_grad=True requires check_rev_over_rev to be True"
    )
    assert not (check_batched_grad and not check_rev_over_rev), (
        "Setting check_batched_grad=True requires check_rev_over_rev to be True"
    )
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = _differentiable_outputs(func(*tupled_inputs))
        tupled_grad_outputs = tuple(_make_grad_output(x) for x in outputs)
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    # Saved now: gradcheck may detach the inputs before it calls new_func.
    diff_input_args_indices = {
        i for i, x in enumerate(tupled_inputs) if isinstance(x, Tensor) and x.requires_grad
    }
    diff_grad_output_indices = {i for i, x in enumerate(tupled_grad_outputs) if x.requires_grad}

    def new_func(*args: Any) -> tuple[Tensor, ...]:
        input_args = tuple(
            x.requires_grad_() if i in diff_input_args_indices else x
            for i, x in enumerate(args[:-num_outputs])
        )
        outputs = _differentiable_outputs(func(*input_args))
        grad_outputs = tuple(
            x.requires_grad_() if i in diff_grad_output_indices else x
            for i, x in enumerate(args[-num_outputs:])
        )
        diff_input_args = tuple(x for i, x in enumerate(input_args) if i in diff_input_args_indices)
        grad_inputs = engine.autograd.grad(
            outputs, diff_input_args, grad_outputs, create_graph=True, allow_unused=True
        )
        return tuple(g for g in grad_inputs if g is not None)

    return gradcheck(
        new_func,
        tupled_inputs + tupled_grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        fast_mode=fast_mode,
        check_forward_ad=check_fwd_over_rev,
        check_backward_ad=check_rev_over_rev,
        masked=masked,
    )


def _make_grad_output(x: Tensor) -> Tensor:
    """``torch.testing.make_tensor(x.shape, low=-1, high=1, requires_grad=True)``."""
    dtype = x.dtype if (x.is_floating_point() or x.is_complex()) else engine.float64
    gen = engine.default_generator._np
    shape = tuple(x.shape)
    if dtype.is_complex:
        data = gen.uniform(-1, 1, shape) + 1j * gen.uniform(-1, 1, shape)
    else:
        data = gen.uniform(-1, 1, shape)
    return Tensor._make(np.asarray(data, dtype=dtype._np), requires_grad=True)
