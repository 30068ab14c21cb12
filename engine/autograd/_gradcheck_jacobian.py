"""The Jacobians behind ``gradcheck``: numerical (finite differences) and analytical (backward).

A port of the corresponding parts of ``torch/autograd/gradcheck.py``, computed in NumPy (the
engine's tensors are NumPy arrays) and shown as engine tensors in messages.

# Note [Jacobian layout]
# ~~~~~~~~~~~~~~~~~~~~~~
# For an input with N elements and an output with M elements, both the numerical and the
# analytical Jacobian are N x M matrices: row k is how every output element moves when input
# element k moves (finite differences perturb one input element per row), column j is the
# gradient of output element j (backward with the j-th basis vector as grad_output fills one
# column). This is PyTorch's layout, so the matrices in a mismatch message read the same.
"""

from __future__ import annotations

import collections.abc
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import engine
from engine._tensor import Tensor

Array = np.ndarray


class GradcheckError(RuntimeError):
    """Error raised by :func:`gradcheck` and :func:`gradgradcheck`."""


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""

# --- small helpers ------------------------------------------------------------------------------


def _as_tuple(x: Any) -> tuple[Any, ...]:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_float_or_complex_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor) and (obj.is_floating_point() or obj.is_complex())


def _differentiable_outputs(x: Any) -> tuple[Tensor, ...]:
    return tuple(o for o in _as_tuple(x) if o.requires_grad)


def _iter_tensors(x: Any, only_requiring_grad: bool = False) -> Iterator[Tensor]:
    if isinstance(x, Tensor):
        if x.requires_grad or not only_requiring_grad:
            yield x
    elif isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
        for elem in x:
            yield from _iter_tensors(elem, only_requiring_grad)


def _np(t: Tensor) -> Array:
    return t.detach()._data


def _wrap(a: Array) -> Tensor:
    return Tensor._make(np.array(a, order="C"))


def _transpose(matrix: list[Any]) -> list[tuple[Any, ...]]:
    return list(zip(*matrix, strict=False))


def _allclose_with_type_promotion(a: Array, b: Array, rtol: float, atol: float) -> bool:
    promoted = np.result_type(a, b)
    return bool(np.allclose(a.astype(promoted), b.astype(promoted), rtol=rtol, atol=atol))


def _get_notallclose_msg(
    analytical: Array,
    numerical: Array,
    output_idx: int,
    input_idx: int,
    complex_indices: list[int] | None,
    test_imag: bool = False,
) -> str:
    out_is_complex = complex_indices and output_idx in complex_indices
    part = "imaginary" if test_imag else "real"
    prefix = f"While considering the {part} part of complex outputs only, " if out_is_complex else ""
    return (
        prefix + f"Jacobian mismatch for output {output_idx:d} with respect to input {input_idx:d},\n"
        f"numerical:{_wrap(numerical)}\nanalytical:{_wrap(analytical)}\n"
    )


# --- numerical Jacobians (finite differences) ---------------------------------------------------


def _check_outputs_same_dtype_and_shape(
    output1: Tensor, output2: Tensor, eps: float, idx: Any = None
) -> None:
    on_index = "on index {idx} " if idx is not None else ""  # sic: PyTorch's message has no f here
    assert output1.shape == output2.shape, (
        f"Expected `func` to return outputs with the same shape when inputs are perturbed {on_index}by "
        f"{eps}, but got: shapes {output1.shape} and {output2.shape}."
    )
    assert output1.dtype == output2.dtype, (
        f"Expected `func` to return outputs with the same dtype when inputs are perturbed {on_index}by "
        f"{eps}, but got: dtypes {output1.dtype} and {output2.dtype}."
    )


