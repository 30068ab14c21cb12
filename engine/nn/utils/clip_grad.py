"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` (PyTorch's
``torch/nn/utils/clip_grad.py``, single-tensor path). Both modify ``.grad`` in place under
no_grad, between ``backward()`` and ``optimizer.step()``."""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable

import numpy as np

from engine import ops
from engine._tensor import Tensor
from engine.autograd.grad_mode import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _get_total_norm(tensors: list[Tensor], norm_type: float, error_if_nonfinite: bool) -> Tensor:
    """The norm of the per-tensor norms, which is the norm of all elements together."""
    if not tensors:
        return Tensor._make(np.asarray(0.0, np.float32))
    norms = [ops.linalg_vector_norm(t, norm_type) for t in tensors]
    total: Tensor = ops.linalg_vector_norm(ops.stack(norms), norm_type)
    if error_if_nonfinite and not np.isfinite(total._data):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
            "cannot "
            "be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`"
        )
    return total


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale all gradients by ``min(1, max_norm / (total_norm + 1e-6))``; returns the total norm
    of the gradients before clipping."""
    with no_grad():
        if isinstance(parameters, Tensor):
            params = [parameters]
        else:
            is_generator = isinstance(parameters, types.GeneratorType)
            params = list(parameters)
            if is_generator and not params:
                warnings.warn(
                    "`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2
                )
        grads = [p.grad for p in params if p.grad is not None]
        total_norm = _get_total_norm(grads, float(norm_type), error_if_nonfinite)
        if grads:
            clip_coef = float(max_norm) / (total_norm + 1e-6)
            clip_coef_clamped = clip_coef.clamp(max=1.0)
            for g in grads:
                g.mul_(clip_coef_clamped)
        return total_norm


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]`` in place."""
    with no_grad():
        params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
        clip_value = float(clip_value)
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
