"""``RMSprop`` (PyTorch's single-tensor implementation: one parameter at a time, in place).

Each step keeps ``square_avg``, a running average of the squared gradient, and divides the
gradient by its square root; ``centered`` subtracts the square of the running average of the
gradient first (an estimate of its variance), ``momentum`` accumulates the divided gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import engine
from engine._factories import zeros, zeros_like
from engine._tensor import Tensor
from engine.autograd.grad_mode import enable_grad
from engine.optim.optimizer import Optimizer, ParamsT, _get_scalar_dtype, _use_grad_for_differentiable

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        # foreach is stored as given and otherwise ignored: the engine has one implementation,
        # PyTorch's single-tensor one (which torch itself uses for CPU tensors).
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)
        self._steps_as_tensors()

    def _init_group(self, group: dict[str, Any]) -> tuple[list[Tensor], ...]:
        params, grads, square_avgs, momentum_buffers, grad_avgs, steps = [], [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            params.append(p)
            grads.append(p.grad)
            state = self.state[p]
            if len(state) == 0:
                # Lazy state: created at the first step that sees a gradient.
                state["step"] = zeros((), dtype=_get_scalar_dtype())
                state["square_avg"] = zeros_like(p)
                if group["momentum"] > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if group["centered"]:
                    state["grad_avg"] = zeros_like(p)
            square_avgs.append(state["square_avg"])
            steps.append(state["step"])
            if group["momentum"] > 0:
                momentum_buffers.append(state["momentum_buffer"])
            if group["centered"]:
                grad_avgs.append(state["grad_avg"])
        return params, grads, square_avgs, grad_avgs, momentum_buffers, steps

    @_use_grad_for_differentiable
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a ``.grad``; ``closure`` re-evaluates the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            _single_tensor_rmsprop(
                *self._init_group(group),
                lr=group["lr"],
                alpha=group["alpha"],
                eps=group["eps"],
                weight_decay=group["weight_decay"],
                momentum=group["momentum"],
                centered=group["centered"],
                maximize=group["maximize"],
                differentiable=group["differentiable"],
            )
        return loss


def _single_tensor_rmsprop(
    params: list[Tensor],
    grads: list[Tensor],
    square_avgs: list[Tensor],
    grad_avgs: list[Tensor],
    momentum_buffer_list: list[Tensor],
    state_steps: list[Tensor],
    *,
    lr: float,
    alpha: float,
    eps: float,
    weight_decay: float,
    momentum: float,
    centered: bool,
    maximize: bool,
    differentiable: bool,
) -> None:
    # PyTorch writes square_avg.addcmul_(grad, grad, value=1 - alpha), grad_avg.lerp_(grad, 1 - alpha)
    # and param.addcdiv_(grad, avg, value=-lr); the add_(..., alpha=...) forms are the same arithmetic.
    for i, param in enumerate(params):
        step = state_steps[i]
        grad = grads[i] if not maximize else -grads[i]
        square_avg = square_avgs[i]
        step += 1
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        is_complex_param = param.is_complex()
        if is_complex_param:
            param = engine.ops.view_as_real(param)
            grad = engine.ops.view_as_real(grad)
            square_avg = engine.ops.view_as_real(square_avg)
        square_avg.mul_(alpha).add_(grad * grad, alpha=1 - alpha)
        if centered:
            grad_avg = grad_avgs[i]
            if is_complex_param:
                grad_avg = engine.ops.view_as_real(grad_avg)
            grad_avg.add_(grad - grad_avg, alpha=1 - alpha)
            avg = square_avg.add(grad_avg * grad_avg, alpha=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add(eps) if differentiable else avg.add_(eps)
        if momentum > 0:
            buf = momentum_buffer_list[i]
            if is_complex_param:
                buf = engine.ops.view_as_real(buf)
            buf.mul_(momentum).add_(grad / avg)
            param.add_(buf, alpha=-lr)
        else:
            param.add_(grad / avg, alpha=-lr)
