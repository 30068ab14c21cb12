"""``Tensor``'s autograd-facing methods: ``backward``, hooks, ``retain_grad``, and dtype casts.

They call into ``engine.autograd`` (imported lazily, since ``engine.autograd`` builds on
``Tensor``), so they live apart from the attribute block in ``_tensor.py``, which installs them
by importing this module at its end.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from engine import _dtype
from engine._C import _tls
from engine._device import NO_CUDA_MESSAGE, check_device, device
from engine._dtype import dtype
from engine._tensor import Tensor


def _backward(
    self: Tensor,
    gradient: Tensor | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """Accumulate the gradient of ``self`` into the leaves' ``.grad``."""
    from engine.autograd import backward

    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _register_hook(self: Tensor, hook: Callable[[Tensor], Tensor | None]) -> Any:
    """``hook(grad)`` runs when the gradient of ``self`` is computed; it may return a new one."""
    from engine.utils.hooks import RemovableHandle

    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self._backward_hooks is None:
        self._backward_hooks = {}
        fn = self.grad_fn
        if fn is not None:
            if not isinstance(fn._tensor_pre_hooks, list):  # See Note [Objects per node].
                fn._tensor_pre_hooks = []
            fn._tensor_pre_hooks.append((self._output_nr, self._backward_hooks))
    return RemovableHandle.add(self._backward_hooks, hook)


def _retain_grad(self: Tensor) -> None:
    """Populate ``.grad`` of this non-leaf tensor during backward."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.is_leaf or self._retains_grad:
        return
    ref = weakref.ref(self)

    def retain_grad_hook(grads: list[Tensor | None], output_nr: int) -> list[Tensor | None]:
        t = ref()
        grad = grads[output_nr]
        if t is None or grad is None:
            return grads
        if t._grad is None:
            t._grad = grad.detach().clone() if not _tls.grad_enabled else grad.clone()
        else:
            t._grad = t._grad + grad
        return grads

    fn = self.grad_fn
    assert fn is not None
    fn._own("_retains_grad_hooks")[self._output_nr] = retain_grad_hook
    self._retains_grad = True


def _register_post_accumulate_grad_hook(self: Tensor, hook: Callable[[Tensor], None]) -> Any:
    """``hook(tensor)`` runs after ``.grad`` of this leaf was accumulated."""
    from engine.utils.hooks import RemovableHandle

    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self._grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    if self._post_accumulate_grad_hooks is None:
        self._post_accumulate_grad_hooks = {}
    return RemovableHandle.add(self._post_accumulate_grad_hooks, hook)


def _to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``x.to(dtype)``, ``x.to(device)``, ``x.to(device, dtype)``, ``x.to(other)``: the only device
    is the CPU; naming another raises PyTorch's error for a machine without it."""
    target = kwargs.get("dtype")
    if kwargs.get("device") is not None:
        check_device(kwargs["device"])
    for a in args:
        if isinstance(a, dtype):
            target = a
        elif isinstance(a, Tensor):
            target = a.dtype
        elif isinstance(a, (str, device)) or (isinstance(a, int) and not isinstance(a, bool)):
            check_device(a)
    flags = [a for a in args if isinstance(a, bool)]  # positional non_blocking, copy
    copy = kwargs.get("copy", False) or (len(flags) > 1 and flags[1])
    if target is None and copy:
        target = self._dtype
    if target is None or (target is self._dtype and not copy):
        return self
    from engine.ops.copies import _to_copy

    return _to_copy(self, target)  # type: ignore[no-any-return]


def _cuda(self: Tensor, device: Any = None, non_blocking: bool = False, **kwargs: Any) -> Tensor:
    """``x.cuda()``: there is no CUDA here; PyTorch's error for a machine without it."""
    raise RuntimeError(NO_CUDA_MESSAGE)


def _cpu(self: Tensor, memory_format: Any = None) -> Tensor:
    return self


def _type_as(self: Tensor, other: Tensor) -> Tensor:
    return _to(self, other.dtype)


Tensor.backward = _backward  # type: ignore[attr-defined]
Tensor.register_hook = _register_hook  # type: ignore[attr-defined]
Tensor.retain_grad = _retain_grad  # type: ignore[attr-defined]
Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook  # type: ignore[attr-defined]
Tensor.to = _to  # type: ignore[attr-defined]
Tensor.type_as = _type_as  # type: ignore[attr-defined]
Tensor.float = lambda self: _to(self, _dtype.float32)  # type: ignore[attr-defined]
Tensor.double = lambda self: _to(self, _dtype.float64)  # type: ignore[attr-defined]
Tensor.long = lambda self: _to(self, _dtype.int64)  # type: ignore[attr-defined]
Tensor.int = lambda self: _to(self, _dtype.int32)  # type: ignore[attr-defined]
Tensor.bool = lambda self: _to(self, _dtype.bool_)  # type: ignore[attr-defined]
Tensor.cpu = _cpu  # type: ignore[attr-defined]
Tensor.cuda = _cuda  # type: ignore[attr-defined]
