"""Custom autograd ``Function``s (PyTorch's ``torch/autograd/function.py`` + ``python_function.cpp``).

``MyFn.apply(*args)`` creates the node first (so it takes the next ``sequence_nr``), runs
``forward`` with grad mode off, wires the outputs to the node, and only then saves what
``ctx.save_for_backward`` named: saved-tensor hooks active at that moment pack them. The node *is*
the ctx object (``y.grad_fn is ctx``), named ``MyFnBackward``.
"""

from __future__ import annotations

import functools
import gc
import inspect
import types
import warnings
from collections.abc import Callable
from typing import Any

from engine._C import _tls
from engine._tensor import CreationMeta, Tensor, _ViewInfo
from engine.autograd.graph import (
    ERR_BACKWARD_TWICE,
    InputMetadata,
    Node,
    SavedVariable,
    collect_next_edges,
)
from engine.trace import emit

__all__ = ["BackwardCFunction", "Function", "FunctionCtx", "InplaceFunction", "once_differentiable"]


class FunctionCtx:
    """What ``forward`` / ``setup_context`` / ``backward`` see as ``ctx``."""

    to_save: tuple[Tensor | None, ...] | None
    _saved_variables: list[SavedVariable]
    needs_input_grad: tuple[bool, ...]
    materialize_grads: bool
    dirty_tensors: tuple[Tensor, ...]
    non_differentiable: tuple[Tensor, ...]
    _freed: bool

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Save tensors for ``backward`` (call at most once, from forward or setup_context)."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} is of type "
                    f"{type(t).__name__}"
                )
        self.to_save = tensors

    def save_for_forward(self, *tensors: Tensor | None) -> None:
        self.saved_for_forward = tensors

    def mark_dirty(self, *args: Tensor) -> None:
        """Declare inputs that forward modified in place."""
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args: Tensor) -> None:
        """Declare outputs that get no gradient (they will not require grad)."""
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        """Whether backward receives zeros (default) or ``None`` for undefined gradients."""
        self.materialize_grads = value

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        # Every read unpacks every saved tensor again (and runs unpack hooks again).
        if isinstance(self, BackwardCFunction) and not self._freed and not _graph_holds(self):
            # See Note [A custom Function's node outlives its graph].
            self.release_variables()
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        node = self if isinstance(self, Node) else None
        return tuple(sv.unpack(node) for sv in self._saved_variables)

    @property
    def saved_variables(self) -> tuple[Tensor | None, ...]:
        # PyTorch's deprecated alias of saved_tensors (THPFunction_saved_variables).
        warnings.warn(
            "'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2
        )
        return self.saved_tensors


class BackwardCFunction(Node, FunctionCtx):
    """The node of a custom Function (PyTorch's ``PyNode`` and its ctx in one object)."""

    _forward_cls: type[Function]

    def __init__(self) -> None:
        Node.__init__(self)
        self.to_save = None
        self._saved_variables = []
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._materialize_non_diff_grads = True
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self._freed = False
        self._is_variable_input: list[bool] = []
        self._output_info: list[tuple[tuple[int, ...], Any] | None] = []

    def name(self) -> str:
        return type(self).__name__

    @property
    def metadata(self) -> dict[str, Any]:
        # See Note [A custom Function's node outlives its graph].
        if not _graph_holds(self):
            raise RuntimeError(ERR_PYNODE_DEALLOCATED)
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def apply(self, *args: Any) -> Any:
        """Run the user's backward (or vjp) on ``args`` (PyTorch's ``BackwardCFunction.apply``)."""
        cls = self._forward_cls
        backward_fn, vjp_fn = cls.backward, cls.vjp
        if backward_fn is not Function.backward and vjp_fn is not Function.vjp:
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function is not allowed. You should "
                "only implement one of them."
            )
        user_fn = vjp_fn if vjp_fn is not Function.vjp else backward_fn
        return user_fn(self, *args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"'{type(self).__name__}' object is not callable")

    def _apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        from engine import zeros

        # A missing gradient becomes zeros (unless set_materialize_grads(False)); a
        # non-tensor output always gets None, and a non-differentiable one gets zeros unless
        # ctx._materialize_non_diff_grads is False (PyNode::apply).
        args: list[Tensor | None] = []
        for g, info, meta in zip(grads, self._output_info, self._input_metadata, strict=True):
            if (
                g is not None
                or not self.materialize_grads
                or info is None
                or (meta.was_default_constructed and not self._materialize_non_diff_grads)
            ):
                args.append(g)
            else:
                args.append(zeros(info[0], dtype=info[1]))
        result = self.apply(*args)
        if not isinstance(result, tuple):
            result = (result,)
        n_forward = len(self._is_variable_input)
        if len(result) > n_forward and all(r is None for r in result[n_forward:]):
            result = result[:n_forward]
        if len(result) != n_forward:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected "
                f"{n_forward}, got {len(result)})"
            )
        out: list[Tensor | None] = []
        for i, (r, is_var) in enumerate(zip(result, self._is_variable_input, strict=True)):
            if not is_var:
                if r is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at "
                        f"position {i + 1}, but the corresponding forward input was not a "
                        "Variable"
                    )
                continue
            if r is not None and not isinstance(r, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(r).__name__})")
            out.append(r)
        return out

    def release_variables(self) -> None:
        self._saved_variables = []
        self._freed = True


