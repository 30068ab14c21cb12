"""Stand-in for ``torch.testing._internal.common_device_type``: device-generic test classes are not
instantiated (the conformance run is CPU-only and runs the classes listed in scripts/conformance.py)."""

from __future__ import annotations

from typing import Any

from tests.conformance.standins.common_utils import _decorator_or_factory


def instantiate_device_type_tests(*args: Any, **kwargs: Any) -> None:
    return None


def __getattr__(name: str) -> Any:
    # onlyCPU, dtypes, deviceCountAtLeast, skipMeta, ops, ...: no-op decorators (or factories).
    return _decorator_or_factory
