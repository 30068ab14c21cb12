"""``engine.trace.torch_backend``: the same trace, recorded from real PyTorch.

    from engine.trace import torch_backend
    with torch_backend.record(source_files=[__file__]) as tr:
        ...                              # any PyTorch code (torch.utils.checkpoint included)
    tr.to_json()                         # the format of docs/trace.md, meta.backend "torch 2.8.0"

    with torch_backend.engine_is_torch():
        exec(scenario_code, namespace)   # a scenario written with ``import engine as torch``

Needs torch (the ``oracle`` extra): 2.8.0, whose checkpoint the seeds describe (the inputs saved
by ``_NoopSaveInputs``, with its empty dummy tensor), or 2.13.0 (the inputs saved on the frame);
any other version is refused with a clear error. ``_instrument.py`` says what is patched (Note
[What the torch backend patches]), only for the duration of ``record()``; ``_recorder.py`` turns
torch's objects into events. docs/torch_backend.md lists what a torch trace holds and lacks.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import ModuleType, TracebackType
from typing import Any

from engine.trace.record import _files_and_sources, _Recording

__all__ = [
    "SUPPORTED",
    "check_version",
    "engine_as_torch",
    "engine_is_torch",
    "engine_rng",
    "import_torch",
    "record",
]

# The torch versions the backend knows, and the checkpoint design each has.
SUPPORTED = {"2.8.0": "noop_save_inputs", "2.13.0": "frame_inputs"}


def check_version(version: str) -> str:
    """The checkpoint design of a torch version (``"2.8.0+cu128"`` counts as 2.8.0), or a
    ``RuntimeError`` naming the versions supported."""
    base = version.split("+", 1)[0]
    design = SUPPORTED.get(base)
    if design is None:
        known = " and ".join(SUPPORTED)
        raise RuntimeError(
            f"unsupported torch version {version}: the torch backend knows the checkpoint internals "
            f"of torch {known} only (pip install torch==2.8.0)"
        )
    return design


def import_torch() -> ModuleType:
    """``torch``, checked: ``ImportError`` with the way to install it, or the version error."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("the torch backend needs PyTorch: pip install -e '.[oracle]' (torch 2.8.0)") from e
    check_version(torch.__version__)
    return torch


class _TorchRecording(_Recording):
    exit_frames = 1

    def __init__(self, files: dict[str, str], sources: dict[str, str], max_events: int | None) -> None:
        self.torch = import_torch()
        self.backend = f"torch {self.torch.__version__.split('+', 1)[0]}"
        super().__init__(files, sources, max_events)
        self._uninstall: Callable[[], None] | None = None

    def _make_recorder(self) -> Any:
        from engine.trace.torch_backend._instrument import Instrumentation
        from engine.trace.torch_backend._recorder import TorchRecorder

        recorder = TorchRecorder(self.trace.events, self.files, self.torch)
        design = check_version(self.torch.__version__)
        self._uninstall = Instrumentation(recorder, self.torch, design).install()
        return recorder

    def _module_hooks(self, recorder: Any) -> list[Any]:
        """torch's global module hooks, for Note [Module paths]."""
        hooks = self.torch.nn.modules.module
        pre, post = recorder.module_hooks()
        return [
            hooks.register_module_forward_pre_hook(pre),
            hooks.register_module_forward_hook(post, always_call=True),
        ]

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._uninstall is not None:
                self._uninstall()
                self._uninstall = None
        finally:
            super().__exit__(exc_type, exc, tb)


def record(
    source_files: Iterable[str] | Mapping[str, str] | None = None, *, max_events: int | None = None
) -> _TorchRecording:
    """Like ``engine.trace.record()``, for a block of PyTorch code: the same events, from torch's
    objects (``docs/torch_backend.md``). Raises ``ImportError``/``RuntimeError`` at once when torch
    is missing or its version is not supported."""
    if source_files is None:
        source_files = [sys._getframe(1).f_code.co_filename]
    return _TorchRecording(*_files_and_sources(source_files), max_events)


# --- scenarios written for the engine ----------------------------------------------------------


def engine_rng() -> contextlib.AbstractContextManager[None]:
    """torch's sampling fed by the engine's generator (Note [One random stream for both
    backends] in ``_engine_rng.py``), for a scenario written for the engine."""
    from engine.trace.torch_backend._engine_rng import engine_rng as rng

    return rng(import_torch())


# Engine modules a scenario may import that stay the engine's: the trace API (``trace.mark``).
_KEEP = ("engine.trace",)


def engine_as_torch(
    real_import: Callable[..., ModuleType] = builtins.__import__,
) -> Callable[..., ModuleType]:
    """An ``__import__`` that hands a scenario ``torch`` for ``engine`` (``engine.utils.checkpoint``
    is ``torch.utils.checkpoint``, ``engine.nn`` is ``torch.nn``...), except ``engine.trace``."""

    def shim(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> ModuleType:
        if level == 0 and (name == "engine" or name.startswith("engine.")):
            if any(name == k or name.startswith(k + ".") for k in _KEEP):
                return real_import(name, globals, locals, fromlist, level)
            if name == "engine" and fromlist and "trace" in fromlist:
                return _EngineWithTrace(importlib.import_module("torch"))
            module = importlib.import_module("torch" + name[len("engine") :])
            return module if fromlist else importlib.import_module("torch")
        return real_import(name, globals, locals, fromlist, level)

    return shim


class _EngineWithTrace(ModuleType):
    """``from engine import trace, nn``: ``trace`` is the engine's, the rest torch's."""

    def __init__(self, torch: ModuleType) -> None:
        super().__init__("torch")
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        if name == "trace":
            return importlib.import_module("engine.trace")
        return getattr(self._torch, name)


@contextlib.contextmanager
def engine_is_torch(namespace: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Builtins for ``exec``-ing a scenario against torch: ``namespace["__builtins__"]`` gets a
    copy of the builtins whose ``__import__`` is ``engine_as_torch()``."""
    namespace = {} if namespace is None else namespace
    current = namespace.get("__builtins__", builtins)
    scenario_builtins = dict(vars(current) if isinstance(current, ModuleType) else current)
    scenario_builtins["__import__"] = engine_as_torch(scenario_builtins["__import__"])
    namespace["__builtins__"] = scenario_builtins
    yield namespace