def _with_prepare_inputs(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> Callable[[], tuple[Tensor, ...]]:
    # The function sees the user's own input tensors, whose memory is perturbed in place
    # (PyTorch perturbs ``input.data``: same memory, no version bump, no autograd).
    def wrapped_fn() -> tuple[Tensor, ...]:
        return tuple(a.clone() for a in _as_tuple(fn(*inputs)))

    return wrapped_fn


def _compute_numerical_gradient(
    fn: Callable[[], tuple[Tensor, ...]],
    data: Array,
    idx: Any,
    v: Any,
    norm_v: float,
    nbhd_checks_fn: Callable[..., None],
) -> tuple[Array, ...]:
    """Central difference of ``fn`` at ``data[idx]`` along ``v``: (f(x + v) - f(x - v)) / 2|v|."""
    orig = np.array(data[idx], copy=True)
    data[idx] = orig - v
    outa = fn()
    data[idx] = orig + v
    outb = fn()
    data[idx] = orig

    def compute(a: Tensor, b: Tensor) -> Array:
        nbhd_checks_fn(a, b)
        # With engine ops, so that outputs the difference is not defined for (bool) raise the
        # engine's error, as in PyTorch.
        ret = (b.detach() - a.detach()) / (2 * norm_v)
        return _np(ret).reshape(-1)

    return tuple(compute(a, b) for a, b in zip(outa, outb, strict=False))


def _compute_numerical_jvps_wrt_specific_input(
    jvp_fn: Callable[[Any], tuple[Array, ...]], delta: Any, input_is_complex: bool
) -> list[Array]:
    # See Note [Complex gradcheck]: a complex input is moved along x and along y.
    jvps: list[Array] = []
    ds_dx_tup = jvp_fn(delta[0] if isinstance(delta, tuple) else delta)
    if input_is_complex:
        ds_dy_tup = jvp_fn(delta[1] * 1j) if isinstance(delta, tuple) else jvp_fn(delta * 1j)
        for ds_dx, ds_dy in zip(ds_dx_tup, ds_dy_tup, strict=False):
            assert not np.iscomplexobj(ds_dx)
            jvps.append(ds_dx + ds_dy * 1j)
    else:
        for ds_dx in ds_dx_tup:
            assert not np.iscomplexobj(ds_dx)
            jvps.append(ds_dx)
    return jvps


def get_numerical_jacobian_wrt_specific_input(
    fn: Callable[..., Any],
    input_idx: int,
    inputs: tuple[Any, ...],
    outputs: tuple[Tensor, ...],
    eps: float,
    input: Tensor | None = None,  # noqa: A002 - PyTorch's name
) -> tuple[Tensor, ...]:
    """The N x M numerical Jacobians of every output with respect to ``inputs[input_idx]``
    (see Note [Jacobian layout])."""
    inp = inputs[input_idx] if input is None else input
    assert inp.requires_grad
    data = inp._data
    wrapped_fn = _with_prepare_inputs(fn, inputs)
    cols: dict[int, list[Array]] = {}
    for d_idx, idx in enumerate(itertools.product(*[range(m) for m in data.shape])):
        nbhd = functools.partial(_check_outputs_same_dtype_and_shape, idx=idx, eps=eps)

        def jvp_fn(delta: Any, idx: Any = idx, nbhd: Any = nbhd) -> tuple[Array, ...]:
            return _compute_numerical_gradient(wrapped_fn, data, idx, delta, eps, nbhd)

        cols[d_idx] = _compute_numerical_jvps_wrt_specific_input(jvp_fn, eps, inp.is_complex())
    float_outputs = [o for o in outputs if _is_float_or_complex_tensor(o)]
    jacobians: list[Tensor] = []
    for i, out in enumerate(float_outputs):
        dtype = inp.dtype._np if inp.is_complex() else out.dtype._np
        jac = np.zeros((inp.numel(), out.numel()), dtype=dtype)
        for k, col in cols.items():
            jac[k] = col[i]
        jacobians.append(_wrap(jac))
    return tuple(jacobians)


def _get_numerical_jacobian(
    fn: Callable[..., Any],
    inputs: tuple[Any, ...],
    outputs: tuple[Tensor, ...] | None = None,
    eps: float = 1e-3,
) -> list[tuple[Tensor, ...]]:
    """One tuple per input requiring grad, of one N x M Jacobian per float output."""
    if outputs is None:
        outputs = _as_tuple(fn(*_as_tuple(inputs)))
    if any(o.is_complex() for o in outputs):
        raise ValueError(
            "Expected output to be non-complex. get_numerical_jacobian no longer supports functions that "
            "return complex outputs."
        )
    inp_indices = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad]
    return [
        get_numerical_jacobian_wrt_specific_input(fn, inp_idx, inputs, outputs, eps, input=inp)
        for inp, inp_idx in zip(_iter_tensors(inputs, True), inp_indices, strict=False)
    ]


