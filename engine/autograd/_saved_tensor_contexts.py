"""``save_on_cpu`` and ``allow_mutation_on_saved_tensors``: two context managers of
``torch.autograd.graph`` built on saved-tensor hooks (re-exported by ``engine.autograd.graph``).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Generator, MutableMapping
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary, WeakValueDictionary

from engine._tensor import Tensor, device
from engine.autograd.graph import saved_tensors_hooks
from engine.ops._kernel import DispatchMode

if TYPE_CHECKING:
    from engine.ops._dispatch import Op

__all__ = ["allow_mutation_on_saved_tensors", "save_on_cpu"]


class save_on_cpu(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    """Context manager under which tensors saved by the forward pass are stored on the CPU, then
    retrieved for backward.

    Every engine tensor lives on the CPU, so the pack hook keeps ``(tensor.device, tensor.cpu())``
    (the tensor itself) and the unpack hook moves it back with ``.to(device)`` (a no-op): the
    hooks are PyTorch's, and so are their effects on the graph (saved tensors go through hooks, so
    no version check is made). ``pin_memory`` and ``device_type`` are accepted as in PyTorch.

    Example::

        >>> import engine
        >>> a = engine.ones(3, requires_grad=True)
        >>> with engine.autograd.graph.save_on_cpu(pin_memory=True):
        ...     y = a * a
        >>> y.sum().backward()
        >>> a.grad
        tensor([2., 2., 2.])
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack_to_cpu(tensor: Tensor) -> tuple[device, Tensor]:
            if not pin_memory:
                return (tensor.device, tensor.cpu())
            # PyTorch copies into an empty (pinned when CUDA is available) CPU tensor; no device
            # module is available here, so the copy is not pinned, as in PyTorch without CUDA.
            from engine import empty

            packed = empty(tuple(tensor.size()), dtype=tensor.dtype)
            packed.copy_(tensor)
            return (tensor.device, packed)

        def unpack_from_cpu(packed: tuple[device, Tensor]) -> Tensor:
            dev, tensor = packed
            return tensor.to(dev, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


# NOTE [Allow mutation on tensors saved for backward]
# (PyTorch's note, torch/autograd/graph.py; the engine follows it step by step.)
#
# 1. Tensor gets saved for backward
#    - remember the python object id and the version of the tensor
#    - remember aliasing information (data_ptr of base + version)
#    - save the original so we control its lifetime
# 2. Any time a tensor gets in-placed
#    - for each tensor aliased to it:
#      - check using its object id and version to see if it has been saved
#      - if it has been saved, clone it
#      - delete the reference to the original
# 3. during backward
#    - if the clone exists, the tensor must've been modified in-place
#
# Step 1 is a pair of saved-tensor hooks (``_swap_with_cloned``), step 2 a dispatch mode
# (``_CloneArgBeforeMutateMode``): it sees every op below autograd, before the kernel writes and
# before the version counter moves. Lifetimes are those of the graph: a handle lives as long as a
# SavedVariable holds it, so the weak dictionaries forget a tensor once its graph is freed.
_allow_mutation_on_saved_tensors_enabled: bool = False

_TID = tuple[int, int, int]
_SID = tuple[int, int]


def _get_tid(tensor: Tensor) -> _TID:
    return (id(tensor), tensor.data_ptr(), tensor._version)


def _get_sid(tensor: Tensor) -> _SID:
    return (tensor.data_ptr(), tensor._version)


class _Handle:
    pass


class _swap_with_cloned(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    def __init__(self, ctx: _AllowMutationOnSavedContext) -> None:
        def pack_hook(tensor: Tensor) -> _Handle:
            tid = _get_tid(tensor)
            sid = _get_sid(tensor)
            # Save aliasing information
            ctx.sid_to_tid[sid].add(tid)
            # The same tensor (of the same version) can be saved multiple times
            if tid not in ctx.tid_to_weakhandle:
                handle = _Handle()
                ctx.tid_to_weakhandle[tid] = handle
                ctx.original[handle] = tensor
            else:
                # Store an additional strong reference to the handle
                handle = ctx.tid_to_weakhandle[tid]
            return handle

        def unpack_hook(handle: _Handle) -> Tensor:
            error_msg = (
                "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
                "in which the graph was originally recorded."
            )
            assert _allow_mutation_on_saved_tensors_enabled, error_msg
            if handle in ctx.cloned:
                return ctx.cloned[handle]
            assert handle in ctx.original, error_msg
            return ctx.original[handle]

        super().__init__(pack_hook, unpack_hook)


class _CloneArgBeforeMutateMode(DispatchMode):
    def __init__(self, ctx: _AllowMutationOnSavedContext) -> None:
        self.ctx = ctx

    def __torch_dispatch__(
        self,
        func: Op,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}

        def maybe_clone(t: Tensor) -> None:
            sid = _get_sid(t)
            ctx = self.ctx
            if sid in ctx.sid_to_tid:
                for tid in ctx.sid_to_tid[sid]:
                    if tid not in ctx.tid_to_weakhandle:
                        # Saved once, but its graph was freed (by backward) before the in-place.
                        continue
                    handle = ctx.tid_to_weakhandle[tid]
                    if handle in ctx.cloned:
                        # The same exact tensor has been cloned already
                        continue
                    ctx.cloned[handle] = ctx.original[handle].clone()
                    del ctx.original[handle]

        # The arguments an op writes to (``Tensor(a!)`` in PyTorch's schema): ``self`` of an
        # in-place op, and ``out=``.
        if func.is_inplace:
            maybe_clone(args[0] if args else kwargs["self"])
        out = kwargs.get("out")
        if isinstance(out, Tensor):
            maybe_clone(out)
        elif isinstance(out, (list, tuple)):
            for t in out:
                maybe_clone(t)
        return func(*args, **kwargs)


class _AllowMutationOnSavedContext:
    def __init__(self) -> None:
        self.cloned: MutableMapping[_Handle, Tensor] = WeakKeyDictionary()
        self.original: MutableMapping[_Handle, Tensor] = WeakKeyDictionary()
        self.tid_to_weakhandle: MutableMapping[_TID, _Handle] = WeakValueDictionary()
        self.sid_to_tid: dict[_SID, set[_TID]] = defaultdict(set)

    def clear(self) -> None:
        self.cloned.clear()
        self.original.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()


@contextlib.contextmanager
def allow_mutation_on_saved_tensors() -> Generator[_AllowMutationOnSavedContext, None, None]:
    """Context manager under which mutating tensors saved for backward is allowed.

    Under this context manager, tensors saved for backward are cloned on mutation, so the
    original version can still be used during backward. Normally, mutating a tensor saved for
    backward will result in an error raised when it's used during backward. Both the forward and
    the backward must run under the same context manager; its state is cleared on exit.

    Example::

        >>> import engine
        >>> with engine.autograd.graph.allow_mutation_on_saved_tensors():
        ...     a = engine.ones(2, 3, requires_grad=True)
        ...     b = a.clone()
        ...     out = (b**2).sum()
        ...     _ = b.sin_()
        ...     out.sum().backward()
        >>> a.grad
        tensor([[2., 2., 2.],
                [2., 2., 2.]])
    """
    global _allow_mutation_on_saved_tensors_enabled

    ctx = _AllowMutationOnSavedContext()

    with _swap_with_cloned(ctx), _CloneArgBeforeMutateMode(ctx):
        try:
            if _allow_mutation_on_saved_tensors_enabled:
                raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
            _allow_mutation_on_saved_tensors_enabled = True
            yield ctx
        finally:
            ctx.clear()
            _allow_mutation_on_saved_tensors_enabled = False
