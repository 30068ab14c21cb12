"""Module full backward hooks: ``BackwardHookFunction`` and ``BackwardHook`` (PyTorch's
``torch/nn/modules/_functions.py`` and ``torch/utils/hooks.py``).

A module's inputs and outputs are passed through an identity ``Function`` whose node,
``BackwardHookFunctionBackward``, marks the spot in the graph: the node on the outputs sees
``grad_output`` first (pre-hooks run there), the node on the inputs sees ``grad_input`` last
(the user's hooks run there, with both in hand).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine._C import _tls
from engine._tensor import Tensor
from engine.autograd.function import Function

if TYPE_CHECKING:
    from engine.autograd.graph import Node
    from engine.nn.modules.module import Module

__all__ = ["BackwardHook", "BackwardHookFunction"]


class BackwardHookFunction(Function):
    """Identity on tensors: only there to put a node in the graph."""

    @staticmethod
    def forward(ctx: Any, *args: Tensor) -> tuple[Tensor, ...]:
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx: Any, *args: Tensor) -> tuple[Tensor, ...]:
        return args


class BackwardHook:
    """Runs a module's full backward (pre-)hooks with ``grad_input`` / ``grad_output`` laid out
    like the module's positional inputs / outputs (``None`` where the argument is not a tensor)."""

    def __init__(
        self, module: Module, user_hooks: list[Callable[..., Any]], user_pre_hooks: list[Callable[..., Any]]
    ) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs: tuple[Tensor | None, ...] | None = None
        self.n_outputs = -1
        self.output_tensors_index: list[int] | None = None
        self.n_inputs = -1
        self.input_tensors_index: list[int] | None = None

    @staticmethod
    def _pack_with_none(indices: list[int], values: Any, size: int) -> tuple[Any, ...]:
        res: list[Any] = [None] * size
        for idx, val in zip(indices, values, strict=False):
            res[idx] = val
        return tuple(res)

    @staticmethod
    def _unpack_none(indices: list[int], values: Any) -> tuple[Any, ...]:
        return tuple(values[idx] for idx in indices)

    def _set_user_hook(self, grad_fn: Node) -> None:
        def hook(grad_input: Any, _: Any) -> Any:
            if self.grad_outputs is None:
                # Only the graph behind the inputs ran (e.g. backward from an intermediate).
                return None
            assert self.input_tensors_index is not None
            res = self._pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError(
                        f"Backward hook returned an invalid number of grad_input, got {len(out)}, but "
                        f"expected {len(res)}"
                    )
                res = out
            self.grad_outputs = None
            return self._unpack_none(self.input_tensors_index, res)

        grad_fn.register_hook(hook)

    def _apply_on_tensors(
        self, fn: Callable[[Node], None], args: tuple[Any, ...]
    ) -> tuple[Any, list[int] | None]:
        tensors_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in tensors_idx]
        requires_grad = any(t.requires_grad for t in tensors)
        if not (requires_grad and _tls.grad_enabled):
            return args, None
        new_tensors = BackwardHookFunction.apply(*tensors)
        if not isinstance(new_tensors, tuple):
            new_tensors = (new_tensors,)
        if len(new_tensors) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input Tensors.")
        grad_fns = [
            t.grad_fn
            for t in new_tensors
            if t.grad_fn is not None and t.grad_fn.name() == "BackwardHookFunctionBackward"
        ]
        if not grad_fns:
            raise RuntimeError(
                "Error while setting up backward hooks. Please open an issue with a code sample to "
                "reproduce this."
            )
        fn(grad_fns[0])
        arg_list = list(args)
        for idx, val in zip(tensors_idx, new_tensors, strict=True):
            arg_list[idx] = val
        return tuple(arg_list), tensors_idx

    def setup_input_hook(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        res, input_idx = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        self.input_tensors_index = input_idx
        return res  # type: ignore[no-any-return]

    def setup_output_hook(self, args: Any) -> Any:
        def fn(grad_fn: Node) -> None:
            def hook(_: Any, grad_output: Any) -> Any:
                assert self.output_tensors_index is not None
                self.grad_outputs = self._pack_with_none(
                    self.output_tensors_index, grad_output, self.n_outputs
                )
                expected_len = len(self.grad_outputs)
                for user_pre_hook in self.user_pre_hooks:
                    new = user_pre_hook(self.module, self.grad_outputs)
                    if new is None:
                        continue
                    if len(new) != expected_len:
                        raise RuntimeError(
                            "Backward pre hook returned an invalid number of grad_output, got "
                            f"{len(new)}, but expected {expected_len}"
                        )
                    self.grad_outputs = new
                local_grad_outputs = self.grad_outputs
                if self.input_tensors_index is None:
                    # No input requires grad: the hooks fire here, with grad_input all None.
                    warnings.warn(
                        "Full backward hook is firing when gradients are computed with respect to module "
                        "outputs since no inputs require gradients. See "
                        "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook "  # noqa: E501
                        "for more details.",
                        stacklevel=5,
                    )
                    grad_inputs = self._pack_with_none([], [], self.n_inputs)
                    for user_hook in self.user_hooks:
                        res = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if res is not None and not (isinstance(res, tuple) and all(el is None for el in res)):
                            raise RuntimeError(
                                "Backward hook for Modules where no input requires gradient should "
                                "always return None or None for all gradients."
                            )
                    self.grad_outputs = None
                if local_grad_outputs is not None:
                    return tuple(local_grad_outputs[i] for i in self.output_tensors_index)
                return None

            grad_fn.register_hook(hook)

        is_tuple = isinstance(args, tuple)
        if not is_tuple:
            args = (args,)
        res, output_idx = self._apply_on_tensors(fn, args)
        self.n_outputs = len(args)
        self.output_tensors_index = output_idx
        return res if is_tuple else res[0]
