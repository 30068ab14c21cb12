"""Module hook bookkeeping: handles that remove a hook with its flags, and the global forward
hooks that run for every module (``register_module_forward_hook``)."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from engine.utils.hooks import RemovableHandle

__all__ = ["register_module_forward_hook", "register_module_forward_pre_hook"]

_hook_ids = itertools.count()

_global_forward_pre_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
_global_forward_hooks: OrderedDict[int, Callable[..., Any]] = OrderedDict()
_global_forward_hooks_always_called: OrderedDict[int, bool] = OrderedDict()
_global_forward_hooks_with_kwargs: OrderedDict[int, bool] = OrderedDict()


class _HookHandle(RemovableHandle):
    """A handle that also removes its hook's flags (``with_kwargs``, ``always_call``)."""

    def __init__(self, hooks_dict: dict[int, Any], extra_dicts: tuple[dict[int, Any], ...] = ()) -> None:
        super().__init__(hooks_dict, next(_hook_ids))
        self.extra_dicts = extra_dicts

    def remove(self) -> None:
        super().remove()
        for d in self.extra_dicts:
            d.pop(self.id, None)


def _add_hook(
    hooks: OrderedDict[int, Any], hook: Callable[..., Any], prepend: bool, *flags: dict[int, bool] | None
) -> _HookHandle:
    handle = _HookHandle(hooks, tuple(f for f in flags if f is not None))
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def register_module_forward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """A forward pre-hook run before every module's own pre-hooks."""
    return _add_hook(_global_forward_pre_hooks, hook, False)


def register_module_forward_hook(
    hook: Callable[..., Any], *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """A forward hook run before every module's own forward hooks."""
    handle = _add_hook(
        _global_forward_hooks,
        hook,
        False,
        _global_forward_hooks_with_kwargs,
        _global_forward_hooks_always_called,
    )
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle
