"""``engine.autograd``: ``backward``, ``grad``, custom ``Function``s and the graph API.

``backward`` and ``grad`` do PyTorch's argument checks, then hand the roots of the graph to the
engine (``engine/autograd/engine.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from engine._C import _is_view_replay_enabled as is_view_replay_enabled
from engine._tensor import Size, Tensor
from engine.autograd import functional, graph
from engine.autograd._multithreading import set_multithreading_enabled
from engine.autograd.anomaly_mode import detect_anomaly, set_detect_anomaly
from engine.autograd.engine import Engine, get_default_engine
from engine.autograd.function import Function, FunctionCtx, once_differentiable
from engine.autograd.grad_mode import (
    _force_original_view_tracking as _force_original_view_tracking,
)
from engine.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)
from engine.autograd.gradcheck import gradcheck, gradgradcheck
from engine.autograd.graph import Edge, GradientEdge, Node, SavedTensor, gradient_edge

__all__ = [
    "Function",
    "FunctionCtx",
    "SavedTensor",
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
    "is_view_replay_enabled",
    "no_grad",
    "once_differentiable",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_multithreading_enabled",
]


class _VariableMeta(type):
    def __instancecheck__(cls, other: Any) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """The legacy ``Variable``: since PyTorch 0.4 every tensor is one (``isinstance(t, Variable)``
    is True for any tensor). ``Variable(t, requires_grad=True)`` returns a new leaf tensor sharing
    ``t``'s data, as PyTorch's does. ``Variable._execution_engine`` is the backward engine, for
    ``queue_callback``."""

    _execution_engine: Engine = get_default_engine()

    def __new__(  # type: ignore[misc]
        cls,
        data: Any = None,
        requires_grad: bool = False,
        volatile: bool = False,
        _grad_fn: Any = None,
        name: str | None = None,
    ) -> Tensor:
        if data is None:
            from engine import empty

            var = empty(0)
        elif isinstance(data, Tensor):
            var = data.detach()
        else:
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            warnings.warn(
                "volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                stacklevel=2,
            )
        if _grad_fn is not None:
            raise RuntimeError(
                "_grad_fn argument to legacy Variable constructor is no longer supported.  Instead, "
                "please invoke your _grad_fn to produce a variable with it as the _grad_fn."
            )
        if requires_grad and not (var.dtype.is_floating_point or var.dtype.is_complex):
            # The C++ set_requires_grad's message, not Tensor.requires_grad_'s.
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        var.requires_grad_(requires_grad)
        return var


def _tensor_or_tensors_to_tuple(tensors: Any, length: int) -> tuple[Any, ...]:
    if tensors is None:
        return (None,) * length
    if isinstance(tensors, Tensor):
        return (tensors,)
    return tuple(tensors)


def _make_grads(
    outputs: Sequence[Tensor | GradientEdge], grads: Sequence[Any], is_grads_batched: bool
) -> tuple[Tensor | None, ...]:
    """Check the given output gradients against the outputs; create the implicit ``1`` of a
    scalar output."""
    from engine import ones, ones_like

    new_grads: list[Tensor | None] = []
    for out, grad in zip(outputs, grads, strict=False):
        if isinstance(out, GradientEdge):
            meta = out.node._input_metadata[out.output_nr]
            out_size, out_dtype = Size(meta.shape), meta.dtype
        else:
            out_size, out_dtype = out.shape, out.dtype
        if isinstance(grad, Tensor):
            first_grad = grad.select(0, 0) if is_grads_batched else grad
            if out_size != first_grad.shape:
                index_g, index_o = list(grads).index(grad), list(outputs).index(out)
                # PyTorch's _calculate_shape: the batched shape drops the first dim of grad[0].
                grad_shape = Size(first_grad.shape[1:]) if is_grads_batched else first_grad.shape
                if is_grads_batched:
                    raise RuntimeError(
                        "If `is_grads_batched=True`, we interpret the first dimension of each grad_output "
                        "as the batch dimension. The sizes of the remaining dimensions are expected to "
                        f"match the shape of corresponding output, but a mismatch was detected: "
                        f"grad_output[{index_g}] has a shape of {grad_shape} and output[{index_o}] has a "
                        f"shape of {out_size}. If you only want some tensors in `grad_output` to be "
                        "considered batched, consider using vmap."
                    )
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{index_g}] has a shape of {grad_shape} and "
                    f"output[{index_o}] has a shape of {out_size}."
                )
            if out_dtype.is_complex != grad.dtype.is_complex:
                raise RuntimeError(
                    "For complex Tensors, both grad_output and output are required to have the same "
                    f"dtype. Mismatch in dtype: grad_output[{list(grads).index(grad)}] has a dtype of "
                    f"{grad.dtype} and output[{list(outputs).index(out)}] has a dtype of {out_dtype}."
                )
            new_grads.append(grad)
        elif grad is None:
            if isinstance(out, GradientEdge) or out.requires_grad:
                if any(s != 1 for s in out_size):
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if not out_dtype.is_floating_point:
                    raise RuntimeError(
                        f"grad can be implicitly created only for real scalar outputs but got {out_dtype}"
                    )
                new_grads.append(
                    ones(tuple(out_size), dtype=out_dtype)
                    if isinstance(out, GradientEdge)
                    else ones_like(out)
                )
            else:
                new_grads.append(None)
        else:
            raise TypeError(f"gradients can be either Tensors or None, but got {type(grad).__name__}")
    return tuple(new_grads)


class _Identity(Node):
    """The edge of an input that is not part of the graph: never reached, so never captured."""


def _run_backward(
    tensors: Sequence[Tensor | GradientEdge],
    grad_tensors: Sequence[Tensor | None],
    retain_graph: bool,
    create_graph: bool,
    inputs: Sequence[Any],
    allow_unreachable: bool,
    accumulate_grad: bool,
) -> tuple[Tensor | None, ...]:
    """PyTorch's ``THPEngine_run_backward``: turn tensors into graph edges and run the engine."""
    if len(tensors) != len(grad_tensors):
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grad_tensors)} gradients")
    roots: list[Edge] = []
    for i, t in enumerate(tensors):
        edge: Edge = (t.node, t.output_nr) if isinstance(t, GradientEdge) else gradient_edge(t)
        if edge[0] is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append(edge)
    if not accumulate_grad and not inputs:
        raise ValueError("grad requires non-empty inputs.")
    output_edges: list[Edge] = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            fn = inp.grad_fn
            if fn is None:
                fn = inp._grad_accumulator() if inp._grad_accumulator is not None else None
            if accumulate_grad:
                inp.retain_grad()
            if not inp.requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            # An input no node leads to (a leaf without an AccumulateGrad yet) is unreachable.
            output_edges.append((fn, inp.output_nr) if fn is not None else (_Identity(), 0))
        elif isinstance(inp, GradientEdge):
            if not isinstance(inp.node, Node):
                raise RuntimeError(
                    "GradientEdge first object must be an autograd.graph.Node but got "
                    f"{type(inp.node).__name__}"
                )
            output_edges.append((inp.node, inp.output_nr))
        else:
            raise RuntimeError(
                f"all inputs have to be Tensors or GradientEdges, but got {type(inp).__name__}"
            )
    outputs = get_default_engine().execute(
        roots, list(grad_tensors), retain_graph, create_graph, accumulate_grad, output_edges
    )
    if accumulate_grad:
        return ()
    if not allow_unreachable and any(out is None for out in outputs):
        raise RuntimeError(
            "One of the differentiated Tensors appears to not have been used in the graph. Set "
            "allow_unused=True if this is the desired behavior."
        )
    return tuple(outputs)


