"""``GraphExecGroup`` (PyTorch 2.9+): several backward calls that share one recomputation.

Part of ``engine/utils/checkpoint.py``: ``_checkpoint_hook``'s unpack hook keys a recomputation by
the active group (``GraphExecGroup._get_current_group()``) instead of the graph task, when there
is one. ``_get_graph_exec_group`` stands for ``torch._C._get_graph_exec_group()``.
"""

from __future__ import annotations

import threading

__all__ = ["GraphExecGroup"]

_graph_exec_group_tls = threading.local()


def _get_graph_exec_group() -> GraphExecGroup | None:
    """PyTorch's ``torch._C._get_graph_exec_group()``: the group active on this thread."""
    return getattr(_graph_exec_group_tls, "group", None)


def _set_graph_exec_group(group: GraphExecGroup | None) -> None:
    _graph_exec_group_tls.group = group


class GraphExecGroup:
    """Any checkpointed regions encountered by backward under the same instance of this context
    manager will trigger recompute at most once, even if there are multiple calls to backward.

    Backward calls under the same instance must execute over non-overlapping regions of the
    backward graph even if retain_graph=True: no two of them may use the same saved activation.
    (From PyTorch 2.9; only affects ``use_reentrant=False``.)

    Example::

        >>> import engine
        >>> from engine.utils.checkpoint import GraphExecGroup, checkpoint
        >>> x = engine.ones(2, requires_grad=True)
        >>> def fn(t):
        ...     y = t.sin().cos()
        ...     return y, y.sin().cos()
        >>> y, z = checkpoint(fn, x, use_reentrant=False)
        >>> with GraphExecGroup():
        ...     gy, = engine.autograd.grad(z.sum(), y, retain_graph=True)
        ...     gx, = engine.autograd.grad(y, x, grad_outputs=gy)
    """

    def __enter__(self) -> GraphExecGroup:
        if _get_graph_exec_group() is not None:
            raise RuntimeError(
                f"GraphExecGroup contexts cannot be nested. Already inside group {_get_graph_exec_group()}"
            )
        _set_graph_exec_group(self)
        return self

    def __exit__(self, *args: object) -> None:
        _set_graph_exec_group(None)

    @classmethod
    def _get_current_group(cls) -> GraphExecGroup | None:
        # Private API to be used by utils like AC
        return _get_graph_exec_group()


# Its repr (in the error of nested groups) reads ``engine.utils.checkpoint.GraphExecGroup``, as
# torch's reads ``torch.utils.checkpoint.GraphExecGroup``. See Note [Checkpoint's sibling modules].
GraphExecGroup.__module__ = "engine.utils.checkpoint"
