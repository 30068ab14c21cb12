"""Selective activation checkpointing (SAC), as in PyTorch 2.8's ``torch/utils/checkpoint.py``.

Plain checkpointing recomputes every op of the region in backward. SAC lets a *policy* keep the
outputs of some ops (typically the expensive ones, such as ``mm``) from the forward, so that the
recomputation takes them from a cache instead of running their kernels again. It is built from
two dispatch modes that share one ``storage`` (a dict: op -> list of cached outputs):

- ``_CachingTorchDispatchMode`` is the checkpoint's *forward* context: for every op, it asks the
  policy, runs the op and, for a ``*_SAVE`` decision, appends a detached alias of the output;
- ``_CachedTorchDispatchMode`` is the *recompute* context: it asks the policy again (with
  ``ctx.is_recompute=True``, as 2.8 does) and, for ``*_SAVE``, pops the first cached output of
  that op instead of running its kernel.

``create_selective_checkpoint_contexts`` returns the pair; pass it as ``context_fn`` to
``checkpoint`` (through ``functools.partial``). Ops are the engine's op objects: a policy compares
``func`` with ``engine.ops.mm`` where PyTorch compares with ``torch.ops.aten.mm.default``.

SAC does not change how checkpoint packs, unpacks or stops early; it only decides which kernels
the recomputation re-runs.
"""

from __future__ import annotations

import contextlib
import enum
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from engine import ops
from engine._C import _tls
from engine._tensor import Tensor
from engine.ops import OPS, CompositeOp, DispatchMode, Op

__all__ = [
    "SAC_IGNORED_OPS",
    "CheckpointPolicy",
    "SelectiveCheckpointContext",
    "create_selective_checkpoint_contexts",
]


class _VersionWrapper:
    """A cached value plus the version it had when cached: a cached tensor mutated in place
    afterwards would silently feed the wrong value to backward, so reading it checks."""

    def __init__(self, val: Any) -> None:
        self.val: Tensor | Any = val
        self.version: int | None = val._version if isinstance(val, Tensor) else None

    def get_val(self, allow_cache_entry_mutation: bool) -> Any:
        if self.version is not None and not allow_cache_entry_mutation:
            if self.val._version != self.version:
                raise RuntimeError("Tensor cached during selective activation checkpoint has been mutated")
        return self.val


@contextlib.contextmanager
def _include_inplace_or_view() -> Iterator[None]:
    """PyTorch's ``_SetExcludeDispatchKeyGuard(ADInplaceOrView, False)``.

    Inside a dispatch mode, ops run below autograd *and* below the view/in-place layer, so a
    ``detach()`` made there would not share its input's version counter. Re-entering from the top
    makes it a proper alias (``detach`` has no derivative, so the autograd layer records nothing).
    """
    prev = _tls.below_autograd
    _tls.below_autograd = False
    try:
        yield
    finally:
        _tls.below_autograd = prev


def _maybe_detach(x: Any, any_ret_has_alias_info: bool) -> Any:
    # We detach for two separate reasons:
    # - the cached tensor is handed back to the autograd layer during recomputation, which sets
    #   its history: it must not carry the forward's;
    # - to avoid reference cycles through grad_fn.
    # The alias shares the version counter, so _VersionWrapper sees in-place changes to the
    # original output.
    if isinstance(x, Tensor) and (x.is_floating_point() or x.is_complex() or any_ret_has_alias_info):
        with _include_inplace_or_view():
            x = x.detach()
    return x


def _tree_map(fn: Callable[[Any], Any], out: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return type(out)(_tree_map(fn, o) for o in out)
    return fn(out)


class SelectiveCheckpointContext:
    """What the policy function receives as its first argument.

    ``is_recompute`` is False in the forward and True during recomputation (2.8 calls the policy
    in both; 2.9+ only in the forward).

    Example::

        >>> def policy_fn(ctx, op, *args, **kwargs):
        ...     print(ctx.is_recompute)
    """

    def __init__(self, *, is_recompute: bool) -> None:
        self.is_recompute = is_recompute


class CheckpointPolicy(enum.Enum):
    """What selective checkpointing does with the output of one op.

    - ``{MUST,PREFER}_SAVE``: the output is saved in the forward and not recomputed;
    - ``{MUST,PREFER}_RECOMPUTE``: the output is not saved and is recomputed in backward.

    ``MUST_*`` means other subsystems (``torch.compile`` in PyTorch) must not override the choice.
    A policy that always returns ``PREFER_RECOMPUTE`` is plain checkpointing; one that always
    returns ``PREFER_SAVE`` is *not* the same as no checkpointing (it caches every output, not
    only the tensors backward needs).
    """

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3


def _policy_from_bool(b: bool) -> CheckpointPolicy:
    # For backward compatibility: True means "save".
    return CheckpointPolicy.MUST_SAVE if b else CheckpointPolicy.PREFER_RECOMPUTE


# Ops selective checkpointing never caches. PyTorch lists aten.detach (checkpoint itself inserts a
# different number of detaches in the forward and in the recomputation) and metadata ops (which
# the engine does not dispatch: shapes and devices are plain attributes here).
SAC_IGNORED_OPS: set[Op] = {ops.OPS["detach"]}  # type: ignore[arg-type]

PolicyFn = Callable[..., "CheckpointPolicy | bool"]


class _CachingTorchDispatchMode(DispatchMode):
    """The forward context of SAC: runs each op and caches the outputs the policy saves."""

    def __init__(self, policy_fn: PolicyFn, storage: dict[Op, list[Any]]) -> None:
        self.policy_fn = policy_fn
        self.storage = storage

    def __torch_dispatch__(
        self,
        func: Op,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = {} if kwargs is None else kwargs
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)

        # 2.8 asks the policy before running the op (2.9+ asks after, passing the output).
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False), func, *args, **kwargs)
        if isinstance(policy, bool):
            policy = _policy_from_bool(policy)

        out = func(*args, **kwargs)

        # A view or in-place op returns an alias of an input (``Tensor(a)`` / ``Tensor(a!)`` in
        # PyTorch's schema): always detach those, whatever the dtype.
        any_ret_has_alias_info = func.view is not None or func.is_inplace
        if policy in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            self.storage[func].append(
                _tree_map(lambda x: _VersionWrapper(_maybe_detach(x, any_ret_has_alias_info)), out)
            )
        return out


