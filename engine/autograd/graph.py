"""The autograd graph: ``Node``, ``AccumulateGrad``, ``SavedVariable`` and saved-tensor hooks.

A reader who knows PyTorch's ``torch/csrc/autograd/function.h`` and ``saved_variable.cpp``
will find the same pieces here under the same names.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

from engine._C import _tls
from engine._tensor import Tensor, _init_tensor
from engine.trace import emit
from engine.utils.hooks import RemovableHandle

__all__ = [
    "AccumulateGrad",
    "GradientEdge",
    "Node",
    "SavedTensor",
    "SavedVariable",
    "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks",
    "get_gradient_edge",
    "gradient_edge",
    "increment_version",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
]

Edge = tuple["Node | None", int]
UINT64_MAX = 2**64 - 1

ERR_BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward."
)


class InputMetadata:
    """Shape and dtype of one gradient a node expects (one per forward output)."""

    __slots__ = ("dtype", "shape", "was_default_constructed")

    def __init__(self, shape: tuple[int, ...], dtype: Any, was_default_constructed: bool = False) -> None:
        self.shape = shape
        self.dtype = dtype
        self.was_default_constructed = was_default_constructed

    @classmethod
    def of(cls, t: Tensor) -> InputMetadata:
        # See Note [Objects per node]: one shared instance per (shape, dtype).
        key = (t._data.shape, t._dtype)
        meta = _input_metadata_cache.get(key)
        if meta is None:
            if len(_input_metadata_cache) >= 4096:
                _input_metadata_cache.clear()
            meta = _input_metadata_cache[key] = cls(*key)
        return meta

    @classmethod
    def undefined(cls) -> InputMetadata:
        """PyTorch's ``Node::undefined_input()``: the slot of an output that gets no gradient
        (a non-tensor or non-differentiable output of a custom Function)."""
        return cls((), None, was_default_constructed=True)


# Note [Objects per node]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A graph of 100,000+ nodes (a long chain) lives in memory at once, and Python's cyclic garbage
# collector re-scans every container object of it in each full collection: its cost grows with
# the number of objects per node, not only with their size. So a node allocates only what it
# needs: InputMetadata is immutable and shared per (shape, dtype), the list of tensor pre-hooks
# is created by the first hook registered (a shared empty tuple until then), and so are the
# dicts of node hooks, retain_grad hooks and saved non-tensor values (a shared read-only empty
# mapping until then, so a write that forgot ``Node._own`` fails instead of sharing an entry).
# Making a node is then also cheaper: it is on the path of every differentiable op.
_input_metadata_cache: dict[tuple[tuple[int, ...], Any], InputMetadata] = {}
_NOTHING: Mapping[Any, Any] = MappingProxyType({})


class Node:
    """A function of the backward graph (PyTorch's ``torch::autograd::Node``).

    ``next_functions[i]`` is the edge along which the gradient for the forward op's ``i``-th
    input flows: ``(node, input_nr)``, or ``(None, 0)`` for an input that needs no gradient.
    Subclasses implement ``apply(grads) -> grads``.
    """

    _node_name: ClassVar[str | None] = None
    # Tensor hooks of the outputs, in registration order: (output_nr, the tensor's own ordered
    # hook dict, shared with the tensor). A list, not a dict by output_nr: two tensor objects can
    # stand for the same output (a saved output unpacked), each with its hooks. The class's empty
    # tuple until the first one (Note [Objects per node]).
    _tensor_pre_hooks: list[tuple[int, dict[int, Callable[..., Any]]]] | tuple[()] = ()
    # Node pre-hooks, post-hooks and retain_grad hooks, by handle id; the saved tensors and the
    # non-tensor values the formulas use (``dim``), by name. Each is the class's read-only empty
    # mapping until the node's first entry (Note [Objects per node]): ``_own`` gives the node a
    # dict of its own before a write.
    _pre_hooks: dict[int, Callable[..., Any]] = _NOTHING  # type: ignore[assignment]
    _post_hooks: dict[int, Callable[..., Any]] = _NOTHING  # type: ignore[assignment]
    _retains_grad_hooks: dict[int, Callable[..., Any]] = _NOTHING  # type: ignore[assignment]
    _saved: dict[str, SavedVariable] = _NOTHING  # type: ignore[assignment]
    _saved_attrs: dict[str, Any] = _NOTHING  # type: ignore[assignment]
    _metadata: dict[str, Any] | None = None
    _anomaly_trace: list[str] | None = None
    _anomaly_parent: Node | None = None

    def __init__(self, sequence_nr: int | None = None) -> None:
        # See Note [sequence_nr] in engine/_C.py.
        if sequence_nr is None:
            tls = _tls.__dict__  # See Note [Reading the thread-local state once] in engine/_C.py
            sequence_nr = tls["sequence_nr"]
            tls["sequence_nr"] = sequence_nr + 1
        self._seq_nr = sequence_nr
        self._next_edges: list[Edge] = []
        self._input_metadata: list[InputMetadata] = []
        if _anomaly_enabled[0]:
            from engine.autograd.anomaly_mode import record_forward_trace

            record_forward_trace(self)

    def _own(self, name: str) -> dict[Any, Any]:
        """The node's own dict ``name`` (one of the mappings above), made at its first write."""
        # Compared with the class's mapping rather than looked up in ``self.__dict__``: reading
        # ``__dict__`` would make CPython build the instance's dict object, one more per node.
        d: dict[Any, Any] = getattr(self, name)
        if d is _NOTHING:
            d = {}
            setattr(self, name, d)
        return d

    # --- the graph ----------------------------------------------------------------------------

    def name(self) -> str:
        return self._node_name or type(self).__name__

    @property
    def next_functions(self) -> tuple[Edge, ...]:
        return tuple(self._next_edges)

    def _sequence_nr(self) -> int:
        return self._seq_nr

    def _set_sequence_nr(self, nr: int) -> None:
        self._seq_nr = nr

    @property
    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def num_outputs(self) -> int:
        return len(self._next_edges)

    def num_inputs(self) -> int:
        return len(self._input_metadata)

    def add_input_metadata(self, t: Tensor) -> int:
        self._input_metadata.append(InputMetadata.of(t))
        return len(self._input_metadata) - 1

    def should_compute_output(self, i: int) -> bool:
        """Whether forward input ``i`` gets a gradient at all (its edge leads somewhere)."""
        return self._next_edges[i][0] is not None

    def task_should_compute_output(self, i: int) -> bool:
        """Whether the running backward needs the gradient of forward input ``i``."""
        fn = self._next_edges[i][0]
        if fn is None:
            return False
        task = _tls.graph_task
        if task is None or not task.exec_info:
            return True
        info = task.exec_info.get(fn)
        return info is not None and info.should_execute()

    # --- running ------------------------------------------------------------------------------

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        raise NotImplementedError(f"{self.name()} does not implement apply")

    def _apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        """What the engine calls: ``apply`` (a custom Function's node keeps the name ``apply``
        for PyTorch's user-facing ``ctx.apply(*grads)``)."""
        return self.apply(grads)

    def __call__(self, *grads: Tensor | None, **kwargs: Any) -> Any:
        # Calling a node runs its backward formula directly (no hooks); like PyTorch's
        # THPCppFunction_call, it takes exactly one gradient (a tensor or None) per input of the
        # node, and returns one result as is, several (or none) as a tuple.
        if kwargs:
            raise TypeError("keyword arguments are not supported")
        if len(grads) != self.num_inputs():
            raise TypeError(f"expected {self.num_inputs()} arguments, got {len(grads)} instead")
        for i, g in enumerate(grads):
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"argument {i} is not a Variable")
        out = self.apply(list(grads))
        return out[0] if len(out) == 1 else tuple(out)

    def release_variables(self) -> None:
        for saved in self._saved.values():
            saved.reset_data()

    def will_release_variables(self) -> None:
        pass

    # --- hooks --------------------------------------------------------------------------------

    def register_hook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` runs after this node; may return new grad_inputs."""
        return RemovableHandle.add(self._own("_post_hooks"), fn)

    def register_prehook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """``fn(grad_outputs)`` runs before this node; may return new grad_outputs."""
        return RemovableHandle.add(self._own("_pre_hooks"), fn)

    # --- saved tensors ------------------------------------------------------------------------

    def save(self, name: str, t: Tensor | None, is_output: bool = False) -> None:
        self._own("_saved")[name] = SavedVariable(t, is_output, saved_for=self, slot=name)

    def __getattr__(self, name: str) -> Any:
        # ``_saved_self`` / ``_raw_saved_self``: PyTorch's generated accessors. A tensor the op can
        # save but did not (``mul`` saves ``self`` only if ``other`` requires grad) reads as None,
        # like PyTorch's default-constructed SavedVariable.
        if name.startswith("_raw_saved_"):
            key = name[len("_raw_saved_") :]
            if key in self.__dict__.get("_saved", {}):
                return SavedTensor._make(self._saved[key])
            if key in self._saveable_names():
                return SavedTensor._make(SavedVariable(None, False))
        elif name.startswith("_saved_"):
            key = name[len("_saved_") :]
            if key in self.__dict__.get("_saved", {}):
                return self._saved[key].unpack(self)
            attrs = self.__dict__.get("_saved_attrs", {})
            if key in attrs:
                return attrs[key]
            if key in self._saveable_names():
                return None
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def _saveable_names(self) -> tuple[str, ...]:
        # Generated nodes carry their op-table entry (engine/ops/_dispatch.py) as ``op``.
        op = getattr(type(self), "op", None)
        return (*op.saved_inputs, *op.saved_outputs) if op is not None else ()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {hex(id(self))}>"


_anomaly_enabled = [False]


class AccumulateGrad(Node):
    """The node at a leaf: adds the incoming gradient into ``variable.grad``."""

    _node_name = "engine::autograd::AccumulateGrad"

    def __init__(self, variable: Tensor) -> None:
        super().__init__(sequence_nr=UINT64_MAX)
        self.variable = variable
        self._input_metadata = [InputMetadata.of(variable)]
        # Set by the engine right before apply: nothing outside the engine holds the gradient.
        # See Note [AccumulateGrad steals the gradient].
        self._steal_ok = False
        if emit.enabled:
            emit.emit("node_new", node=self)

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        new_grad = grads[0]
        variable = self.variable
        steal_ok, self._steal_ok = self._steal_ok, False
        if new_grad is None:
            return []
        if not variable.requires_grad:
            return []
        old = variable._grad
        if old is None:
            if not _tls.grad_enabled:
                if steal_ok and _obeys_layout_contract(new_grad, variable):
                    variable._grad = new_grad.detach()
                else:
                    variable._grad = new_grad.detach().clone()
            else:
                # create_graph: PyTorch's clone_obey_contract, an empty tensor copy_()'d into,
                # so the new .grad's grad_fn is CopyBackwards.
                from engine import empty_like

                variable._grad = empty_like(variable).copy_(new_grad)
        elif not _tls.grad_enabled:
            old._data += new_grad._data  # in place: ``x.grad`` stays the same object
            old._version_counter.version += 1
            if emit.enabled:
                emit.emit("version_bump", tensor=old)
        else:
            variable._grad = old + new_grad  # create_graph: out of place, differentiable
        if emit.enabled:
            emit.emit("grad_accumulate", tensor=variable, grad=variable._grad, node=self)
        if variable._post_accumulate_grad_hooks:
            _call_post_accumulate_grad_hooks(variable)
        return []

    @property
    def _tensor_pre_hooks(self) -> list[tuple[int, dict[int, Callable[..., Any]]]]:  # type: ignore[override]
        # The node is only weakly held by its leaf, so the hooks live on the tensor and are read
        # from it each time (PyTorch's AccumulateGrad::tensor_pre_hooks does the same).
        hooks = self.variable._backward_hooks
        return [(0, hooks)] if hooks else []

    @_tensor_pre_hooks.setter
    def _tensor_pre_hooks(self, value: Any) -> None:
        pass


# Note [AccumulateGrad steals the gradient]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The first gradient a leaf receives (no create_graph) becomes its ``.grad`` without a copy when
# nothing but the engine holds it and its strides are the leaf's (PyTorch's "Gradient Layout
# Contract"; a zero stride, as expand() makes, never is): ``.grad`` is then a detach() of the very
# tensor the last node returned, as in PyTorch, where AccumulateGrad looks at the use count of the
# tensor. The engine counts Python references instead: call_function (engine.py) knows which of
# its own lists hold the gradient and sets ``_steal_ok`` when sys.getrefcount finds no other
# holder (a hook or a custom backward that kept it, another node's input buffer). Otherwise it is
# copied. Values are the same either way; what differs is whether ``.grad`` aliases that tensor
# (test_no_grad_copy, and a post-accumulate-grad hook that modifies ``.grad`` in place, seen by the
# node's post hook). Recording changes none of this: the recorder holds tensors only weakly (no
# reference counted here) and counts a storage once however many tensors share it (``_Storages``
# in engine/trace/_core.py), so a stolen ``.grad`` adds no bytes to the trace's memory, as in
# PyTorch, and the trace shows its ``detach`` without a ``clone``.


def _obeys_layout_contract(grad: Tensor, variable: Tensor) -> bool:
    """PyTorch's ``obeys_layout_contract`` for dense tensors (plus: the memory is writable)."""
    g, v = grad._data, variable._data
    if g.shape != v.shape or grad._dtype is not variable._dtype or not g.flags.writeable:
        return False
    for n, gs, vs in zip(g.shape, g.strides, v.strides, strict=True):
        if (n != 1 and gs != vs) or (n == 1 and gs == 0):
            return False
    return True


# Note [Post-accumulate-grad hooks]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A leaf's post-accumulate-grad hooks run inside its AccumulateGrad node, right after the incoming
# gradient (already summed over every use of the leaf by the input buffer) was added to ``.grad``:
# once per backward that reaches the leaf, each seeing ``.grad`` already accumulated. They are
# called the way PyTorch's ``_call_hooks`` (python_hook.cpp) calls them: in registration order,
# each with the value the previous one returned. A hook should return None; returning the tensor
# itself is ignored; anything else is checked like a tensor hook's result (so a non-tensor raises
# TypeError "expected Variable, ...", a new shape or dtype RuntimeError), becomes the next hook's
# argument and, once all hooks ran, raises "Tensor post accumulate grad hooks should return None.".


def _call_post_accumulate_grad_hooks(variable: Tensor) -> None:
    from engine.autograd.engine import _check_single_result

    hooks = variable._post_accumulate_grad_hooks
    assert hooks is not None
    value = variable
    modified = False
    for hook in list(hooks.values()):
        result = hook(value)
        if result is None or result is value:
            continue
        _check_single_result(value, result, hook)
        value = result
        modified = True
    if modified:
        raise RuntimeError("Tensor post accumulate grad hooks should return None.")


def grad_accumulator(t: Tensor) -> AccumulateGrad | None:
    """The (lazily created, weakly held) AccumulateGrad node of a leaf that requires grad."""
    if not t._requires_grad:
        return None
    acc = t._grad_accumulator() if t._grad_accumulator is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._grad_accumulator = weakref.ref(acc)
    return acc


def gradient_edge(t: Tensor) -> Edge:
    """Where the gradient of ``t`` goes: its grad_fn, its AccumulateGrad, or nowhere."""
    # Only a view's grad_fn may need rebuilding (Tensor.grad_fn); otherwise its slot is read.
    fn = t._grad_fn_ if t._view is None else t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    return (grad_accumulator(t), 0)


def collect_next_edges(tensors: Sequence[Tensor | None]) -> list[Edge]:
    return [(None, 0) if t is None else gradient_edge(t) for t in tensors]


# Note [Saved variable versions]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A SavedVariable is "a snapshot of a variable at a certain version": it records the version
# counter's value when saved, and unpack() refuses a tensor whose counter moved since, because
# the backward formula would silently use the modified values. The counter is shared by a tensor,
# all its views and its detach()es, so modifying any of them is caught. With saved-tensor hooks,
# the hook owns the data and no check is made (PyTorch: "we can't track versions through hooks").


class SavedVariable:
    """One tensor saved for backward (PyTorch's ``SavedVariable``)."""

    __slots__ = (
        "_data",
        "_dtype",
        "_grad_accumulator",
        "_grad_fn",
        "_hooks",
        "_is_leaf",
        "_is_output",
        "_output_nr",
        "_packed",
        "_requires_grad",
        "_saved_original",
        "_saved_version",
        "_shape",
        "_version_counter",
        "_was_default_constructed",
        "_weak_grad_fn",
    )

    def __init__(
        self, t: Tensor | None, is_output: bool, saved_for: Node | None = None, slot: str | None = None
    ) -> None:
        # ``slot``: the name the node saves it under (``self``, ``result``, ``saved_tensors[0]``),
        # only for the trace.
        self._was_default_constructed = t is None
        self._data: Tensor | None = None
        self._hooks: tuple[Any, Any] | None = None
        self._packed: Any = None
        self._saved_original = False
        self._grad_fn: Node | None = None
        self._grad_accumulator: AccumulateGrad | None = None
        self._requires_grad = False
        if t is None:
            return
        if t._inference:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. To work around you can make a "
                "clone to get a normal tensor and use it in autograd."
            )
        self._saved_version = t._version_counter.version
        self._version_counter = t._version_counter
        # Tensor.is_leaf, with the common answer (a grad_fn, not a view) read from the slots.
        self._is_leaf = False if t._grad_fn_ is not None and t._view is None else t.is_leaf
        self._is_output = is_output
        self._output_nr = t._output_nr
        self._shape = t._data.shape
        self._dtype = t._dtype
        stack = _tls.saved_tensors_hooks
        hooks = stack[-1] if stack else None
        # Python numbers turned into tensors ("wrapped numbers") never reach user hooks.
        if hooks is not None and not t._wrapped_number:
            self._save_metadata(t)
            if emit.enabled:
                # The pack hook's events (a checkpoint's pack) belong to this node and slot.
                emit.emit("_saving", node=saved_for, slot=slot)
            self._set_hooks_and_pack_data(hooks, t)
        elif not is_output or self._is_leaf:
            # An input, or a leaf, can be kept as is: its grad_fn is not the node saving it, so
            # no reference cycle. An output is stored without its grad_fn and re-linked on unpack.
            self._saved_original = True
            self._data = t
        else:
            self._save_metadata(t)
            self._data = object.__new__(Tensor)  # Tensor._make(t._data), one call fewer
            _init_tensor(self._data, t._data)
            self._data._version_counter = t._version_counter
        if emit.enabled and saved_for is not None:
            emit.emit("saved", sv=self, tensor=t, node=saved_for, slot=slot)

    def _save_metadata(self, t: Tensor) -> None:
        if self._is_leaf:
            self._grad_accumulator = grad_accumulator(t)
            self._requires_grad = t.requires_grad
        elif not self._is_output:
            self._grad_fn = t.grad_fn

    def _set_hooks_and_pack_data(self, hooks: tuple[Any, Any], t: Tensor) -> None:
        from engine.autograd.grad_mode import no_grad

        self._hooks = hooks
        version = t._version_counter.version
        with no_grad():
            self._packed = hooks[0](t)
        if version != t._version_counter.version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as "
                "input to pack hook can not be modified by in-place operations as this can lead "
                "to unexpected side-effects. Please open an issue if you need to perform "
                "in-place operations on the input to a pack hook."
            )

    def reset_data(self) -> None:
        self._hooks = None
        self._packed = None
        self._grad_fn = None
        self._data = None

    @property
    def is_released(self) -> bool:
        return not self._was_default_constructed and self._data is None and self._hooks is None

    def unpack(self, saved_for: Node | None = None) -> Tensor | None:
        if self._was_default_constructed:
            return None
        if self._data is None and self._hooks is None:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        grad_fn = self._grad_fn
        if self._saved_original and self._data is not None:
            original = self._data  # its grad_fn: only a view's may need rebuilding (Tensor.grad_fn)
            grad_fn = original._grad_fn_ if original._view is None else original.grad_fn
        if not self._is_leaf and grad_fn is None:
            # The saved original lost its grad_fn to an in-place detach_(). Only a node's own
            # output is unpacked with saved_for (generated nodes unpack their inputs without it,
            # as in PyTorch), so a saved input detached in place cannot be re-linked.
            if saved_for is None:
                raise RuntimeError(
                    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_()."
                    "This is not supported, please use out-of-place `.detach()` instead"
                )
            grad_fn = saved_for
        if self._hooks is None:
            current = self._version_counter.version
            if current != self._saved_version:
                raise RuntimeError(self._version_error(current, grad_fn))
            if self._saved_original:
                return self._data
        if self._hooks is not None:
            data = self._hooks[1](self._packed)
            if not isinstance(data, Tensor):
                raise TypeError(
                    "Output of saved tensor unpack_hook expected to be a Tensor but got result "
                    f"of type {type(data).__name__}"
                )
        else:
            assert self._data is not None
            data = self._data
        if grad_fn is None and not self._requires_grad and not data.requires_grad:
            return data
        # Re-link the saved data to its place in the graph (a new tensor object, as in PyTorch).
        var = object.__new__(Tensor)  # Tensor._make(data._data), one call fewer
        _init_tensor(var, data._data)
        var._version_counter = data._version_counter
        if grad_fn is not None:
            var._grad_fn_ = grad_fn  # the slot behind _grad_fn: Note [Undeletable attributes]
            var._output_nr = self._output_nr
        else:
            var._requires_grad = self._requires_grad
            if self._grad_accumulator is not None:
                var._grad_accumulator = weakref.ref(self._grad_accumulator)
        return var

    def _version_error(self, current: int, grad_fn: Node | None) -> str:
        from engine._tensor_str import type_and_size

        msg = (
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{type_and_size(self._dtype, self._shape)}]"
        )
        if grad_fn is not None:
            msg += f", which is output {self._output_nr} of {grad_fn.name()},"
        msg += f" is at version {current}; expected version {self._saved_version} instead."
        if _anomaly_enabled[0]:
            msg += (
                " Hint: the backtrace further above shows the operation that failed to compute "
                "its gradient. The variable in question was changed in there or anywhere later. "
                "Good luck!"
            )
        else:
            msg += (
                " Hint: enable anomaly detection to find the operation that failed to compute "
                "its gradient, with torch.autograd.set_detect_anomaly(True)."
            )
        return msg


class SavedTensor:
    """``node._raw_saved_<name>``: lets a user put their own pack/unpack hooks on one saved
    tensor. Only nodes make them: calling the class raises, as PyTorch's does."""

    _saved: SavedVariable

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Trying to create a SavedTensor object from Python is forbidden.")

    @classmethod
    def _make(cls, saved: SavedVariable) -> SavedTensor:
        self = object.__new__(cls)
        self._saved = saved
        return self

    def register_hooks(
        self, pack_hook: Callable[[Tensor], Any], unpack_hook: Callable[[Any], Tensor]
    ) -> None:
        sv = self._saved
        if sv._was_default_constructed:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is forbidden")
        if sv._hooks is not None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only "
                "one pair of hooks is allowed at a time."
            )
        if sv._data is None:
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved variables after calling "
                "backward."
            )
        if not callable(pack_hook) or not callable(unpack_hook):
            # pybind11's message for arguments that are not callables.
            raise TypeError(
                "register_hooks(): incompatible function arguments. The following argument types are "
                "supported:\n    1. (self: engine._C._autograd.SavedTensor, arg0: Callable, arg1: Callable) "
                f"-> None\n\nInvoked with: <engine._C._autograd.SavedTensor object at {hex(id(self))}>, "
                f"{pack_hook!r}, {unpack_hook!r}"
            )
        data = sv._data
        if sv._saved_original:
            sv._save_metadata(data)
        sv._data = None
        sv._saved_original = False
        sv._set_hooks_and_pack_data((pack_hook, unpack_hook), data)


# --- saved-tensor hooks ----------------------------------------------------------------------

# Note [Saved-tensor hooks stack]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The stack is thread-local and only its innermost pair applies: a SavedVariable created while
# the pair (pack, unpack) is on top calls pack(tensor) at once and keeps only what pack returned;
# the same pair's unpack turns it back into a tensor in backward, whatever the stack is then.
# Activation checkpointing is built on exactly this (engine/utils/checkpoint.py).


class saved_tensors_hooks:  # noqa: N801 - PyTorch's name
    """Context manager that sets a pair of pack / unpack hooks for saved tensors.

    ``pack_hook(tensor: Tensor) -> Any`` runs when an op saves a tensor for backward, and its
    result is stored instead of the tensor. ``unpack_hook(Any) -> Tensor`` runs when the saved
    tensor is needed and must return a tensor with the same content.

    Example::

        >>> import engine
        >>> a = engine.ones(5, requires_grad=True)
        >>> with engine.autograd.graph.saved_tensors_hooks(lambda x: x * 4, lambda x: x / 4):
        ...     y = a * a
        >>> y.sum().backward()
        >>> a.grad
        tensor([2., 2., 2., 2., 2.])
    """

    def __init__(self, pack_hook: Callable[[Tensor], Any], unpack_hook: Callable[[Any], Tensor]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        if _tls.saved_tensors_hooks_disabled is not None:
            raise RuntimeError(_tls.saved_tensors_hooks_disabled)
        _tls.saved_tensors_hooks.append((self.pack_hook, self.unpack_hook))
        if emit.enabled:
            emit.emit("hooks_push", hooks=self)

    def __exit__(self, *args: object) -> None:
        _tls.saved_tensors_hooks.pop()
        if emit.enabled:
            emit.emit("hooks_pop")


class disable_saved_tensors_hooks:  # noqa: N801
    """Make entering ``saved_tensors_hooks`` an error carrying ``error_message``."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message
        self.prev: str | None = None

    def __enter__(self) -> None:
        self.prev = _tls.saved_tensors_hooks_disabled
        _tls.saved_tensors_hooks_disabled = self.error_message

    def __exit__(self, *args: object) -> None:
        _tls.saved_tensors_hooks_disabled = self.prev


# The user-facing graph helpers (GradientEdge, register_multi_grad_hook, ...) live in their own
# module and are re-exported here, where PyTorch has them.
from engine.autograd._graph_api import (  # noqa: E402 (they build on the classes above)
    GradientEdge,
    get_gradient_edge,
    increment_version,
    register_multi_grad_hook,
)
from engine.autograd._saved_tensor_contexts import (  # noqa: E402 (built on saved_tensors_hooks)
    allow_mutation_on_saved_tensors,
    save_on_cpu,
)
