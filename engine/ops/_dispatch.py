"""The op table's machinery: ``Op`` (one entry), ``@op`` (how an entry is written) and dispatch.

An entry is PyTorch's ``native_functions.yaml`` and ``derivatives.yaml`` rows in one place::

    @op(derivatives={"self": lambda grad, self: grad * self.cos().conj()})
    def sin(self: Tensor) -> Tensor:
        return np.sin(self)

The decorated function is the NumPy kernel; its signature is the op's signature (parameters
annotated ``Tensor`` or ``TensorList`` are tensors; the kernel receives their arrays). Each
derivative formula names, by its parameters, what it needs: ``grad`` (or ``grads``), inputs
(``self``, ``other``), outputs (``result``), non-tensor arguments (``dim``) and sizes
(``self_sym_sizes``). What an op saves for backward is derived from those names.

Calling an op runs the layers PyTorch's dispatcher runs, top to bottom:

1. Autograd (``_autograd_call``): decide ``requires_grad``, check in-place rules, create the
   node and save its inputs *before* the kernel, then set the outputs' history and save outputs.
2. ADInplaceOrView (``_inplace_or_view``): bump the version counter of a tensor modified in
   place, attach view metadata to a view.
3. Python dispatch modes (``DispatchMode``, the analogue of ``TorchDispatchMode``): observers
   such as selective checkpointing's caching mode and checkpoint's debug log see every op here.
4. The NumPy kernel, after PyTorch's type promotion.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine._C import _tls
from engine._tensor import Tensor
from engine.ops._autograd_layer import _attr_reader, _autograd_call, _common_autograd_call, _GeneratedNode
from engine.ops._kernel import (
    DispatchMode,
    _as_tensor,
    _python_dispatch,
    _run_kernel,
    _scalar_type_name,
    _wrapped_number,
)
from engine.ops._out import call_out
from engine.ops._samples import SampleInput
from engine.trace import emit

__all__ = ["OPS", "DispatchMode", "Op", "SampleInput", "_scalar_type_name", "composite", "op"]

OPS: dict[str, Op | CompositeOp] = {}


# What a node saves, and in which order: see Note [Saved variable order] in _autograd_layer.py.


class DerivativeFormula:
    """One ``input: formula`` row of derivatives.yaml."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.needs = tuple(inspect.signature(fn).parameters)


