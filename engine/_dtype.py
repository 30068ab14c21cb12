"""Dtypes and PyTorch's type-promotion rules.

NumPy's own promotion differs from PyTorch's (``float32 + int64`` is ``float64`` in NumPy and
``float32`` in PyTorch; a Python float never widens a float32 tensor in PyTorch), so the engine
computes every result dtype here and casts before calling a NumPy kernel.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "bool_",
    "complex64",
    "complex128",
    "dtype",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "int32",
    "int64",
    "promote_types",
    "result_type",
    "set_default_dtype",
]


class dtype:  # noqa: N801 - PyTorch's name
    """A tensor element type, printed like PyTorch's (``engine.float32``)."""

    __slots__ = ("_category", "_legacy_name", "_np", "itemsize", "name")

    def __init__(self, name: str, np_dtype: Any, category: int, legacy_name: str) -> None:
        self.name = name
        self._np = np.dtype(np_dtype)
        self.itemsize = self._np.itemsize
        # 0 bool, 1 integral, 2 floating, 3 complex: PyTorch's promotion categories.
        self._category = category
        self._legacy_name = legacy_name

    @property
    def is_floating_point(self) -> bool:
        return self._category == 2

    @property
    def is_complex(self) -> bool:
        return self._category == 3

    @property
    def is_signed(self) -> bool:
        return self is not bool_ and self is not uint8

    def to_real(self) -> dtype:
        return {complex64: float32, complex128: float64}.get(self, self)

    def to_complex(self) -> dtype:
        return {float32: complex64, float64: complex128, float16: complex64}.get(self, self)

    def __repr__(self) -> str:
        return f"engine.{self.name}"

    def __reduce__(self) -> str:
        return self.name


bool_ = dtype("bool", np.bool_, 0, "BoolTensor")
uint8 = dtype("uint8", np.uint8, 1, "ByteTensor")
int32 = dtype("int32", np.int32, 1, "IntTensor")
int64 = dtype("int64", np.int64, 1, "LongTensor")
float16 = dtype("float16", np.float16, 2, "HalfTensor")
float32 = dtype("float32", np.float32, 2, "FloatTensor")
float64 = dtype("float64", np.float64, 2, "DoubleTensor")
complex64 = dtype("complex64", np.complex64, 3, "ComplexFloatTensor")
complex128 = dtype("complex128", np.complex128, 3, "ComplexDoubleTensor")

ALL_DTYPES = (bool_, uint8, int32, int64, float16, float32, float64, complex64, complex128)
_BY_NUMPY = {d._np: d for d in ALL_DTYPES}
_BY_NAME = {d.name: d for d in ALL_DTYPES}
# The PyTorch aliases people write.
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "long": int64, "int": int32})
_RANK = {d: i for i, d in enumerate(ALL_DTYPES)}


def from_numpy(np_dtype: Any) -> dtype:
    try:
        return _BY_NUMPY[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(np_dtype).name}. The only supported "
            "types are: float64, float32, float16, complex64, complex128, int64, int32, uint8, "
            "and bool."
        ) from None


def by_name(name: str) -> dtype:
    return _BY_NAME[name]


# PyTorch's default dtype is process-global, not thread-local.
_default_dtype: list[dtype] = [float32]


def get_default_dtype() -> dtype:
    """The dtype of new floating tensors (``float32`` unless changed)."""
    return _default_dtype[0]


def set_default_dtype(d: dtype) -> None:
    if d not in (float16, float32, float64):
        raise TypeError("only floating-point types are supported as the default type")
    _default_dtype[0] = d


def promote_types(a: dtype, b: dtype) -> dtype:
    """``torch.promote_types`` for the engine's dtypes."""
    if a is b:
        return a
    if a._category != b._category:
        hi, lo = (a, b) if a._category > b._category else (b, a)
        if hi.is_complex and lo.is_floating_point:
            # complex64 + float64 -> complex128: keep the wider real part.
            return promote_types(hi.to_real(), lo).to_complex()
        return hi
    if a is float16 or b is float16:
        return a if _RANK[a] > _RANK[b] else b
    return a if a.itemsize > b.itemsize else b


def _scalar_dtype(value: Any) -> dtype:
    # Python numbers are "wrapped numbers": they only decide the category, never the width.
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, complex):
        return get_default_dtype().to_complex()
    return get_default_dtype()


def _combine_categories(higher: dtype | None, lower: dtype | None) -> dtype | None:
    # c10's combine_categories: a lower-priority participant only matters if its category is
    # higher than everything above it.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:
        return higher.to_complex() if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type(operands: Iterable[Any]) -> dtype:
    """PyTorch's ``result_type``: dimensioned tensors beat zero-dim tensors beat Python scalars."""
    dim_result: dtype | None = None
    zero_result: dtype | None = None
    wrapped_result: dtype | None = None
    for x in operands:
        if x is None:
            continue
        tensor_dtype = getattr(x, "dtype", None)
        if isinstance(tensor_dtype, dtype):
            if getattr(x, "_wrapped_number", False):
                d = tensor_dtype
                if d.is_floating_point:
                    d = get_default_dtype()
                elif d.is_complex:
                    d = get_default_dtype().to_complex()
                wrapped_result = d if wrapped_result is None else promote_types(wrapped_result, d)
            elif x.ndim == 0:
                d = tensor_dtype
                zero_result = d if zero_result is None else promote_types(zero_result, d)
            else:
                d = tensor_dtype
                dim_result = d if dim_result is None else promote_types(dim_result, d)
        else:
            d = _scalar_dtype(x)
            wrapped_result = d if wrapped_result is None else promote_types(wrapped_result, d)
    out = _combine_categories(dim_result, _combine_categories(zero_result, wrapped_result))
    assert out is not None, "result_type needs at least one operand"
    return out
