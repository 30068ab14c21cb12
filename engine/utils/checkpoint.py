"""Activation checkpointing: PyTorch 2.8's ``torch/utils/checkpoint.py`` for the engine.

Checkpointing trades compute for memory: a checkpointed region does not keep the tensors its ops
save for backward; backward recomputes them by running the region again. This module keeps
PyTorch's structure and names so that it can be read side by side with the original:

- ``checkpoint`` drives ``_checkpoint_without_reentrant_generator`` (the default,
  non-reentrant variant): the generator saves the region's inputs on a no-op node
  (``_NoopSaveInputs``), creates a ``_CheckpointFrame`` and installs ``_checkpoint_hook``,
  whose pack hook stores an empty ``_Holder`` instead of each saved tensor;
- in backward, the first unpack of a holder re-runs the region under ``_recomputation_hook``,
  which hands each re-saved tensor to its holder (through a ``_Handle``) and stops the
  re-run (``_StopRecomputationError``) once every tensor is back.

See ``Note [Nestable checkpoint]`` below for the rules that make nested checkpoints work, and
``docs/checkpoint.md`` for a walk-through with sequence diagrams. What PyTorch does with devices,
CUDA RNG states, autocast and torch.compile is left out: the engine is CPU only.

Note [Checkpoint's sibling modules]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch's one file is split here, in its order: ``_checkpoint_reentrant.py`` (``CheckpointFunction``),
``_checkpoint_sequential.py``, ``_checkpoint_frame.py`` (``_Holder``, ``_NoopSaveInputs``,
``_CheckpointFrame``, ``CheckpointError``, ``_StopRecomputationError``), ``_checkpoint_debug.py``
(``debug=True``), ``_checkpoint_selective.py`` (SAC) and ``_checkpoint_graph_exec_group.py``
(2.9+); ``_checkpoint_trace.py`` has the engine's trace wrappers. This module imports the names
code reads from ``engine.utils.checkpoint`` as from ``torch.utils.checkpoint``. ``checkpoint``,
the generator and the two hooks stay here: they look up ``_checkpoint_without_reentrant_generator``,
``_CheckpointFrame``, ``_checkpoint_hook`` and ``_recomputation_hook`` as globals of this module at
call time, so setting those names on this module (as tests/utils/_ckpt_probe.py does, on torch's
module too) changes what checkpoint runs. Moving ``checkpoint``, the generator or
``_checkpoint_hook`` to another module would silently undo that. ``CheckpointError`` and
``GraphExecGroup`` keep ``__module__ = "engine.utils.checkpoint"``, which tracebacks and reprs show.
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
import weakref
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager
from typing import Any

import engine
from engine._C import _current_graph_task_id
from engine._tensor import Tensor
from engine.autograd.grad_mode import enable_grad, no_grad
from engine.autograd.graph import saved_tensors_hooks
from engine.random import fork_rng, get_rng_state, set_rng_state
from engine.trace import emit
from engine.utils._checkpoint_debug import (
    ContextFn,
    _checkpoint_error_template,  # noqa: F401
    _get_debug_context_and_cb,
)
from engine.utils._checkpoint_frame import (
    _DEFAULT_DETERMINISM_MODE,
    CheckpointError,
    _allowed_determinism_checks_to_fns,
    _CheckpointFrame,
    _debug_tip_msg,
    _default_meta_extractor,  # noqa: F401 - PyTorch's namespace has it
    _Handle,
    _Holder,
    _internal_assert,
    _NoopSaveInputs,
    _StopRecomputationError,
)
from engine.utils._checkpoint_graph_exec_group import (
    GraphExecGroup,
    _get_graph_exec_group,
    _graph_exec_group_tls,  # noqa: F401 - still importable from here, as before the split
    _set_graph_exec_group,  # noqa: F401
)
from engine.utils._checkpoint_reentrant import CheckpointFunction, check_backward_validity, detach_variable
from engine.utils._checkpoint_selective import (
    SAC_IGNORED_OPS,
    CheckpointPolicy,
    SelectiveCheckpointContext,
    _CachedTorchDispatchMode,  # noqa: F401 - PyTorch's namespace has the two SAC modes
    _CachingTorchDispatchMode,  # noqa: F401
    create_selective_checkpoint_contexts,
)
from engine.utils._checkpoint_sequential import checkpoint_sequential
from engine.utils._checkpoint_trace import _reporting_errors, _traced_call

__all__ = [
    "SAC_IGNORED_OPS",
    "CheckpointError",
    "CheckpointFunction",
    "CheckpointPolicy",
    "GraphExecGroup",
    "SelectiveCheckpointContext",
    "check_backward_validity",
    "checkpoint",
    "checkpoint_sequential",
    "create_selective_checkpoint_contexts",
    "detach_variable",
    "noop_context_fn",
    "set_checkpoint_debug_enabled",
    "set_checkpoint_early_stop",
]

_checkpoint_debug_enabled: bool | None = None


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None) -> Iterator[None]:
    """Context manager that sets whether checkpoint should print additional debug information
    when running (see the ``debug`` flag of :func:`checkpoint`). When set, it overrides the
    ``debug`` passed to checkpoint; ``None`` defers to that local setting.
    """
    global _checkpoint_debug_enabled
    try:
        prev = _checkpoint_debug_enabled
        _checkpoint_debug_enabled = enabled
        yield
    finally:
        _checkpoint_debug_enabled = prev


def noop_context_fn() -> tuple[AbstractContextManager[Any], AbstractContextManager[Any]]:
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: ContextFn = noop_context_fn,
    determinism_check: str = _DEFAULT_DETERMINISM_MODE,
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    r"""Checkpoint a model or part of the model.

    The ops of ``function`` do not keep the tensors they save for backward; backward recomputes
    them by running ``function`` again. Two implementations exist, chosen by ``use_reentrant``;
    ``use_reentrant=False`` is recommended:

    * non-reentrant checkpoint stops recomputation as soon as all needed tensors are back
      (``early_stop``); reentrant checkpoint always re-runs the whole function;
    * non-reentrant checkpoint records the graph in the forward, so backward can be run inside
      the checkpointed function, and it supports ``autograd.grad``, ``backward(inputs=...)``,
      keyword arguments, tensors inside nested structures, and regions with detached tensors.

    .. warning::
        If the function behaves differently when recomputed (a global variable changed, random
        numbers without ``preserve_rng_state``), the gradients may be wrong or an error raised.

    Args:
        function: what to run in the forward pass; it receives ``*args`` and ``**kwargs``.
        use_reentrant: which variant to use. Should be passed explicitly: without it, a warning
            is issued and the reentrant variant is used.
        context_fn: returns two context managers; the forward runs under the first and every
            recomputation under the second (non-reentrant only). See
            :func:`create_selective_checkpoint_contexts`.
        determinism_check: ``"default"`` compares the shape, dtype and device of each
            recomputed tensor with the original; ``"none"`` skips that (the number of saved
            tensors is still checked).
        debug: on a determinism error, dump the ops that ran in the forward and in the
            recomputation, with stack traces.
        early_stop: stop the recomputation once every needed tensor is recomputed. Overridden
            by :func:`set_checkpoint_early_stop` (this argument exists from PyTorch 2.9).
        preserve_rng_state: replay the forward's random number state during recomputation.
        args, kwargs: the inputs of ``function``.

    Returns:
        What ``function(*args, **kwargs)`` returns.

    Example::

        >>> import engine
        >>> from engine.utils.checkpoint import checkpoint
        >>> x = engine.ones(3, requires_grad=True)
        >>> y = checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False)
        >>> y.sum().backward()
    """
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be "
            "passed explicitly. In version 2.5 we will raise an exception "
            "if use_reentrant is not passed. use_reentrant=False is "
            "recommended, but if you need to preserve the current default "
            "behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True

    preserve = preserve_rng_state
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    else:
        gen = _checkpoint_without_reentrant_generator(
            function, preserve, context_fn, determinism_check, debug, early_stop, *args, **kwargs
        )
        # Runs pre-forward logic: up to the ``yield`` inside ``with _checkpoint_hook(...)``.
        next(gen)
        # The hooks installed by the suspended generator apply to this call. If it raises, the
        # exception propagates and, as in 2.8, the generator stays suspended with its hooks on
        # the stack until the exception's traceback (which references this frame) is released.
        if emit.enabled:
            ret = _traced_call("forward", function, *args, **kwargs)
        else:
            ret = function(*args, **kwargs)
        # Runs post-forward logic: leaves the hooks' ``with`` block.
        try:
            next(gen)
        except StopIteration:
            return ret
        raise AssertionError(
            "torch.utils.checkpoint: expected context_fn generator to yield exactly twice, "
            "but it yielded more than twice."
        )


# Note [Nestable checkpoint]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# (PyTorch's NOTE [ Nestable Checkpoint ], restated for this file.)
#
# The semantics of nested checkpoint can be defined by two basic rules. Following the two rules
# leads to an important implication that is central to motivating the design.
#
# Rule 1. Saved tensors are managed by inner-most checkpoint only and hidden from any outer
#         layers of checkpoint.
#
#   The saved-tensor hooks stack applies only its innermost pair (see Note [Saved-tensor hooks
#   stack] in engine/autograd/graph.py): a tensor saved inside an inner checkpoint is packed by
#   the inner _checkpoint_hook, and the outer one never sees it.
#
# Rule 2. The inputs of inner checkpoints are treated as tensors saved to its parent checkpoint.
#
#   _NoopSaveInputs.apply(dummy, kwargs, *args) saves the inner checkpoint's inputs *before*
#   the inner hooks are pushed, so under a parent it is the parent's pack hook that packs them:
#   first the empty dummy, then each tensor argument (2.8; from 2.9 the dummy is gone).
#
# Implication: to recompute any given saved tensor, we need to recompute all of the checkpoints
# wrapping it. To unpack a saved tensor X we recompute the inner-most checkpoint (Rule 1); to do
# that we need its inputs, which are managed by its parent (Rule 2), so the parent is recomputed
# first; and so on outwards. Unless that already happened in this backward for another tensor.
#
#   In practice: the inner unpack hook reads ``ctx.saved_tensors`` of its _NoopSaveInputs node,
#   which unpacks the dummy through the parent's unpack hook and triggers the parent's
#   recomputation.
#
# Rule 3. We should start recomputation as if there are no checkpoints currently active.
#         Checkpoints encountered during recomputation are still respected.
#
#   _recomputation_hook is pushed on top of the stack for the recomputation. A checkpoint()
#   call met while re-running the parent body creates a new frame with its own _checkpoint_hook
#   (a fresh forward: its holders are garbage once the recomputation ends); its input saves are
#   recompute-packs of the parent, so the parent's early stop can fire inside that call, before
#   the inner body runs.
#
# Beyond nesting, some rules apply to checkpointing in general.
#
# Rule 4. Recomputed tensors are specific to one backward call and are cleared as soon as they
#         are unpacked, even with retain_graph=True.
#
#   If that were not needed we could store recomputed tensors as values of a WeakKeyDictionary
#   and pack strong references to the keys: backward (with retain_graph=False) frees the packed
#   keys and the entries go with them. To clear them on unpack even when the graph is kept, we
#   pack a container (the _Holder) and clear it by hand on unpack: holder.handles[gid] = None
#   drops the only strong reference to the _Handle that keys frame.recomputed[gid]. A second
#   backward has a new gid, hence a new handle.
#
# Rule 5. Stop recomputation as soon as we've recomputed the saved tensors we know we need.
#
#   The recompute pack hook raises _StopRecomputationError once as many tensors were re-saved as
#   the forward saved (recomp_counter[gid] == len(weak_holders)); the unpack hook catches it.
#   The error is raised inside the pack of the last saving op, so an op that saves its inputs
#   never runs its kernel.
#
# Rule 6. We support doing backward inside checkpoint context.
#
#   [retain_graph is True]
#
#       def fn(x):
#           y = x.sin()
#           z = y.cos()
#           gx, = engine.autograd.grad(z, x, retain_graph=True)
#           return gx, z
#
#   z's cos saved y through the checkpoint's pack hook, so the grad() call inside must trigger a
#   recomputation. During recomputation the "inner pack hook" has two responsibilities: (1) as
#   usual, fill the WeakKeyDictionary of recomputed tensors; (2) return the actual (detached)
#   tensor, so that backward can run on the recomputed graph. That happens when backward runs
#   inside the forward (during the original forward if early stop is off, or during the original
#   backward), and whenever there are several backward calls.
#
#   [retain_graph is False]
#
#       def fn(x):
#           y = x.sin()                          # (1)
#           z = y.cos()                          # (2)
#           gx, = engine.autograd.grad(z, x)     # (3)
#           return x.cos() * gx                  # (4)
#
#       out = checkpoint(fn, inp, use_reentrant=False)
#       out.backward()                           # (5)
#
#   (1, 2) x and y are not saved: we are inside a checkpoint. (3) recomputes fn (stopping at (2)
#   or not, depending on early stop); grad() with retain_graph=False frees the holders of x and
#   y. (4) saves x through a new holder. (5) recomputes fn again: the holders of (1) and (2) are
#   dead (weak_holders[i]() is None) and are skipped; (4)'s holder is alive and gets its tensor.

# 2.8 defaults this to True and has no ``early_stop`` argument; the argument and this ``None``
# default ("defer to the argument") come from 2.9+. See Rule 5.
_enable_checkpoint_early_stop: bool | None = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Context manager that sets whether checkpoint should stop recomputation early.

    By default, non-reentrant checkpoint stops recomputation as soon as it has computed all needed
    tensors. This context manager only needs to be active when the forward runs (the frame takes
    the setting then); it overrides the ``early_stop`` argument of :func:`checkpoint`.

    Example::

        >>> import engine
        >>> from engine.utils.checkpoint import checkpoint, set_checkpoint_early_stop
        >>> x = engine.ones(2, requires_grad=True)
        >>> with set_checkpoint_early_stop(False):
        ...     out = checkpoint(lambda t: t.sin().cos(), x, use_reentrant=False)
        >>> out.sum().backward()  # the backward need not be inside the context
    """
    global _enable_checkpoint_early_stop
    try:
        prev = _enable_checkpoint_early_stop
        _enable_checkpoint_early_stop = enable
        yield
    finally:
        _enable_checkpoint_early_stop = prev


