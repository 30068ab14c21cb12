"""What one non-reentrant ``checkpoint()`` call remembers: ``_CheckpointFrame`` and its holders.

Part of ``engine/utils/checkpoint.py`` (see Note [Checkpoint's sibling modules] there). In
PyTorch 2.8's ``torch/utils/checkpoint.py`` this is the stretch from ``_Handle`` to
``_StopRecomputationError``, in the same order, less the debug mode (``_checkpoint_debug.py``):

- ``_Holder``: what the checkpoint's pack hook stores in the graph instead of a saved tensor, and
  ``_Handle``: the key of the tensor a recomputation gives back for it;
- ``_NoopSaveInputs``: the no-op node that saves the checkpoint's inputs;
- ``_CheckpointFrame``: the state a checkpointed call shares between its forward and its
  recomputations, and the check that a recomputation saved what the forward saved
  (``CheckpointError``; the determinism checks ``_allowed_determinism_checks_to_fns``);
- ``_StopRecomputationError``: raised to end a frame's recomputation early.

``_internal_assert`` and ``_DEFAULT_DETERMINISM_MODE`` come from further up in PyTorch's file. The
hooks that fill a frame (``_checkpoint_hook``, ``_recomputation_hook``) are in ``checkpoint.py``,
with ``Note [Nestable checkpoint]``: "Rule N" in this file is a rule of that Note.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NoReturn

import engine
from engine._tensor import Tensor
from engine.autograd.function import Function

__all__ = ["CheckpointError"]

_DEFAULT_DETERMINISM_MODE = "default"


def _internal_assert(cond: bool) -> None:
    if not cond:
        raise AssertionError(
            "Something went unexpectedly wrong in activation checkpoint. "
            "Please report this bug by filing an issue to PyTorch."
        )


class _Handle:
    """The key of one recomputed tensor in ``frame.recomputed[gid]``: an object whose only
    strong reference is ``holder.handles[gid]``. See Rule 4."""


class _Holder:
    """What the checkpoint's pack hook stores in the graph instead of a tensor. See Rule 4."""

    def __init__(self) -> None:
        self.handles: dict[Any, _Handle | None] = {}


class _NoopSaveInputs(Function):
    """A no-op node whose only job is to save the checkpoint's inputs. See Rule 2.

    Saving them as ordinary saved tensors ties their lifetime to the graph (they live as long as
    the frame that references this node) and routes them through whatever saved-tensor hook is
    active: none at top level (so they are version-checked on unpack), the parent's pack hook when
    nested.
    """

    @staticmethod
    def forward(*args: Any) -> Tensor:
        return engine.empty((0,))

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        # Only tensors can be saved with ctx.save_for_backward, everything else
        # is captured by get_args, which is saved directly on ctx
        tensor_indices, tensors = zip(
            *[(i, o) for i, o in enumerate(inputs) if isinstance(o, Tensor)], strict=False
        )
        idx2saved_idx = {b: a for a, b in enumerate(tensor_indices)}
        # args but with tensors replaced with None as placeholders
        args = [None if isinstance(o, Tensor) else o for o in inputs]

        def get_args(saved_tensors: tuple[Tensor, ...]) -> list[Any]:
            # restore the placeholders with the original tensors grabbed from
            # ctx.saved_tensors (which may be saved on a parent checkpoint if
            # this checkpoint is nested, and that would trigger a recursive
            # unpack!)
            ret = [saved_tensors[idx2saved_idx[i]] if i in tensor_indices else o for i, o in enumerate(args)]
            # grab the tail since we also saved the dummy to avoid having to explicitly
            # handle the case where there are no tensor inputs
            return ret[1:]

        ctx.get_args = get_args
        ctx.save_for_backward(*tensors)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> NoReturn:
        raise AssertionError("Did not expect to backward on this graph")


