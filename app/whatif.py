"""What if these modules were checkpointed? A script runs unchanged, with the calls of chosen
modules wrapped in ``checkpoint(..., use_reentrant=False)``.

Note [Checkpointing modules from outside]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``CheckpointModules(["transformer.h.*"], backend, namespace)`` replaces ``nn.Module.__call__``
for the run (and puts it back after): a call of a module whose path matches a pattern runs as
``checkpoint(module_call, *args, use_reentrant=False)``, exactly what the script would do had it
written ``checkpoint(block, h, use_reentrant=False)`` itself (the module's own hooks run inside
the checkpoint, and again in its recomputation). The script's text is untouched.

A module's path is found the first time it is called: its path in a module variable of the
script (``model.transformer.h.3``), and its path in the outermost module being called
(``transformer.h.3``, which also finds models held in a function's locals); a pattern may match
either. It matches component by component (``*`` is one component, ``fnmatch`` within it):
``transformer.h.*`` is every block of ``transformer.h``, not their children. A call made by a
wrapped module's checkpoint (the first run and the recomputation) is not wrapped again.
``wrapped`` lists the paths checkpointed; a pattern that matched no module is the run's error,
with the paths there were (``unmatched``, ``seen``).
"""

from __future__ import annotations

import fnmatch
import weakref
from collections.abc import Sequence
from typing import Any

from engine.trace._core import module_path_in


class WhatIfError(ValueError):
    """A pattern that cannot be used."""


def parse_patterns(patterns: Sequence[str]) -> list[list[str]]:
    parsed = []
    for pattern in patterns:
        parts = pattern.strip().split(".")
        if not pattern.strip() or any(not p for p in parts):
            raise WhatIfError(
                f"--checkpoint-modules {pattern!r}: a module path is names joined by dots, "
                "e.g. 'transformer.h.*'"
            )
        parsed.append(parts)
    return parsed


def matches(pattern: Sequence[str], path: str) -> bool:
    parts = path.split(".")
    return len(parts) == len(pattern) and all(
        fnmatch.fnmatchcase(a, p) for a, p in zip(parts, pattern, strict=True)
    )


class CheckpointModules:
    """Note [Checkpointing modules from outside]."""

    def __init__(
        self, patterns: Sequence[str], backend: str = "engine", namespace: dict[str, Any] | None = None
    ):
        self.patterns = list(patterns)
        self.parsed = parse_patterns(patterns)
        self.backend = backend
        self.namespace = namespace if namespace is not None else {}
        self.wrapped: list[str] = []
        self.seen: list[str] = []
        self._hits = dict.fromkeys(self.patterns, 0)
        self._paths: dict[int, tuple[weakref.ref[Any], list[str]]] = {}
        self._stack: list[Any] = []  # modules being called, outermost first
        self._inside: set[int] = set()  # wrapped modules whose checkpoint is running

    def __enter__(self) -> CheckpointModules:
        if self.backend == "torch":
            import torch

            self._Module: Any = torch.nn.Module
            self._checkpoint: Any = torch.utils.checkpoint.checkpoint
        else:
            from engine.nn import Module
            from engine.utils.checkpoint import checkpoint

            self._Module, self._checkpoint = Module, checkpoint
        self._original = self._Module.__call__
        inst, original = self, self._original

        def __call__(module: Any, *args: Any, **kwargs: Any) -> Any:
            return inst._call(original, module, args, kwargs)

        self._Module.__call__ = __call__
        return self

    def __exit__(self, *exc: object) -> None:
        self._Module.__call__ = self._original

    def unmatched(self) -> list[str]:
        """The patterns that matched no module."""
        return [p for p in self.patterns if not self._hits[p]]

    def _call(self, original: Any, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        paths = self._paths_of(module, self._stack[0] if self._stack else module)
        hits = [
            p
            for p, parts in zip(self.patterns, self.parsed, strict=True)
            if any(matches(parts, x) for x in paths)
        ]
        self._stack.append(module)
        try:
            if not hits or id(module) in self._inside:
                return original(module, *args, **kwargs)
            if paths[0] not in self.wrapped:
                self.wrapped.append(paths[0])
                for p in hits:
                    self._hits[p] += 1
            return self._checkpoint(self._bound(original, module), *args, use_reentrant=False, **kwargs)
        finally:
            self._stack.pop()

    def _bound(self, original: Any, module: Any) -> Any:
        """The module's own call, marked as inside its checkpoint while it runs."""
        inside = self._inside

        def module_call(*args: Any, **kwargs: Any) -> Any:
            inside.add(id(module))
            try:
                return original(module, *args, **kwargs)
            finally:
                inside.discard(id(module))

        return module_call

    def _paths_of(self, module: Any, root: Any) -> list[str]:
        known = self._paths.get(id(module))
        if known is not None and known[0]() is module:
            return known[1]
        paths = []
        for name, value in list(self.namespace.items()):
            if isinstance(value, self._Module) and not name.startswith("_"):
                found = module_path_in(value, name, module)
                if found is not None:
                    paths.append(found)
                    break
        relative = module_path_in(root, "", module)
        if relative and relative not in paths:
            paths.append(relative)
        if paths and paths[0] not in self.seen:
            self.seen.append(paths[0])
        self._paths[id(module)] = (weakref.ref(module), paths)
        return paths
