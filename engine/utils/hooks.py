"""``RemovableHandle``: what every ``register_*hook`` returns."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["RemovableHandle"]

_next_id = itertools.count()


class RemovableHandle:
    """Removes one hook from the ordered dict it was added to."""

    def __init__(self, hooks_dict: dict[int, Any], key: int) -> None:
        self.hooks_dict = hooks_dict
        self.id = key

    @classmethod
    def add(cls, hooks_dict: dict[int, Any], fn: Callable[..., Any]) -> RemovableHandle:
        key = next(_next_id)
        hooks_dict[key] = fn
        return cls(hooks_dict, key)

    def remove(self) -> None:
        self.hooks_dict.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *args: object) -> None:
        self.remove()
