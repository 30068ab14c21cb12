"""Layer 1 of an op call: autograd (PyTorch's generated ``VariableType`` kernels).

Decide whether the output requires grad, check the in-place rules, create the node and save the
inputs its formulas need *before* the kernel runs; after it, give the outputs their history and
save the outputs. ``_GeneratedNode.apply`` is the node's backward: unpack, then run the formulas.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from engine._C import _tls
from engine._tensor import Tensor
from engine.autograd.graph import (
    Edge,
    InputMetadata,
    Node,
    SavedVariable,
    _input_metadata_cache,
    gradient_edge,
)
from engine.ops._kernel import _inplace_or_view, _run_kernel
from engine.trace import emit

if TYPE_CHECKING:
    from engine.ops._dispatch import Op


# Note [Saved variable order]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's generated code packs the inputs a node saves before the kernel runs, in the order of
# their names (``MulBackward0`` packs other, then self; ``ClampBackward0`` max, min, self), and
# the outputs (``result``) after the kernel. Its ``apply`` unpacks every saved tensor first, in
# that same order, and only then runs the formulas. An input is saved only if the formula of
# some input that requires grad uses it (``mul`` saves ``other`` only when ``self`` requires
# grad), except in a backward op (``tanh_backward``, ``threshold_backward``: "backward" in the
# name), which saves every input its formulas use, as PyTorch's generated code does (its
# ``guard_for`` in gen_variable_type.py leaves those saves unguarded). Checkpointing observes
# exactly this order through its pack and unpack hooks, so the engine reproduces it, and
# tests/engine/test_ops.py checks it against torch for every op.


# --- layer 1: autograd ---------------------------------------------------------------------


def _autograd_call(op: Op, bound: dict[str, Any]) -> Any:
    if op._plain and not emit.enabled and not _tls.dispatch_modes:
        if not _tls.grad_enabled:
            return _run_kernel(op, bound)  # See Note [Layers with nothing to do]
        if op._common:
            return _common_autograd_call(op, bound)  # See Note [The common differentiable op]
    inputs = _differentiable_inputs(op, bound)
    requires_grad = (
        op.node_name is not None
        and _tls.grad_enabled
        and _any_requires_grad(inputs)
        and (op.output_differentiability is None or op.output_differentiability(bound))
    )
    if op.is_inplace:
        from engine.autograd._views import check_inplace

        check_inplace(bound["self"], requires_grad)
    node: _GeneratedNode | None = None
    if requires_grad:
        node = _make_node(op, inputs, _input_slots(op, bound))
        for name in op.saved_inputs:
            if not _is_saved(op, node, name):
                continue
            value = bound[name]
            if op.is_inplace and name == "self":
                # The kernel is about to overwrite self: save a copy (PyTorch's original_self).
                from engine.ops.shape import clone

                value = clone(value)
            if name in op.list_params:
                node._own("_saved")[name] = _SavedVariableList(value, node, name)
            else:
                node.save(name, value)
        if op.saved_attrs:
            node._saved_attrs = {name: read(bound) for name, read in op.saved_attrs.items()}
    if op._plain and not _tls.dispatch_modes:
        outs = _run_kernel(op, bound)  # See Note [Layers with nothing to do]
    else:
        outs = _inplace_or_view(op, bound)
    if node is None:
        if emit.enabled:
            _emit_op(op, bound, outs, None)
        return outs
    out_tuple = outs if isinstance(outs, tuple) else (outs,)
    if op.view == "inplace":
        _set_inplace_view_history(out_tuple[0], node)
    elif op.is_inplace:
        from engine.autograd._views import rebase_history

        rebase_history(out_tuple[0], node)
    else:
        diffs = op.differentiable_outputs
        if op.view == "multi" and len(out_tuple) != len(diffs):
            diffs = diffs[:1] * len(out_tuple)  # a Tensor[] result (split): one output per tensor
        for i, (t, diff) in enumerate(zip(out_tuple, diffs, strict=True)):
            if diff:
                t._grad_fn = node
                t._output_nr = i
                node.add_input_metadata(t)
    for name, index in op._saved_output_index.items():
        node.save(name, out_tuple[index], is_output=True)
    if emit.enabled:
        _emit_op(op, bound, outs, node)
    return outs


def _common_autograd_call(op: Op, bound: dict[str, Any]) -> Tensor:
    """``_autograd_call`` for the common differentiable op, in grad mode, with no dispatch mode
    active and no trace recorded: See Note [The common differentiable op]."""
    inputs: list[Tensor | None] = list(map(bound.__getitem__, op.differentiable_inputs))
    for t in inputs:
        # Tensor.requires_grad, with its two common answers read from the slots first.
        if t is not None and (t._requires_grad or t._grad_fn_ is not None or t.requires_grad):
            break
    else:
        return _run_kernel(op, bound)  # nothing requires grad: no node
    node = _make_node(op, inputs, op.differentiable_inputs)
    if op.saved_inputs:
        edges = node._next_edges
        user_edges = op._saved_input_edges
        assert user_edges is not None  # an op without TensorList parameters
        saved: dict[str, SavedVariable] = {}
        for name in op.saved_inputs:
            for i in user_edges[name]:  # _is_saved
                if edges[i][0] is not None:
                    saved[name] = SavedVariable(bound[name], False, saved_for=node, slot=name)
                    break
        if saved:
            node._saved = saved
    if op.saved_attrs:
        node._saved_attrs = {name: read(bound) for name, read in op.saved_attrs.items()}
    out: Tensor = _run_kernel(op, bound)
    out._grad_fn_ = node  # the slot behind _grad_fn: Note [Undeletable attributes] in _tensor.py
    out._output_nr = 0
    # InputMetadata.of(out), its cache read here first: Note [Objects per node] in graph.py.
    meta = _input_metadata_cache.get((out._data.shape, out._dtype)) or InputMetadata.of(out)
    node._input_metadata.append(meta)
    for name in op.saved_outputs:
        node._own("_saved")[name] = SavedVariable(out, True, saved_for=node, slot=name)
    return out


# Note [The common differentiable op]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Most op calls of a model are a differentiable op (a node name, formulas) with one differentiable
# output that is neither written in place nor a view, without TensorList parameters or an
# ``output_differentiability`` condition (``op._common``, fixed at registration). When such an op
# is called in grad mode with no dispatch mode active and no trace recorded (tested per call, as
# for Note [Layers with nothing to do]), ``_common_autograd_call`` does what ``_autograd_call``
# does for it, with every branch that cannot apply left out: no in-place check, no view or
# in-place history, no list inputs, one output; the kernel layer is called directly (the layers
# between have nothing to do). It makes the same node with the same edges, saves the same
# tensors in the same order (inputs by name, each if an edge whose formula uses it leads
# somewhere; then the output), the same non-tensor values, and gives the output the same
# history. Being only taken while no trace is recorded, it has no ``emit`` calls of its own; the
# functions it shares (``_make_node``, ``SavedVariable``, ``_run_kernel``) keep theirs.


# Note [Layers with nothing to do]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Of the three layers below autograd, ADInplaceOrView only acts on an op that writes in place
# or returns a view, and the Python dispatch layer only when a mode is active; otherwise each
# just calls the next. So for an op that is neither (``op._plain``, fixed at registration) and no
# active mode (``_tls.dispatch_modes`` empty, read at each call), autograd calls the kernel layer
# directly: the same kernel call with the same arguments, two calls fewer. Autograd itself has
# nothing to do for such an op when grad mode is off (no node, no saving, no in-place check: it
# is not in place) and no trace is recorded (no ``op`` event to emit): then it goes straight to
# the kernel, as every op a backward formula calls does. Each test is made per call, so a mode
# entered, grad mode turned on or a recording started is seen at the next op.


def _any_requires_grad(inputs: list[Tensor | None]) -> bool:
    for t in inputs:
        if t is not None and t.requires_grad:
            return True
    return False


def _is_saved(op: Op, node: Node, name: str) -> bool:
    """Whether input ``name`` is saved: some input whose formula uses it gets a gradient."""
    user_edges = op._saved_input_edges  # See Note [Precomputed per op]
    if user_edges is None:  # a TensorList op: its edges are known only now
        users = op.saved_input_users[name]
        return any(node.should_compute_output(i) for i, s in enumerate(node._slots) if s in users)
    edges = node._next_edges
    for i in user_edges[name]:
        if edges[i][0] is not None:
            return True
    return False


def _set_inplace_view_history(t: Tensor, node: Node) -> None:
    """An in-place view op's history (PyTorch's ``set_history``, not ``rebase_history``): the
    tensor's grad_fn is the op's node, on top of its previous one; a view also records that this
    grad_fn is current, so reading it does not rebuild it from the base (``set_gradient_edge``)."""
    t._grad_fn = node
    t._output_nr = node.add_input_metadata(t)
    if t._view is not None:
        t._view.attr_version = t._version_counter.version


def _emit_op(op: Op, bound: dict[str, Any], outs: Any, node: Node | None) -> None:
    """The trace's ``op`` event: which tensors went in and came out, and the node recorded."""
    if not op.list_params:  # See Note [Precomputed per op]
        inputs: list[Any] = list(map(bound.__getitem__, op.tensor_params))
    else:
        inputs = []
        for n in op.tensor_params:
            v = bound[n]
            inputs.extend(v if n in op.list_params else [v])
    outputs = [t for t in (outs if isinstance(outs, tuple) else (outs,)) if isinstance(t, Tensor)]
    emit.emit("op", name=op.name, inputs=inputs, outputs=outputs, node=node)


