"""Tensor factories: ``tensor``, ``zeros``, ``ones``, ``rand`` ... (``torch`` namespace functions)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine import _dtype
from engine._dtype import dtype
from engine._tensor import Tensor
from engine.random import Generator, _gen

__all__ = [
    "arange",
    "as_tensor",
    "empty",
    "empty_like",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "linspace",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "tensor",
    "zeros",
    "zeros_like",
]


def _shape(size: Sequence[Any]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(s) for s in size)


def _new(data: np.ndarray, requires_grad: bool) -> Tensor:
    return Tensor._make(data, requires_grad)


def _infer_dtype(data: Any) -> dtype:
    flat = np.asarray(data)
    if flat.dtype == np.bool_:
        return _dtype.bool_
    if np.issubdtype(flat.dtype, np.integer):
        return _dtype.int64
    if np.issubdtype(flat.dtype, np.complexfloating):
        return _dtype.get_default_dtype().to_complex()
    return _dtype.get_default_dtype()


def tensor(data: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, a NumPy array)."""
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.detach()."
            "clone() or sourceTensor.detach().clone().requires_grad_(True), rather than "
            "torch.tensor(sourceTensor).",
            UserWarning,
            stacklevel=2,
        )
        d = dtype or data.dtype
        return _new(np.array(data._data, dtype=d._np, copy=True), requires_grad)
    if isinstance(data, np.ndarray):
        d = dtype or _dtype.from_numpy(data.dtype)
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flatten(data)):
            data = _to_nested_values(data)
        d = dtype or _infer_dtype(data)
    return _new(np.array(data, dtype=d._np, copy=True), requires_grad)


def _flatten(data: Any) -> list[Any]:
    if isinstance(data, (list, tuple)):
        return [y for x in data for y in _flatten(x)]
    return [data]


def _to_nested_values(data: Any) -> Any:
    if isinstance(data, (list, tuple)):
        return [_to_nested_values(x) for x in data]
    if isinstance(data, Tensor):
        return data._data.tolist()
    return data


def as_tensor(data: Any, dtype: dtype | None = None, device: Any = None) -> Tensor:
    if isinstance(data, Tensor) and (dtype is None or data.dtype is dtype):
        return data
    return tensor(data, dtype=dtype)


