"""The engine's thread-local state: what PyTorch keeps in C++ thread-locals.

Grad mode, inference mode, the ``sequence_nr`` counter, the saved-tensor hooks stack, the
graph task running on this thread and the dispatch-mode stack all live here, one object per
thread, so that two threads running forward and backward on separate graphs never see each
other's settings (the "Autograd mechanics" seed, section "Multithreaded Autograd").
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.autograd.engine import GraphTask
    from engine.ops._dispatch import DispatchMode

__all__ = ["_current_graph_task_id", "_tls", "_will_engine_execute_node", "is_grad_enabled"]


class _ThreadLocalState(threading.local):
    def __init__(self) -> None:
        self.grad_enabled = True
        self.inference_mode = False
        # Note [sequence_nr]
        # ~~~~~~~~~~~~~~~~~~
        # Every Node gets the next value of a per-thread counter when it is created. The engine's
        # ready queue pops the ready node with the highest sequence_nr first, so backward runs
        # nodes in reverse creation order whenever the graph leaves a choice.
        # AccumulateGrad nodes take UINT64_MAX instead, so they run as soon as they are ready.
        self.sequence_nr = 0
        # The saved-tensor hooks stack (innermost pair last) and the message that makes pushing
        # a pair an error (``disable_saved_tensors_hooks``).
        self.saved_tensors_hooks: list[tuple[Any, Any]] = []
        self.saved_tensors_hooks_disabled: str | None = None
        # The graph task this thread is executing, and the depth of re-entrant backward calls.
        self.graph_task: GraphTask | None = None
        # The node the engine is running on this thread (PyTorch's NodeGuard): anomaly mode
        # records it as the "parent" of nodes created during its backward.
        self.current_node: Any = None
        self.reentrant_depth = 0
        self.ready_queue: Any = None
        # Python dispatch modes (``engine.ops._dispatch.DispatchMode``), innermost last.
        self.dispatch_modes: list[DispatchMode] = []
        # Set while a dispatch mode runs: ops called there skip autograd (they run "below" it).
        self.below_autograd = False
        # View replay (``torch.autograd._force_original_view_tracking``): views made while it is
        # on record how to remake them from their base (``_ViewInfo.view_fn``).
        self.view_replay_enabled = False


_tls = _ThreadLocalState()

# Note [Reading the thread-local state once]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Each attribute read or write on ``_tls`` first finds the calling thread's own dict (about 70 ns
# with the lookup through the class, against about 15 ns for a plain attribute). ``_tls.__dict__``
# *is* that dict: its entries are this thread's attributes, read and written by both spellings
# (``_ThreadLocalState`` has no properties or slots that a dict entry would bypass). So a hot
# path reading several fields per call (``Op.__call__``, a node's ``sequence_nr``, the engine loop
# setting each node's state) fetches ``_tls.__dict__`` once, on the thread it runs on, and uses
# its entries. It sees exactly what ``_tls.x`` would: grad mode and the rest stay per thread.


def _current_graph_task_id() -> int:
    """The id of the backward pass running on this thread, ``-1`` outside backward."""
    task = _tls.graph_task
    return -1 if task is None else task.id


def is_grad_enabled() -> bool:
    """Whether grad mode is on for this thread (``torch.is_grad_enabled`` is this function)."""
    return _tls.grad_enabled


def _is_view_replay_enabled() -> bool:
    return _tls.view_replay_enabled


def _set_view_replay_enabled(mode: bool) -> None:
    _tls.view_replay_enabled = mode


def _get_sequence_nr() -> int:
    return _tls.sequence_nr


def _will_engine_execute_node(node: Any) -> bool:
    """Whether the running backward will execute ``node`` (a grad_fn or an AccumulateGrad).

    Only callable inside backward. A node outside the graph, or one that ``grad()`` /
    ``backward(inputs=...)`` does not need, will not run.
    """
    from engine.autograd.graph import Node

    if not isinstance(node, Node):
        raise RuntimeError(f"_will_engine_execute_node expects an grad_fn, but got {type(node).__name__}")
    task = _tls.graph_task
    if task is None:
        raise RuntimeError("_get_should_execute_nodes should only be called during the backward pass")
    if node not in task.nodes_in_graph:
        return False
    if not task.exec_info:
        return True
    info = task.exec_info.get(node)
    if info is None or not info.should_execute():
        return False
    if info.captures and not any(fn is not None for fn, _ in node._next_edges):
        # PyTorch refuses a leaf (topological_nr 0) whose gradient grad() captures.
        raise RuntimeError(
            "A leaf node was passed to _will_engine_execute_node but we are currently running "
            "autograd.grad(). This is currently not supported."
        )
    return True