def _differentiable_inputs(op: Op, bound: dict[str, Any]) -> list[Tensor | None]:
    if not op.list_params:  # See Note [Precomputed per op]
        return list(map(bound.__getitem__, op.differentiable_inputs))
    out: list[Tensor | None] = []
    for n in op.differentiable_inputs:
        v = bound[n]
        if n in op.list_params:
            out.extend(v)
        else:
            out.append(v)
    return out


def _input_slots(op: Op, bound: dict[str, Any]) -> Sequence[str]:
    """The input name behind each next edge (a TensorList input has one edge per tensor)."""
    if not op.list_params:
        return op.differentiable_inputs
    slots: list[str] = []
    for n in op.differentiable_inputs:
        slots.extend([n] * len(bound[n]) if n in op.list_params else [n])
    return slots


class _SavedVariableList:
    """A saved ``Tensor[]`` / ``Tensor?[]`` (PyTorch's ``std::vector<SavedVariable>``): one
    SavedVariable per entry, packed and unpacked in list order; a None entry packs nothing."""

    def __init__(self, tensors: Sequence[Tensor | None], node: Node, name: str = "") -> None:
        self.items = [
            SavedVariable(t, False, saved_for=node, slot=f"{name}[{i}]") for i, t in enumerate(tensors)
        ]

    def unpack(self, saved_for: Node | None = None) -> tuple[Tensor | None, ...]:
        return tuple(sv.unpack(saved_for) for sv in self.items)

    def reset_data(self) -> None:
        for sv in self.items:
            sv.reset_data()


