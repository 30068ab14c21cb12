"""The import shim under PyTorch's own tests (Note [Conformance shim]).

Note [Conformance shim]
~~~~~~~~~~~~~~~~~~~~~~~
A worker process runs the vendored test files against one backend, chosen before they are
imported:

- ``torch``: real PyTorch 2.8.0, untouched.
- ``engine``: ``torch`` and every ``torch.*`` module name resolve to the engine's module of the same
  path (``torch.utils.checkpoint`` -> ``engine.utils.checkpoint``, ``torch.autograd`` ->
  ``engine.autograd``, ``torch.nn`` -> ``engine.nn``), each wrapped in a proxy module. A name the
  engine does not have is not an import error (one missing helper would sink a whole test file):
  it is a :class:`Missing` placeholder that raises :class:`EngineLacks` ("engine lacks
  torch.autograd.forward_ad.dual_level") the first time a test *uses* it, so the failure names the
  API that is missing. While the test files are being imported (decorators, module constants,
  base classes) placeholders are lenient: calling one gives another placeholder.

For both backends alike, ``torch.testing._internal.*`` (PyTorch's test infrastructure, thousands
of lines tied to CUDA, dynamo and the C++ build) is replaced by the small stand-ins of
``tests/conformance/standins/`` (``TestCase`` with torch's ``assertEqual`` tolerances,
``parametrize``, no-op ``skipIfTorchDynamo``...), and ``torch_npu`` (the vendored copy is the
Ascend project's) by a stub with no device. Both backends see the very same harness, so a test
that passes on torch and fails on the engine is the engine's gap, not the harness's.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

# While True, Missing placeholders are lenient (module import time); the runner sets it False.
IMPORTING = False

STANDINS = {
    "torch.testing._internal.common_utils": "tests.conformance.standins.common_utils",
    "torch.testing._internal.common_device_type": "tests.conformance.standins.common_device_type",
    "torch.testing._internal.common_dtype": "tests.conformance.standins.common_dtype",
    "torch.testing._internal.common_methods_invocations": "tests.conformance.standins.common_methods_invocations",
    "torch.testing._internal.common_cuda": "tests.conformance.standins.common_cuda",
    "torch.testing._internal.logging_tensor": "tests.conformance.standins.logging_tensor",
}


class EngineLacks(Exception):  # noqa: N818  (reads as the message: "EngineLacks: engine lacks torch.x")
    """A test used a ``torch`` name that the engine does not have. Not a RuntimeError (nor a
    NotImplementedError, which is one): a test expecting torch to raise must not pass on it."""


class Missing:
    """A ``torch`` name the engine lacks (Note [Conformance shim])."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _lacks(self) -> EngineLacks:
        return EngineLacks(f"engine lacks {self._name}")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if IMPORTING:
            # A decorator or a module constant: stay a placeholder (a decorated test becomes one,
            # and fails when it is run).
            return Missing(f"{self._name}()")
        raise self._lacks()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        name = self._name

        class _MissingBase:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                raise EngineLacks(f"engine lacks {name}")

            def __init_subclass__(cls, **kwargs: Any) -> None:
                pass

        return (_MissingBase,)

    def __bool__(self) -> bool:
        if IMPORTING:
            return False
        raise self._lacks()

    def __iter__(self) -> Any:
        raise self._lacks()

    def __enter__(self) -> Any:
        raise self._lacks()

    def __exit__(self, *exc: object) -> None:
        return None

    def _raise(self, *args: Any) -> Any:
        if IMPORTING:
            return Missing(self._name)
        raise self._lacks()

    __neg__ = __pos__ = __abs__ = __invert__ = _raise
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _raise
    __truediv__ = __rtruediv__ = __pow__ = __rpow__ = __lt__ = __gt__ = __le__ = __ge__ = _raise
    __float__ = __int__ = __index__ = __len__ = __getitem__ = _raise

    def __repr__(self) -> str:
        return f"<missing {self._name}>"


