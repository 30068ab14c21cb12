"""Bucketing: ``searchsorted`` and ``bucketize`` (PyTorch's ATen/native/Bucketization.cpp).

Both return int64 (or int32 with ``out_int32=True``) positions: they have no derivative, so their
result never requires grad, whatever their inputs (``test_integer_outputs``). A Python number
as the value (``searchsorted.Scalar``, ``bucketize.Scalar``) gives a 0-dim result.
"""

from __future__ import annotations

import numpy as np

from engine._tensor import Tensor
from engine.ops._dispatch import op
from engine.ops._samples import Lit, SampleInput, T

Array = np.ndarray


def _side(right: bool, side: str | None) -> str:
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError(
                "torch.searchsorted(): side and right can't be set to opposites, got side of left while "
                "right was True"
            )
        return side
    return "right" if right else "left"


def _search(boundaries: Array, values: Array, side: str, sorter: Array | None, out_int32: bool) -> Array:
    out_dtype = np.int32 if out_int32 else np.int64
    if boundaries.ndim == 1:
        idx = np.searchsorted(boundaries, values, side=side, sorter=sorter)  # type: ignore[call-overload]
        return np.asarray(idx, dtype=out_dtype)
    # N-d boundaries: one search per row of the leading dimensions.
    lead = boundaries.shape[:-1]
    rows_b = boundaries.reshape(-1, boundaries.shape[-1])
    rows_v = values.reshape(rows_b.shape[0], -1)
    rows_s = None if sorter is None else sorter.reshape(rows_b.shape)
    out = np.empty(rows_v.shape, dtype=out_dtype)
    for i in range(rows_b.shape[0]):
        out[i] = np.searchsorted(
            rows_b[i], rows_v[i], side=side, sorter=None if rows_s is None else rows_s[i]
        )  # type: ignore[call-overload]
    return out.reshape((*lead, values.shape[-1]))


@op(
    dtypes="keep",
    method=False,
    samples=lambda: [
        SampleInput((Lit([0.1, 0.5, 0.5, 0.9], "float64"), T.of(2, 3, low=0.0, high=1.0))),
        SampleInput((Lit([0.1, 0.5, 0.5, 0.9], "float64"), Lit([0.5, 0.2], "float64")), {"right": True}),
        SampleInput((Lit([0.1, 0.5, 0.9], "float64"), Lit([0.5, 0.2], "float64")), {"side": "right"}),
        SampleInput((Lit([0.1, 0.5, 0.9], "float64"), 0.5), note="scalar value"),
        SampleInput(
            (Lit([0.1, 0.5, 0.9], "float64"), Lit([0.5], "float64")), {"out_int32": True}, note="int32"
        ),
        SampleInput((Lit([[1.0, 2.0], [3.0, 4.0]], "float64"), Lit([[1.5], [3.5]], "float64")), note="2-d"),
        SampleInput(
            (Lit([0.9, 0.1, 0.5], "float64"), Lit([0.5, 0.2], "float64")),
            {"sorter": Lit([1, 2, 0])},
            note="sorter",
        ),
        SampleInput((Lit([0.1, 0.5], "float64"), 0.5), {"side": "middle"}, note="bad side"),
        SampleInput((Lit([[1.0, 2.0]], "float64"), Lit([[1.5], [3.5]], "float64")), note="bad dims"),
    ],
)
def searchsorted(
    sorted_sequence: Tensor,
    self: Tensor,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Array:
    """Where each value of ``self`` would go in ``sorted_sequence`` (each row of its last dim)."""
    side_ = _side(right, side)
    if sorted_sequence.ndim == 0:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension"
        )
    if sorted_sequence.ndim != 1 and (
        sorted_sequence.shape[:-1] != self.shape[:-1] or self.ndim != sorted_sequence.ndim
    ):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
            "boundaries tensor and input value tensor must match, but we got boundaries tensor "
            f"{list(sorted_sequence.shape)} and input value tensor {list(self.shape)}"
        )
    return _search(sorted_sequence, self, side_, sorter, out_int32)


@op(
    dtypes="keep",
    method=False,
    samples=lambda: [
        SampleInput((T.of(2, 3, low=0.0, high=1.0), Lit([0.1, 0.5, 0.9], "float64"))),
        SampleInput((Lit([0.5, 0.2], "float64"), Lit([0.1, 0.5, 0.9], "float64")), {"right": True}),
        SampleInput((0.5, Lit([0.1, 0.5, 0.9], "float64")), note="scalar value"),
        SampleInput((Lit([0.5], "float64"), Lit([0.1, 0.5], "float64")), {"out_int32": True}, note="int32"),
        SampleInput((Lit([0.5], "float64"), Lit([[0.1, 0.5]], "float64")), note="bad boundaries"),
    ],
)
def bucketize(self: Tensor, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Array:
    """The bucket of each value of ``self`` given 1-d ``boundaries``."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _search(boundaries, self, "right" if right else "left", None, out_int32)
