"""Copies into existing tensors and dtype conversions: ``copy_``, ``zero_``, ``fill_``, ``_to_copy``.

A copy between dtypes follows PyTorch: complex to real keeps the real part (with PyTorch's
warning, not NumPy's), and the gradient flowing back to a real source is the real part of a
complex gradient (``CopyBackwards`` and ``ToCopyBackward0`` do that themselves).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from engine import _dtype
from engine._factories import zeros_like
from engine._tensor import Tensor
from engine.ops._dispatch import composite, op
from engine.ops._samples import SampleInput, T
from engine.ops.complex import handle_r_to_c
from engine.ops.pointwise import infer_size

Array = np.ndarray


@op(
    # PyTorch's CopyBackwards gives src the real part of a complex gradient if src is real.
    derivatives={
        "self": lambda grad: zeros_like(grad),
        "src": lambda grad, src_scalar_type: _to_copy_backward(grad, src_scalar_type),
    },
    node="engine::autograd::CopyBackwards",
    inplace=True,
    function=False,
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3), T.of(2, 3))),
        SampleInput((T.of(2, 3), T.of(3))),
        SampleInput((T.complex(2, 3), T.complex(3)), note="complex"),
        SampleInput((T.complex(2, 3), T.of(2, 3)), note="real into complex"),
        SampleInput((T.of(2, 3), T((2, 3), dtype="float32")), note="float32 into float64", gradcheck=False),
    ],
)
def copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> Array:
    shape = infer_size(self.shape, src.shape)
    if shape != self.shape:
        raise RuntimeError(
            f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(shape)}"
        )
    return cast_array(np.broadcast_to(src, self.shape), self.dtype)


@op(
    derivatives={"self": lambda grad: zeros_like(grad)},
    node="ZeroBackward0",
    inplace=True,
    function=False,
    samples=lambda: [SampleInput((T.of(2, 3),)), SampleInput((T.complex(2, 3),), note="complex")],
)
def zero_(self: Tensor) -> Array:
    return np.zeros_like(self)


@op(
    derivatives={"self": lambda grad: zeros_like(grad)},
    node="FillBackward2",
    inplace=True,
    name="fill_.Scalar",
    function=False,
    samples=lambda: [SampleInput((T.of(2, 3), 1.5))],
)
def fill_Scalar(self: Tensor, value: float) -> Array:  # noqa: N802
    return np.full_like(self, value)


@op(
    derivatives={"self": lambda grad: zeros_like(grad), "value": lambda grad: grad.sum()},
    node="FillBackward3",
    inplace=True,
    name="fill_.Tensor",
    function=False,
    dtypes="keep",
)
def fill_Tensor(self: Tensor, value: Tensor) -> Array:  # noqa: N802
    if value.ndim != 0:
        raise RuntimeError(
            f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
        )
    return np.full_like(self, value)


@composite(samples=lambda: [SampleInput((T.of(2, 3), 1.5))])
def fill_(self: Tensor, value: Tensor | float) -> Tensor:
    if isinstance(value, Tensor):
        return fill_Tensor(self, value)
    return fill_Scalar(self, value)


def _to_copy_backward(grad: Tensor, self_scalar_type: _dtype.dtype) -> Tensor:
    # A real input's gradient is the real part, taken without the discarding-imaginary warning.
    return handle_r_to_c(self_scalar_type, grad).to(self_scalar_type)


def cast_array(a: Array, d: np.dtype) -> Array:
    """``a.astype(d)``, warning like PyTorch (not NumPy) when a complex value loses its imaginary part."""
    if np.iscomplexobj(a) and not np.issubdtype(d, np.complexfloating):
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=2)
        a = a.real
    return a.astype(d)


@op(
    derivatives={"self": _to_copy_backward},
    dtypes="keep",
    node="ToCopyBackward0",
    method=False,
    function=False,
    # derivatives.yaml: output_differentiability: ["!dtype || isDifferentiableType(*dtype)"]
    output_differentiability=lambda bound: (
        bound["dtype"] is None or bound["dtype"].is_floating_point or bound["dtype"].is_complex
    ),
    samples=lambda: [
        SampleInput((T.of(2, 3),), {"dtype": _dtype.complex128}, note="to complex"),
        SampleInput((T.of(2, 3),), {"dtype": _dtype.int64}, note="to int64"),
        SampleInput((T.of(2, 3),), {"dtype": _dtype.float32}, gradcheck=False),  # float32 output
    ],
)
def _to_copy(self: Tensor, dtype: Any) -> Array:
    return cast_array(self, dtype._np)