class _CheckpointFrame:
    """Everything one checkpointed call shares between its forward and its recomputations."""

    def __init__(
        self,
        recompute_fn: Callable[..., None],
        early_stop: bool,
        unpack_error_cb: Callable[[CheckpointError], NoReturn] | None,
        metadata_fn: Callable[[Tensor], Any] | None,
    ) -> None:
        self.recompute_fn = recompute_fn
        # The output of _NoopSaveInputs.apply; its grad_fn holds the inputs.
        self.input_saver: Tensor | None = None
        # One weak reference per forward pack, in order: a holder dies with the SavedVariable
        # that stores it, and recomputation skips dead ones (Rule 6).
        self.weak_holders: list[weakref.ref[_Holder]] = []
        # We store this as a weakkeydictionary so that in the case of a partial
        # backward, the entries in the dict are cleared alongside the Holder
        # which will be removed when the SavedVariable is cleared.
        self.recomputed: defaultdict[Any, weakref.WeakKeyDictionary[_Handle, Tensor]] = defaultdict(
            weakref.WeakKeyDictionary
        )
        # We need both recomp_counter and recomputed since they can diverge (dead holders get
        # counted but not recomputed).
        self.recomp_counter: defaultdict[Any, int] = defaultdict(int)
        self.is_recomputed: defaultdict[Any, bool] = defaultdict(bool)

        # See Rule 5
        self.early_stop = early_stop

        # Debugging
        self.metadata_fn = metadata_fn
        self.unpack_error_cb = unpack_error_cb
        self.x_metadatas: list[Any] = []
        self.forward_completed = False
        self.ignore_saved_mismatch = False

    def check_recomputed_tensors_match(self, gid: Any) -> None:
        if self.ignore_saved_mismatch:
            # TODO: we can probably make this check stricter by checking that
            #       the metadata of the first tensors still match.
            return
        # NOTE [ Error handling for checkpoint ]
        #
        # At a high level, we need to check that the tensors saved
        # during original forward matches tensors saved during recompute
        # This means handling 3 cases:
        #
        # 1. During recompute, more tensors were saved.
        #
        #    Usually this is hidden due to the StopRecomputationError
        #    but if early stop is not enabled, or we would have errored
        #    anyway because there aren't enough weak_holders. But we
        #    do want to have a nice error. See the _recomputation_hook
        #    for details.
        if not len(self.weak_holders) == self.recomp_counter[gid]:
            # 2. During recompute, fewer tensors were saved
            #
            # We know that everytime we save something do original forward
            # we append to weak_holder, and every time we save a tensor
            # during recompute we increment recompute_counter.
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved "
                "during the original forward and recomputation.\n"
                f"Number of tensors saved during forward: {len(self.weak_holders)}\n"
                f"Number of tensors saved during recomputation: {self.recomp_counter[gid]}.\n"
                f"{_debug_tip_msg}"
            )

        # 3. During recompute, the same tensors were saved, but they
        #    have different metadata
        nb_meta_different = []
        for idx, weak_holder in enumerate(self.weak_holders):
            holder = weak_holder()
            if holder is None:
                continue
            # We've seen all holders since we iterate over them in order
            # For every holder that is still alive now, it must've been
            # alive when we saw it during recompute, therefore, the
            # gid must be set.
            _internal_assert(gid in holder.handles)
            # We know this is the first unpack, so it couldn't have been set
            # to None yet.
            _internal_assert(holder.handles[gid] is not None)
            # We always set these together in the recomputation hook
            _internal_assert(holder.handles[gid] in self.recomputed[gid])
            # see pack hook, x_metadata is 1:1 with weak_holders.
            x_meta = self.x_metadatas[idx]
            recomputed_x = self.recomputed[gid][holder.handles[gid]]  # type: ignore[index]
            assert self.metadata_fn is not None
            if x_meta != self.metadata_fn(recomputed_x):
                nb_meta_different.append((idx, x_meta, self.metadata_fn(recomputed_x)))

        if len(nb_meta_different) > 0:
            mismatched_tensors = ""
            for idx, x_meta, recomputed_meta in nb_meta_different:
                mismatched_tensors += (
                    f"tensor at position {idx}:\n"
                    f"saved metadata: {x_meta}\n"
                    f"recomputed metadata: {recomputed_meta}\n"
                )
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors "
                "have different metadata than during the forward pass.\n"
                f"{mismatched_tensors}.\n"
                f"{_debug_tip_msg}"
            )


# The hyphen of "checkpoint\u2011debug" is U+2011 (a non-breaking hyphen), as in PyTorch.
_debug_tip_msg = """
Tip: To see a more detailed error message, either pass `debug=True` to
`torch.utils.checkpoint.checkpoint(...)` or wrap the code block
with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to
enable checkpoint\u2011debug mode globally.
"""


class CheckpointError(RuntimeError):
    """Raised when the recomputation does not reproduce what the forward saved."""


# A traceback shows ``engine.utils.checkpoint.CheckpointError``, where to import it from, as torch
# shows ``torch.utils.checkpoint.CheckpointError``. See Note [Checkpoint's sibling modules].
CheckpointError.__module__ = "engine.utils.checkpoint"


def _default_meta_extractor(x: Tensor) -> dict[str, Any]:
    # These properties are fast to check, easy to understand
    return {"shape": x.shape, "dtype": x.dtype, "device": x.device}


_allowed_determinism_checks_to_fns: dict[str, Callable[[Tensor], Any]] = {
    _DEFAULT_DETERMINISM_MODE: _default_meta_extractor,
    "none": lambda _: None,
}


# See Rule 5
class _StopRecomputationError(Exception):
    pass
