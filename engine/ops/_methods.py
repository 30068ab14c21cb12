"""Install the op table on ``engine.Tensor`` (methods and operators) and on ``engine`` (functions).

Every op is written once, in its module; this file only decides under which Python names it
appears, like PyTorch's generated ``TensorBase`` methods and ``torch.*`` functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine._tensor import Tensor
from engine.ops._dispatch import OPS, CompositeOp, Op

__all__ = ["install"]

# Methods that take a size either as varargs or as one sequence: x.view(2, 3) / x.view((2, 3)).
_VARARG_SIZE = ("view", "expand", "permute", "repeat")


def _sizes(args: tuple[Any, ...]) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _method_of(entry: Op | CompositeOp) -> Callable[..., Any]:
    name = entry.name.split(".")[0]
    if name in _VARARG_SIZE:

        def method(self: Tensor, *size: Any, **kwargs: Any) -> Any:
            return entry(self, _sizes(size), **kwargs)

        method.__name__ = name
        return method

    if isinstance(entry, CompositeOp):
        fn = entry.fn

        def call(self: Tensor, *args: Any, **kwargs: Any) -> Any:
            # Without keyword arguments there is no ``out=``: the composite's function is all
            # CompositeOp.__call__ would run (``x.conj()`` in every complex-aware formula).
            return entry(self, *args, **kwargs) if kwargs else fn(self, *args)

    else:

        def call(self: Tensor, *args: Any, **kwargs: Any) -> Any:
            return entry(self, *args, **kwargs)

    call.__name__ = name
    call.__doc__ = getattr(entry, "__doc__", None)
    return call


def install(namespace: dict[str, Any]) -> None:
    """Add every op's method to Tensor and its function to ``namespace`` (``engine``)."""
    from engine import ops

    for entry in OPS.values():
        name = entry.name.split(".")[0]
        if "." in entry.name and not isinstance(entry, CompositeOp):
            continue  # overloads are reached through their router (pow -> pow.Tensor_Scalar)
        if entry.method and not hasattr(Tensor, name):
            setattr(Tensor, name, _method_of(entry))
        if entry.function and name not in namespace:
            namespace[name] = entry

    def binary(fn: Callable[..., Any], reverse: bool = False) -> Callable[..., Any]:
        if reverse:
            return lambda self, other: fn(other, self) if isinstance(other, Tensor) else fn(self, other)
        return lambda self, other: fn(self, other)

    Tensor.__add__ = binary(ops.add)  # type: ignore[method-assign]
    Tensor.__radd__ = binary(ops.add)  # type: ignore[method-assign]
    Tensor.__iadd__ = lambda self, other: ops.add_(self, other)  # type: ignore[method-assign]
    Tensor.__sub__ = binary(ops.sub)  # type: ignore[method-assign]
    # ``2 - x``: the composite ``rsub`` would only call rsub.Scalar with the same arguments.
    Tensor.__rsub__ = lambda self, other: ops.rsub_Scalar(self, other)  # type: ignore[method-assign]
    Tensor.__isub__ = lambda self, other: ops.sub_(self, other)  # type: ignore[method-assign]
    Tensor.__mul__ = binary(ops.mul)  # type: ignore[method-assign]
    Tensor.__rmul__ = binary(ops.mul)  # type: ignore[method-assign]
    Tensor.__imul__ = lambda self, other: ops.mul_(self, other)  # type: ignore[method-assign]
    Tensor.__truediv__ = binary(ops.div)  # type: ignore[method-assign]
    Tensor.__rtruediv__ = lambda self, other: ops.reciprocal(self) * other  # type: ignore[method-assign]
    Tensor.__itruediv__ = lambda self, other: ops.div_(self, other)  # type: ignore[method-assign]
    Tensor.__pow__ = binary(ops.pow)  # type: ignore[method-assign]
    Tensor.__rpow__ = lambda self, other: ops.pow(other, self)  # type: ignore[method-assign]
    Tensor.__ipow__ = lambda self, other: ops.pow_(self, other)  # type: ignore[method-assign]
    Tensor.__neg__ = lambda self: ops.neg(self)  # type: ignore[method-assign]
    Tensor.__matmul__ = lambda self, other: ops.matmul(self, other)  # type: ignore[method-assign]
    Tensor.__rmatmul__ = lambda self, other: ops.matmul(other, self)  # type: ignore[method-assign]
    Tensor.__pos__ = lambda self: self  # type: ignore[method-assign]
    Tensor.__abs__ = lambda self: ops.abs(self)  # type: ignore[method-assign]
    # ``x == None`` is False and ``x != None`` True, as in PyTorch: let Python fall back.
    Tensor.__eq__ = lambda self, other: NotImplemented if other is None else ops.eq(self, other)  # type: ignore[method-assign,assignment]
    Tensor.__ne__ = lambda self, other: NotImplemented if other is None else ops.ne(self, other)  # type: ignore[method-assign,assignment]
    Tensor.__lt__ = binary(ops.lt)  # type: ignore[method-assign]
    Tensor.__le__ = binary(ops.le)  # type: ignore[method-assign]
    Tensor.__gt__ = binary(ops.gt)  # type: ignore[method-assign]
    Tensor.__ge__ = binary(ops.ge)  # type: ignore[method-assign]
    Tensor.__and__ = binary(ops.bitwise_and)  # type: ignore[method-assign]
    Tensor.__or__ = binary(ops.bitwise_or)  # type: ignore[method-assign]
    Tensor.__invert__ = lambda self: ops.logical_not(self)  # type: ignore[method-assign]
    Tensor.__floordiv__ = lambda self, other: ops.floor_divide(self, other)  # type: ignore[attr-defined]
    Tensor.__rfloordiv__ = lambda self, other: ops.floor_divide(other, self)  # type: ignore[attr-defined]
    Tensor.__ifloordiv__ = lambda self, other: ops.floor_divide_(self, other)  # type: ignore[attr-defined]
    Tensor.__mod__ = lambda self, other: ops.remainder(self, other)  # type: ignore[attr-defined]
    Tensor.__rmod__ = lambda self, other: ops.remainder(other, self)  # type: ignore[attr-defined]
    Tensor.__imod__ = lambda self, other: ops.remainder_(self, other)  # type: ignore[attr-defined]
    Tensor.__hash__ = lambda self: id(self)  # type: ignore[method-assign]
    Tensor.where = lambda self, condition, other: ops.where(condition, self, other)  # type: ignore[attr-defined]
    from engine import _factories

    for name in ("new", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"):
        setattr(Tensor, name, getattr(_factories, name))
    Tensor.__getitem__ = ops.tensor_indexing.getitem  # type: ignore[method-assign]
    Tensor.__setitem__ = ops.tensor_indexing.setitem  # type: ignore[method-assign]