def from_numpy(a: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``a``."""
    return _new(a, False)


def _float(dtype: dtype | None) -> dtype:
    return dtype or _dtype.get_default_dtype()


def zeros(*size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _new(np.zeros(_shape(size), _float(dtype)._np), requires_grad)


def ones(*size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    return _new(np.ones(_shape(size), _float(dtype)._np), requires_grad)


def empty(*size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    # Zero-filled rather than uninitialised, so that runs are reproducible.
    return _new(np.zeros(_shape(size), _float(dtype)._np), requires_grad)


def full(
    size: Sequence[int],
    fill_value: Any,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    d = dtype or _infer_dtype(fill_value)
    return _new(np.full(_shape((size,)), fill_value, d._np), requires_grad)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = (
            _dtype.int64
            if all(isinstance(v, int) for v in (start, end, step))
            else _dtype.get_default_dtype()
        )
    return _new(np.arange(start, end, step).astype(dtype._np), requires_grad)


def linspace(
    start: float,
    end: float,
    steps: int,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    return _new(np.linspace(start, end, steps).astype(_float(dtype)._np), requires_grad)


def eye(
    n: int, m: int | None = None, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    return _new(np.eye(n, m, dtype=_float(dtype)._np), requires_grad)


def rand(
    *size: Any,
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    return _new(_gen(generator).random(_shape(size)).astype(_float(dtype)._np), requires_grad)


def randn(
    *size: Any,
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    return _new(_gen(generator).standard_normal(_shape(size)).astype(_float(dtype)._np), requires_grad)


def randint(
    low: int,
    high: int | None = None,
    size: Sequence[int] = (),
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    if isinstance(high, (list, tuple)):
        # randint(high, size): PyTorch's other overload, size given second.
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    d = dtype or _dtype.int64
    return _new(_gen(generator).integers(low, high, _shape((size,))).astype(d._np), requires_grad)


def _like(t: Tensor, dtype: dtype | None) -> tuple[tuple[int, ...], dtype]:
    return tuple(t.shape), dtype or t.dtype


def zeros_like(
    input: Tensor,  # noqa: A002
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    shape, d = _like(input, dtype)
    return _new(np.zeros(shape, d._np), requires_grad)


def ones_like(
    input: Tensor,  # noqa: A002
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    shape, d = _like(input, dtype)
    return _new(np.ones(shape, d._np), requires_grad)


def empty_like(
    input: Tensor,  # noqa: A002
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    return zeros_like(input, dtype=dtype, requires_grad=requires_grad)


def full_like(
    input: Tensor,  # noqa: A002
    fill_value: Any,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    shape, d = _like(input, dtype)
    return _new(np.full(shape, fill_value, d._np), requires_grad)


def rand_like(
    input: Tensor,  # noqa: A002
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    generator: Generator | None = None,
) -> Tensor:
    shape, d = _like(input, dtype)
    return _new(_gen(generator).random(shape).astype(d._np), requires_grad)


def randn_like(
    input: Tensor,  # noqa: A002
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    generator: Generator | None = None,
) -> Tensor:
    shape, d = _like(input, dtype)
    return _new(_gen(generator).standard_normal(shape).astype(d._np), requires_grad)


# --- Tensor.new_*: a new tensor with ``self``'s dtype unless told otherwise ------------------


def new_zeros(
    self: Tensor, *size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    return zeros(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)


def new_ones(
    self: Tensor, *size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    return ones(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)


def new_empty(
    self: Tensor, *size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    return empty(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)


def new_full(
    self: Tensor,
    size: Sequence[int],
    fill_value: Any,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    return full(size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad)


def new_tensor(
    self: Tensor, data: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    return tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)


_NEW_OVERLOADS = (
    "(*, torch.device device = None)",
    "(torch.Storage storage)",
    "(Tensor other)",
    "(tuple of ints size, *, torch.device device = None)",
    "(object data, *, torch.device device = None)",
)


def _new_type_name(v: Any) -> str:
    if isinstance(v, Tensor):
        return "Tensor"
    if isinstance(v, dtype):
        return "torch.dtype"
    return type(v).__name__


def new(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """The legacy constructor ``x.new(...)``, with ``x``'s dtype: ``x.new()`` is empty,
    ``x.new(2, 3)`` or ``x.new(engine.Size([2, 3]))`` uninitialised (zeros here) of that size,
    ``x.new([1, 2])`` a copy of the data, ``x.new(other)`` an alias of a tensor of the same dtype."""
    bad = [k for k in kwargs if k != "device"]
    if bad:
        got = ", ".join(
            [_new_type_name(a) for a in args] + [f"{k}={_new_type_name(v)}" for k, v in kwargs.items()]
        )
        note = f"\n      didn't match because some of the keywords were incorrect: {', '.join(bad)}"
        marked = (0,) if len(args) <= 1 else (3, 4)
        lines = "".join(f" * {o}{note if i in marked else ''}\n" for i, o in enumerate(_NEW_OVERLOADS))
        raise TypeError(
            f"new() received an invalid combination of arguments - got ({got}), but expected one of:\n{lines}"
        )
    if not args:
        return empty(0, dtype=self.dtype)
    first = args[0]
    if isinstance(first, Tensor) and len(args) == 1:
        if first.dtype is not self.dtype:
            raise TypeError(
                f"expected TensorOptions(dtype={_cpp_name(self.dtype)}, device=cpu, layout=Strided, "
                "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)) "
                f"(got TensorOptions(dtype={_cpp_name(first.dtype)}, device=cpu, layout=Strided, "
                "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt)))"
            )
        from engine.ops.shape import alias

        return alias(first)  # type: ignore[no-any-return]
    from engine._tensor import Size

    if isinstance(first, Size) or (isinstance(first, int) and not isinstance(first, bool)):
        size = tuple(first) if isinstance(first, Size) else args
        for pos, s in enumerate(size):
            if not isinstance(s, int) or isinstance(s, bool):
                raise TypeError(
                    f"new(): argument 'size' failed to unpack the object at pos {pos + 1} with error "
                    f'"type must be tuple of ints,but got {type(s).__name__}"'
                )
        for s in size:
            if s < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        return empty(*size, dtype=self.dtype)
    if len(args) == 1 and isinstance(first, (list, tuple, np.ndarray)):
        return tensor(first, dtype=self.dtype)
    raise TypeError(f"new(): data must be a sequence (got {type(first).__name__})")


def _cpp_name(d: dtype) -> str:
    from engine._tensor import _CPP_TYPE_NAMES

    return _CPP_TYPE_NAMES[d.name]
