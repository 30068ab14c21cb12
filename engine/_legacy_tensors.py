"""The legacy typed tensor constructors: ``engine.FloatTensor``, ``LongTensor``, ``BoolTensor``...

In PyTorch these are objects of the metaclass ``torch.tensortype``, one per (dtype, backend), made
by ``torch/csrc/tensor/python_tensor.cpp``. Calling one runs the legacy constructor
``legacy_tensor_ctor`` (``torch/csrc/utils/tensor_new.cpp``) with the type's dtype:
``LongTensor()`` is empty, ``LongTensor(2, 3)`` or ``LongTensor(torch.Size([2, 3]))`` is an
uninitialised tensor of that size, ``LongTensor([1, 2])`` copies the data (floats truncated),
``LongTensor(t)`` returns an alias of a tensor that already has the type.
``isinstance(t, engine.FloatTensor)`` holds for a float32 tensor (every tensor is on the CPU).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine import _dtype
from engine._tensor import Size, Tensor

__all__ = ["BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "IntTensor", "LongTensor", "tensortype"]

# c10's TensorOptions printing names the scalar type by its C++ type.
_CPP_TYPE_NAMES = {
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "int64": "long int",
    "bool": "bool",
    "uint8": "unsigned char",
    "float16": "c10::Half",
    "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}

# The signatures PyTorch's argument parser lists; type names are the engine's (``engine.device``).
_SIGNATURES = (
    " * (*, engine.device device = None)\n"
    "{bad_keywords}"
    " * (engine.Storage storage)\n"
    " * (Tensor other)\n"
    " * (tuple of ints size, *, engine.device device = None)\n"
    " * (object data, *, engine.device device = None)\n"
)


def _options(d: _dtype.dtype) -> str:
    return (
        f"TensorOptions(dtype={_CPP_TYPE_NAMES.get(d.name, d.name)}, device=cpu, layout=Strided, "
        "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))"
    )


def _arg_type_name(x: Any) -> str:
    # The names PyTorch's argument parser prints for a call's arguments.
    if isinstance(x, Tensor):
        return "Tensor"
    if isinstance(x, _dtype.dtype):
        return "engine.dtype"
    return type(x).__name__


def _legacy_new(d: _dtype.dtype, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
    """PyTorch's ``legacy_tensor_ctor`` for the type of dtype ``d``."""
    from engine import empty, tensor

    device = kwargs.pop("device", None)
    if kwargs:
        got = ", ".join(
            [*map(_arg_type_name, args), *(f"{k}={_arg_type_name(v)}" for k, v in kwargs.items())]
        )
        bad = f"      didn't match because some of the keywords were incorrect: {', '.join(kwargs)}\n"
        raise TypeError(
            f"new() received an invalid combination of arguments - got ({got}), but expected one of:\n"
            + _SIGNATURES.format(bad_keywords=bad)
        )
    device_type = None if device is None else str(device).split(":")[0]
    if device_type is not None and device_type != "cpu":
        raise RuntimeError(
            f"legacy constructor expects device type: cpu but device type: {device_type} was passed"
        )
    if not args:
        return empty(0, dtype=d)
    if len(args) == 1 and isinstance(args[0], Tensor):
        other = args[0]
        if device is not None:
            raise RuntimeError(
                "Legacy tensor constructor of the form torch.Tensor(tensor, device=device) is not "
                "supported.  Use torch.tensor(...) or torch.as_tensor(...) instead."
            )
        if other.dtype is not d:
            raise TypeError(f"expected {_options(d)} (got {_options(other.dtype)})")
        return other.alias()
    if len(args) == 1 and isinstance(args[0], Size):
        return empty(tuple(args[0]), dtype=d)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return empty(tuple(int(a) for a in args), dtype=d)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, str):
            raise TypeError("new(): invalid data type 'str'")
        if not isinstance(data, (list, tuple, np.ndarray)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        return tensor(data, dtype=d)
    for i, a in enumerate(args):
        if not isinstance(a, (int, np.integer)):
            raise TypeError(
                f"new(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                f'"type must be tuple of ints,but got {type(a).__name__}"'
            )
    raise AssertionError("unreachable")  # pragma: no cover


class tensortype(type):  # noqa: N801 - PyTorch's name
    """The metaclass of the legacy tensor types: calling one builds a tensor of its dtype, and
    ``isinstance`` checks the dtype."""

    dtype: _dtype.dtype
    is_cuda = False
    is_sparse = False

    def __call__(cls, *args: Any, **kwargs: Any) -> Tensor:
        return _legacy_new(cls.dtype, args, dict(kwargs))

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype


def _make(name: str, d: _dtype.dtype) -> tensortype:
    return tensortype(name, (), {"dtype": d, "__module__": "engine", "__qualname__": name})


FloatTensor = _make("FloatTensor", _dtype.float32)
DoubleTensor = _make("DoubleTensor", _dtype.float64)
LongTensor = _make("LongTensor", _dtype.int64)
IntTensor = _make("IntTensor", _dtype.int32)
BoolTensor = _make("BoolTensor", _dtype.bool_)
ByteTensor = _make("ByteTensor", _dtype.uint8)
