"""Linear algebra: mm, bmm, mv, dot, addmm, baddbmm, the composites matmul and outer (norms: norm.py).

``matmul`` is not an op of its own in PyTorch (``CompositeImplicitAutograd``): it reshapes its
arguments and calls ``dot``, ``mv``, ``mm`` or ``bmm``, so the graph of ``a @ b`` holds those
ops' nodes (``MmBackward0`` under ``UnsafeViewBackward0`` for a batch times a matrix). The engine
follows at::native::matmul step by step, so the same nodes appear and save the same tensors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from engine._C import _tls
from engine._tensor import _CPP_TYPE_NAMES, Tensor
from engine.ops._dispatch import _scalar_type_name, composite, op
from engine.ops._samples import SampleInput, T
from engine.ops.inplace_views import squeeze__dim
from engine.ops.pointwise import _conj_scalar, _maybe_multiply, infer_size
from engine.ops.shape import _expanded_shape, _unsafe_view

Array = np.ndarray


# --- mm, addmm ------------------------------------------------------------------------------------
# A complex alpha or beta enters the gradients conjugated (``maybe_multiply(grad, beta.conj())``).


def _mm_mat1_backward(
    grad: Tensor, mat2: Tensor, sizes: Sequence[int], strides: Sequence[int], alpha: float
) -> Tensor:
    if strides[0] == 1 and strides[1] == sizes[0]:
        # A column-major mat1 gets a column-major gradient.
        return _maybe_multiply(mat2.conj().mm(grad.t()).t(), _conj_scalar(alpha))
    return _maybe_multiply(grad.mm(mat2.t().conj()), _conj_scalar(alpha))


def _mm_mat2_backward(
    grad: Tensor, mat1: Tensor, sizes: Sequence[int], strides: Sequence[int], alpha: float
) -> Tensor:
    if strides[0] == 1 and strides[1] == sizes[0]:
        return _maybe_multiply(grad.t().mm(mat1.conj()).t(), _conj_scalar(alpha))
    return _maybe_multiply(mat1.t().conj().mm(grad), _conj_scalar(alpha))


def _mm_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(2, 3), T.of(3, 4))),
        SampleInput((T.of(2, 3), T.of(3, 4, grad=False)), note="self only"),
        SampleInput((T.of(2, 3, grad=False), T.of(3, 4)), note="mat2 only"),
        SampleInput((T.of(2, 3), T.of(4, 5)), note="shape mismatch"),
        SampleInput((T.of(3), T.of(3, 4)), note="vector"),
        SampleInput((T.of(2, 3), T((3, 4), dtype="float32")), note="dtype mismatch"),
        SampleInput((T.complex(2, 3), T.complex(3, 4)), note="complex"),
        SampleInput((T.complex(2, 3, grad=False), T.complex(3, 4)), note="complex mat2 only"),
        SampleInput((T.complex(2, 3), T.of(3, 4)), note="complex real"),
    ]


@op(
    derivatives={
        "self": lambda grad, mat2, self_sym_sizes, self_sym_strides: _mm_mat1_backward(
            grad, mat2, self_sym_sizes, self_sym_strides, 1
        ),
        "mat2": lambda grad, self, mat2_sym_sizes, mat2_sym_strides: _mm_mat2_backward(
            grad, self, mat2_sym_sizes, mat2_sym_strides, 1
        ),
    },
    dtypes="keep",
    samples=_mm_samples,
)
def mm(self: Tensor, mat2: Tensor) -> Array:
    if self.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if self.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({self.shape[0]}x{self.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})"
        )
    if self.dtype != mat2.dtype:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{_CPP_TYPE_NAMES[self.dtype.name]} != {_CPP_TYPE_NAMES[mat2.dtype.name]}"
        )
    return np.matmul(self, mat2)


def _check_addmm(self: Array, mat1: Array, mat2: Array) -> None:
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})"
        )
    for name, m in (("self", self), ("mat1", mat1)):
        if m.dtype != mat2.dtype:
            raise RuntimeError(
                f"{name} and mat2 must have the same dtype, but got {_scalar_type_name(m.dtype)} and "
                f"{_scalar_type_name(mat2.dtype)}"
            )
    _expanded_shape(self, (mat1.shape[0], mat2.shape[1]))  # self must broadcast to the product


def _add_scaled(self: Array, product: Array, beta: float, alpha: float) -> Array:
    out = product if alpha == 1 else alpha * product
    if beta == 0:  # self is ignored, NaNs included (BLAS's beta == 0 convention)
        return np.ascontiguousarray(np.broadcast_to(out, product.shape))
    return (self if beta == 1 else beta * self) + out


@op(
    derivatives={
        "self": lambda grad, beta: _maybe_multiply(grad, _conj_scalar(beta)),
        "mat1": lambda grad, mat2, mat1_sym_sizes, mat1_sym_strides, alpha: _mm_mat1_backward(
            grad, mat2, mat1_sym_sizes, mat1_sym_strides, alpha
        ),
        "mat2": lambda grad, mat1, mat2_sym_sizes, mat2_sym_strides, alpha: _mm_mat2_backward(
            grad, mat1, mat2_sym_sizes, mat2_sym_strides, alpha
        ),
    },
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(4), T.of(2, 3), T.of(3, 4))),
        SampleInput((T.of(2, 4), T.of(2, 3), T.of(3, 4)), {"beta": 0.5, "alpha": 2.0}),
        SampleInput((T.of(1, 4), T.of(2, 3), T.of(3, 4, grad=False)), {"beta": 0}),
        SampleInput((T.of(3), T.of(2, 3), T.of(3, 2)), note="bad bias"),
        SampleInput((T.of(4), T.of(3), T.of(3, 4)), note="vector"),
        SampleInput((T.complex(4), T.complex(2, 3), T.complex(3, 4)), note="complex"),
        SampleInput(
            (T.complex(2, 4), T.complex(2, 3), T.complex(3, 4)),
            {"beta": 0.5 - 1j, "alpha": 2 + 1j},
            note="complex scales",
        ),
    ],
)
def addmm(self: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1) -> Array:
    _check_addmm(self, mat1, mat2)
    return _add_scaled(self, np.matmul(mat1, mat2), beta, alpha)


# --- bmm, baddbmm ---------------------------------------------------------------------------------


def _check_bmm(batch1: Array, batch2: Array) -> None:
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    expected = [batch1.shape[0], batch1.shape[2]]
    if [batch2.shape[0], batch2.shape[1]] != expected:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: {expected} but got: "
            f"{[batch2.shape[0], batch2.shape[1]]}."
        )
    if batch1.dtype != batch2.dtype:
        raise RuntimeError(
            f"expected scalar type {_scalar_type_name(batch1.dtype)} but found "
            f"{_scalar_type_name(batch2.dtype)}"
        )


@op(
    derivatives={
        "self": lambda grad, mat2: grad.bmm(mat2.transpose(1, 2).conj()),
        "mat2": lambda grad, self: self.transpose(1, 2).conj().bmm(grad),
    },
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3, 4), T.of(2, 4, 5))),
        SampleInput((T.of(2, 3, 4), T.of(2, 4, 5, grad=False)), note="self only"),
        SampleInput((T.of(2, 3, 4), T.of(2, 5, 5)), note="shape mismatch"),
        SampleInput((T.of(3, 4), T.of(4, 5)), note="matrices"),
        SampleInput((T.complex(2, 3, 4), T.complex(2, 4, 5)), note="complex"),
    ],
)
def bmm(self: Tensor, mat2: Tensor) -> Array:
    _check_bmm(self, mat2)
    return np.matmul(self, mat2)


@op(
    derivatives={
        "self": lambda grad, beta: _maybe_multiply(grad, _conj_scalar(beta)),
        "batch1": lambda grad, batch2, alpha: _maybe_multiply(
            grad.bmm(batch2.transpose(1, 2).conj()), _conj_scalar(alpha)
        ),
        "batch2": lambda grad, batch1, alpha: _maybe_multiply(
            batch1.transpose(1, 2).conj().bmm(grad), _conj_scalar(alpha)
        ),
    },
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3, 5), T.of(2, 3, 4), T.of(2, 4, 5))),
        SampleInput((T.of(5), T.of(2, 3, 4), T.of(2, 4, 5)), {"beta": 0.5, "alpha": -1.5}),
        SampleInput((T.of(2, 3, 6), T.of(2, 3, 4), T.of(2, 4, 5)), note="bad self"),
        SampleInput(
            (T.complex(5), T.complex(2, 3, 4), T.complex(2, 4, 5)),
            {"beta": 0.5j, "alpha": 1 - 1j},
            note="complex",
        ),
    ],
)
def baddbmm(self: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1) -> Array:
    _check_bmm(batch1, batch2)
    _expanded_shape(self, (batch1.shape[0], batch1.shape[1], batch2.shape[2]))  # self must broadcast
    return _add_scaled(self, np.matmul(batch1, batch2), beta, alpha)


# --- mv, dot, outer -------------------------------------------------------------------------------


@op(
    derivatives={
        "self": lambda grad, vec: outer(grad, vec.conj()),  # PyTorch: grad.ger(vec.conj())
        "vec": lambda grad, self: self.conj().t().mv(grad),
    },
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(2, 3), T.of(3))),
        SampleInput((T.of(2, 3, grad=False), T.of(3)), note="vec only"),
        SampleInput((T.of(2, 3), T.of(2)), note="size mismatch"),
        SampleInput((T.of(2, 3), T.of(3, 1)), note="matrix"),
        SampleInput((T.complex(2, 3), T.complex(3)), note="complex"),
    ],
)
def mv(self: Tensor, vec: Tensor) -> Array:
    if self.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {self.ndim}, {vec.ndim}")
    if self.shape[1] != vec.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({self.shape[0]}), mat ({self.shape[0]}x{self.shape[1]}), "
            f"vec ({vec.shape[0]})"
        )
    if self.dtype != vec.dtype:
        raise RuntimeError(
            f"expected scalar type {_scalar_type_name(self.dtype)} but found {_scalar_type_name(vec.dtype)}"
        )
    return np.matmul(self, vec)


@op(
    derivatives={
        "self": lambda grad, tensor: grad * tensor.conj(),
        "tensor": lambda grad, self: grad * self.conj(),
    },
    dtypes="keep",
    samples=lambda: [
        SampleInput((T.of(3), T.of(3))),
        SampleInput((T.of(3), T.of(3, grad=False)), note="self only"),
        SampleInput((T.of(3), T.of(4)), note="size mismatch"),
        SampleInput((T.of(2, 3), T.of(3)), note="matrix"),
        SampleInput((T.of(3), T((3,), dtype="float32")), note="dtype mismatch"),
        SampleInput((T.complex(3), T.complex(3)), note="complex"),
        SampleInput((T.complex(3), T.complex(3, grad=False)), note="complex self only"),
        SampleInput((T.complex(3), T.of(3)), note="complex real"),
    ],
)
def dot(self: Tensor, tensor: Tensor) -> Array:
    if self.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {self.ndim}D and {tensor.ndim}D tensors")
    if self.dtype != tensor.dtype:
        raise RuntimeError(
            "dot : expected both vectors to have same dtype, but found "
            f"{_scalar_type_name(self.dtype)} and {_scalar_type_name(tensor.dtype)}"
        )
    if self.shape[0] != tensor.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{self.shape[0]}] and src [{tensor.shape[0]}] to "
            f"have the same number of elements, but got {self.shape[0]} and {tensor.shape[0]} elements "
            "respectively"
        )
    return np.asarray(np.dot(self, tensor))


@composite(
    samples=lambda: [
        SampleInput((T.of(3), T.of(4))),
        SampleInput((T.of(3, grad=False), T.of(4))),
        SampleInput((T.of(2, 3), T.of(4)), note="matrix"),
        SampleInput((T.complex(3), T.complex(4)), note="complex"),
        SampleInput((T.of(3), T.complex(4)), note="real complex"),
    ]
)
def outer(self: Tensor, vec2: Tensor) -> Tensor:
    """``self.reshape(n, 1) * vec2``: the graph of an outer product is a ``MulBackward0``."""
    for name, t in (("self", self), ("vec2", vec2)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    return self.reshape(self.shape[0], 1) * vec2


# --- matmul ---------------------------------------------------------------------------------------


def _should_fold(tensor1: Tensor, tensor2: Tensor) -> bool:
    """Whether ``matmul`` can fold the batch of the larger operand into mm/mv rows (no bmm)."""
    tensor1_larger = tensor1.ndim >= tensor2.ndim
    t1 = tensor1 if tensor1_larger else tensor2.mT
    dim_t2 = tensor2.ndim if tensor1_larger else tensor1.ndim
    if not (t1.ndim >= 3 and dim_t2 <= 2):
        return False
    # Folding copies t1 when needed, but spares the backward of a (small) t2 that requires grad a
    # large expanded gradient.
    if (tensor2 if tensor1_larger else tensor1).requires_grad:
        return True
    # A 2-D tensor1 would need its result transposed and copied.
    if tensor1.ndim == 2:
        return False
    if t1.numel() == 0:
        return True
    # Fold only if the leading dims can be viewed as one (t1.view(-1, t1.size(-1)) without a copy).
    sizes, strides = t1.shape, t1.stride()
    return all(strides[i] == strides[i + 1] * sizes[i + 1] for i in range(t1.ndim - 2))


def _matmul_samples() -> list[SampleInput]:
    return [
        SampleInput((T.of(3), T.of(3)), note="1d 1d"),
        SampleInput((T.of(2, 3), T.of(3)), note="2d 1d"),
        SampleInput((T.of(3), T.of(3, 4)), note="1d 2d"),
        SampleInput((T.of(2, 3), T.of(3, 4)), note="2d 2d"),
        SampleInput((T.of(2, 5, 3), T.of(3, 4)), note="3d 2d"),
        SampleInput((T.of(2, 5, 3), T.of(3, 4, grad=False)), note="3d 2d const"),
        SampleInput((T.of(2, 5, 3), T.of(3)), note="3d 1d"),
        SampleInput((T.of(3), T.of(2, 3, 4)), note="1d 3d"),
        SampleInput((T.of(3, grad=False), T.of(2, 3, 4)), note="1d const 3d"),
        SampleInput((T.of(5, 3), T.of(2, 3, 4)), note="2d 3d"),
        SampleInput((T.of(5, 3, grad=False), T.of(2, 3, 4)), note="2d const 3d"),
        SampleInput((T.of(2, 5, 3), T.of(2, 3, 4)), note="3d 3d"),
        SampleInput((T.of(2, 1, 5, 3), T.of(3, 3, 4)), note="4d 3d broadcast"),
        SampleInput((T.of(2, 2, 5, 3), T.of(3)), note="4d 1d"),
        SampleInput((T.of(1, 5, 3), T.of(4, 3, 2)), note="3d batch-1 3d"),
        SampleInput((T.of(4, 5, 3, grad=False), T.of(1, 3, 2)), note="3d 3d batch-1"),
        SampleInput((T.of(2, 3), T.of(4, 5)), note="mismatch"),
        SampleInput((T.of(2, 3), T.of()), note="0d"),
        SampleInput((T.of(2, 3, 4), T.of(3, 5, 6)), note="batch mismatch"),
        SampleInput((T.complex(3), T.complex(3)), note="complex 1d 1d"),
        SampleInput((T.complex(2, 3), T.complex(3)), note="complex 2d 1d"),
        SampleInput((T.complex(3), T.complex(3, 4)), note="complex 1d 2d"),
        SampleInput((T.complex(2, 3), T.complex(3, 4)), note="complex 2d 2d"),
        SampleInput((T.complex(2, 5, 3), T.complex(3, 4)), note="complex 3d 2d"),
        SampleInput((T.complex(2, 1, 5, 3), T.complex(3, 3, 4)), note="complex 4d 3d broadcast"),
        SampleInput((T.complex(2, 3), T.of(3, 4)), note="complex real"),
    ]


@composite(samples=_matmul_samples)
def matmul(self: Tensor, other: Tensor) -> Tensor:
    """``self @ other``, decomposed as at::native::matmul does it."""
    tensor1, tensor2 = self, other
    dim1, dim2 = tensor1.ndim, tensor2.ndim
    if dim1 == 0 or dim2 == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {dim1}D and {dim2}D"
        )
    if dim1 == 1 and dim2 == 1:
        return dot(tensor1, tensor2)
    if dim1 == 2 and dim2 == 1:
        return mv(tensor1, tensor2)
    if dim1 == 1 and dim2 == 2:
        return squeeze__dim(mm(tensor1.unsqueeze(0), tensor2), 0)
    if dim1 == 2 and dim2 == 2:
        return mm(tensor1, tensor2)
    if _should_fold(tensor1, tensor2):
        # One mm/mv on the larger operand with its batch dims folded into the rows; a larger
        # tensor2 is handled as (tensor2.mT @ tensor1.mT).mT.
        transpose = dim2 > dim1
        t1 = tensor2.mT if transpose else tensor1
        t2 = (tensor1.t() if dim1 == 2 else tensor1) if transpose else tensor2
        output_shape = list(t1.shape[:-1])
        folded_dim1 = math.prod(output_shape)
        if t2.ndim == 2:
            output_shape.append(t2.shape[1])
        t1_folded = t1.reshape(folded_dim1, t1.shape[-1])
        if t2.ndim == 2:
            output = _unsafe_view(t1_folded.mm(t2), output_shape)
            return output.mT.contiguous() if transpose else output
        return _unsafe_view(t1_folded.mv(t2), output_shape)
    if dim1 == 3 and dim2 == 3 and tensor1.shape[0] != tensor2.shape[0]:
        # A batch of one that would be broadcast is squeezed so that the folding path applies
        # (same reason as in _should_fold). PyTorch also does it for "tensor subclass-like"
        # inputs, which includes any tensor while a dispatch mode is active.
        subclass_like = bool(_tls.dispatch_modes)
        if tensor1.shape[0] == 1 and (tensor1.requires_grad or subclass_like):
            return matmul(tensor1.squeeze(0), tensor2)
        if tensor2.shape[0] == 1 and (tensor2.requires_grad or subclass_like):
            return matmul(tensor1, tensor2.squeeze(0))
    # Broadcast the batch dims, flatten them into one and call bmm.
    n = tensor1.shape[-2] if dim1 > 1 else 1
    m1 = tensor1.shape[-1]
    m2 = tensor2.shape[-2] if dim2 > 1 else tensor2.shape[0]
    p = tensor2.shape[-1] if dim2 > 1 else 1
    output_shape = list(infer_size(tensor1.shape[: max(dim1 - 2, 0)], tensor2.shape[: max(dim2 - 2, 0)]))
    batch = math.prod(output_shape)
    tensor1_expanded = tensor1.expand([*output_shape, n, m1]).reshape(batch, n, m1)
    vector_rhs = dim2 == 1
    if vector_rhs:
        tensor2_expanded = tensor2.expand([*output_shape, m2]).reshape(batch, m2).unsqueeze(2)
    else:
        tensor2_expanded = tensor2.expand([*output_shape, m2, p]).reshape(batch, m2, p)
    if dim1 > 1:
        output_shape.append(n)
    if dim2 > 1:
        output_shape.append(p)
    result = tensor1_expanded.bmm(tensor2_expanded)
    return _unsafe_view(result.squeeze(-1) if vector_rhs else result, output_shape)
