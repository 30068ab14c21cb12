"""``Conv1d`` and ``Conv2d`` (PyTorch's ``torch/nn/modules/conv.py``): weights of shape
``(out_channels, in_channels // groups, *kernel_size)``, initialised like torch's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from engine._dtype import dtype as DType  # noqa: N812
from engine._factories import empty
from engine._tensor import Tensor
from engine.nn import functional as F  # noqa: N812
from engine.nn import init
from engine.nn.modules.module import Module
from engine.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d"]


def _ntuple(value: int | Sequence[int], n: int) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * n
    return tuple(value)


class _ConvNd(Module):
    in_channels: int
    out_channels: int
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: str | tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    output_padding: tuple[int, ...]
    groups: int
    padding_mode: str
    weight: Parameter
    bias: Parameter | None

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: tuple[int, ...],
        stride: tuple[int, ...],
        padding: str | tuple[int, ...],
        dilation: tuple[int, ...],
        transposed: bool,
        output_padding: tuple[int, ...],
        groups: int,
        bias: bool,
        padding_mode: str,
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}"
                )
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(
                f"padding_mode must be one of {valid_padding_modes}, but got padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(empty((out_channels, in_channels // groups, *kernel_size), dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_ with a=sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in counting the
        # kernel's taps; the bias uses the same bound.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _check_padding_mode(self) -> None:
        if self.padding_mode != "zeros":
            raise NotImplementedError(f"engine: padding_mode={self.padding_mode!r} is not supported")

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class Conv1d(_ConvNd):
    """A 1-d convolution over ``(N, C_in, L)`` (or ``(C_in, L)``) inputs."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: str | int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            _ntuple(kernel_size, 1),
            _ntuple(stride, 1),
            padding if isinstance(padding, str) else _ntuple(padding, 1),
            _ntuple(dilation, 1),
            False,
            (0,),
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        self._check_padding_mode()
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """A 2-d convolution over ``(N, C_in, H, W)`` (or ``(C_in, H, W)``) inputs."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: str | int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            _ntuple(kernel_size, 2),
            _ntuple(stride, 2),
            padding if isinstance(padding, str) else _ntuple(padding, 2),
            _ntuple(dilation, 2),
            False,
            (0, 0),
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002
        self._check_padding_mode()
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
