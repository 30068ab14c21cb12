"""PyTorch's ``torch/autograd/_functions/tensor.py``: ``Resize``, a custom Function kept for old code."""

from __future__ import annotations

import operator
from functools import reduce
from typing import Any

from engine._tensor import Tensor
from engine.autograd.function import Function

__all__ = ["Resize"]


class Resize(Function):
    """Reshape ``tensor`` to ``sizes`` (same number of elements); the gradient is reshaped back."""

    @staticmethod
    def forward(ctx: Any, tensor: Tensor, sizes: tuple[int, ...]) -> Tensor:
        ctx.sizes = sizes
        ctx.numel = reduce(operator.mul, sizes, 1)
        if tensor.numel() != ctx.numel:
            raise RuntimeError(
                "requested resize to {} ({} elements in total), "
                "but the given tensor has a size of {} ({} elements). "
                "autograd's resize can only change the shape of a given "
                "tensor, while preserving the number of elements. ".format(
                    "x".join(map(str, sizes)),
                    ctx.numel,
                    "x".join(map(str, tensor.size())),
                    tensor.numel(),
                )
            )
        ctx.input_sizes = tensor.size()
        if tensor.is_contiguous():
            return tensor.new(tensor).contiguous().view(*sizes)
        return tensor.contiguous().view(*sizes)

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor, None]:
        assert grad_output.numel() == ctx.numel
        return grad_output.contiguous().view(ctx.input_sizes), None
