"""Views and in-place operations: the checks, ``CopySlices`` and view ``grad_fn`` regeneration.

# Note [View + in-place]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A view shares its base's memory and version counter. When an op modifies a view in place, the
# base's values change too, so the base's history must now include that op: ``rebase_history``
# gives the base a new grad_fn, ``CopySlices``, which takes the base's gradient, runs the in-place
# op's backward on the slice the view covers, and writes the result back into that slice. Every
# other view of the base notices the change through the shared version counter: the next time
# its ``grad_fn`` is read, it is rebuilt as ``AsStridedBackward0`` on top of the base's new
# history (``regenerate_view_grad_fn``). Views made in no_grad mode, or as one of several outputs
# (``split``), cannot be rebased correctly, so modifying them in place is an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine._C import _tls
from engine._tensor import CreationMeta, Tensor
from engine.autograd.graph import InputMetadata, Node, gradient_edge
from engine.trace import emit

if TYPE_CHECKING:
    pass

__all__ = ["CopySlices", "check_inplace", "rebase_history", "regenerate_view_grad_fn"]


def check_inplace(t: Tensor, requires_grad: bool) -> None:
    """Refuse in-place ops autograd cannot handle (PyTorch's ``check_inplace``)."""
    if t._inference and not _tls.inference_mode:
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed.You can "
            "make a clone to get a normal tensor before doing inplace update.See "
            "https://github.com/pytorch/rfcs/pull/17 for more details."
        )
    if not (requires_grad and _tls.grad_enabled):
        return
    if t._view is not None:
        handle_view_on_rebase(t)
        if t.requires_grad and t._view.base.is_leaf:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place operation."
            )
    if t.requires_grad and t.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def handle_view_on_rebase(t: Tensor, indirect: bool = False) -> None:
    view = t._view
    assert view is not None
    meta = view.creation_meta
    if meta == CreationMeta.DEFAULT:
        return
    grad_fn = t._grad_fn
    modified = "its base or another view of its base has been" if indirect else "is being"
    if meta in (CreationMeta.INFERENCE_MODE, CreationMeta.NO_GRAD_MODE) or grad_fn is None:
        if grad_fn is not None:
            prefix = f"Output {t._output_nr} of {grad_fn.name()} is a view of a view which was created in"
        else:
            prefix = "A view was created in"
        if meta == CreationMeta.INFERENCE_MODE:
            msg = f"{prefix} inference mode and {modified} modified inplace in normal mode."
        else:
            msg = f"{prefix} no_grad mode and {modified} modified inplace with grad mode enabled."
    else:
        msg = f"Output {t._output_nr} of {grad_fn.name()} is a view and {modified} modified inplace."
    if meta == CreationMeta.MULTI_OUTPUT_NODE:
        msg += (
            " This view is the output of a function that returns multiple views. Such functions "
            "do not allow the output views to be modified inplace. You should replace the "
            "inplace operation by an out-of-place one."
        )
    elif meta == CreationMeta.NO_GRAD_MODE:
        msg += (
            " Given that this use case is ambiguous and error-prone, it is forbidden. You can "
            "clarify your code by moving both the view and the inplace either both inside the "
            "no_grad block (if you don't want the inplace to be tracked) or both outside (if you "
            "want the inplace to be tracked)."
        )
    elif meta == CreationMeta.INFERENCE_MODE:
        msg += (
            " Given that this use case is ambiguous and error-prone, it is forbidden. You can "
            "clarify your code by moving both the view and the inplace either both inside the "
            "inference_mode block (if you don't want the inplace to be tracked) or both outside "
            "(if you want the inplace to be tracked)."
        )
    elif meta == CreationMeta.IN_CUSTOM_FUNCTION:
        msg += (
            " This view was created inside a custom Function (or because an input was returned "
            "as-is) and the autograd logic to handle view+inplace would override the custom "
            "backward associated with the custom Function, leading to incorrect gradients. This "
            "behavior is forbidden. You can fix this by cloning the output of the custom "
            "Function."
        )
    raise RuntimeError(msg)


def _geometry(t: Tensor) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    return tuple(t.shape), t.stride(), _offset_in(t, t._view.base if t._view else t)


def _offset_in(t: Tensor, base: Tensor) -> int:
    """Element offset of ``t``'s first element from ``base``'s first element."""
    start = base._data.__array_interface__["data"][0]
    return (t._data.__array_interface__["data"][0] - start) // t._data.itemsize


