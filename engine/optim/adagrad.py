"""``Adagrad`` (PyTorch's single-tensor implementation: one parameter at a time, in place).

Each parameter keeps ``sum``, the running sum of its squared gradients (its state exists from
construction, not from the first step as in Adam); the step divides the gradient by
``sqrt(sum) + eps`` with a learning rate decayed as ``lr / (1 + (step - 1) * lr_decay)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import engine
from engine._factories import full_like, tensor
from engine._tensor import Tensor
from engine.autograd.grad_mode import enable_grad
from engine.optim.optimizer import (
    Optimizer,
    ParamsT,
    _get_scalar_dtype,
    _get_value,
    _use_grad_for_differentiable,
)

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        # foreach and fused are stored as given and otherwise ignored: the engine has one
        # implementation, PyTorch's single-tensor one (torch's default for CPU tensors).
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = tensor(0.0, dtype=_get_scalar_dtype())
                init_value = (
                    complex(initial_accumulator_value, initial_accumulator_value)
                    if p.is_complex()
                    else initial_accumulator_value
                )
                state["sum"] = full_like(p, init_value)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)
        state_values = list(self.state.values())
        step_is_tensor = len(state_values) != 0 and isinstance(state_values[0]["step"], Tensor)
        if not step_is_tensor:
            for s in state_values:
                s["step"] = tensor(float(s["step"]), dtype=_get_scalar_dtype())

    @_use_grad_for_differentiable
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a ``.grad``; ``closure`` re-evaluates the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, state_sums, state_steps = [], [], [], []
            for p in group["params"]:
                if p.grad is not None:
                    params.append(p)
                    grads.append(p.grad)
                    state_sums.append(self.state[p]["sum"])
                    state_steps.append(self.state[p]["step"])
            _single_tensor_adagrad(
                params,
                grads,
                state_sums,
                state_steps,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                lr_decay=group["lr_decay"],
                eps=group["eps"],
                maximize=group["maximize"],
                differentiable=group["differentiable"],
            )
        return loss


def _single_tensor_adagrad(
    params: list[Tensor],
    grads: list[Tensor],
    state_sums: list[Tensor],
    state_steps: list[Tensor],
    *,
    lr: float,
    weight_decay: float,
    lr_decay: float,
    eps: float,
    maximize: bool,
    differentiable: bool,
) -> None:
    # PyTorch writes state_sum.addcmul_(grad, grad, value=1) and param.addcdiv_(grad, std,
    # value=-clr): the same arithmetic as below.
    for param, grad, state_sum, step_t in zip(params, grads, state_sums, state_steps, strict=True):
        step_t += 1
        step = _get_value(step_t)
        grad = grad if not maximize else -grad
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        clr = lr / (1 + (step - 1) * lr_decay)
        if param.is_complex():
            grad = engine.ops.view_as_real(grad)
            state_sum = engine.ops.view_as_real(state_sum)
            param = engine.ops.view_as_real(param)
        state_sum.add_(grad * grad)
        std = state_sum.sqrt() + eps if differentiable else state_sum.sqrt().add_(eps)
        param.add_(grad / std, alpha=-clr)
