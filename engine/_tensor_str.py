"""How tensors print: ``tensor([1., 2.], requires_grad=True)``, like PyTorch's ``_tensor_str``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine import _dtype

if TYPE_CHECKING:
    from engine._tensor import Tensor

__all__ = ["tensor_repr", "type_and_size"]

PRECISION = 4


def type_and_size(d: _dtype.dtype, shape: tuple[int, ...]) -> str:
    """``engine.FloatTensor [4, 3]``: how version-counter errors name a tensor."""
    return f"engine.{d._legacy_name} [{', '.join(str(s) for s in shape)}]"


def _format_floats(values: np.ndarray) -> tuple[str, Any]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return "fixed", None
    if np.all(finite == np.round(finite)):
        return "int", None
    amax, amin = np.abs(finite).max(), np.abs(finite).min()
    if amax / max(amin, 1e-300) > 1000.0 or amax > 1e8 or amin < 1e-4:
        return "sci", None
    return "fixed", None


def _fmt(v: Any, mode: str, is_float: bool, is_complex: bool = False) -> str:
    if is_complex:
        re = _fmt(float(np.real(v)), mode, True)
        im = float(np.imag(v))
        sign = "+" if im >= 0 or np.isnan(im) else "-"
        return f"{re}{sign}{_fmt(abs(im), mode, True)}j"
    if not is_float:
        return str(bool(v)) if isinstance(v, (bool, np.bool_)) else str(int(v))
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    if mode == "int":
        return f"{v:.0f}."
    if mode == "sci":
        return f"{v:.{PRECISION}e}"
    return f"{v:.{PRECISION}f}"


def _body(a: np.ndarray, d: _dtype.dtype, indent: int) -> str:
    is_float = d.is_floating_point or d.is_complex
    mode = "fixed"
    if d.is_floating_point and a.size:
        mode, _ = _format_floats(a.astype(np.float64))
    elif d.is_complex and a.size:
        mode, _ = _format_floats(np.concatenate([a.real.ravel(), a.imag.ravel()]))
    flat = [_fmt(v, mode, is_float, d.is_complex) for v in a.ravel()]
    width = max((len(s) for s in flat), default=0)
    flat = [s.rjust(width) for s in flat]
    if a.ndim == 0:
        return flat[0]

    def build(shape: tuple[int, ...], items: list[str], depth: int) -> str:
        if len(shape) == 1:
            return "[" + ", ".join(items) + "]"
        step = len(items) // shape[0] if shape[0] else 0
        rows = [build(shape[1:], items[i * step : (i + 1) * step], depth + 1) for i in range(shape[0])]
        sep = "," + "\n" * (len(shape) - 1) + " " * (indent + depth + 1)
        return "[" + sep.join(rows) + "]"

    return build(a.shape, flat, 0)


def tensor_repr(t: Tensor) -> str:
    a = t._data
    d = t.dtype
    body = _body(a, d, len("tensor("))
    if a.size == 0:
        body = "[]"
    suffix = []
    if (a.size == 0 and a.ndim != 1) or (a.size == 0 and a.shape != (0,)):
        suffix.append(f"size={tuple(a.shape)}")
    default_float = _dtype.get_default_dtype()
    if d not in (default_float, _dtype.int64, _dtype.bool_) and not (
        d.is_complex and d is default_float.to_complex()
    ):
        suffix.append(f"dtype={d!r}")
    if t.grad_fn is not None:
        suffix.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffix.append("requires_grad=True")
    return "tensor(" + ", ".join([body, *suffix]) + ")"