class _GeneratedNode(Node):
    """Base of the nodes the op table generates (``SinBackward0`` ...)."""

    op: Op
    _slots: Sequence[str]

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        op = self.op
        # See Note [Saved variable order]: unpack everything first, in pack order. Like PyTorch's
        # generated code, only saved outputs are unpacked with the node (``saved_for``).
        values: dict[str, Any] = {}
        if self._saved:
            saved_outputs = op._saved_output_set
            for name, sv in self._saved.items():
                values[name] = sv.unpack(self if name in saved_outputs else None)
        if self._saved_attrs:  # (the shared empty mapping is not a dict: updating from it is slower)
            values.update(self._saved_attrs)
        values["grad"] = grads[0]
        values["grads"] = grads
        if grads[0] is None and _all_none(grads):
            return [None] * len(self._slots)  # no formula runs without a gradient
        edges = self._next_edges
        # Node.task_should_compute_output, hoisted: the task and its plan are the same for every
        # input. Without a plan (a plain backward()), an input is wanted iff its edge leads somewhere.
        task = _tls.graph_task
        exec_info = task.exec_info if task is not None else None
        out: list[Tensor | None] = []
        if not op.list_params:  # one next edge per input: See Note [Precomputed per op]
            for i, (_, formula, needs) in enumerate(op._formulas):
                if self.task_should_compute_output(i) if exec_info else edges[i][0] is not None:
                    out.append(formula(*map(values.__getitem__, needs)))
                else:
                    out.append(None)
            return out
        slots = self._slots
        i = 0
        for name, formula, needs in op._formulas:
            count = slots.count(name)  # a TensorList input has one edge per tensor
            if any(self.task_should_compute_output(j) for j in range(i, i + count)):
                result = formula(*map(values.__getitem__, needs))
                out.extend(result if name in op.list_params else [result])
            else:
                out.extend([None] * count)
            i += count
        return out

    # What the engine calls (Node._apply): the same function, one call fewer per node. Only a
    # custom Function's node needs ``_apply`` and ``apply`` apart.
    _apply = apply