def _replay_view(
    base: Tensor, view_is_complex: bool, size: tuple[int, ...], stride: tuple[int, ...], offset: int
) -> Tensor:
    """The view of ``base`` with the given geometry, counted in the view's elements.

    A view whose dtype differs from its base's (``z.real``, ``view_as_real(z)``,
    ``view_as_complex(x)``) cannot be an ``as_strided`` of the base: as PyTorch's chained view
    functions do, replay ``view_as_real`` (then ``as_strided`` in real units) or ``as_strided`` in
    real units (then ``view_as_complex``).
    """
    # Imported here: the op modules build on this one. From their modules, not engine.ops, so
    # that type checkers see the op objects.
    from engine.ops.complex import view_as_complex, view_as_real
    from engine.ops.shape import as_strided

    if base.is_complex() and not view_is_complex:
        floats = view_as_real(base)
        if (tuple(floats.shape), floats.stride(), 0) == (size, stride, offset):
            return floats
        return as_strided(floats, size, stride, offset)
    if view_is_complex and not base.is_complex():
        float_geometry = ((*size, 2), (*(2 * s for s in stride), 1), 2 * offset)
        if (tuple(base.shape), base.stride(), 0) != float_geometry:
            base = as_strided(base, *float_geometry)
        return view_as_complex(base)
    return as_strided(base, size, stride, offset)


class CopySlices(Node):
    """The base's grad_fn after one of its views was modified in place; see Note [View + in-place]."""

    _node_name = "engine::autograd::CopySlices"

    def __init__(self, base: Tensor, view: Tensor, fn: Node) -> None:
        super().__init__()
        self.base_shape = tuple(base.shape)
        self.view_size, self.view_stride, self.view_offset = _geometry(view)
        self.view_is_complex = view.is_complex()
        self.fn = fn
        self._input_metadata = [InputMetadata.of(base)]
        self._next_edges = [gradient_edge(base), *fn._next_edges[1:]]
        if emit.enabled:
            emit.emit("node_new", node=self)

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        from engine.ops.shape import clone

        grad = grads[0]
        if grad is None:
            return [None] * self.num_outputs()
        task = _tls.graph_task
        fn_next = self.fn._next_edges[0][0]
        if task is not None and task.exec_info and fn_next is not None and fn_next not in task.exec_info:
            # grad()/inputs= planned the graph through our edges, not fn's: fn's edge 0 (the
            # view's old history) must be marked too, or fn would skip self's gradient.
            if self.task_should_compute_output(0):
                from engine.autograd.engine import ExecInfo

                task.exec_info[fn_next] = ExecInfo()
                task.exec_info[fn_next].needed = True
        result = clone(grad, memory_format="contiguous")
        grad_slice = _replay_view(
            result, self.view_is_complex, self.view_size, self.view_stride, self.view_offset
        )
        res = self.fn._apply([clone(grad_slice)])
        grad_inputs: list[Tensor | None] = [None] * self.num_outputs()
        for i, r in enumerate(res):
            if self.task_should_compute_output(i):
                if i == 0:
                    if r is not None:
                        grad_slice.copy_(r)
                    else:
                        grad_slice.zero_()
                    grad_inputs[0] = result
                else:
                    grad_inputs[i] = r
        return grad_inputs

    def release_variables(self) -> None:
        self.fn.release_variables()


def rebase_history(t: Tensor, node: Node) -> None:
    """Make ``node`` (an in-place op's grad_fn) the new history of ``t``."""
    output_nr = node.add_input_metadata(t)
    old_fn = t._grad_fn
    if t._view is not None:
        base = t._view.base
        copy_slices = CopySlices(base, t, node)
        if t.requires_grad:
            # Hooks registered on the base from now on belong to CopySlices.
            move_tensor_hooks(base, base.grad_fn, copy_slices)
        base._grad_fn = copy_slices
        base._output_nr = 0
        t.grad_fn  # noqa: B018 - reading it rebuilds the view's grad_fn (AsStridedBackward0)
        return
    t._grad_fn = node
    t._output_nr = output_nr
    move_tensor_hooks(t, old_fn, node)


def move_tensor_hooks(t: Tensor, old_fn: Node | None, new_fn: Node | None) -> None:
    """Hooks registered before an in-place op stay on the old grad_fn; later ones go to the
    new one. ``retain_grad`` follows the tensor (PyTorch's update_tensor_hooks_on_new_gradfn)."""
    if t._backward_hooks is not None:
        t._backward_hooks = None
    if old_fn is not None and new_fn is not None:
        hook = old_fn._retains_grad_hooks.get(t._output_nr)
        if hook is not None:
            del old_fn._retains_grad_hooks[t._output_nr]
            new_fn._own("_retains_grad_hooks")[t._output_nr] = hook


def regenerate_view_grad_fn(t: Tensor) -> None:
    """Rebuild a view's grad_fn on top of its base's current history."""
    from engine.autograd.grad_mode import enable_grad

    view = t._view
    assert view is not None
    base = view.base
    old_fn = t._grad_fn
    if old_fn is None and not base.requires_grad:
        view.attr_version = t._version_counter.version
        return
    # Views that cannot be rebased (split outputs, no_grad views) refuse, on every read.
    handle_view_on_rebase(t, indirect=True)
    view.attr_version = t._version_counter.version
    size, stride, offset = _geometry(t)
    with enable_grad():
        if view.view_fn is not None:  # See Note [View replay] in engine/ops/_kernel.py
            replay = view.view_fn(base)
        else:
            replay = _replay_view(base, t.is_complex(), size, stride, offset)
    t._grad_fn = replay._grad_fn
    t._output_nr = 0
    move_tensor_hooks(t, old_fn, t._grad_fn)