ERR_PYNODE_DEALLOCATED = (
    "You attempted to access the anomaly metadata of a custom autograd function but the underlying "
    "PyNode has already been deallocated.  The most likely reason this occurred is because you "
    "assigned x.grad_fn to a local variable and then let the original variable get deallocated.  "
    "Don't do that!  If you really have no way of restructuring your code so this is the case, "
    "please file an issue reporting that you are affected by this."
)


def _invalid_attribute(name: str) -> str:
    # PyTorch's text, its non-breaking hyphen ("new\u2011style") and final space included.
    return (
        f"Attribute '{name}' is invalid for this instance of _C._FunctionBase. Accessing this "
        "attribute directly on an instance of autograd.Function is a legacy access pattern that is "
        "no longer supported. For examples on how to use new\u2011style autograd functions, see "
        "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function "
    )


# Note [A custom Function's node outlives its graph]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# In PyTorch the ctx object (also what ``y.grad_fn`` returns) is a Python object that the graph's
# C++ PyNode keeps alive, and that only holds the PyNode weakly. Once nothing in the graph holds
# the PyNode (its outputs are gone and no other node has an edge to it), the PyNode dies and frees
# the saved tensors, even if Python code kept the ctx (``g = y.grad_fn; del y``, or a ctx stashed
# by backward): ``ctx.saved_tensors`` then raises "Trying to backward through the graph a second
# time", ``ctx.metadata`` "the underlying PyNode has already been deallocated". Here the node is
# the ctx, so "the graph still holds it" is asked of the garbage collector, only when one of those
# two is read outside a backward (inside one, the node is running or reachable): a tensor whose
# grad_fn it is, an edge (node, nr) in a list, a saved variable or another node referring to it
# count; Python variables do not. A reference the check does not recognize counts as the graph's,
# so in doubt nothing is freed.


def _graph_holds(node: BackwardCFunction) -> bool:
    """Whether the autograd graph still holds ``node`` (whether PyTorch's PyNode is alive)."""
    if _tls.graph_task is not None or _tls.current_node is node:
        return True
    for r in gc.get_referrers(node):
        if isinstance(r, Tensor):
            if r._grad_fn is node:
                return True
        elif isinstance(r, SavedVariable):
            if r._grad_fn is node:
                return True
        elif isinstance(r, Node):
            if r is not node:
                return True
        elif type(r) is tuple:
            if len(r) == 2 and r[0] is node and any(type(o) is list for o in gc.get_referrers(r)):
                return True
        elif type(r) is dict:
            # A node's attribute dictionary (another node's __dict__, materialized).
            if any(isinstance(o, Node) and o is not node for o in gc.get_referrers(r)):
                return True
        elif not isinstance(r, (list, types.FrameType, types.CellType, types.FunctionType)):
            return True  # unknown holder: assume it belongs to the graph
    return False


