"""Vector norms: ``linalg_vector_norm``, ``norm.Scalar``, ``norm.ScalarOpt_dim`` and the ``norm`` router.

A norm is real even for a complex input (it is the norm of ``|z|``), and its gradient is
``sgn(z)``-shaped: ``d|z|/dz*`` is ``z / (2|z|)``, which PyTorch scales to ``sgn(z)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _dtype
from engine._tensor import Tensor
from engine.ops._dispatch import _scalar_type_name, composite, op
from engine.ops._samples import SampleInput, T
from engine.ops.reduction import _dims, _unsqueeze_multiple

Array = np.ndarray


# --- norms ----------------------------------------------------------------------------------------


def _norm_backward(
    grad: Tensor, self: Tensor, p: float | None, norm: Tensor, dim: Sequence[int] | None, keepdim: bool
) -> Tensor | None:
    p = 2.0 if p is None else float(p)
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if not keepdim and self.ndim != 0 and dims:
        grad = _unsqueeze_multiple(grad, dims, self.ndim)
        norm = _unsqueeze_multiple(norm, dims, self.ndim)
    if p == 0.0:
        return None
    if p == 1.0:
        return self.sgn() * grad
    if p == 2.0:
        # PyTorch: grad * (self / norm).masked_fill_(norm == 0, 0)
        return grad * (self / norm).where(norm != 0, 0.0)
    if math.isinf(p):
        # Derivative of amax(abs(self)) that respects NaNs: the gradient is shared by the maxima.
        self_abs = self.abs()
        mask = self_abs.eq(norm).logical_or(self_abs.isnan())
        return self.sgn() * ((grad / mask.sum(dims, True)) * mask)
    if p < 1.0:
        self_scaled = self.sgn() * self.abs().pow(p - 1).where(self != 0, 0.0)
        return self_scaled * grad * norm.pow(1 - p)
    self_scaled = self.sgn() * self.abs().pow(p - 1) if p < 2.0 else self * self.abs().pow(p - 2)
    scale_v = (grad / norm.pow(p - 1)).where(norm != 0, 0.0)
    return self_scaled * scale_v


def _vector_norm(name: str, a: Array, ord: float, dim: Sequence[int] | None, keepdim: bool) -> Array:  # noqa: A002
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating)):
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {_scalar_type_name(a.dtype)}"
        )
    dims = _dims(dim, a.ndim)
    x = np.abs(a)
    if ord == math.inf:
        out = np.max(x, axis=dims, keepdims=keepdim)
    elif ord == -math.inf:
        out = np.min(x, axis=dims, keepdims=keepdim)
    elif ord == 0:
        out = np.sum(x != 0, axis=dims, keepdims=keepdim).astype(x.dtype)
    elif ord == 1:
        out = np.sum(x, axis=dims, keepdims=keepdim)
    elif ord == 2:
        out = np.sqrt(np.sum(x * x, axis=dims, keepdims=keepdim))
    else:
        out = np.sum(x**ord, axis=dims, keepdims=keepdim) ** (1.0 / ord)
    return np.asarray(out)


def _norm_samples(with_dim: bool) -> list[SampleInput]:
    if not with_dim:
        return [SampleInput((T.of(2, 3),)), SampleInput((T.of(2, 3), 3)), SampleInput((T.of(2, 3), 1))]
    return [
        SampleInput((T.of(2, 3), 2, [1])),
        SampleInput((T.of(2, 3, 4), 3.0, [0, 2], True)),
        SampleInput((T.of(2, 3), 1.5, [0])),
    ]


@op(
    derivatives={
        "self": lambda grad, self, ord, result, dim, keepdim: _norm_backward(
            grad, self, ord, result, dim, keepdim
        )
    },
    dtypes="keep",
    method=False,
    function=False,  # torch.linalg.vector_norm, not torch.linalg_vector_norm
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), 2, [1])),
        SampleInput((T.of(2, 3, 4), 3, [0, 2], True)),
        SampleInput((T.of(2, 3), 1, [0])),
        SampleInput((T.of(2, 3), 0.5)),
        SampleInput((T.of(2, 3), 0)),
        SampleInput((T.of(2, 3), math.inf, [1])),
        SampleInput((T.of(2, 3), -math.inf)),
        SampleInput((T.of(),)),
        SampleInput((T.complex(2, 3),), note="complex"),
        SampleInput((T.complex(2, 3), 1, [0]), note="complex 1"),
        SampleInput((T.complex(2, 3), 3, [1], True), note="complex 3"),
        SampleInput((T.complex(2, 3), math.inf), note="complex inf"),
    ],
)
def linalg_vector_norm(
    self: Tensor,
    ord: float = 2,
    dim: Sequence[int] | None = None,
    keepdim: bool = False,
    *,  # noqa: A002
    dtype: Any = None,
) -> Array:
    if dtype is not None and _dtype.promote_types(_dtype.from_numpy(self.dtype), dtype) is not dtype:
        raise RuntimeError(
            f"linalg.vector_norm: the dtype of the input ({_scalar_type_name(self.dtype)}) should be "
            f"convertible without narrowing to the specified dtype ({_scalar_type_name(dtype)})"
        )
    a = self if dtype is None else self.astype(dtype._np)
    return _vector_norm("linalg.vector_norm", a, ord, dim, keepdim)


@op(
    derivatives={"self": lambda grad, self, p, result: _norm_backward(grad, self, p, result, None, True)},
    name="norm.Scalar",
    node="NormBackward0",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: _norm_samples(False),
)
def norm_Scalar(self: Tensor, p: float = 2) -> Array:  # noqa: N802
    return _vector_norm("norm", self, p, None, False)


@op(
    derivatives={
        "self": lambda grad, self, p, result, dim, keepdim: _norm_backward(
            grad, self, p, result, dim, keepdim
        )
    },
    name="norm.ScalarOpt_dim",
    node="NormBackward1",
    dtypes="keep",
    method=False,
    function=False,
    samples=lambda: _norm_samples(True),
)
def norm_ScalarOpt_dim(self: Tensor, p: float | None, dim: Sequence[int], keepdim: bool = False) -> Array:  # noqa: N802
    return _vector_norm("norm", self, 2 if p is None else p, dim, keepdim)


@composite(
    samples=lambda: [
        SampleInput((T.of(2, 3),)),
        SampleInput((T.of(2, 3), "fro", 1)),
        SampleInput((T.of(2, 3), 3, (0, 1), True)),
        SampleInput((T.of(2, 3), 1)),
        SampleInput((T.of(2, 3),), {"p": math.inf, "dim": 0}),
        SampleInput((T.of(2, 3, 2), "fro", (0, 1, 2)), note="fro with 3 dims"),
        SampleInput((T.complex(2, 3), 2, 1), note="complex"),
    ]
)
def norm(
    self: Tensor,
    p: float | str | None = "fro",
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    out: Any = None,
    dtype: Any = None,
) -> Tensor:
    """torch.norm: a vector norm (``linalg_vector_norm``) unless a matrix norm is asked for."""
    if out is not None:
        raise NotImplementedError("norm(out=...) is not supported by the engine")
    dims = None if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return linalg_vector_norm(self, 2, dims, keepdim, dtype=dtype)
        dims = list(range(self.ndim)) if dims is None else dims
        if len(dims) != 2:
            raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dims))}")
        raise NotImplementedError(f"norm(p={p!r}) (a matrix norm) is not supported by the engine")
    return linalg_vector_norm(self, 2.0 if p is None else p, dims, keepdim, dtype=dtype)
