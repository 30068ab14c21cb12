"""``Parameter`` (a tensor a Module registers as learnable) and ``Buffer`` (one it registers as state)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from engine._tensor import Tensor, _init_tensor

__all__ = ["Buffer", "Parameter"]


class Parameter(Tensor):
    """A leaf tensor that requires grad and that ``Module.__setattr__`` registers as a parameter.

    Like PyTorch's ``_make_subclass``, it shares ``data``'s memory and version counter but is a
    new leaf: whatever history ``data`` had is not part of it. Ops on a Parameter return plain
    Tensors.
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = Tensor._make(np.empty((0,), np.float32))
        t = object.__new__(cls)
        _init_tensor(t, data._data)
        t._version_counter = data._version_counter
        t.requires_grad_(requires_grad)
        return t

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        # Everything happened in __new__; Tensor.__init__ (the legacy constructor) must not run.
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict[int, Any]) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        result = type(self)(Tensor._make(self._data.copy()), self.requires_grad)
        memo[id(self)] = result
        if self._grad is not None:
            result._grad = copy.deepcopy(self._grad, memo)
        return result

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild_parameter, (self._data.copy(), self.requires_grad))


def _rebuild_parameter(data: np.ndarray, requires_grad: bool) -> Parameter:
    return Parameter(Tensor._make(data), requires_grad)


class _BufferMeta(type):
    # ``isinstance(t, Buffer)`` is true for the plain tensor Buffer(...) returned, as in PyTorch.
    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)


class Buffer(metaclass=_BufferMeta):
    """``nn.Buffer(data, persistent=True)``: marks a tensor as a buffer when assigned to a Module
    attribute (``persistent=False`` keeps it out of ``state_dict``)."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Tensor:  # type: ignore[misc]
        if data is None:
            data = Tensor._make(np.empty((0,), np.float32))
        t: Tensor = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent  # type: ignore[attr-defined]
        t._is_buffer = True  # type: ignore[attr-defined]
        return t
