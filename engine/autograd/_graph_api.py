"""``engine.autograd.graph``'s user-facing helpers: gradient edges, ``increment_version`` and
``register_multi_grad_hook`` (PyTorch's ``torch/autograd/graph.py``). Re-exported by
``engine.autograd.graph``."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from engine._tensor import Tensor
from engine.autograd.graph import Node, grad_accumulator
from engine.trace import emit
from engine.utils.hooks import RemovableHandle

__all__ = ["GradientEdge", "get_gradient_edge", "increment_version", "register_multi_grad_hook"]


def increment_version(tensor: Tensor | Sequence[Tensor]) -> None:
    """Bump the version counter, as an in-place op would."""
    tensors = [tensor] if isinstance(tensor, Tensor) else tensor
    for t in tensors:
        t._version_counter.version += 1
        if emit.enabled:
            emit.emit("version_bump", tensor=t)


class GradientEdge(NamedTuple):
    """Where the gradient of a tensor is computed: ``(node, output_nr)``. ``grad()`` and
    ``backward()`` accept it in place of the tensor (as outputs or inputs)."""

    node: Node
    output_nr: int


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The gradient edge of ``tensor``: ``grad(loss, get_gradient_edge(x))`` equals
    ``grad(loss, x)``."""
    if not tensor.requires_grad:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not require gradients"
        )
    return GradientEdge(_get_grad_fn_or_grad_acc(tensor), tensor.output_nr)


def _get_grad_fn_or_grad_acc(t: Tensor) -> Node:
    node: Node | None = grad_accumulator(t) if t.requires_grad and t.grad_fn is None else t.grad_fn
    assert node is not None
    return node


class _MultiHandle(RemovableHandle):
    def __init__(self, handles: tuple[RemovableHandle, ...]) -> None:
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def register_multi_grad_hook(
    tensors: Sequence[Tensor], fn: Callable[..., Any], *, mode: str = "all"
) -> RemovableHandle:
    """Call ``fn`` once per backward, after the gradients of ``tensors`` are computed.

    ``mode="all"``: ``fn(grads)`` once every tensor the running backward will reach has its
    gradient, with ``None`` for the others. ``mode="any"``: ``fn(grad)`` with the first one.
    Counts are kept per graph task, so two backwards running at once do not mix.
    """
    from engine._C import _current_graph_task_id, _will_engine_execute_node

    supported_modes = ("all", "any")
    lock = threading.Lock()
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    handles: tuple[RemovableHandle, ...]
    if mode == "all":
        count: dict[int, int] = {}
        nb_calls: int | None = None
        buffer: dict[int, list[Tensor | None]] = {}
        grad_fns = [_get_grad_fn_or_grad_acc(t) for t in tensors]
        len_tensors = len(tensors)

        def get_inner_hook(idx: int) -> Callable[[Tensor], None]:
            def inner_hook(grad: Tensor) -> None:
                nonlocal nb_calls
                task_id = _current_graph_task_id()
                assert task_id != -1, "expected this hook to be called inside a backward call"
                count[task_id] = count.get(task_id, 0)
                buffer[task_id] = buffer.get(task_id, [None] * len_tensors)
                with lock:
                    curr_count, count[task_id] = count[task_id], count[task_id] + 1
                    if curr_count == 0:
                        # The first gradient of this backward: count the tensors it will reach.
                        nb_calls = sum(map(_will_engine_execute_node, grad_fns))
                buffer[task_id][idx] = grad
                assert nb_calls is not None
                if curr_count == nb_calls - 1:
                    fn(buffer[task_id])
                    del count[task_id]
                    del buffer[task_id]

            return inner_hook

        handles = tuple(t.register_hook(get_inner_hook(i)) for i, t in enumerate(tensors))
    else:
        ran_hook: dict[int, bool] = {}

        @functools.wraps(fn)
        def wrapped_fn(grad: Tensor) -> None:
            task_id = _current_graph_task_id()
            assert task_id != -1, "expected this hook to be called inside a backward call"
            with lock:
                prev, ran_hook[task_id] = ran_hook.get(task_id, False), True
            if prev:
                return
            fn(grad)

        handles = tuple(t.register_hook(wrapped_fn) for t in tensors if t.requires_grad)
    return _MultiHandle(handles)
