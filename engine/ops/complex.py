"""Complex numbers: the views between real and complex tensors, and the ops that build or take
apart complex values.

PyTorch's gradient for a complex input is the conjugate Wirtinger derivative (see "Autograd for
Complex Numbers" in PyTorch's autograd notes): for a real loss L of z = x + iy, ``z.grad`` is
dL/dx + i dL/dy. Formulas of ops whose input is real and output complex take the real part of
their result (``handle_r_to_c``), because a real input only receives a real gradient.

``real`` and ``imag`` are not kernels: as in PyTorch they are ``view_as_real(z).select(-1, 0)``
(or ``1``), so ``z.real`` is a float view of ``z``'s memory with a ``SelectBackward0`` grad_fn.
"""

from __future__ import annotations

import numpy as np

from engine import _dtype
from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import _scalar_type_name, composite, op
from engine.ops._samples import SampleInput, T
from engine.ops.shape import select

__all__ = ["handle_r_to_c"]

Array = np.ndarray
_C = T.complex


def handle_r_to_c(self_scalar_type: _dtype.dtype, grad: Tensor) -> Tensor:
    """The gradient of a real input whose formula produced a complex value: its real part
    (PyTorch's ``handle_r_to_c``; the imaginary part is the derivative along a direction the
    real input cannot move in)."""
    if self_scalar_type._category != 3 and grad._dtype._category == 3:  # real input, complex grad
        return real(grad)
    return grad


# --- views between real and complex -----------------------------------------------------------


@op(
    derivatives={"self": lambda grad: view_as_complex(grad.contiguous())},
    view="view",
    dtypes="keep",
    samples=lambda: [SampleInput((_C(2, 3),)), SampleInput((_C(),), note="0-dim")],
)
def view_as_real(self: Tensor) -> Array:
    if not np.iscomplexobj(self):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    # A new trailing axis of size 1 is contiguous whatever the other strides: reinterpreting it
    # as two floats gives the [..., 2] view, real part first.
    return self[..., None].view(self.real.dtype)


@op(
    derivatives={"self": lambda grad: view_as_real(grad.contiguous())},
    view="view",
    dtypes="keep",
    samples=lambda: [SampleInput((T.of(2, 3, 2),)), SampleInput((T.of(2),), note="to 0-dim")],
)
def view_as_complex(self: Tensor) -> Array:
    if self.dtype not in (np.float32, np.float64):
        raise RuntimeError(
            "view_as_complex is only supported for half, float and double tensors, but got a tensor of "
            f"scalar type: {_scalar_type_name(self.dtype)}"
        )
    if self.ndim == 0:
        raise RuntimeError("Input tensor must have one or more dimensions")
    if self.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    item = self.itemsize
    if self.strides[-1] != item:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % (2 * item) for s in self.strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if _element_offset(self) % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    complex_type = np.complex64 if self.dtype == np.float32 else np.complex128
    return self.view(complex_type)[..., 0]


def _element_offset(a: Array) -> int:
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // a.itemsize


@composite(method=False, samples=lambda: [SampleInput((_C(2, 3),)), SampleInput((T.of(2, 3),), note="real")])
def real(self: Tensor) -> Tensor:
    """The real part, a view of ``self`` (``self`` itself for a real tensor)."""
    if self.is_complex():
        return select(view_as_real(self), -1, 0)
    return self


@composite(method=False, samples=lambda: [SampleInput((_C(2, 3),)), SampleInput((T.of(2, 3),), note="real")])
def imag(self: Tensor) -> Tensor:
    """The imaginary part, a view of ``self``; real tensors have none."""
    if self.is_complex():
        return select(view_as_real(self), -1, 1)
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def _set_real(self: Tensor, value: Tensor | complex) -> None:
    """``z.real = value`` writes into the view: ``z``'s history gets a CopySlices."""
    real(self).copy_(value)


def _set_imag(self: Tensor, value: Tensor | complex) -> None:
    imag(self).copy_(value)


# ``Tensor.real``'s getter is in engine/_tensor.py; the setters and ``imag`` need the ops above.
Tensor.real = Tensor.real.setter(_set_real)  # type: ignore[attr-defined]
Tensor.imag = property(imag, _set_imag)  # type: ignore[attr-defined]


@composite(method=False)
def is_complex(self: Tensor) -> bool:
    """``engine.is_complex(t)``: whether ``t``'s dtype is complex64 or complex128."""
    return self.is_complex()


# --- complex conjugation ------------------------------------------------------------------------


@op(
    derivatives={"self": lambda grad: grad.conj()},
    name="_conj",
    node="ConjBackward0",
    dtypes="keep",
    method=False,
    function=False,
)
def _conj(self: Tensor) -> Array:
    return np.conj(self)


# No op-table samples: torch's result is a lazily conjugated view, which numpy() refuses to read;
# tests/engine/test_complex.py compares conj() with torch instead.
@composite()
def conj(self: Tensor) -> Tensor:
    """The complex conjugate; a real tensor is returned as is (no op, no node), as in PyTorch.

    PyTorch's ``conj()`` is lazy: a view with a conjugate bit, resolved when read. NumPy has no
    such bit, so here it computes the conjugate (same values and grad_fn, but not a view)."""
    return _conj(self) if self._dtype._category == 3 else self  # self.is_complex(), read directly


