"""``out=``: an op writing its result into a tensor the caller gives (PyTorch's ``mul.out``).

Note [out= variants]
~~~~~~~~~~~~~~~~~~~~
PyTorch generates an ``.out`` overload for most functional ops; the engine gives every op entry
with a single, non-view result the same keyword, and every composite returning one tensor
(routers such as ``sum``, ``mean``) that has no ``out`` parameter of its own. Three rules, in torch's order:

1. Autograd: an out= function records no graph, so torch refuses it when grad mode is on and an
   input of a differentiable op, or ``out`` itself, requires grad (``throw_error_out_requires_grad``).
   Under ``no_grad()`` it is allowed.
2. ADInplaceOrView: ``out`` is modified in place: an inference tensor outside inference mode is
   refused, and ``out``'s version counter is bumped.
3. Dispatch modes see the call with its ``out=`` keyword (as torch's see the ``.out``
   overload); below them the kernel runs as usual. The result is cast into ``out``'s dtype if
   torch's ``canCast`` allows it, and ``out`` is resized (with torch's deprecation warning when it
   had elements) when its shape is not the result's.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from engine._C import _tls
from engine._tensor import Tensor
from engine.ops._kernel import _can_cast, _python_dispatch, _scalar_type_name
from engine.trace import emit

if TYPE_CHECKING:
    from engine.ops._dispatch import CompositeOp, Op

__all__ = ["call_out"]


def call_out(op: Op | CompositeOp, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
    """``op(*args, out=out)``: see Note [out= variants]. A composite (a router such as ``sum``)
    checks every tensor argument, as the overload it dispatches to would."""
    from engine.ops._autograd_layer import _autograd_call
    from engine.ops._dispatch import Op

    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    name = op.name.split(".")[0]
    if out is None:
        return op(*args, **kwargs)  # type: ignore[no-any-return]
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if isinstance(op, Op):
        bound = op._bind(args, kwargs)
        inputs: list[Any] = []
        for n in op.tensor_params:
            inputs.extend(bound[n] if n in op.list_params else [bound[n]])
        differentiable = op.node_name is not None
    else:
        inputs = [a for v in (*args, *kwargs.values()) for a in (v if isinstance(v, (list, tuple)) else [v])]
        differentiable = True
    if _tls.grad_enabled and differentiable:
        if out.requires_grad or any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
            raise RuntimeError(
                f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                "but one of the arguments requires grad."
            )
    from engine.autograd._views import check_inplace

    check_inplace(out, False)
    grad_enabled = _tls.grad_enabled
    _tls.grad_enabled = False
    try:
        if isinstance(op, Op) and _tls.dispatch_modes:
            # Dispatch modes see the call with its ``out=`` (torch's ``.out`` overload): the
            # innermost one calls the op again, below it, which writes ``out``.
            mode = _tls.dispatch_modes.pop()
            below = _tls.below_autograd
            _tls.below_autograd = True
            try:
                pos = tuple(bound[n] for n in op._positional)
                kw = {n: bound[n] for n in op.param_names if n not in op._positional}
                mode.__torch_dispatch__(op, (Tensor,), pos, {**kw, "out": out})
            finally:
                _tls.below_autograd = below
                _tls.dispatch_modes.append(mode)
            return out
        if isinstance(op, Op):
            result = _python_dispatch(op, bound) if _tls.below_autograd else _autograd_call(op, bound)
        else:
            result = op.fn(*args, **kwargs)
    finally:
        _tls.grad_enabled = grad_enabled
    if not isinstance(result, Tensor):
        raise TypeError(f"{name}(): out= is only supported for ops returning one tensor")
    _write_out(out, result)
    return out


def _write_out(out: Tensor, result: Tensor) -> None:
    from engine._dtype import from_numpy

    src = from_numpy(result._data.dtype)
    dst = from_numpy(out._data.dtype)
    if not _can_cast(src, dst):
        raise RuntimeError(
            f"result type {_scalar_type_name(src)} can't be cast to the desired output type "
            f"{_scalar_type_name(dst)}"
        )
    if out._data.shape != result._data.shape:
        if out._data.size != 0:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out._data.shape)}, which does not match the required output shape "
                f"{list(result._data.shape)}. This behavior is deprecated, and in a future PyTorch "
                "release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
                "t.resize_(0).",
                UserWarning,
                stacklevel=3,
            )
        out._data = np.empty(result._data.shape, out._data.dtype)
    np.copyto(out._data, result._data, casting="unsafe")
    out._version_counter.version += 1
    if emit.enabled:
        emit.emit("version_bump", tensor=out)
