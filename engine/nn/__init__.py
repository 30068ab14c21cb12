"""``engine.nn``: modules, parameters, ``functional`` and ``init``, like ``torch.nn``."""

from engine.nn import functional, init, modules, utils
from engine.nn.modules import *  # noqa: F403 - the layer classes, listed once in modules/__init__.py
from engine.nn.parameter import Buffer, Parameter

__all__ = [*modules.__all__, "Buffer", "Parameter", "functional", "init", "utils"]
