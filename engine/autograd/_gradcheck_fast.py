"""Fast-mode ``gradcheck`` (``fast_mode=True``): compare ``v^T J u`` instead of whole Jacobians.

A port of PyTorch's ``_fast_gradcheck`` (see https://github.com/pytorch/pytorch/issues/53876).

# Note [Fast gradcheck]
# ~~~~~~~~~~~~~~~~~~~~~
# For random unit vectors u (one per input) and v (one per output), finite differences along u
# give J u (one pair of function calls per input, not per input element), and one backward with
# grad_output v gives v^T J; both sides reduce to the scalar v^T J u. The tolerance is scaled
# accordingly: an element-wise atol on J becomes atol * sum(u) * sum(v) on the scalar. On a
# mismatch, the slow-mode Jacobians are computed for the message. The random vectors come from a
# private generator with a fixed seed, so the check does not touch the user's RNG state; they
# are not PyTorch's numbers (its generator differs), so a failure message shows other scalars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from engine._tensor import Tensor
from engine.autograd._gradcheck_jacobian import (
    GradcheckError,
    _allclose_with_type_promotion,
    _as_tuple,
    _check_analytical_jacobian_attributes,
    _check_outputs_same_dtype_and_shape,
    _compute_numerical_gradient,
    _compute_numerical_jvps_wrt_specific_input,
    _get_notallclose_msg,
    _get_numerical_jacobian,
    _is_float_or_complex_tensor,
    _np,
    _with_prepare_inputs,
)

Array = np.ndarray
Vec = Array | tuple[Array, Array]

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()

_FAST_SEED = 67280421310721  # PyTorch's default CPU seed, for a fresh generator per check


def _vec_from_tensor(x: Tensor, gen: np.random.Generator, downcast_complex: bool = False) -> Array:
    """A random unit vector with ``x.numel()`` entries (real when ``downcast_complex``)."""
    dtype = x.dtype.to_real() if downcast_complex else x.dtype
    vec = gen.random(x.numel()).astype(dtype._np)
    return vec / np.linalg.norm(vec)


def _make_vectors(inp_tensors: list[Tensor], outputs: tuple[Tensor, ...]) -> tuple[list[Array], list[Vec]]:
    gen = np.random.Generator(np.random.PCG64(_FAST_SEED))
    all_u: list[Vec] = []
    for inp in inp_tensors:
        ur = _vec_from_tensor(inp, gen, True)
        all_u.append((ur, _vec_from_tensor(inp, gen, True)) if inp.is_complex() else ur)
    all_v = [_vec_from_tensor(out, gen) for out in outputs]
    return all_v, all_u


def _get_inp_tensors(tupled_inputs: tuple[Any, ...]) -> tuple[list[int], list[Tensor]]:
    pairs = [(i, t) for i, t in enumerate(tupled_inputs) if isinstance(t, Tensor) and t.requires_grad]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _adjusted_atol(atol: float, u: Vec, v: Array | None) -> float:
    # See Note [Fast gradcheck]: sum over i, j of atol * u_i * v_j.
    u = u[0] if isinstance(u, tuple) else u
    sum_v = 1.0 if v is None else float(v.sum())
    return atol * float(u.sum()) * sum_v


def _get_numerical_jvp_wrt_specific_input(
    fn: Callable[..., Any], input_idx: int, inputs: tuple[Any, ...], u: Vec, eps: float
) -> list[Array]:
    inp = inputs[input_idx]
    data = inp._data
    wrapped_fn = _with_prepare_inputs(fn, inputs)

    def nbhd(a: Tensor, b: Tensor) -> None:
        _check_outputs_same_dtype_and_shape(a, b, eps=eps)

    def jvp_fn(delta: Array) -> tuple[Array, ...]:
        return _compute_numerical_gradient(wrapped_fn, data, Ellipsis, delta, eps, nbhd)

    shape = data.shape
    scaled: Any = (
        (eps * u[0].reshape(shape), eps * u[1].reshape(shape))
        if isinstance(u, tuple)
        else eps * u.reshape(shape)
    )
    return _compute_numerical_jvps_wrt_specific_input(jvp_fn, scaled, inp.is_complex())


def _get_numerical_vJu(
    fn: Callable[..., Any],
    inputs: tuple[Any, ...],
    inp_indices: list[int],
    func_out: Any,
    all_u: list[Vec],
    all_v: list[Array],
    eps: float,
) -> list[list[Array]]:
    reduced_jacobians: list[list[Array]] = []
    for inp_idx, u in zip(inp_indices, all_u, strict=False):
        all_ju = _get_numerical_jvp_wrt_specific_input(fn, inp_idx, inputs, u, eps)
        func_out_t = _as_tuple(func_out)
        assert len(all_ju) == len(func_out_t)
        filtered_ju = [ju for ju, o in zip(all_ju, func_out_t, strict=True) if _is_float_or_complex_tensor(o)]
        reduced_jacobians.append(
            [np.asarray((v * ju).sum()) for v, ju in zip(all_v, filtered_ju, strict=False)]
        )
    return reduced_jacobians


def _get_analytical_vJu_backward_mode(
    inputs: tuple[Any, ...],
    outputs: tuple[Tensor, ...],
    nondet_tol: float,
    check_grad_dtypes: bool,
    all_v: list[Array],
    all_u: list[Vec],
) -> list[list[Array]]:
    reduced_jacobians: list[list[Array]] = []
    for output, v in zip(outputs, all_v, strict=False):
        all_vj = _check_analytical_jacobian_attributes(
            inputs, output, nondet_tol, check_grad_dtypes, fast_mode=True, v=v
        )
        scalars: list[Array] = []
        for vj, u in zip(all_vj, all_u, strict=False):
            vj = vj.T.reshape(-1)
            if np.iscomplexobj(vj):  # C -> R: the real part pairs with u_r, the imaginary with u_i
                assert isinstance(u, tuple)
                scalars.append(np.asarray(vj.real.dot(u[0]) + 1j * vj.imag.dot(u[1])))
            else:
                assert not isinstance(u, tuple)
                scalars.append(np.asarray(vj.dot(u)))
        reduced_jacobians.append(scalars)
    return reduced_jacobians


def _run_slow_mode_and_get_error(
    func: Callable[..., Any],
    tupled_inputs: tuple[Any, ...],
    outputs: tuple[Tensor, ...],
    input_idx: int,
    output_idx: int,
    rtol: float,
    atol: float,
    eps: float,
) -> str:
    slow_numerical = _get_numerical_jacobian(func, tupled_inputs, outputs, eps=eps)[input_idx][output_idx]
    slow_analytical = _check_analytical_jacobian_attributes(
        tupled_inputs, outputs[output_idx], nondet_tol=float("inf"), check_grad_dtypes=False
    )[input_idx]
    n = _np(slow_numerical)
    analytical = Tensor._make(np.array(slow_analytical, order="C"))
    slow_max_diff = Tensor._make(np.asarray(np.abs(n - slow_analytical).max()))
    msg = (
        "\nThe above quantities relating the numerical and analytical jacobians are computed \n"
        "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more background \n"
        "about fast mode. Below, we recompute numerical and analytical jacobians in slow mode:\n\n"
        f"Numerical:\n {slow_numerical}\n"
        f"Analytical:\n{analytical}\n\n"
        f"The max per-element difference (slow mode) is: {slow_max_diff}.\n"
    )
    if _allclose_with_type_promotion(slow_analytical, n, rtol, atol):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


def _check_no_differentiable_outputs_fast(
    func: Callable[..., Any],
    all_inputs: tuple[Any, ...],
    inputs_indices: list[int],
    all_u: list[Vec],
    eps: float,
    nondet_tol: float,
) -> None:
    for inp_idx, u in zip(inputs_indices, all_u, strict=False):
        for jvp in _get_numerical_jvp_wrt_specific_input(func, inp_idx, all_inputs, u, eps):
            if jvp.size and np.abs(jvp).max() > nondet_tol:
                raise GradcheckError("Numerical gradient for function expected to be zero")


def _fast_gradcheck(
    func: Callable[..., Any],
    func_out: Any,
    inputs: tuple[Any, ...],
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
    inp_tensors_idx, inp_tensors = _get_inp_tensors(inputs)
    all_v, all_u = _make_vectors(inp_tensors, outputs)
    numerical_vju = _get_numerical_vJu(func, inputs, inp_tensors_idx, func_out, all_u, all_v, eps)
    if not outputs:
        _check_no_differentiable_outputs_fast(func, inputs, inp_tensors_idx, all_u, eps, nondet_tol)
    analytical_vju = _get_analytical_vJu_backward_mode(
        inputs, outputs, nondet_tol, check_grad_dtypes, all_v, all_u
    )
    for i, numerical_for_input_i in enumerate(numerical_vju):
        for j, n in enumerate(numerical_for_input_i):
            a = analytical_vju[j][i]
            updated_atol = _adjusted_atol(atol, all_u[i], all_v[j] if all_v else None)
            if not _allclose_with_type_promotion(a, n, rtol, updated_atol):
                jacobians_str = _run_slow_mode_and_get_error(func, inputs, outputs, i, j, rtol, atol, eps)
                raise GradcheckError(
                    _get_notallclose_msg(a, n, j, i, complex_indices, test_imag) + jacobians_str
                )
    return True
