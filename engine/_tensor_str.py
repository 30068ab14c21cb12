"""How tensors print: ``tensor([1., 2.], requires_grad=True)``, like PyTorch's ``torch/_tensor_str.py``.

The same steps as PyTorch's: a ``_Formatter`` looks at the finite non-zero values once and picks
integer mode (``1.``), fixed point (``1.5000``) or scientific notation (``1.5000e-05``) and a column
width; every element is then right-aligned to that width. A complex tensor gets two formatters,
one for the real parts and one for the imaginary parts (``tensor([1.0000e+00+0.j, ...])``). Long
rows wrap at 80 columns; tensors of more than 1000 elements are summarized with ``...``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import _dtype

if TYPE_CHECKING:
    from engine._tensor import Tensor

__all__ = ["tensor_repr", "type_and_size"]

# PyTorch's default print options.
PRECISION = 4
LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3


def type_and_size(d: _dtype.dtype, shape: tuple[int, ...]) -> str:
    """``engine.FloatTensor [4, 3]``: how version-counter errors name a tensor."""
    return f"engine.{d._legacy_name} [{', '.join(str(s) for s in shape)}]"


class _Formatter:
    """Picks the notation and the width of one column of numbers (PyTorch's ``_Formatter``)."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.ravel()
        if not self.floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
            return
        # Only finite non-zero values decide: zeros, nan and inf print in any notation.
        nonzero = flat[np.isfinite(flat) & (flat != 0)]
        if nonzero.size == 0:
            return
        magnitudes = np.abs(nonzero).astype(np.float64)
        lo, hi = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(nonzero == np.ceil(nonzero)))
        if self.int_mode:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8
        else:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        for v in nonzero.tolist():
            if self.sci_mode:
                width = len(f"{v:.{PRECISION}e}")
            elif self.int_mode:
                width = len(f"{v:.0f}") + 1  # the trailing "." that marks a float
            else:
                width = len(f"{v:.{PRECISION}f}")
            self.max_width = max(self.max_width, width)

    def width(self) -> int:
        return self.max_width

    def format(self, value: Any) -> str:
        if not self.floating:
            text = f"{value}"
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{PRECISION}e}"
        elif self.int_mode:
            text = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                text += "."
        else:
            text = f"{value:.{PRECISION}f}"
        return (self.max_width - len(text)) * " " + text


class _Formatters:
    """One formatter, or two for complex values (real parts, imaginary parts)."""

    def __init__(self, real: _Formatter, imag: _Formatter | None = None) -> None:
        self.real = real
        self.imag = imag

    def element_length(self) -> int:
        length = self.real.width() + 2  # with ", "
        if self.imag is not None:
            length += self.imag.width() + 1  # and the "j"
        return length

    def format(self, value: Any) -> str:
        if self.imag is None:
            return self.real.format(value)
        real = self.real.format(value.real)
        imag = (self.imag.format(value.imag) + "j").lstrip()
        # A negative imaginary part brings its own sign ("-0.j" too).
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements a summarized print shows (PyTorch's ``get_summarized_data``)."""
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:EDGEITEMS], a[-EDGEITEMS:]]) if a.shape[0] > 2 * EDGEITEMS else a
    rows = list(range(a.shape[0]))
    if a.shape[0] > 2 * EDGEITEMS:
        rows = rows[:EDGEITEMS] + rows[-EDGEITEMS:]
    return np.stack([_summarized(a[i]) for i in rows])


def _vector_str(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatters) -> str:
    per_line = max(1, (LINEWIDTH - indent) // fmt.element_length())
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        data = [fmt.format(v) for v in a[:EDGEITEMS].tolist()]
        data += [" ..."] + [fmt.format(v) for v in a[-EDGEITEMS:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i : i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(a: np.ndarray, indent: int, summarize: bool, fmt: _Formatters) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        slices = [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)]
        slices.append("...")
        slices += [
            _tensor_str_with_formatter(a[i], indent + 1, summarize, fmt)
            for i in range(a.shape[0] - EDGEITEMS, a.shape[0])
        ]
    else:
        slices = [_tensor_str_with_formatter(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(a: np.ndarray, indent: int) -> str:
    if a.size == 0:
        return "[]"
    summarize = a.size > THRESHOLD
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    shown = _summarized(a) if summarize else a
    if np.iscomplexobj(a):
        fmt = _Formatters(_Formatter(shown.real), _Formatter(shown.imag))
    else:
        fmt = _Formatters(_Formatter(shown))
    return _tensor_str_with_formatter(a, indent, summarize, fmt)


def _add_suffixes(tensor_str: str, suffixes: list[str], indent: int) -> str:
    parts = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t: Tensor) -> str:
    from engine._tensor import Tensor

    plain = type(t) is Tensor or type(t).__name__ == "Parameter"
    prefix = "tensor(" if plain else f"{type(t).__name__}("
    indent = len(prefix)
    a = t._data
    d = t.dtype
    default_float = _dtype.get_default_dtype()
    suffixes = []
    if a.size == 0:
        # An empty tensor shows its shape unless it is (0,), and any non-default dtype (int64 too).
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        if d is not default_float:
            suffixes.append(f"dtype={d!r}")
        body = "[]"
    else:
        if d not in (default_float, default_float.to_complex(), _dtype.int64, _dtype.bool_):
            suffixes.append(f"dtype={d!r}")
        body = _tensor_str(a, indent)
    try:
        grad_fn = t.grad_fn
        # A hand-written node prints its class name, not its namespace ("CopySlices").
        grad_fn_name = None if grad_fn is None else grad_fn.name().rsplit("::", 1)[-1]
    except RuntimeError:
        # Reading grad_fn rebuilds a view's history, which fails for some views modified in place.
        grad_fn_name = "Invalid"
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
