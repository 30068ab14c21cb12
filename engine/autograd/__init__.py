"""``engine.autograd``: ``backward``, ``grad``, custom ``Function``s and the graph API.

``backward`` and ``grad`` do PyTorch's argument checks, then hand the roots of the graph to the
engine (``engine/autograd/engine.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine._tensor import Tensor
from engine.autograd import functional, graph
from engine.autograd.anomaly_mode import detect_anomaly, set_detect_anomaly
from engine.autograd.engine import Engine, get_default_engine
from engine.autograd.function import Function, FunctionCtx, once_differentiable
from engine.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)
from engine.autograd.gradcheck import gradcheck, gradgradcheck
from engine.autograd.graph import Edge, Node, grad_accumulator

__all__ = [
    "Function",
    "FunctionCtx",
    "Variable",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "graph",
    "inference_mode",
    "no_grad",
    "once_differentiable",
    "set_detect_anomaly",
    "set_grad_enabled",
]


class Variable:
    """Kept for ``Variable._execution_engine.queue_callback(...)``, as in PyTorch."""

    _execution_engine: Engine = get_default_engine()


def _tensor_or_tensors_to_tuple(tensors: Any, length: int) -> tuple[Any, ...]:
    if tensors is None:
        return (None,) * length
    if isinstance(tensors, Tensor):
        return (tensors,)
    return tuple(tensors)


def _make_grads(outputs: Sequence[Tensor], grads: Sequence[Tensor | None]) -> list[Tensor | None]:
    from engine import ones_like

    new_grads: list[Tensor | None] = []
    for out, grad in zip(outputs, grads, strict=False):
        if isinstance(grad, Tensor):
            if tuple(grad.shape) != tuple(out.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{list(grads).index(grad)}] has a shape of "
                    f"{grad.shape} and output[{list(outputs).index(out)}] has a shape of "
                    f"{out.shape}."
                )
            if out.dtype.is_complex != grad.dtype.is_complex:
                raise RuntimeError(
                    "For complex Tensors, both grad_output and output are required to have the "
                    f"same dtype. Mismatch in dtype: grad_output[{list(grads).index(grad)}] has "
                    f"a dtype of {grad.dtype} and output[{list(outputs).index(out)}] has a dtype "
                    f"of {out.dtype}."
                )
            new_grads.append(grad)
        elif grad is None:
            if out.requires_grad:
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not out.dtype.is_floating_point:
                    raise RuntimeError(
                        f"grad can be implicitly created only for real scalar outputs but got {out.dtype}"
                    )
                new_grads.append(ones_like(out))
            else:
                new_grads.append(None)
        else:
            raise TypeError(f"gradients can be either Tensors or None, but got {type(grad).__name__}")
    return new_grads


class _Identity(Node):
    """The edge of an input that is not part of the graph: never reached, so never captured."""


def _run_backward(
    tensors: Sequence[Tensor],
    grad_tensors: Sequence[Tensor | None],
    retain_graph: bool,
    create_graph: bool,
    inputs: Sequence[Tensor],
    allow_unreachable: bool,
    accumulate_grad: bool,
) -> tuple[Tensor | None, ...]:
    if len(tensors) != len(grad_tensors):
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grad_tensors)} gradients")
    roots: list[Edge] = []
    grads: list[Tensor | None] = []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors, strict=True)):
        fn = t.grad_fn
        edge: Edge = (fn, t.output_nr) if fn is not None else (grad_accumulator(t), 0)
        if edge[0] is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append(edge)
        grads.append(g)
    output_edges: list[Edge] = []
    for t in inputs:
        fn = t.grad_fn
        if fn is None:
            acc = t._grad_accumulator() if t._grad_accumulator is not None else None
            fn = acc
        if accumulate_grad:
            t.retain_grad()
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        output_edges.append((fn, t.output_nr) if fn is not None else (_Identity(), 0))
    outputs = get_default_engine().execute(
        roots, grads, retain_graph, create_graph, accumulate_grad, output_edges
    )
    if not accumulate_grad and inputs:
        for out in outputs:
            if not allow_unreachable and out is None:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
        return tuple(outputs)
    return ()


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    grad_variables: Any = None,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves (or only of
    ``inputs``)."""
    if inputs is not None and not isinstance(inputs, Tensor) and len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    t_tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
    t_inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs) if inputs is not None else ()
    if grad_variables is not None and grad_tensors is None:
        grad_tensors = grad_variables
    grads = _make_grads(t_tensors, _tensor_or_tensors_to_tuple(grad_tensors, len(t_tensors)))
    if retain_graph is None:
        retain_graph = create_graph
    _run_backward(t_tensors, grads, retain_graph, create_graph, t_inputs, True, True)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Return the gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated
    into ``.grad``)."""
    import warnings

    from engine import zeros_like

    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    if is_grads_batched:
        raise NotImplementedError("engine.autograd.grad: is_grads_batched is not supported")
    t_outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    t_inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use "
            "engine.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    grads = _make_grads(t_outputs, _tensor_or_tensors_to_tuple(grad_outputs, len(t_outputs)))
    if retain_graph is None:
        retain_graph = create_graph
    result = _run_backward(t_outputs, grads, retain_graph, create_graph, t_inputs, allow_unused, False)
    if materialize_grads:
        result = tuple(
            out if out is not None else zeros_like(inp, requires_grad=True)
            for out, inp in zip(result, t_inputs, strict=True)
        )
    return result


def _is_checkpoint_valid() -> bool:
    from engine._C import _tls

    task = _tls.graph_task
    # PyTorch's GraphTask::can_checkpoint(): only a backward that runs the whole graph (no
    # grad() / backward(inputs=...), i.e. no exec_info) lets reentrant checkpoint re-enter it.
    return task is None or not task.exec_info