def _all_none(grads: list[Tensor | None]) -> bool:
    for g in grads:
        if g is not None:
            return False
    return True


_NODE_CLASSES: dict[str, type[_GeneratedNode]] = {}


def _make_node(op: Op, inputs: list[Tensor | None], slots: Sequence[str]) -> _GeneratedNode:
    cls = op._node_class or _node_class(op)  # See Note [Precomputed per op]
    node: _GeneratedNode = cls()
    # collect_next_edges(inputs), with gradient_edge's two common answers worked out here: a
    # tensor that is not a view has its grad_fn as is, and without one and without
    # requires_grad (a wrapped number, a constant) no edge.
    edges: list[Edge] = []
    for t in inputs:
        if t is None:
            edges.append((None, 0))
        elif t._view is not None:
            edges.append(gradient_edge(t))
        elif t._grad_fn_ is not None:
            edges.append((t._grad_fn_, t._output_nr))
        elif not t._requires_grad:
            edges.append((None, 0))
        else:
            edges.append(gradient_edge(t))  # a leaf: its AccumulateGrad
    node._next_edges = edges
    node._slots = slots
    if emit.enabled:
        emit.emit("node_new", node=node)
    return node


def _node_class(op: Op) -> type[_GeneratedNode]:
    assert op.node_name is not None
    base_op = op.inplace_of or op  # add_ builds the same AddBackward0 as add
    cls = _NODE_CLASSES.get(base_op.name)
    if cls is None:
        # PyTorch's hand-written nodes have a namespaced name() ("torch::autograd::CopyBackwards")
        # and a plain class name (CopyBackwards).
        namespace = {"op": base_op, "__module__": "engine.autograd.generated", "_node_name": op.node_name}
        cls = type(op.node_name.split("::")[-1], (_GeneratedNode,), namespace)
        _NODE_CLASSES[base_op.name] = cls
    op._node_class = cls
    return cls


def _attr_reader(
    name: str, params: Sequence[str], list_params: Collection[str]
) -> Callable[[dict[str, Any]], Any]:
    """How a node reads a non-tensor name its formulas use from the call's arguments, worked out
    once per op: an argument (``dim``), or something about a tensor argument (``self_sym_sizes``;
    a list of them for a TensorList argument such as ``tensors_sym_sizes``)."""
    if name in params:
        return operator.itemgetter(name)
    for suffix, get in _ATTR_SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if base in list_params:
                return lambda bound: [get(t) for t in bound[base]]
            return lambda bound: get(bound[base])
    raise KeyError(f"formula uses unknown name {name!r}")


_ATTR_SUFFIXES: tuple[tuple[str, Callable[[Tensor], Any]], ...] = (
    ("_sym_sizes", lambda t: tuple(t.shape)),
    ("_sym_argsize_0", lambda t: t.shape[0]),
    ("_sym_numel", lambda t: t.numel()),
    ("_sym_strides", lambda t: t.stride()),
    ("_scalar_type", operator.attrgetter("_dtype")),  # t.dtype
    ("_options", lambda t: t.dtype),
)
