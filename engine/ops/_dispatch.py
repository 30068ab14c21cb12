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

from engine import _dtype
from engine._C import _tls
from engine._tensor import CreationMeta, Tensor, _ViewInfo
from engine.autograd.graph import Node, SavedVariable, collect_next_edges
from engine.ops._samples import SampleInput

__all__ = ["OPS", "DispatchMode", "Op", "SampleInput", "composite", "op"]

OPS: dict[str, Op | CompositeOp] = {}


# Note [Saved variable order]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's generated code packs the inputs a node saves before the kernel runs, in the order of
# their names (``MulBackward0`` packs other, then self; ``ClampBackward0`` max, min, self), and
# the outputs (``result``) after the kernel. Its ``apply`` unpacks every saved tensor first, in
# that same order, and only then runs the formulas. An input is saved only if the formula of
# some input that requires grad uses it (``mul`` saves ``other`` only when ``self`` requires
# grad). Checkpointing observes exactly this order through its pack and unpack hooks, so the
# engine reproduces it, and tests/engine/test_ops.py checks it against torch for every op.


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
        saves_original_self: bool = True,
    ) -> None:
        self.name = name
        self.kernel = kernel
        self.node_name = node
        self.dtypes = dtypes
        self.view = view
        self.outputs = tuple(outputs)
        self.differentiable_outputs = tuple(differentiable_outputs or (True,) * len(self.outputs))
        self.inplace_of = inplace_of
        self.inplace = inplace or inplace_of is not None
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
        self.saved_outputs = tuple(n for n in self.outputs if n in needed)
        self.saved_attrs = tuple(
            n
            for n in sorted(needed)
            if n not in self.tensor_params and n not in self.outputs and n not in ("grad", "grads")
        )
        # For each saved input: the inputs whose formulas use it (it is saved if any of them
        # requires grad).
        self.saved_input_users = {
            s: tuple(i for i, f in self.derivatives.items() if s in f.needs) for s in self.saved_inputs
        }
        self.saves_original_self = saves_original_self

    def __repr__(self) -> str:
        return f"engine.ops.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
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
        for k, v in kwargs.items():
            if k not in self.param_names:
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{k}'")
            if k in bound:
                raise TypeError(f"{self.name}() got multiple values for argument '{k}'")
            bound[k] = v
        for n in self.param_names:
            if n not in bound:
                if n not in self._defaults:
                    raise TypeError(f"{self.name}() missing required argument '{n}'")
                bound[n] = self._defaults[n]
        for n in self.tensor_params:
            v = bound[n]
            if n in self.list_params:
                optional = n in self.optional_params
                bound[n] = [None if x is None and optional else _as_tensor(x) for x in v]
            elif v is not None and not isinstance(v, Tensor):
                bound[n] = _wrapped_number(v)
        return bound

    @property
    def is_inplace(self) -> bool:
        return self.inplace


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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
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
) -> Callable[[Callable[..., Any]], Op]:
    """Register an op: see the module docstring.

    Args:
        derivatives: input name -> formula (derivatives.yaml). No formulas: not differentiable.
        node: the grad_fn's name; ``"auto"`` derives ``SinBackward0`` from the op name.
        dtypes: ``"promote"`` (PyTorch's result_type of the tensor inputs), ``"float"`` (the
            same, integers become the default float), ``"keep"`` (the kernel decides, e.g.
            int64 indices), ``"bool"`` (comparisons: inputs promoted, bool result).
        view: ``"view"`` if the output is a view of ``self``, ``"multi"`` for ops returning
            several views (``split``), ``"alias"`` for a non-differentiable alias (``detach``).
        outputs: output names as the formulas see them; ``differentiable_outputs`` marks
            outputs that get a grad_fn (``max.dim``'s indices do not).
        inplace: the op only exists in place (``zero_``, ``copy_``): its result is written
            into ``self``. In-place twins of out-of-place ops come from ``inplace_variant``.
        name: the op's name when it differs from the kernel's (``"pow.Tensor_Scalar"``).
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


# --- layer 1: autograd ---------------------------------------------------------------------


def _autograd_call(op: Op, bound: dict[str, Any]) -> Any:
    inputs = _differentiable_inputs(op, bound)
    requires_grad = (
        _tls.grad_enabled
        and op.node_name is not None
        and any(t is not None and t.requires_grad for t in inputs)
    )
    if op.is_inplace:
        from engine.autograd._views import check_inplace

        check_inplace(bound["self"], requires_grad)
    node: _GeneratedNode | None = None
    if requires_grad:
        node = _make_node(op, inputs, _input_slots(op, bound))
        for name in op.saved_inputs:
            users = op.saved_input_users[name]
            if not any(node.should_compute_output(i) for i, s in enumerate(node._slots) if s in users):
                continue
            value = bound[name]
            if op.is_inplace and name == "self":
                # The kernel is about to overwrite self: save a copy (PyTorch's original_self).
                from engine.ops import clone

                value = clone(value)
            if name in op.list_params:
                node._saved[name] = _SavedVariableList(value, node)  # type: ignore[assignment]
            else:
                node.save(name, value)
        for name in op.saved_attrs:
            node._saved_attrs[name] = _attr_value(name, bound)
    outs = _inplace_or_view(op, bound)
    if node is None:
        return outs
    out_tuple = outs if isinstance(outs, tuple) else (outs,)
    if op.is_inplace:
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
    for name in op.saved_outputs:
        node.save(name, out_tuple[op.outputs.index(name)], is_output=True)
    return outs


def _differentiable_inputs(op: Op, bound: dict[str, Any]) -> list[Tensor | None]:
    out: list[Tensor | None] = []
    for n in op.differentiable_inputs:
        v = bound[n]
        if n in op.list_params:
            out.extend(v)
        else:
            out.append(v)
    return out


def _input_slots(op: Op, bound: dict[str, Any]) -> list[str]:
    """The input name behind each next edge (a TensorList input has one edge per tensor)."""
    slots: list[str] = []
    for n in op.differentiable_inputs:
        slots.extend([n] * len(bound[n]) if n in op.list_params else [n])
    return slots


class _SavedVariableList:
    """A saved ``Tensor[]`` / ``Tensor?[]`` (PyTorch's ``std::vector<SavedVariable>``): one
    SavedVariable per entry, packed and unpacked in list order; a None entry packs nothing."""

    def __init__(self, tensors: Sequence[Tensor | None], node: Node) -> None:
        self.items = [SavedVariable(t, False, saved_for=node) for t in tensors]

    def unpack(self, saved_for: Node | None = None) -> tuple[Tensor | None, ...]:
        return tuple(sv.unpack(saved_for) for sv in self.items)

    def reset_data(self) -> None:
        for sv in self.items:
            sv.reset_data()


class _GeneratedNode(Node):
    """Base of the nodes the op table generates (``SinBackward0`` ...)."""

    op: Op
    _slots: list[str]

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        op = self.op
        # See Note [Saved variable order]: unpack everything first, in pack order.
        values: dict[str, Any] = {name: sv.unpack(self) for name, sv in self._saved.items()}
        values.update(self._saved_attrs)
        values["grad"] = grads[0]
        values["grads"] = grads
        out: list[Tensor | None] = []
        i = 0
        for name in op.differentiable_inputs:
            count = self._slots.count(name)
            formula = op.derivatives[name]
            wanted = any(self.task_should_compute_output(j) for j in range(i, i + count))
            if not wanted or all(g is None for g in grads):
                out.extend([None] * count)
            else:
                result = formula.fn(*[values[n] for n in formula.needs])
                out.extend(result if name in op.list_params else [result])
            i += count
        return out


_NODE_CLASSES: dict[str, type[_GeneratedNode]] = {}


def _make_node(op: Op, inputs: list[Tensor | None], slots: list[str]) -> _GeneratedNode:
    assert op.node_name is not None
    base_op = op.inplace_of or op  # add_ builds the same AddBackward0 as add
    cls = _NODE_CLASSES.get(base_op.name)
    if cls is None:
        namespace = {"op": base_op, "__module__": "engine.autograd.generated"}
        cls = type(op.node_name, (_GeneratedNode,), namespace)
        _NODE_CLASSES[base_op.name] = cls
    node = cls()
    node._next_edges = collect_next_edges(inputs)
    node._slots = slots
    return node


def _attr_value(name: str, bound: dict[str, Any]) -> Any:
    if name in bound:
        return bound[name]
    for suffix, get in _ATTR_SUFFIXES:
        if name.endswith(suffix):
            base = bound[name[: -len(suffix)]]
            if isinstance(base, list):
                return [get(t) for t in base]
            return get(base)
    raise KeyError(f"formula uses unknown name {name!r}")


_ATTR_SUFFIXES: tuple[tuple[str, Callable[[Tensor], Any]], ...] = (
    ("_sym_sizes", lambda t: tuple(t.shape)),
    ("_sym_argsize_0", lambda t: t.shape[0]),
    ("_sym_numel", lambda t: t.numel()),
    ("_sym_strides", lambda t: t.stride()),
    ("_scalar_type", lambda t: t.dtype),
    ("_options", lambda t: t.dtype),
)


# --- layer 2: ADInplaceOrView ---------------------------------------------------------------


def _inplace_or_view(op: Op, bound: dict[str, Any]) -> Any:
    outs = _python_dispatch(op, bound)
    if op.is_inplace:
        bound["self"]._version_counter.version += 1
    elif op.view is not None:
        base: Tensor = bound["self"]
        for t in outs if isinstance(outs, tuple) else (outs,):
            _as_view(base, t, op.view)
    return outs


def _as_view(base: Tensor, view: Tensor, kind: str) -> None:
    view._version_counter = base._version_counter
    # A view is an inference tensor iff its base is, whatever the mode it was made in.
    view._inference = base._inference
    if kind == "alias":  # detach(): shares data and version, but is not a differentiable view
        return
    if _tls.inference_mode:
        meta = CreationMeta.INFERENCE_MODE
    elif not _tls.grad_enabled:
        meta = CreationMeta.NO_GRAD_MODE
    elif kind == "multi":
        meta = CreationMeta.MULTI_OUTPUT_NODE
    else:
        meta = CreationMeta.DEFAULT
    root = base
    if base._view is not None:
        root = base._view.base
        previous = base._view.creation_meta
        if meta == CreationMeta.DEFAULT or previous == CreationMeta.INFERENCE_MODE:
            meta = previous
    view._view = _ViewInfo(root, meta, base._version_counter.version)


# --- layer 3: Python dispatch modes -------------------------------------------------------


class DispatchMode:
    """Sees every op call below autograd, like ``TorchDispatchMode``.

    Override ``__torch_dispatch__(func, types, args, kwargs)``; call ``func(*args, **kwargs)``
    inside it to run the op (ops called there run below autograd and below this mode).
    """

    def __torch_dispatch__(
        self,
        func: Op,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return func(*args, **(kwargs or {}))

    def __enter__(self) -> DispatchMode:
        _tls.dispatch_modes.append(self)
        return self

    def __exit__(self, *args: object) -> None:
        _tls.dispatch_modes.remove(self)


def _python_dispatch(op: Op, bound: dict[str, Any]) -> Any:
    modes = _tls.dispatch_modes
    if not modes:
        return _run_kernel(op, bound)
    mode = modes.pop()
    below = _tls.below_autograd
    _tls.below_autograd = True
    try:
        args = tuple(bound[n] for n in op._positional)
        kwargs = {n: bound[n] for n in op.param_names if n not in op._positional}
        return mode.__torch_dispatch__(op, (Tensor,), args, kwargs)
    finally:
        _tls.below_autograd = below
        modes.append(mode)


# --- layer 4: the kernel --------------------------------------------------------------------


def _run_kernel(op: Op, bound: dict[str, Any]) -> Any:
    tensors = [bound[n] for n in op.tensor_params if n not in op.list_params and bound[n] is not None]
    for n in op.list_params:
        tensors.extend(t for t in bound[n] if t is not None)
    out_dtype: _dtype.dtype | None = None
    cast_to: _dtype.dtype | None = None
    if op.dtypes in ("promote", "float", "bool") and tensors:
        common = _dtype.result_type(tensors)
        if op.dtypes == "float" and not (common.is_floating_point or common.is_complex):
            common = _dtype.get_default_dtype()
        cast_to = common
        out_dtype = _dtype.bool_ if op.dtypes == "bool" else common
    args: dict[str, Any] = {}
    for n, v in bound.items():
        if n in op.list_params:
            args[n] = [None if t is None else _cast(t._data, cast_to) for t in v]
        elif isinstance(v, Tensor):
            args[n] = _cast(v._data, cast_to) if n in op.tensor_params else v._data
        else:
            args[n] = v
    if op.is_inplace:
        self_t: Tensor = bound["self"]
        with np.errstate(all="ignore"):  # IEEE results (nan, inf) without NumPy's warnings, like torch
            result = op.kernel(**args)
        if isinstance(result, tuple):
            result = result[0]
        if out_dtype is not None and not _can_cast(out_dtype, self_t._dtype):
            raise RuntimeError(
                f"result type {_scalar_type_name(out_dtype)} can't be cast to the desired output "
                f"type {_scalar_type_name(self_t._dtype)}"
            )
        if np.shape(result) != self_t._data.shape:
            raise RuntimeError(
                f"output with shape {list(self_t._data.shape)} doesn't match the broadcast shape "
                f"{list(np.shape(result))}"
            )
        if result is not self_t._data:
            np.copyto(self_t._data, result, casting="unsafe")
        return self_t
    with np.errstate(all="ignore"):
        result = op.kernel(**args)
    view = op.view is not None
    if isinstance(result, tuple):
        dtypes = [out_dtype] + [None] * (len(result) - 1) if op.view is None else [None] * len(result)
        return tuple(_wrap(r, d, view) for r, d in zip(result, dtypes, strict=True))
    return _wrap(result, None if view else out_dtype, view)


def _cast(a: np.ndarray, d: _dtype.dtype | None) -> np.ndarray:
    if d is None or a.dtype == d._np:
        return a
    return a.astype(d._np)


def _wrap(a: Any, d: _dtype.dtype | None, view: bool = False) -> Tensor:
    if not isinstance(a, np.ndarray):
        a = np.asarray(a)
    if d is not None and a.dtype != d._np:
        a = a.astype(d._np)
    elif not view and not a.flags.c_contiguous:
        # Non-view results own C-contiguous memory, so a view's strides and offset, measured
        # from its base's first element, address the base's elements (see as_strided).
        a = np.ascontiguousarray(a)
    return Tensor._make(a)


def _can_cast(src: _dtype.dtype, dst: _dtype.dtype) -> bool:
    # PyTorch's canCast: no complex -> real, no float -> integral, no non-bool -> bool.
    if src.is_complex and not dst.is_complex:
        return False
    if src.is_floating_point and not (dst.is_floating_point or dst.is_complex):
        return False
    return not (src is not _dtype.bool_ and dst is _dtype.bool_)


_SCALAR_TYPE_NAMES = {
    "float32": "Float",
    "float64": "Double",
    "float16": "Half",
    "int64": "Long",
    "int32": "Int",
    "uint8": "Byte",
    "bool": "Bool",
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
}


def _scalar_type_name(d: _dtype.dtype) -> str:
    return _SCALAR_TYPE_NAMES[d.name]


def _wrapped_number(v: Any) -> Tensor:
    """A Python number used where a tensor is expected (PyTorch's "wrapped number")."""
    # Stored at full precision; result_type() only lets it decide the category (see
    # engine/_dtype.py), so ``float32_tensor * 2.5`` stays float32 as in PyTorch.
    d = _dtype._scalar_dtype(v)
    if isinstance(v, float):
        d = _dtype.float64
    elif isinstance(v, complex):
        d = _dtype.complex128
    t = Tensor._make(np.asarray(v, dtype=d._np))
    t._wrapped_number = True
    return t


def _as_tensor(v: Any) -> Tensor:
    if isinstance(v, Tensor):
        return v
    raise TypeError(f"expected Tensor as element in argument, but got {type(v).__name__}")