class _recomputation_hook(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    """The hooks on top of the stack while a frame is recomputed for the backward ``gid``."""

    _trace_kind = "recomputation"

    def __init__(self, target_frame_ref: weakref.ref[_CheckpointFrame], gid: Any) -> None:
        self._trace_frame = target_frame_ref
        self._trace_gid = gid

        def pack_hook(x: Tensor) -> Tensor:
            x = x.detach() if x.requires_grad else x
            target_frame = target_frame_ref()
            assert target_frame is not None  # appease mypy
            recomp_idx = target_frame.recomp_counter[gid]
            target_frame.recomp_counter[gid] += 1

            if recomp_idx >= len(target_frame.weak_holders):
                if emit.enabled:
                    emit.emit(
                        "rpack", frame=target_frame, index=recomp_idx, outcome="extra", tensor=x, gid=gid
                    )
                assert not target_frame.early_stop
                if not target_frame.forward_completed:
                    # We run into this case when early stop is not enabled and do
                    # grad within checkpoint.
                    # We need to set this flag, so we don't error out later when
                    # we check if the number of tensors saved during forward and
                    # recomputation match.
                    target_frame.ignore_saved_mismatch = True
                    return x
                raise CheckpointError(
                    "torch.utils.checkpoint: trying to save more tensors during "
                    "recomputation than during the original forward pass.\n"
                    f"{_debug_tip_msg}"
                )

            holder = target_frame.weak_holders[recomp_idx]()

            # This holder may have been cleared because someone may have called
            # backward within forward. If so, we don't need to save.
            if holder is not None:
                _internal_assert(holder.handles.get(gid, None) is None)
                holder.handles[gid] = _Handle()
                target_frame.recomputed[gid][holder.handles[gid]] = x  # type: ignore[index]
            if emit.enabled:
                outcome = "skip" if holder is None else "keep"
                emit.emit(
                    "rpack",
                    frame=target_frame,
                    index=recomp_idx,
                    outcome=outcome,
                    tensor=x,
                    gid=gid,
                    holder=holder,
                )

            if target_frame.early_stop and target_frame.recomp_counter[gid] == len(target_frame.weak_holders):
                if emit.enabled:
                    count, total = target_frame.recomp_counter[gid], len(target_frame.weak_holders)
                    emit.emit("early_stop", frame=target_frame, count=count, total=total, gid=gid)
                raise _StopRecomputationError
            # See Rule 6: [ retain_graph is True ] above
            return x

        def unpack_hook(x: Tensor) -> Tensor:
            # See Rule 6: [ retain_graph is True ] above for an example of when
            # the graph created during recomputation could be backwarded.
            return x

        super().__init__(pack_hook, unpack_hook)

    # The recomputation is the time these hooks are on the stack: the trace's recompute_start
    # and recompute_end (where the probe of tests/utils/_ckpt_probe.py sees it in torch too).
    def __enter__(self) -> None:
        if emit.enabled:
            emit.emit("recompute_start", frame=self._trace_frame(), gid=self._trace_gid)
        super().__enter__()

    def __exit__(self, *args: Any) -> None:
        super().__exit__(*args)
        if emit.enabled:
            exc_type = args[0] if args else None
            reason = (
                "completed"
                if exc_type is None
                else "early_stop"
                if issubclass(exc_type, _StopRecomputationError)
                else "error"
            )
            emit.emit("recompute_end", frame=self._trace_frame(), reason=reason, gid=self._trace_gid)


class _checkpoint_hook(saved_tensors_hooks):  # noqa: N801 - PyTorch's name
    """The hooks active while a checkpointed function runs its original forward."""

    _trace_kind = "checkpoint"

    def __init__(self, frame: _CheckpointFrame) -> None:
        self._trace_frame = weakref.ref(frame)

        def pack_hook(x: Tensor) -> _Holder:
            # See Rule 4 above
            holder = _Holder()
            frame.weak_holders.append(weakref.ref(holder))
            if emit.enabled:
                index = len(frame.weak_holders) - 1
                emit.emit("pack", frame=frame, index=index, holder=holder, tensor=x)
            # Save metadata to detect non-determinism
            if frame.metadata_fn is not None:
                with no_grad():
                    frame.x_metadatas.append(frame.metadata_fn(x))
            return holder

        def unpack_hook(holder: _Holder) -> Tensor:
            # 2.13: a GraphExecGroup makes several backward calls share one recomputation.
            gid: Any = GraphExecGroup._get_current_group()
            if gid is None:
                gid = _current_graph_task_id()
                if gid == -1:
                    # generate a temporary id if we trigger unpack outside of a backward call
                    gid = int(uuid.uuid4())
            if emit.enabled:
                emit.emit("unpack", frame=frame, holder=holder, gid=gid)

            if not frame.is_recomputed[gid]:
                # See Note [Nestable checkpoint], Implication: reading the saved inputs may
                # unpack them through a parent checkpoint, recomputing it first.
                assert frame.input_saver is not None and frame.input_saver.grad_fn is not None
                ctx: Any = frame.input_saver.grad_fn
                args = ctx.get_args(ctx.saved_tensors)

                try:
                    # See Rule 3: the recomputation hook goes on top of whatever is active.
                    with _recomputation_hook(weakref.ref(frame), gid), enable_grad():
                        frame.recompute_fn(*args)
                except _StopRecomputationError:
                    pass
                frame.is_recomputed[gid] = True
                frame.check_recomputed_tensors_match(gid)

            _internal_assert(gid in holder.handles)

            if holder.handles[gid] is None:
                extra = ""
                if _get_graph_exec_group() is not None:
                    extra = (
                        "Performing two backward calls that overlap (i.e. require the same "
                        "saved activation in order to compute gradients) is not allowed while "
                        "under the torch.utils.checkpoint.GraphExecGroup context. "
                    )
                raise CheckpointError(
                    "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already "
                    f"unpacked once. {extra}If you are calling ctx.saved_tensors in backward, make sure "
                    "to do so only once. Otherwise please open an issue with details on your use case."
                )
            _internal_assert(holder.handles[gid] in frame.recomputed[gid])
            ret = frame.recomputed[gid][holder.handles[gid]]  # type: ignore[index]
            # See Rule 4: dropping the handle drops the recomputed tensor.
            holder.handles[gid] = None
            if emit.enabled:
                emit.emit("recomputed_take", frame=frame, holder=holder, tensor=ret, gid=gid)
            return ret

        if frame.unpack_error_cb is not None:
            error_cb = frame.unpack_error_cb

            def unpack_hook_with_error_cb(holder: _Holder) -> Tensor:
                try:
                    return unpack_hook(holder)
                except CheckpointError as e:
                    error_cb(e)

            super().__init__(pack_hook, _reporting_errors(frame, unpack_hook_with_error_cb))
        else:
            super().__init__(pack_hook, _reporting_errors(frame, unpack_hook))


def _checkpoint_without_reentrant_generator(
    fn: Callable[..., Any],
    preserve_rng_state: bool = True,
    context_fn: ContextFn = noop_context_fn,
    determinism_check: str = _DEFAULT_DETERMINISM_MODE,
    debug: bool = False,
    early_stop: bool = True,
    *args: Any,
    **kwargs: Any,
) -> Generator[None, None, None]:
    """Checkpointing without reentrant autograd: the part of :func:`checkpoint` that runs before
    (up to the ``yield``) and after the checkpointed function. See :func:`checkpoint` for the
    arguments.
    """
    unpack_error_cb = None

    if _checkpoint_debug_enabled if _checkpoint_debug_enabled is not None else debug:
        if context_fn != noop_context_fn:
            raise ValueError("debug=True is incompatible with non-default context_fn")
        context_fn, unpack_error_cb = _get_debug_context_and_cb()

    if determinism_check in _allowed_determinism_checks_to_fns:
        metadata_fn = _allowed_determinism_checks_to_fns[determinism_check]
    else:
        raise ValueError(
            f"determinism_check should be one of {list(_allowed_determinism_checks_to_fns.keys())}, "
            f"but got {determinism_check}"
        )

    # (PyTorch infers the device type of the inputs here, to save the RNG state of their
    # devices and their autocast settings; the engine has the CPU only.)
    # The contexts are made once, at forward time: every recomputation enters the same one.
    forward_context, recompute_context = context_fn()

    fwd_cpu_state = get_rng_state() if preserve_rng_state else None

    def recompute_fn(*inputs: Any) -> None:
        kwargs, *args = inputs
        # This will be called later during recomputation. This wrapping enables
        # the necessary global state to be captured.
        with fork_rng(enabled=preserve_rng_state):
            if preserve_rng_state:
                assert fwd_cpu_state is not None
                set_rng_state(fwd_cpu_state)
            with recompute_context:
                # The result is discarded: the recomputation is run for what it saves.
                if emit.enabled:
                    _traced_call("recompute", fn, *args, **kwargs)
                else:
                    fn(*args, **kwargs)

    new_frame = _CheckpointFrame(
        recompute_fn,
        # See Rule 5. The context wins over the argument; fixed at forward time.
        _enable_checkpoint_early_stop if _enable_checkpoint_early_stop is not None else early_stop,
        unpack_error_cb,
        metadata_fn,
    )
    if emit.enabled:
        emit.emit("frame_new", frame=new_frame, label=getattr(fn, "__name__", type(fn).__name__))
    # See Note [Nestable checkpoint], Rule 2: saved before _checkpoint_hook is pushed.
    dummy = engine.empty((0,), requires_grad=True)
    new_frame.input_saver = _NoopSaveInputs.apply(dummy, kwargs, *args)
    if emit.enabled:
        saved = [dummy, *(a for a in args if isinstance(a, Tensor))]
        emit.emit("inputs_saved", frame=new_frame, tensors=saved, node=new_frame.input_saver._grad_fn)

    # When ambient grad_mode is False
    if new_frame.input_saver.grad_fn is None:
        yield
        return

    with _checkpoint_hook(new_frame), forward_context:
        yield
    new_frame.forward_completed = True

    return