# --- building and taking apart complex values -------------------------------------------------


def _check_parts(a: Array, b: Array) -> None:
    """complex() and polar() take two float tensors of the same dtype."""
    from engine.ops.pointwise import infer_size

    names = [_scalar_type_name(x.dtype) for x in (a, b)]
    if not all(x.dtype in (np.float16, np.float32, np.float64) for x in (a, b)):
        raise RuntimeError(
            f"Expected both inputs to be Half, Float or Double tensors but got {names[0]} and {names[1]}"
        )
    if a.dtype != b.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {names[0]} but got scalar type {names[1]} for second argument"
        )
    infer_size(a.shape, b.shape)


def _complex_type(a: Array) -> type:
    if a.dtype == np.float16:
        raise NotImplementedError("the engine has no complex32 (ComplexHalf) dtype")
    return np.complex64 if a.dtype == np.float32 else np.complex128


def _parts_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3), T.of(2, 3))),
        SampleInput((T.of(2, 3), T.of(3)), note="broadcast"),
        SampleInput((T.of(2, 3), T((2, 3), grad=False)), note="first only"),
    ]


def _complex_backward_real(grad: Tensor, real: Tensor) -> Tensor:
    # ``real`` is unused, but PyTorch's ComplexBackward0 saves it: its codegen reads the
    # ``real`` of ``at::real(grad)`` as the input's name. Naming it here saves it too.
    return grad.real


def _complex_backward_imag(grad: Tensor, imag: Tensor) -> Tensor:
    return grad.imag


@op(
    derivatives={"real": _complex_backward_real, "imag": _complex_backward_imag},
    name="complex",
    dtypes="keep",
    samples=_parts_samples,
    method=False,
)
def complex_(real: Tensor, imag: Tensor) -> Array:  # noqa: A002 - the op is torch.complex
    _check_parts(real, imag)
    out: Array = np.empty(np.broadcast_shapes(real.shape, imag.shape), _complex_type(real))
    out.real = real
    out.imag = imag
    return out


def _polar_backward_abs(grad: Tensor, result: Tensor) -> Tensor:
    return real(grad.conj() * result.sgn())


def _polar_backward_angle(grad: Tensor, result: Tensor) -> Tensor:
    return real(grad.conj() * (result * 1j))


@op(
    derivatives={"abs": _polar_backward_abs, "angle": _polar_backward_angle},
    dtypes="keep",
    samples=lambda: [
        SampleInput((T((2, 3), 0.5, 2.0), T.of(2, 3))),
        SampleInput((T((2, 3), 0.5, 2.0), T.of(3)), note="broadcast"),
    ],
    method=False,
)
def polar(abs: Tensor, angle: Tensor) -> Array:  # noqa: A002 - PyTorch's parameter names
    _check_parts(abs, angle)
    ctype = _complex_type(abs)
    out: Array = np.empty(np.broadcast_shapes(abs.shape, angle.shape), ctype)
    out.real = abs * np.cos(angle)
    out.imag = abs * np.sin(angle)
    return out


def _angle_backward(grad: Tensor, self: Tensor) -> Tensor:
    if not self.is_complex():
        return zeros_like(self)
    from engine.ops.pointwise import where

    return where(self == 0.0, 0.0, grad * self / self.abs().pow(2) * 1j)


@op(
    derivatives={"self": _angle_backward},
    dtypes="keep",
    samples=lambda: [
        SampleInput((_C(2, 3),)),
        SampleInput((_C(),), note="0-dim"),
        SampleInput((T.of(2, 3),), note="real"),
    ],
)
def angle(self: Tensor) -> Array:
    if np.iscomplexobj(self):
        return np.angle(self)
    # A real number's angle is 0 or pi (nan stays nan); integers give the default float dtype.
    out_type = self.dtype if self.dtype.kind == "f" else _dtype.get_default_dtype()._np
    values = self.astype(out_type)
    return np.where(values < 0, np.pi, np.where(np.isnan(values), values, 0.0)).astype(out_type)


@op(
    derivatives={"self": lambda grad: grad.conj_physical()},
    name="_conj_physical",
    node="ConjPhysicalBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: [SampleInput((_C(2, 3),))],
)
def _conj_physical(self: Tensor) -> Array:
    return np.conj(self)


@composite(samples=lambda: [SampleInput((_C(2, 3),)), SampleInput((T.of(2, 3),), note="real")])
def conj_physical(self: Tensor) -> Tensor:
    """The conjugate, computed now (``conj()`` is lazy in PyTorch; here both compute it)."""
    return _conj_physical(self) if self.is_complex() else self


@composite(samples=lambda: [SampleInput((_C(2, 3),))])
def resolve_conj(self: Tensor) -> Tensor:
    """Conjugation is never lazy here: there is nothing to resolve."""
    return self


@composite()
def is_conj(self: Tensor) -> bool:
    """Always False: the engine's ``conj()`` computes the conjugate instead of setting a bit."""
    return False