# --- analytical Jacobians (backward) ------------------------------------------------------------


def _stack_and_check_tensors(
    list_of_list_of_tensors: list[list[Tensor | None]], inputs: tuple[Any, ...], numel_outputs: int
) -> tuple[list[Array], bool, bool]:
    diff_input_list = list(_iter_tensors(inputs, True))
    out_jacobians = [np.zeros((t.numel(), numel_outputs), dtype=t.dtype._np) for t in diff_input_list]
    correct_grad_sizes = True
    correct_grad_types = True
    for i, tensor_list in enumerate(list_of_list_of_tensors):
        inp = diff_input_list[i]
        for j, tensor in enumerate(tensor_list):
            if tensor is not None and tensor.size() != inp.size():
                correct_grad_sizes = False
            elif tensor is not None and tensor.dtype != inp.dtype:
                correct_grad_types = False
            if tensor is None:
                out_jacobians[i][:, j] = 0
            else:
                dense = _np(tensor).reshape(-1)
                assert out_jacobians[i][:, j].size == dense.size
                out_jacobians[i][:, j] = dense
    return out_jacobians, correct_grad_sizes, correct_grad_types


def _check_jacobians_equal(j1: list[Array], j2: list[Array], atol: float) -> bool:
    return all(a.size == 0 or np.abs(a - b).max() <= atol for a, b in zip(j1, j2, strict=False))


def _check_analytical_jacobian_attributes(
    inputs: tuple[Any, ...],
    output: Tensor,
    nondet_tol: float,
    check_grad_dtypes: bool,
    fast_mode: bool = False,
    v: Array | None = None,
) -> list[Array]:
    """The analytical Jacobian of ``output`` (slow mode) or ``v^T J`` (fast mode), computed twice
    to check that backward is deterministic ("reentrant")."""
    diff_input_list = list(_iter_tensors(inputs, True))

    def vjp_fn(grad_output: Array) -> tuple[Tensor | None, ...]:
        return engine.autograd.grad(
            output,
            diff_input_list,
            _wrap(grad_output.astype(output.dtype._np)),
            retain_graph=True,
            allow_unused=True,
        )

    def rows() -> list[list[Tensor | None]]:
        if fast_mode:
            assert v is not None
            return [[None if g is None else g.clone()] for g in vjp_fn(v.reshape(tuple(output.shape)))]
        # Backward with each basis vector e_j gives e_j^T J, the j-th column (Note [Jacobian layout]).
        result: list[list[Tensor | None]] = [[] for _ in diff_input_list]
        for j in range(output.numel()):
            grad_out = np.zeros(output.numel(), dtype=output.dtype._np)
            grad_out[j] = 1.0
            for i, d_x in enumerate(vjp_fn(grad_out.reshape(tuple(output.shape)))):
                result[i].append(None if d_x is None else d_x.clone())
        return result

    output_numel = 1 if fast_mode else output.numel()
    # PyTorch unpacks (jacobians, sizes_ok, types_ok) into (jacobians, types_ok, sizes_ok): the two
    # flags are swapped, so each failure reports the other's message. Kept for identical behaviour.
    jacobians1, types_ok, sizes_ok = _stack_and_check_tensors(rows(), inputs, output_numel)
    jacobians2, _, _ = _stack_and_check_tensors(rows(), inputs, output_numel)
    reentrant = _check_jacobians_equal(jacobians1, jacobians2, nondet_tol)
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and grad_output multiple "
            "times gives different values, although analytical gradient matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + FAILED_NONDET_MSG
        )
    return jacobians1