class Op:
    """One entry of the op table. See the module docstring."""

    def __init__(
        self,
        kernel: Callable[..., Any],
        *,
        name: str,
        node: str | None,
        derivatives: dict[str, Callable[..., Any]],
        dtypes: str,
        view: str | None,
        outputs: Sequence[str],
        differentiable_outputs: Sequence[bool] | None,
        inplace_of: Op | None = None,
        inplace: bool = False,
        samples: Callable[[], list[SampleInput]] | None = None,
        method: bool = True,
        function: bool = True,
        output_differentiability: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self.name = name
        self.kernel = kernel
        self._quiet_kernel = np.errstate(all="ignore")(kernel)  # See Note [Quiet kernels] in _kernel.py
        self.output_differentiability = output_differentiability
        self.node_name = node
        self.dtypes = dtypes
        self.view = view
        self.outputs = tuple(outputs)
        self.differentiable_outputs = tuple(differentiable_outputs or (True,) * len(self.outputs))
        self.inplace_of = inplace_of
        self.is_inplace = inplace or inplace_of is not None
        self.samples = samples
        self.method = method
        self.function = function
        sig = inspect.signature(kernel)
        self.params = tuple(sig.parameters.values())
        self.param_names = tuple(p.name for p in self.params)
        self._positional = tuple(p.name for p in self.params if p.kind is not inspect.Parameter.KEYWORD_ONLY)
        self._defaults = {p.name: p.default for p in self.params if p.default is not inspect.Parameter.empty}
        annotations = {p.name: str(p.annotation) for p in self.params}
        # ``OptionalTensorList`` is PyTorch's ``Tensor?[]`` (``index``'s indices): None entries allowed.
        self.tensor_params = tuple(
            n for n in self.param_names if annotations[n].startswith(("Tensor", "OptionalTensorList"))
        )
        self.list_params = frozenset(
            n for n in self.tensor_params if annotations[n].startswith(("TensorList", "OptionalTensorList"))
        )
        self.optional_params = frozenset(
            n for n in self.tensor_params if "None" in annotations[n] or annotations[n].startswith("Optional")
        )
        self.derivatives = {k: DerivativeFormula(f) for k, f in derivatives.items()}
        # Inputs with a formula get a next edge, in signature order.
        self.differentiable_inputs = tuple(n for n in self.tensor_params if n in self.derivatives)
        unknown = set(self.derivatives) - set(self.differentiable_inputs)
        if unknown:
            raise TypeError(f"op {name}: formulas for unknown inputs {sorted(unknown)}")
        # See Note [Saved variable order].
        needed = {n for f in self.derivatives.values() for n in f.needs}
        self.saved_inputs = tuple(sorted(n for n in needed if n in self.tensor_params))
        # Outputs too are packed in name order (flash attention: logsumexp, then output).
        self.saved_outputs = tuple(sorted(n for n in self.outputs if n in needed))
        # Non-tensor names (``dim``, ``self_sym_sizes``), each with how to read it from the call.
        self.saved_attrs = {
            n: _attr_reader(n, self.param_names, self.list_params)
            for n in sorted(needed)
            if n not in self.tensor_params and n not in self.outputs and n not in ("grad", "grads")
        }
        # For each saved input: the inputs whose formulas use it (it is saved if any of them
        # requires grad). A backward op saves all of them whatever requires grad: PyTorch's
        # codegen guards no save of an op named ``*backward*`` (Note [Saved variable order]).
        unguarded = "backward" in self.name
        self.saved_input_users = {
            s: tuple(i for i, f in self.derivatives.items() if unguarded or s in f.needs)
            for s in self.saved_inputs
        }
        # torch's ``.out`` overloads: ops with one result that is neither a view nor self.
        self.accepts_out = (
            not self.is_inplace and view is None and len(self.outputs) == 1 and "out" not in self.param_names
        )
        # See Note [Precomputed per op]: what every call would otherwise work out again.
        self._param_set = frozenset(self.param_names)
        self._tensor_param_set = frozenset(self.tensor_params)
        self._single_tensor_params = tuple(n for n in self.tensor_params if n not in self.list_params)
        # Parameters that are not tensors: the kernel still gets a tensor passed there as its array.
        self._other_params = tuple(n for n in self.param_names if n not in self._tensor_param_set)
        # Without a TensorList input, input i has next edge i: so for each saved input, the edges
        # whose gradient needs it are known now (with one, they depend on the lists' lengths).
        self._saved_input_edges: dict[str, tuple[int, ...]] | None = (
            None
            if self.list_params
            else {
                s: tuple(i for i, n in enumerate(self.differentiable_inputs) if n in users)
                for s, users in self.saved_input_users.items()
            }
        )
        self._saved_output_index = {n: self.outputs.index(n) for n in self.saved_outputs}
        self._saved_output_set = frozenset(self.saved_outputs)
        # The backward's formulas, in next-edge order: (input, formula, the names it needs).
        self._formulas = tuple(
            (n, self.derivatives[n].fn, self.derivatives[n].needs) for n in self.differentiable_inputs
        )
        # Binding only positional arguments (``x.add(y)``): the defaults of the parameters after
        # the last one given, in signature order, for each count of positional arguments; None
        # when a parameter without a default would be missing (``_bind``'s general loop raises).
        self._n_positional = len(self._positional)
        self._default_tails: tuple[dict[str, Any] | None, ...] = tuple(
            {n: self._defaults[n] for n in self.param_names[k:]}
            if all(n in self._defaults for n in self.param_names[k:])
            else None
            for k in range(len(self._positional) + 1)
        )
        # See Note [The common kernel call] in _kernel.py.
        self._kernel_general = bool(self.list_params) or self.is_inplace
        self._promotes = dtypes != "keep"
        # See Note [Layers with nothing to do] in _autograd_layer.py.
        self._plain = not self.is_inplace and view is None
        # See Note [The common differentiable op] in _autograd_layer.py.
        self._common = (
            self._plain
            and not self.list_params
            and self.node_name is not None
            and output_differentiability is None
            and len(self.outputs) == 1
            and self.differentiable_outputs == (True,)
        )
        self._node_class: type[_GeneratedNode] | None = None  # made by the first call that builds a node

    # Note [Precomputed per op]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~
    # An op's signature and formulas never change after registration, so everything a call needs
    # to know about them is worked out once here: which parameters are tensors, lists of tensors,
    # or have defaults; which next edges need each saved input; where each saved output is; the
    # formulas in edge order; whether the op is neither in place nor a view; its node class (on
    # first use). The per-call path (``_bind``, ``_autograd_call``, ``_run_kernel``, the node's
    # ``apply``) only looks things up in these tuples, dicts and frozensets: no ``inspect``, no
    # string tests, no rebuilt sets per call. ``_bind`` also skips its defaults-and-missing loop
    # when every parameter is already bound (every key of ``bound`` is a parameter name, so a full
    # count means nothing is missing), and ops without a TensorList parameter (nearly all) take
    # loops that need not ask, parameter by parameter, whether it is a list. A call with only
    # positional arguments (``x.add(y)``) adds the defaults of the parameters after them from
    # ``_default_tails`` (in signature order, as the loop would), when none of those lacks a
    # default; otherwise the loop runs and names the missing argument.

    def __repr__(self) -> str:
        return f"engine.ops.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        n = len(args)
        if kwargs or self.list_params or n > self._n_positional or (tail := self._default_tails[n]) is None:
            return self._call(args, kwargs)
        # See Note [The common call]: _bind and the start of _autograd_call, for positional
        # arguments and no TensorList parameter.
        bound = dict(zip(self._positional, args, strict=False))
        if tail:
            bound.update(tail)
        for name in self.tensor_params:
            v = bound[name]
            if v is not None and not isinstance(v, Tensor):
                bound[name] = _wrapped_number(v)
        tls = _tls.__dict__  # See Note [Reading the thread-local state once] in engine/_C.py
        if tls["below_autograd"]:
            return _python_dispatch(self, bound)
        if self._plain and not emit.enabled and not tls["dispatch_modes"]:  # Note [Layers with nothing to do]
            if not tls["grad_enabled"]:
                return _run_kernel(self, bound)
            if self._common:
                return _common_autograd_call(self, bound)  # Note [The common differentiable op]
        return _autograd_call(self, bound)

    # Note [The common call]
    # ~~~~~~~~~~~~~~~~~~~~~~
    # Most calls pass their arguments by position (``x.mul(y)``, ``x * 2``, every backward formula)
    # to an op without a TensorList parameter, with the parameters after them all defaulted. For
    # those, ``__call__`` binds and dispatches itself instead of calling ``_bind`` and
    # ``_autograd_call``: the same dict in the same order (the positional arguments, then
    # ``_default_tails``), the same Python numbers wrapped, then the same first tests as
    # ``_autograd_call`` (Note [Layers with nothing to do]) picking the same layer. Every other
    # call (keywords, ``out=``, TensorLists, too many or too few arguments, whose messages
    # ``_bind`` words) takes ``_call``, the general path. Two Python calls fewer per op.

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The general path of ``__call__``."""
        if kwargs and "out" in kwargs and self.accepts_out:
            return call_out(self, args, kwargs)  # See Note [out= variants]
        bound = self._bind(args, kwargs)
        if _tls.below_autograd:
            return _python_dispatch(self, bound)
        return _autograd_call(self, bound)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self._positional):
            raise TypeError(
                f"{self.name}() takes {len(self._positional)} positional arguments but {len(args)} were given"
            )
        bound = dict(zip(self._positional, args, strict=False))
        tail = None if kwargs else self._default_tails[len(args)]
        if tail is not None:
            # See Note [Precomputed per op]: every parameter after the given ones has a default.
            if tail:
                bound.update(tail)
        else:
            for k, v in kwargs.items():
                if k not in self._param_set:
                    raise TypeError(f"{self.name}() got an unexpected keyword argument '{k}'")
                if k in bound:
                    raise TypeError(f"{self.name}() got multiple values for argument '{k}'")
                bound[k] = v
            if len(bound) != len(self.param_names):  # See Note [Precomputed per op]
                for n in self.param_names:
                    if n not in bound:
                        if n not in self._defaults:
                            raise TypeError(f"{self.name}() missing required argument '{n}'")
                        bound[n] = self._defaults[n]
        if not self.list_params:  # See Note [Precomputed per op]
            for n in self.tensor_params:
                v = bound[n]
                if v is not None and not isinstance(v, Tensor):
                    bound[n] = _wrapped_number(v)
            return bound
        for n in self.tensor_params:
            v = bound[n]
            if n in self.list_params:
                optional = n in self.optional_params
                bound[n] = [None if x is None and optional else _as_tensor(x) for x in v]
            elif v is not None and not isinstance(v, Tensor):
                bound[n] = _wrapped_number(v)
        return bound


class CompositeOp:
    """An op PyTorch implements by calling other ops (``matmul``, ``outer``, ``flatten``):
    it has no node of its own; the ops it calls record the graph."""

    def __init__(
        self,
        fn: Callable[..., Any],
        samples: Callable[[], list[SampleInput]] | None,
        method: bool,
        function: bool,
    ) -> None:
        self.name = fn.__name__
        self.fn = fn
        self.samples = samples
        self.method = method
        self.function = function
        self.__doc__ = fn.__doc__
        params = inspect.signature(fn).parameters
        self.accepts_out = "out" not in params and not self.name.endswith("_")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "out" in kwargs and self.accepts_out:
            return call_out(self, args, kwargs)  # See Note [out= variants]
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"engine.ops.{self.name}"


def op(
    *,
    derivatives: dict[str, Callable[..., Any]] | None = None,
    node: str | None = "auto",
    dtypes: str = "promote",
    view: str | None = None,
    outputs: Sequence[str] = ("result",),
    differentiable_outputs: Sequence[bool] | None = None,
    samples: Callable[[], list[SampleInput]] | None = None,
    method: bool = True,
    function: bool = True,
    name: str | None = None,
    inplace: bool = False,
    output_differentiability: Callable[[dict[str, Any]], bool] | None = None,
) -> Callable[[Callable[..., Any]], Op]:
    """Register an op: see the module docstring.

    Args:
        derivatives: input name -> formula (derivatives.yaml). No formulas: not differentiable.
        node: the grad_fn's name; ``"auto"`` derives ``SinBackward0`` from the op name.
        dtypes: ``"promote"`` (PyTorch's result_type of the tensor inputs), ``"float"`` (the
            same, integers become the default float), ``"keep"`` (the kernel decides, e.g.
            int64 indices), ``"bool"`` (comparisons: inputs promoted, bool result).
        view: ``"view"`` if the output is a view of ``self``, ``"multi"`` for ops returning
            several views (``split``), ``"alias"`` for a non-differentiable alias (``detach``),
            ``"inplace"`` (with ``inplace=True``) for an in-place view op (``t_``): ``self``
            itself becomes the kernel's view, keeping its identity and view metadata.
        outputs: output names as the formulas see them; ``differentiable_outputs`` marks
            outputs that get a grad_fn (``max.dim``'s indices do not).
        inplace: the op only exists in place (``zero_``, ``copy_``): its result is written
            into ``self``. In-place twins of out-of-place ops come from ``inplace_variant``.
        name: the op's name when it differs from the kernel's (``"pow.Tensor_Scalar"``).
        output_differentiability: derivatives.yaml's condition of that name, on the call's
            arguments: when it is false the output gets no history (``_to_copy`` to an integer
            dtype: ``"!dtype || isDifferentiableType(*dtype)"``).
    """

    def decorate(kernel: Callable[..., Any]) -> Op:
        op_name = name or kernel.__name__
        node_name = node
        if node == "auto":
            node_name = (
                "".join(p.capitalize() for p in op_name.rstrip("_").split("_")) + "Backward0"
                if derivatives
                else None
            )
        entry = Op(
            kernel,
            name=op_name,
            node=node_name,
            derivatives=derivatives or {},
            dtypes=dtypes,
            view=view,
            outputs=outputs,
            differentiable_outputs=differentiable_outputs,
            samples=samples,
            method=method,
            function=function,
            inplace=inplace,
            output_differentiability=output_differentiability,
        )
        if op_name in OPS:
            raise KeyError(f"op {op_name} is defined twice")
        OPS[op_name] = entry
        return entry

    return decorate


def inplace_variant(base: Op, name: str | None = None) -> Op:
    """``add_`` from ``add``: same kernel and formulas, the result written into ``self``."""
    entry = Op(
        base.kernel,
        name=name or base.name + "_",
        node=base.node_name,
        derivatives={k: f.fn for k, f in base.derivatives.items()},
        dtypes=base.dtypes,
        view=None,
        outputs=base.outputs,
        differentiable_outputs=base.differentiable_outputs,
        inplace_of=base,
        method=True,
        function=False,
    )
    OPS[entry.name] = entry
    return entry


def composite(
    samples: Callable[[], list[SampleInput]] | None = None,
    method: bool = True,
    function: bool = True,
) -> Callable[[Callable[..., Any]], CompositeOp]:
    def decorate(fn: Callable[..., Any]) -> CompositeOp:
        entry = CompositeOp(fn, samples, method, function)
        if entry.name in OPS:
            raise KeyError(f"op {entry.name} is defined twice")
        OPS[entry.name] = entry
        return entry

    return decorate
