"""Reentrant activation checkpointing (``use_reentrant=True``): PyTorch's ``CheckpointFunction``.

The older of the two variants. Its forward runs the function under ``no_grad``, so the region
records no graph at all: the outputs hang off a single ``CheckpointFunctionBackward`` node that
saved only the inputs. Its backward *re-enters* the autograd engine: it re-runs the whole function
with grad mode on (replaying the forward's RNG state), then calls ``engine.autograd.backward`` on
that fresh graph from inside the outer backward, and returns the inputs' ``.grad``.

Consequences, all visible in the errors below: no early stop and no determinism check; the
gradient only reaches *top-level tensor inputs* (tensors in lists or closures are invisible);
``autograd.grad`` and ``backward(inputs=...)`` are refused, because the inner backward accumulates
into ``.grad`` instead of answering the outer call's question.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

import engine
from engine._tensor import Tensor
from engine.autograd.function import Function
from engine.autograd.grad_mode import enable_grad, no_grad
from engine.random import fork_rng, get_rng_state, set_rng_state

__all__ = ["CheckpointFunction", "check_backward_validity", "detach_variable"]


def detach_variable(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Detach every tensor of ``inputs`` (a tuple), keeping its ``requires_grad`` flag, so that a
    re-run of the function builds a new graph whose leaves are these tensors."""
    if isinstance(inputs, tuple):
        out = []
        for inp in inputs:
            if not isinstance(inp, Tensor):
                out.append(inp)
                continue

            x = inp.detach()
            x.requires_grad = inp.requires_grad
            out.append(x)
        return tuple(out)
    else:
        # 2.8 passes two arguments to RuntimeError, so str(e) is the tuple's repr.
        raise RuntimeError(
            "Only tuple of tensors is supported. Got Unsupported input type: ",
            type(inputs).__name__,
        )


def check_backward_validity(inputs: Iterable[Any]) -> None:
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)


class CheckpointFunction(Function):
    """``checkpoint(fn, *args, use_reentrant=True)`` is ``CheckpointFunction.apply(fn, preserve, *args)``."""

    @staticmethod
    def forward(ctx: Any, run_function: Callable[..., Any], preserve_rng_state: bool, *args: Any) -> Any:
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        # (PyTorch also records the device type and autocast state here; the engine is CPU only
        # and has no autocast.)
        if preserve_rng_state:
            ctx.fwd_cpu_state = get_rng_state()

        # Save non-tensor inputs in ctx, keep a placeholder None for tensors
        # to be filled out during the backward.
        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)

        ctx.save_for_backward(*tensor_inputs)

        with no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx: Any, *args: Any) -> tuple[Tensor | None, ...]:
        if not engine.autograd._is_checkpoint_valid():
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible"
                " with .grad() or passing an `inputs` parameter to .backward()."
                " To resolve this error, you can either set use_reentrant=False,"
                " or call .backward() without passing the `inputs` argument."
            )
        # Copy the list to avoid modifying original list.
        inputs = list(ctx.inputs)
        tensor_indices = ctx.tensor_indices
        tensors = ctx.saved_tensors

        # Fill in inputs with appropriate saved tensors.
        for i, idx in enumerate(tensor_indices):
            inputs[idx] = tensors[i]

        # Stash the surrounding rng state, and mimic the state that was
        # present at this time during forward.  Restore the surrounding state
        # when we're done.
        with fork_rng(enabled=ctx.preserve_rng_state):
            if ctx.preserve_rng_state:
                set_rng_state(ctx.fwd_cpu_state)
            detached_inputs = detach_variable(tuple(inputs))
            with enable_grad():
                outputs = ctx.run_function(*detached_inputs)

        if isinstance(outputs, Tensor):
            outputs = (outputs,)

        # run backward() with only tensor that requires grad
        outputs_with_grad = []
        args_with_grad = []
        for i in range(len(outputs)):
            if isinstance(outputs[i], Tensor) and outputs[i].requires_grad:
                outputs_with_grad.append(outputs[i])
                args_with_grad.append(args[i])
        if len(outputs_with_grad) == 0:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        engine.autograd.backward(outputs_with_grad, args_with_grad)
        grads = tuple(inp.grad if isinstance(inp, Tensor) else None for inp in detached_inputs)

        return (None, None, *grads)