class _CachedTorchDispatchMode(DispatchMode):
    """The recompute context of SAC: returns cached outputs instead of running those ops."""

    def __init__(
        self, policy_fn: PolicyFn, storage: dict[Op, list[Any]], allow_cache_entry_mutation: bool
    ) -> None:
        self.policy_fn = policy_fn
        self.storage = storage
        self.allow_cache_entry_mutation = allow_cache_entry_mutation

    def __torch_dispatch__(
        self,
        func: Op,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = {} if kwargs is None else kwargs
        if func in SAC_IGNORED_OPS:
            return func(*args, **kwargs)

        # 2.8 asks the policy again here; a policy whose answer changed between the forward and
        # the recomputation can find nothing cached (the "not found in storage" error below).
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=True), func, *args, **kwargs)
        if isinstance(policy, bool):
            policy = _policy_from_bool(policy)

        if policy in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            storage = self.storage.get(func)
            if storage is None:
                raise RuntimeError(f"{func} encountered during backward, but not found in storage")
            if len(storage) == 0:
                # Each cached output is popped when used: a second recomputation finds nothing.
                raise RuntimeError(
                    "Trying to backward an extra time. You are only allowed to backward once "
                    "on any region computed under selective activation checkpoint."
                )
            out = _tree_map(lambda x: x.get_val(self.allow_cache_entry_mutation), storage.pop(0))
        else:
            out = func(*args, **kwargs)
        return out


def _is_overload_packet(op: Any) -> bool:
    """``engine.ops.aten.mm`` (PyTorch's ``OpOverloadPacket``), or a router such as
    ``engine.ops.sum``, which stands for several overloads (``sum.default``, ``sum.dim_IntList``).
    Only overloads are dispatched, so a policy list cannot name a packet."""
    from engine.ops._aten import OpOverloadPacket

    if isinstance(op, OpOverloadPacket):
        return True
    return isinstance(op, CompositeOp) and any(name.startswith(op.name + ".") for name in OPS)


def _op_str(op: Any) -> str:
    """``str(op)`` as PyTorch prints it in the op-list error: a packet is ``aten.mm``."""
    from engine.ops._aten import OpOverloadPacket

    if isinstance(op, OpOverloadPacket):
        return f"aten.{op._name}"
    return str(op)


def create_selective_checkpoint_contexts(
    policy_fn_or_list: PolicyFn | list[Any], allow_cache_entry_mutation: bool = False
) -> tuple[_CachingTorchDispatchMode, _CachedTorchDispatchMode]:
    """The ``(forward, recompute)`` context pair of selective checkpointing.

    Args:
        policy_fn_or_list: either ``policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy``
            (a bool is accepted: True means ``MUST_SAVE``), or a list of ops, meaning
            ``MUST_SAVE`` for those and ``PREFER_RECOMPUTE`` for every other op.
        allow_cache_entry_mutation: by default, reading a cached tensor that was modified in
            place since it was cached raises an error; True disables that check.

    Example::

        >>> import functools, engine
        >>> from engine.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
        >>> x = engine.rand(4, 4, requires_grad=True)
        >>> context_fn = functools.partial(create_selective_checkpoint_contexts, [engine.ops.sin])
        >>> out = checkpoint(lambda t: t.sin().cos(), x, use_reentrant=False, context_fn=context_fn)
        >>> out.sum().backward()
    """
    # If grad mode is off, checkpoint does not run the forward under context_fn at all.
    if isinstance(policy_fn_or_list, list):
        for op in policy_fn_or_list:
            if not isinstance(op, (Op, CompositeOp)) or _is_overload_packet(op):
                # torch 2.8's text, word for word (its example names torch's ops).
                _extra_msg = (
                    (
                        "Please update the OpOverloadPacket to a specific OpOverload."
                        "For example, if you have `torch.ops.aten.mm`, change it to "
                        "`torch.ops.aten.mm.default`."
                    )
                    if _is_overload_packet(op)
                    else ""
                )
                raise ValueError(
                    f"Expected op in `op_list` to be an OpOverload but got: {_op_str(op)} "
                    f"of type {type(op)}. {_extra_msg}"
                )
        op_list = policy_fn_or_list

        def policy_fn(ctx: SelectiveCheckpointContext, op: Op, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            if op in op_list:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list  # type: ignore[assignment]
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")

    storage: dict[Op, list[Any]] = defaultdict(list)
    return (
        _CachingTorchDispatchMode(policy_fn, storage),
        _CachedTorchDispatchMode(policy_fn, storage, allow_cache_entry_mutation),
    )