class _Proxy(types.ModuleType):
    """``torch.X`` backed by ``engine.X``; names the engine lacks are :class:`Missing`."""

    def __init__(self, torch_name: str, target: types.ModuleType | None) -> None:
        super().__init__(torch_name)
        self.__dict__["_target"] = target
        self.__dict__["__path__"] = []  # a package: submodules are imported through the finder
        if target is not None and getattr(target, "__doc__", None):
            self.__dict__["__doc__"] = target.__doc__

    def __setattr__(self, attr: str, value: Any) -> None:
        # Importing ``torch.autograd.gradcheck`` binds the submodule on its parent, where torch (and
        # the engine) have the function of that name: the function wins, as in torch.
        target = self.__dict__.get("_target")
        if isinstance(value, types.ModuleType) and target is not None:
            current = getattr(target, attr, None)
            if current is not None and not isinstance(current, types.ModuleType):
                return
        super().__setattr__(attr, value)

    def __getattr__(self, attr: str) -> Any:
        target = self.__dict__["_target"]
        full = f"{self.__name__}.{attr}"
        if target is not None and hasattr(target, attr):
            value = getattr(target, attr)
            if isinstance(value, types.ModuleType) and value.__name__.startswith("engine"):
                return _proxy_for(full)
            return value
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        if full in sys.modules:
            return sys.modules[full]
        # An attribute that is a submodule not imported yet (``torch.autograd.forward_ad``).
        engine_name = "engine" + full[len("torch") :]
        if target is not None and _module_exists(engine_name):
            return _proxy_for(full)
        return Missing(full)


def _module_exists(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _proxy_for(torch_name: str) -> types.ModuleType:
    if torch_name in sys.modules:
        return sys.modules[torch_name]
    engine_name = "engine" + torch_name[len("torch") :]
    target = importlib.import_module(engine_name) if _module_exists(engine_name) else None
    proxy = _Proxy(torch_name, target)
    sys.modules[torch_name] = proxy
    parent, _, child = torch_name.rpartition(".")
    if parent and parent in sys.modules and child not in sys.modules[parent].__dict__:
        setattr(sys.modules[parent], child, proxy)
    return proxy


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name in STANDINS:
            module = importlib.import_module(STANDINS[spec.name])
            sys.modules[spec.name] = module
            return module
        return _proxy_for(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


class _EngineFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "torch" or fullname.startswith("torch."):
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        return None


def _npu_stub() -> types.ModuleType:
    npu = types.ModuleType("torch_npu.npu")
    npu.get_device_name = lambda *a, **k: "cpu"  # type: ignore[attr-defined]
    npu.is_available = lambda: False  # type: ignore[attr-defined]
    npu.device_count = lambda: 0  # type: ignore[attr-defined]
    return npu


def install(backend: str) -> types.ModuleType:
    """Make ``import torch`` mean ``backend`` ("torch" or "engine") in this process; returns it."""
    if "torch" in sys.modules:
        raise RuntimeError("install() must run before torch is imported")
    npu = _npu_stub()
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.npu = npu  # type: ignore[attr-defined]
    torch_npu.testing = types.ModuleType("torch_npu.testing")  # type: ignore[attr-defined]
    sys.modules.update({"torch_npu": torch_npu, "torch_npu.npu": npu, "torch_npu.testing": torch_npu.testing})  # type: ignore[attr-defined]
    if backend == "torch":
        import torch
        import torch.utils.checkpoint  # imports the real torch.testing._internal.logging_tensor

        torch.set_default_dtype(torch.float32)
        # From here on the test files get the stand-ins; torch's own modules keep what they bound.
        for name, standin in STANDINS.items():
            sys.modules[name] = importlib.import_module(standin)
    elif backend == "engine":
        import engine  # noqa: F401  (the engine itself is imported normally, before the finder)

        sys.meta_path.insert(0, _EngineFinder())
        torch = importlib.import_module("torch")
    else:
        raise ValueError(f"unknown backend {backend!r}")
    # test_utils.py (Ascend's copy) reads torch.npu at import time.
    torch.__dict__["npu"] = npu
    return torch