def _as_tuple_of_roots(x: Any) -> tuple[Any, ...]:
    return (x,) if isinstance(x, (Tensor, GradientEdge)) else tuple(x)


def backward(
    tensors: Tensor | GradientEdge | Sequence[Tensor | GradientEdge],
    grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    grad_variables: Any = None,
    inputs: Tensor | GradientEdge | Sequence[Tensor | GradientEdge] | None = None,
) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves (or only of
    ``inputs``)."""
    if grad_variables is not None:
        warnings.warn(
            "`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=2
        )
        if grad_tensors is None:
            grad_tensors = grad_variables
        else:
            raise RuntimeError(
                "`grad_tensors` and `grad_variables` (deprecated) arguments both passed to `backward()`. "
                "Please only use `grad_tensors`."
            )
    inputs_tuple: tuple[Any, ...] = ()
    if inputs is not None:
        inputs_tuple = _as_tuple_of_roots(inputs)
        if len(inputs_tuple) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    t_tensors = _as_tuple_of_roots(tensors)
    grads = _make_grads(t_tensors, _tensor_or_tensors_to_tuple(grad_tensors, len(t_tensors)), False)
    if retain_graph is None:
        retain_graph = create_graph
    _run_backward(t_tensors, grads, retain_graph, create_graph, inputs_tuple, True, True)


def grad(
    outputs: Tensor | GradientEdge | Sequence[Tensor | GradientEdge],
    inputs: Tensor | GradientEdge | Sequence[Tensor | GradientEdge],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Return the gradients of ``outputs`` with respect to ``inputs`` (nothing is accumulated
    into ``.grad``).

    With ``is_grads_batched``, the first dimension of each grad_output is a batch: the result
    stacks one gradient per batch entry (PyTorch vmaps the backward; the engine loops).
    """
    from engine import zeros_like
    from engine.ops import stack

    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    t_outputs = _as_tuple_of_roots(outputs)
    t_inputs = _as_tuple_of_roots(inputs)
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
            "gradient for other parts of the graph, please use torch.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    grads = _make_grads(
        t_outputs, _tensor_or_tensors_to_tuple(grad_outputs, len(t_outputs)), is_grads_batched
    )
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        batch = next(g.shape[0] for g in grads if g is not None)
        rows = [
            _run_backward(
                t_outputs,
                [None if g is None else g.select(0, i) for g in grads],
                retain_graph or i < batch - 1,
                create_graph,
                t_inputs,
                allow_unused,
                False,
            )
            for i in range(batch)
        ]
        result = tuple(
            None if rows[0][j] is None else stack([row[j] for row in rows]) for j in range(len(t_inputs))
        )
    else:
        result = _run_backward(t_outputs, grads, retain_graph, create_graph, t_inputs, allow_unused, False)
    if materialize_grads:
        if any(result[i] is None and not isinstance(t_inputs[i], Tensor) for i in range(len(t_inputs))):
            raise RuntimeError("materialize_grads cannot be used when the given input is a GradientEdge")
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
