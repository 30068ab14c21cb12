"""``engine.autocast`` / ``engine.amp.autocast``: accepted, with PyTorch's checks and state, but
no lower-precision compute.

PyTorch's autocast re-dispatches ops in a region to a lower precision (bfloat16 by default on
CPU, float16 on CUDA) following a per-op policy. The engine has no bfloat16 dtype and no such
policy, so what it does is:

- ``device_type`` is checked as torch checks it; ``"cuda"`` warns torch's "CUDA is not
  available. Disabling" and the region is disabled; on ``"cpu"`` a ``dtype`` other than
  bfloat16/float16 warns torch's "target dtype is not supported" and the region is disabled;
- an enabled region is recorded (``engine.is_autocast_enabled("cpu")`` is True inside, and
  nesting/``enabled=False`` restore it as in torch), and warns once per process that ops run in
  their inputs' dtypes: a float32 model computes in float32, as if autocast were off.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from engine import _dtype
from engine._device import _DEVICE_TYPES
from engine._warnings import warn_once

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled"]

F = TypeVar("F", bound=Callable[..., Any])

# Devices PyTorch has an autocast dispatch key for.
_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "ipu", "hpu", "xla", "mps", "mtia", "maia", "privateuseone")

_enabled: dict[str, bool] = {}
_fast_dtype: dict[str, Any] = {}

NO_POLICY_WARNING = (
    "engine.autocast: the engine has no autocast op policy and no bfloat16, so ops in this autocast "
    "region run in their inputs' dtypes (a float32 model computes in float32, as with autocast "
    "disabled); only the region's state (is_autocast_enabled) is kept."
)


def is_autocast_available(device_type: str) -> bool:
    return device_type in _AUTOCAST_DEVICES


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether an enabled autocast region for ``device_type`` is active (``None``: CUDA, as in
    torch's ``torch.is_autocast_enabled()``)."""
    return _enabled.get("cuda" if device_type is None else device_type, False)


class autocast:  # noqa: N801 - PyTorch's name
    """``with engine.autocast(device_type="cpu", dtype=engine.float16): ...`` (see the module
    docstring for what it does and does not do)."""

    def __init__(
        self,
        device_type: str,
        dtype: _dtype.dtype | None = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        if device_type.partition(":")[0] not in _DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device string: "
                f"{device_type}"
            )
        if not is_autocast_available(self.device):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{self.device}'")
        # None stands for the device's default (torch: bfloat16 on CPU, float16 on CUDA).
        self.fast_dtype = dtype
        self._cache_enabled = True if cache_enabled is None else cache_enabled
        if enabled and self.device == "cuda":
            warnings.warn(
                "User provided device_type of 'cuda', but CUDA is not available. Disabling", stacklevel=2
            )
            enabled = False
        if self.device == "cpu" and enabled and dtype is not None and dtype is not _dtype.float16:
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.",
                stacklevel=2,
            )
            enabled = False
        self._enabled = enabled

    def __enter__(self) -> None:
        self.prev = _enabled.get(self.device, False)
        self.prev_fastdtype = _fast_dtype.get(self.device)
        _enabled[self.device] = self._enabled
        if self._enabled:
            _fast_dtype[self.device] = self.fast_dtype
            warn_once("autocast", NO_POLICY_WARNING, stacklevel=2)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        _enabled[self.device] = self.prev
        _fast_dtype[self.device] = self.prev_fastdtype

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def decorate_autocast(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return decorate_autocast  # type: ignore[return-value]