class FunctionMeta(type):
    """Gives each Function subclass its node class ``<Name>Backward``."""

    def __init__(cls, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> None:
        backward_cls = type(
            name + "Backward", (BackwardCFunction,), {"_forward_cls": cls, "__module__": cls.__module__}
        )
        cls._backward_cls = backward_cls  # type: ignore[attr-defined]
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Base class for operations with a hand-written backward.

    Example::

        >>> import engine
        >>> class Exp(engine.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, i):
        ...         result = i.exp()
        ...         ctx.save_for_backward(result)
        ...         return result
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         (result,) = ctx.saved_tensors
        ...         return grad_output * result
        >>> x = engine.zeros(2, requires_grad=True)
        >>> Exp.apply(x).sum().backward()
        >>> x.grad
        tensor([1., 1.])
    """

    _backward_cls: type[BackwardCFunction]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            f"{self.__class__} should not be instantiated. Methods on autograd functions "
            "are all static, so you should invoke them on the class itself. "
            "Instantiating an autograd function will raise an "
            "error in a future version of PyTorch.",
            DeprecationWarning,
            stacklevel=2,
        )

    # An instance of a Function is not a node: what PyTorch's _C._FunctionBase would give a node
    # raises (the metadata of a node that does not exist, or the legacy-access message).
    def _register_hook_dict(self, tensor: Any) -> None:
        raise RuntimeError(_invalid_attribute("_register_hook_dict"))

    def register_hook(self, fn: Any) -> None:
        raise RuntimeError(_invalid_attribute("register_hook"))

    def register_prehook(self, fn: Any) -> None:
        raise RuntimeError(_invalid_attribute("register_prehook"))

    def name(self) -> str:
        raise RuntimeError(_invalid_attribute("name"))

    def _sequence_nr(self) -> int:
        raise RuntimeError(_invalid_attribute("_sequence_nr"))

    def _set_sequence_nr(self, nr: int) -> None:
        raise RuntimeError(_invalid_attribute("_set_sequence_nr"))

    @property
    def next_functions(self) -> Any:
        raise RuntimeError(_invalid_attribute("next_functions"))

    @property
    def _input_metadata(self) -> Any:
        raise RuntimeError(_invalid_attribute("_input_metadata"))

    @property
    def metadata(self) -> Any:
        raise RuntimeError(ERR_PYNODE_DEALLOCATED)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        setup_ctx = cls.setup_context is not Function.setup_context
        if setup_ctx:
            # forward's defaults are filled in (setup_context sees every input) ...
            bound = _forward_signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.args)
        if kwargs:
            # ... but keyword arguments are refused either way, as by PyTorch's C++ apply.
            raise TypeError("apply() takes no keyword arguments")
        return _function_apply(cls, args, setup_ctx)


class InplaceFunction(Function):
    """This class is here only for backward compatibility reasons.
    Use :class:`Function` instead of this for any new use case."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


@functools.cache
def _forward_signature(forward: Callable[..., Any]) -> inspect.Signature:
    # Computed once per Function class: apply() is on the hot path (every checkpoint call runs
    # _NoopSaveInputs.apply).
    return inspect.signature(forward)


def _function_apply(cls: type[Function], args: tuple[Any, ...], setup_ctx: bool) -> Any:
    from engine.autograd.grad_mode import no_grad

    tensor_inputs = [a for a in args if isinstance(a, Tensor)]
    is_executable = _tls.grad_enabled and any(t.requires_grad for t in tensor_inputs)
    ctx = cls._backward_cls()
    ctx._is_variable_input = [isinstance(a, Tensor) for a in args]
    # Whether each input requires grad, even in no_grad mode (as in PyTorch).
    ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
    if is_executable:
        ctx._next_edges = collect_next_edges(tensor_inputs)
        if emit.enabled:
            emit.emit("node_new", node=ctx)
    with no_grad():
        if setup_ctx:
            output = cls.forward(*args)
            cls.setup_context(ctx, args, output)
        else:
            output = cls.forward(ctx, *args)
    unpack = not isinstance(output, tuple)
    outputs = (output,) if unpack else output
    wrapped = _wrap_outputs(ctx if is_executable else None, ctx, tensor_inputs, outputs)
    if is_executable:
        _save_variables(ctx)
    ctx.to_save = None
    return wrapped[0] if unpack else wrapped


# Note [Custom Function outputs]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Every output of forward takes one slot of the node (one gradient argument of backward), in
# order, whatever it is. A differentiable tensor output gets the node as grad_fn. A non-tensor
# output and a non-differentiable one (mark_non_differentiable, or an integer/bool tensor) get an
# "undefined" slot: backward receives None for a non-tensor, and zeros (materialized from the
# recorded shape and dtype) for a non-differentiable tensor unless ctx._materialize_non_diff_grads
# is False. An input returned as is comes back as a view of itself (so that giving it a grad_fn
# does not rewrite the caller's tensor); a tensor named in mark_dirty was modified in forward: its
# version is bumped here (forward ran in no_grad, where nothing recorded it), and its history is
# rebased onto the node, as an in-place op's would be; every tensor named in mark_dirty must be
# returned. Every returned view (except a modified input) becomes IN_CUSTOM_FUNCTION (or
# MULTI_OUTPUT_NODE when the node has several differentiable outputs): modifying it in place later
# raises, naming the custom Function, since the rebase would bypass its backward. A view that
# gets the node as grad_fn records its current version, so in-place ops forward ran on it do not
# make reading its grad_fn rebuild it (set_gradient_edge).


def _wrap_outputs(
    node: BackwardCFunction | None,
    ctx: BackwardCFunction,
    inputs: list[Tensor],
    outputs: tuple[Any, ...],
) -> tuple[Any, ...]:
    input_ids = {id(t) for t in inputs}
    dirty = _mark_dirty(ctx)
    non_diff = {id(t) for t in ctx.non_differentiable}
    returned: set[int] = set()
    num_diff_outputs = 0
    result: list[Any] = []
    for out in outputs:
        if not isinstance(out, Tensor):
            # A non-tensor output still takes a slot: backward receives None for it.
            result.append(out)
            if node is not None:
                ctx._output_info.append(None)
                node._input_metadata.append(InputMetadata.undefined())
            continue
        var = out
        is_input = id(var) in input_ids
        is_modified = id(var) in dirty
        differentiable = (
            node is not None
            and id(var) not in non_diff
            and (var.dtype.is_floating_point or var.dtype.is_complex)
        )
        if node is not None:
            ctx._output_info.append((tuple(var.shape), var.dtype))
        if not differentiable:
            if node is not None:
                node._input_metadata.append(InputMetadata.undefined())
            if not var.requires_grad:
                if is_input and not is_modified:
                    var = _view_as_self_with_no_grad(var)
            elif is_input:
                var = var.detach()
            elif var._view is None:
                var.detach_()
        else:
            assert node is not None
            num_diff_outputs += 1
            output_nr = node.add_input_metadata(var)
            if is_modified:
                _check_modified_output(var, is_input, len(outputs))
                from engine.autograd._views import rebase_history

                node._input_metadata.pop()
                var._grad = None  # a retained .grad described the old value
                rebase_history(var, node)
            elif is_input:
                var = _view_as_self_with_no_grad(var)
                _set_gradient_edge(var, node, output_nr)
            else:
                _set_gradient_edge(var, node, output_nr)
                var._requires_grad = False
        if not (is_input and is_modified) and var._view is not None:
            var._view.creation_meta = CreationMeta.IN_CUSTOM_FUNCTION
        returned.add(id(out))
        result.append(var)
    if num_diff_outputs > 1:
        for var in result:
            if isinstance(var, Tensor) and var._view is not None:
                var._view.creation_meta = CreationMeta.MULTI_OUTPUT_NODE
    if not dirty <= returned:
        raise RuntimeError(
            "Some elements marked as dirty during the forward method were not returned as output. The "
            "inputs that are modified inplace must all be outputs of the Function."
        )
    return tuple(result)


def _check_modified_output(var: Tensor, is_input: bool, num_outputs: int) -> None:
    """The checks PyTorch makes on an output named in ``ctx.mark_dirty``."""
    if var.is_leaf and var.requires_grad:
        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
    if not is_input:
        warnings.warn(
            "Only input Tensors should be given to ctx.mark_dirty(). If a Tensor is not an "
            "input, there is no need to pass it to mark_dirty().",
            UserWarning,
            stacklevel=5,
        )
    # Counted over every output, tensor or not (PyTorch's raw_outputs).
    if var._view is not None and num_outputs > 1:
        raise RuntimeError(
            "If your Function modifies inplace an input that is a view of another "
            "Tensor, your Function cannot return more than one Tensor. This is not "
            "supported by the current autograd engine. You should either make sure the "
            "input is not a view (using .clone() for example) or make your Function only "
            "return one Tensor (potentially splitting it into two Functions: one doing "
            "the inplace that returns a single Tensor and a second one that does the "
            "other operations). You can ask on the forum https://discuss.pytorch.org/ if "
            "you need help to do this change."
        )


def _set_gradient_edge(var: Tensor, node: Node, output_nr: int) -> None:
    # PyTorch's set_gradient_edge: a view also records that this grad_fn is current, so that
    # in-place ops forward ran on it (before it had a grad_fn) do not make reading it rebuild it.
    var._grad_fn = node
    var._output_nr = output_nr
    if var._view is not None:
        var._view.attr_version = var._version_counter.version


def _mark_dirty(ctx: BackwardCFunction) -> set[int]:
    """Bump the version of every tensor forward modified in place (``ctx.mark_dirty``), as the
    in-place op would have outside the no_grad forward; returns their ids."""
    dirty: set[int] = set()
    for i, t in enumerate(ctx.dirty_tensors):
        if not isinstance(t, Tensor):
            raise RuntimeError(
                f"mark_dirty can only accept variables, but argument {i} is of type {type(t).__name__}"
            )
        dirty.add(id(t))
        t._version_counter.version += 1
        if emit.enabled:
            emit.emit("version_bump", tensor=t)
    ctx.dirty_tensors = ()
    return dirty


def _view_as_self_with_no_grad(t: Tensor) -> Tensor:
    # An input returned as-is comes back as a new view of itself, so that giving it a grad_fn
    # does not change the caller's tensor.
    from engine.autograd.grad_mode import no_grad

    with no_grad():
        v = t.view_as(t)
    v._view = _ViewInfo(t._view.base if t._view else t, CreationMeta.IN_CUSTOM_FUNCTION, t._version)
    return v


def _save_variables(ctx: BackwardCFunction) -> None:
    if ctx.to_save is None:
        return
    ctx._saved_variables = []
    for i, t in enumerate(ctx.to_save):
        if t is None:
            ctx._saved_variables.append(SavedVariable(None, False))
        else:
            slot = f"saved_tensors[{i}]"
            ctx._saved_variables.append(SavedVariable(t, t._grad_fn is ctx, saved_for=ctx, slot=slot))


class Error(Node):
    """A node whose backward raises (PyTorch's ``torch::autograd::Error``)."""

    _node_name = "engine::autograd::Error"

    def __init__(self, msg: str) -> None:
        super().__init__()
        self.msg = msg

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        raise RuntimeError(self.msg)


def _delayed_error(msg: str, inputs: list[Tensor | None]) -> list[Tensor | None]:
    """PyTorch's ``DelayedError``: aliases of ``inputs`` whose grad_fn is an ``Error`` node."""
    node = Error(msg)
    node._next_edges = collect_next_edges(inputs)
    if emit.enabled:
        emit.emit("node_new", node=node)
    outputs: list[Tensor | None] = []
    for var in inputs:
        if var is None:
            outputs.append(None)
            continue
        out = Tensor._make(var._data)
        out._grad_fn = node
        out._output_nr = node.add_input_metadata(out)
        outputs.append(out)
    return outputs


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a backward as not differentiable: it runs without recording, and differentiating
    its result (with ``create_graph=True``) raises an error."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        from engine.autograd.grad_mode import no_grad

        with no_grad():
            outputs = fn(ctx, *args)
        if not _tls.grad_enabled:
            return outputs
        # Only an approximation of "the result depends on something that requires grad" (as in
        # PyTorch): if no grad_output requires grad, the outputs are returned as they are.
        requires_grad = any(isinstance(a, Tensor) and a.requires_grad for a in args)
        if not requires_grad:
            return outputs
        if not isinstance(outputs, tuple):
            outputs = (outputs,)

        # Detached aliases that require grad, so that the Error node is executable.
        def fake_requires_grad(var: Tensor | None) -> Tensor | None:
            if var is not None:
                var = var.detach()
                var.requires_grad = True
            return var

        wrapped = _delayed_error(
            "trying to differentiate twice a function that was marked with @once_differentiable",
            [fake_requires_grad(v) for v in outputs],
        )
        return wrapped[0] if len(wrapped) == 1 else tuple(wrapped)

    return wrapper
