"""``engine.device`` and the CUDA-less machine the engine pretends to be.

A device is a *name* (``type`` plus optional ``index``), as in PyTorch: ``engine.device("cuda")``
or ``engine.device("cuda:1")`` can be built, compared and printed. Only the CPU holds tensors
here: moving a tensor to any other device (``.to("cuda")``, ``.cuda()``) raises the error PyTorch
raises on a machine without a CUDA driver.
"""

from __future__ import annotations

from typing import Any

__all__ = ["device"]

# c10's DeviceType names, in the order of PyTorch's parse error.
_DEVICE_TYPES = (
    "cpu",
    "cuda",
    "ipu",
    "xpu",
    "mkldnn",
    "opengl",
    "opencl",
    "ideep",
    "hip",
    "ve",
    "fpga",
    "maia",
    "xla",
    "lazy",
    "vulkan",
    "mps",
    "meta",
    "hpu",
    "mtia",
    "privateuseone",
)

# What torch (a CUDA build) says when no GPU driver is present. A CPU-only build of torch
# raises AssertionError("Torch not compiled with CUDA enabled") instead.
NO_CUDA_MESSAGE = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx"
)


class device:  # noqa: N801 - PyTorch's name
    """``engine.device("cpu")``, ``engine.device("cuda", 0)``, ``engine.device("cuda:1")``."""

    __slots__ = ("index", "type")

    def __init__(self, type: Any = "cpu", index: Any = None) -> None:  # noqa: A002
        if isinstance(type, device):
            self.type: str = type.type
            self.index: int | None = type.index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            # torch.device(3) is the CUDA device 3.
            type, index = "cuda", type  # noqa: A001
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise TypeError(f"device(): argument 'index' (position 2) must be int, not {_type_name(index)}")
        if not isinstance(type, str):
            raise TypeError(f"device(): argument 'type' (position 1) must be str, not {_type_name(type)}")
        name, sep, idx = type.partition(":")
        if name not in _DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device string: {type}"
            )
        if sep:
            if not idx.isdigit() or (len(idx) > 1 and idx[0] == "0"):
                raise RuntimeError(f"Invalid device string: '{type}'")
            if index is not None:
                raise RuntimeError(
                    f"type (string) must not include an index because index was passed explicitly: {type}"
                )
            index = int(idx)
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self.type = name
        self.index = index

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self) -> tuple[Any, ...]:
        return (device, (self.type, self.index))


def _type_name(obj: object) -> str:
    return type(obj).__name__


def check_device(where: Any) -> device:
    """The device named by ``where`` (a device, a string, a CUDA index), which must be the CPU:
    any other device raises PyTorch's error for a machine without it."""
    d = where if isinstance(where, device) else device(where)
    if d.type == "cpu":
        return d
    if d.type == "cuda":
        raise RuntimeError(NO_CUDA_MESSAGE)
    raise RuntimeError(f"engine: tensors live on the CPU only; there is no '{d}' device here")
