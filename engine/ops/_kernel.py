"""Layers 2-4 of an op call: ADInplaceOrView, Python dispatch modes, and the NumPy kernel.

See the module docstring of ``_dispatch.py`` for the whole pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import _dtype
from engine._C import _tls
from engine._tensor import CreationMeta, Tensor, _init_tensor, _ViewInfo
from engine.trace import emit

if TYPE_CHECKING:
    from engine.ops._dispatch import Op


# --- layer 2: ADInplaceOrView ---------------------------------------------------------------


def _inplace_or_view(op: Op, bound: dict[str, Any]) -> Any:
    outs = _python_dispatch(op, bound)
    if op.is_inplace:
        bound["self"]._version_counter.version += 1
        if emit.enabled:
            emit.emit("version_bump", tensor=bound["self"])
    elif op.view is not None:
        base: Tensor = bound["self"]
        # See Note [View replay]: only then does a view record how to remake it.
        multi = isinstance(outs, tuple)
        for i, t in enumerate(outs if multi else (outs,)):
            fn = _view_fn(op, bound, i if multi else None) if _tls.view_replay_enabled else None
            _as_view(base, t, op.view, fn)
    return outs


# Note [View replay]
# ~~~~~~~~~~~~~~~~~~
# When a view is modified in place, its grad_fn is rebuilt on top of its base's new history
# (Note [View + in-place]). By default one ``as_strided`` of the base remakes the view
# (``AsStridedBackward0``). Under ``torch.autograd._force_original_view_tracking(True)``, PyTorch's
# ``ViewInfo`` also records a *view function*: the chain of view ops from the root base (each op
# called again with its own arguments), and the rebuilt grad_fn is the last op's node
# (``ViewBackward0`` for ``view``). PyTorch's ``ViewInfo::chain``: a view made while replay is
# off has a view function only if its base has one, and then it ends with ``as_strided``; a view
# made while it is on, of a view without one, starts with its base's ``as_strided``.


def _view_fn(op: Op, bound: dict[str, Any], index: int | None) -> Callable[[Tensor], Tensor]:
    """Call ``op`` again, with the same arguments, on a new ``self`` (output ``index`` of a
    multi-output view op)."""
    rest = {n: v for n, v in bound.items() if n != "self"}
    positional = [n for n in op._positional if n != "self"]

    def view_fn(new_base: Tensor) -> Tensor:
        args = (new_base, *(rest[n] for n in positional))
        out = op(*args, **{n: v for n, v in rest.items() if n not in positional})
        return out if index is None else out[index]

    return view_fn


def _as_view(
    base: Tensor, view: Tensor, kind: str, view_fn: Callable[[Tensor], Tensor] | None = None
) -> None:
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
    base_fn = base._view.view_fn if base._view is not None else None
    if view_fn is None and base_fn is not None:
        view_fn = _as_strided_view_fn(view, root)
    elif view_fn is not None and base._view is not None:
        op_fn, base_fn = view_fn, base_fn or _as_strided_view_fn(base, root)
        view_fn = lambda r: op_fn(base_fn(r))  # noqa: E731 - see Note [View replay]
    view._view = _ViewInfo(root, meta, base._version_counter.version, view_fn)


def _as_strided_view_fn(t: Tensor, root: Tensor) -> Callable[[Tensor], Tensor]:
    """Remake ``t`` from (a tensor like) ``root`` with one ``as_strided``."""
    from engine.autograd._views import _offset_in, _replay_view

    geometry = (tuple(t.shape), t.stride(), _offset_in(t, root))
    is_complex = t.is_complex()
    return lambda r: _replay_view(r, is_complex, *geometry)


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


# In-place ops PyTorch lets write into a tensor whose elements share memory (an expand()ed
# tensor): they write the same value wherever they write (torch warns about the masked ones).
_OVERLAP_OK = frozenset(
    {"fill_", "zero_", "masked_fill_", "index_put_", "_index_put_impl_", "tril_", "triu_"}
)


def _assert_no_internal_overlap(op: Op, t: Tensor) -> None:
    """PyTorch's ``assert_no_internal_overlap``: a size > 1 dimension with stride 0 means
    several elements of the written-to tensor are one memory location (the ops of
    ``_OVERLAP_OK`` write anyway). The shape is checked first: it is the cheap, common case."""
    data = t._data
    if any(st == 0 and n > 1 for n, st in zip(data.shape, data.strides, strict=True)) and (
        op.name.split(".")[0] not in _OVERLAP_OK
    ):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single "
            "memory location. Please clone() the tensor before performing the operation."
        )


def _run_kernel(op: Op, bound: dict[str, Any]) -> Any:
    if op._kernel_general:
        return _run_general_kernel(op, bound)
    # See Note [The common kernel call]: no TensorList parameter, not in place.
    args: dict[str, Any] = {}
    out_dtype: _dtype.dtype | None = None
    if op._promotes:
        # _result_type's common case, worked out while the inputs are read: one dtype ``d`` for
        # every tensor that is not a wrapped number, floating (and no complex wrapped number)
        # or complex.
        d: _dtype.dtype | None = None
        wrapped_complex = mixed = False
        for n in op._single_tensor_params:
            t = bound[n]
            if t is None:
                continue
            if t._wrapped_number:
                wrapped_complex = wrapped_complex or t._dtype._category == 3
            elif d is None:
                d = t._dtype
            elif t._dtype is not d:
                mixed = True
        if d is not None and not mixed and (d._category == 3 or (d._category == 2 and not wrapped_complex)):
            out_dtype = d
        else:
            tensors = [t for t in map(bound.__getitem__, op._single_tensor_params) if t is not None]
            if tensors:
                out_dtype = _dtype.result_type(tensors)
                if op.dtypes == "float" and out_dtype._category < 2:  # neither floating nor complex
                    out_dtype = _dtype.get_default_dtype()
        if out_dtype is not None:
            want = out_dtype._np
            for n in op._single_tensor_params:
                v = bound[n]
                if v is None:
                    args[n] = None
                else:
                    a = v._data
                    args[n] = a if a.dtype is want else _cast(a, out_dtype)
            if op.dtypes == "bool":
                out_dtype = _dtype.bool_
        else:  # no tensor at all: nothing to promote or cast
            for n in op._single_tensor_params:
                args[n] = None
    else:  # "keep": the kernel decides, nothing is cast
        for n in op._single_tensor_params:
            v = bound[n]
            args[n] = None if v is None else v._data
    for n in op._other_params:
        v = bound[n]
        args[n] = v._data if isinstance(v, Tensor) else v
    result = _quiet_call(op, args)
    if op.view is not None:
        if isinstance(result, tuple):
            return tuple(_wrap(r, None, True) for r in result)
        return _wrap(result, None, True)
    if isinstance(result, tuple):
        dtypes = [out_dtype] + [None] * (len(result) - 1)
        return tuple(_wrap(r, d) for r, d in zip(result, dtypes, strict=True))
    # The common result, a C-contiguous array of out_dtype, needs none of _wrap's checks.
    if (
        out_dtype is not None
        and type(result) is np.ndarray
        and result.dtype is out_dtype._np
        and result.flags.c_contiguous
    ):
        # See Note [The result tensor].
        t = object.__new__(Tensor)
        _init_tensor(t, result, dtype=out_dtype)
        return t
    return _wrap(result, out_dtype)


# Note [The result tensor]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# Nearly every op's result is a new C-contiguous array of the dtype promotion chose
# (``out_dtype``); ``_run_kernel`` makes its tensor without ``_wrap``'s checks, and hands
# ``_init_tensor`` that dtype rather than having it look the array's dtype up: the array's dtype
# *is* ``out_dtype._np``, and ``_BY_NUMPY`` maps it back to that same dtype object.


# Note [The common kernel call]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Nearly every op call has no TensorList parameter and does not write in place
# (``op._kernel_general`` false, fixed at registration); its kernel layer is ``_run_kernel``'s
# first part, the general one (``_run_general_kernel``) taking the rest. Both do the same: the
# result dtype is PyTorch's ``result_type`` of the tensor inputs (with ``dtypes="float"``,
# integers become the default dtype; ``"bool"``: the result is bool; ``"keep"``: the kernel
# decides and nothing is cast), each input is cast to it, and the result is wrapped as a tensor
# of that dtype. The common part reads each input once while working out ``_result_type``'s
# common case (See its docstring) and only builds the list for the general rule when that case
# does not apply; the string tests on ``op.dtypes`` are made once, at registration
# (``op._promotes``).


def _run_general_kernel(op: Op, bound: dict[str, Any]) -> Any:
    out_dtype: _dtype.dtype | None = None
    cast_to: _dtype.dtype | None = None
    list_params = op.list_params
    if op.dtypes != "keep":  # with "keep" the kernel decides: nothing to promote
        tensors = [t for t in map(bound.__getitem__, op._single_tensor_params) if t is not None]
        for n in list_params:
            tensors.extend(t for t in bound[n] if t is not None)
        if tensors:
            common = _result_type(tensors)
            if op.dtypes == "float" and common._category < 2:  # neither floating nor complex
                common = _dtype.get_default_dtype()
            cast_to = common
            out_dtype = _dtype.bool_ if op.dtypes == "bool" else common
    args: dict[str, Any] = {}
    if not list_params:  # Note [Precomputed per op]: each parameter's kind is known
        for n in op._single_tensor_params:
            v = bound[n]
            if v is None:
                args[n] = None
            else:
                a = v._data
                args[n] = a if cast_to is None or a.dtype is cast_to._np else _cast(a, cast_to)
        for n in op._other_params:
            v = bound[n]
            args[n] = v._data if isinstance(v, Tensor) else v
    else:
        tensor_params = op._tensor_param_set
        for n, v in bound.items():
            if n in list_params:
                args[n] = [None if t is None else _cast(t._data, cast_to) for t in v]
            elif isinstance(v, Tensor):
                args[n] = _cast(v._data, cast_to) if n in tensor_params else v._data
            else:
                args[n] = v
    if op.is_inplace:
        return _run_inplace_kernel(op, bound, args, out_dtype)
    result = _quiet_call(op, args)  # See Note [Quiet kernels]
    view = op.view is not None
    if isinstance(result, tuple):
        dtypes = [out_dtype] + [None] * (len(result) - 1) if not view else [None] * len(result)
        return tuple(_wrap(r, d, view) for r, d in zip(result, dtypes, strict=True))
    return _wrap(result, None if view else out_dtype, view)


def _run_inplace_kernel(
    op: Op, bound: dict[str, Any], args: dict[str, Any], out_dtype: _dtype.dtype | None
) -> Tensor:
    self_t: Tensor = bound["self"]
    if op.view is None:
        _assert_no_internal_overlap(op, self_t)
    result = _quiet_call(op, args)  # See Note [Quiet kernels]
    if op.view == "inplace":
        # An in-place view op (t_, as_strided_) changes self's geometry, not its values: self
        # now looks at the same memory through the kernel's NumPy view.
        self_t._data = result
        return self_t
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


# Note [Quiet kernels]
# ~~~~~~~~~~~~~~~~~~~~
# Kernels run under ``np.errstate(all="ignore")``: IEEE results (nan, inf) without NumPy's
# warnings, like torch. ``np.errstate`` builds NumPy's error-state object from its keyword
# arguments at every entry, and its decorator form adds a ``*args, **kwargs`` call around the
# kernel; together about as much as a small kernel itself. ``_quiet_call`` does what the
# decorator does (set NumPy's error-state context variable, call, reset it) with the object
# made once per *outer* state: ``_make_extobj(all="ignore")`` depends only on the state it is
# entered from (it keeps that state's buffer size and error callback), so the answer for the
# last outer state seen is kept beside it, and reused while the outer state is that same object
# (held by the cache, so its identity cannot be reused). A user's ``np.errstate``/``np.seterr``
# makes a new outer object, hence a new answer. The kernel sees exactly the error state the
# decorator gave it, and the caller's state is put back on return or on an error. These are
# NumPy's private names (``numpy._core.umath``, as ``np.errstate`` imports them): without them,
# the decorator is used. ``op.kernel`` stays the bare NumPy function.
_errstate: Any = None  # NumPy's error-state context variable (None: not found)
_make_extobj: Any = None  # and how NumPy makes a state
try:
    from numpy._core import umath as _umath

    _errstate, _make_extobj = _umath._extobj_contextvar, _umath._make_extobj
except (ImportError, AttributeError):  # another NumPy: np.errstate's decorator (Op._quiet_kernel)
    pass
_quiet_state: tuple[Any, Any] = (None, None)  # (outer state, its all-ignore state)


def _quiet_call(op: Op, args: dict[str, Any]) -> Any:
    """``op.kernel(**args)`` under ``np.errstate(all="ignore")``: See Note [Quiet kernels]."""
    global _quiet_state
    if _errstate is None:
        return op._quiet_kernel(**args)
    outer = _errstate.get()
    seen, quiet = _quiet_state
    if seen is not outer:
        quiet = _make_extobj(all="ignore")
        _quiet_state = (outer, quiet)
    token = _errstate.set(quiet)
    try:
        return op.kernel(**args)
    finally:
        _errstate.reset(token)


def _result_type(tensors: list[Tensor]) -> _dtype.dtype:
    """``_dtype.result_type`` of an op's tensor inputs, answering the common case first.

    When the inputs that are real tensors (not wrapped Python numbers) all have one dtype ``d``,
    the result is ``d`` if ``d`` is complex, or if ``d`` is floating and no wrapped number is
    complex: promotion of equal dtypes gives that dtype, and a wrapped number only decides the
    category, which a floating or complex ``d`` already has (c10's combine_categories; ``x * 2.5``
    stays float32). Any other mix takes result_type's full walk.
    """
    d: _dtype.dtype | None = None
    wrapped_complex = False
    for t in tensors:
        if t._wrapped_number:
            wrapped_complex = wrapped_complex or t._dtype._category == 3
        elif d is None:
            d = t._dtype
        elif t._dtype is not d:
            return _dtype.result_type(tensors)
    if d is not None and (d._category == 3 or (d._category == 2 and not wrapped_complex)):
        return d
    return _dtype.result_type(tensors)


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
    t = object.__new__(Tensor)  # Tensor._make(a), one call fewer
    _init_tensor(t, a)
    return t


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


def _scalar_type_name(d: _dtype.dtype | np.dtype) -> str:
    """c10's name of a dtype, as error messages print it (``Float``, ``Long``): an engine dtype or
    a NumPy one (the kernels' arrays), looked up by their common name."""
    return _SCALAR_TYPE_NAMES[d.name]


def _wrapped_number(v: Any) -> Tensor:
    """A Python number used where a tensor is expected (PyTorch's "wrapped number")."""
    # Stored at full precision; result_type() only lets it decide the category (see
    # engine/_dtype.py), so ``float32_tensor * 2.5`` stays float32 as in PyTorch.
    d = _WRAPPED_DTYPES.get(type(v))  # the exact builtin types: one lookup
    if d is None:
        d = _dtype._scalar_dtype(v)
        if isinstance(v, float):
            d = _dtype.float64
        elif isinstance(v, complex):
            d = _dtype.complex128
    t = object.__new__(Tensor)
    _init_tensor(t, np.asarray(v, dtype=d._np), wrapped_number=True)
    return t


# What the general rule above gives for each builtin number type (bool before int: it is one).
_WRAPPED_DTYPES = {bool: _dtype.bool_, int: _dtype.int64, float: _dtype.float64, complex: _dtype.complex128}


def _as_tensor(v: Any) -> Tensor:
    if isinstance(v, Tensor):
        return v
    raise TypeError(f"expected Tensor as element in argument, but got {type(v).__name__}")
