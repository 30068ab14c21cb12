"""``engine.utils``: what ``torch.utils`` holds that the engine needs (``checkpoint``, ``data``,
``hooks``).

``engine.utils.checkpoint`` is imported on first access rather than here: this package is first
imported by ``engine.autograd.graph`` (for ``engine.utils.hooks``), long before the autograd
machinery that checkpointing is built on exists. ``import engine.utils.checkpoint`` and
``engine.utils.checkpoint.checkpoint(...)`` both work as in PyTorch.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["checkpoint", "data", "hooks"]


def __getattr__(name: str) -> ModuleType:
    if name in ("checkpoint", "data", "hooks"):
        return importlib.import_module(f"engine.utils.{name}")
    raise AttributeError(f"module 'engine.utils' has no attribute '{name}'")
