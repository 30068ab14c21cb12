"""Run one op-table sample in the engine and in torch from the same NumPy arrays.

Used by ``test_ops.py``: everything an op entry promises (values, grad_fn name, gradients,
second-order gradients, saved tensors and their pack/unpack order) is measured here the same way
on both sides, so that the test only compares two ``Run`` records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

import engine
from engine.ops._dispatch import CompositeOp, Op
from engine.ops._samples import Lit, SampleInput, T


def make_arrays(sample: SampleInput, seed: int) -> list[Any]:
    """One NumPy array (or plain value) per argument, with tensors drawn from their specs."""
    rng = np.random.default_rng(seed)

    def draw(spec: Any) -> Any:
        if isinstance(spec, T):
            if spec.kind == "index":
                return rng.integers(0, int(spec.high), spec.shape).astype(np.int64)
            if spec.kind == "mask":
                return rng.random(spec.shape) < 0.5
            if spec.kind == "complex":
                re = rng.uniform(spec.low, spec.high, spec.shape)
                im = rng.uniform(spec.low, spec.high, spec.shape)
                return (re + 1j * im).astype(spec.dtype)
            return rng.uniform(spec.low, spec.high, spec.shape).astype(spec.dtype)
        if isinstance(spec, Lit):
            return np.asarray(spec.value, dtype=spec.dtype)
        if isinstance(spec, (list, tuple)) and any(isinstance(s, (T, Lit)) for s in spec):
            return type(spec)(draw(s) for s in spec)
        return spec

    return [draw(a) for a in sample.args] + [("kw", k, draw(v)) for k, v in sample.kwargs.items()]


@dataclass
class Run:
    outputs: list[np.ndarray] = field(default_factory=list)
    grad_fn: str | None = None
    requires_grad: list[bool] = field(default_factory=list)
    grads: list[np.ndarray | None] = field(default_factory=list)
    gradgrads: list[np.ndarray | None] | None = None
    packs: list[np.ndarray] = field(default_factory=list)
    unpacks: list[int] = field(default_factory=list)
    error: str | None = None


def _is_spec_tensor(spec: Any) -> bool:
    return isinstance(spec, (T, Lit))


def build(
    lib: ModuleType, sample: SampleInput, arrays: list[Any]
) -> tuple[list[Any], dict[str, Any], list[Any]]:
    """Turn arrays into ``lib`` tensors. Returns args, kwargs and the tensors that require grad."""
    leaves: list[Any] = []
    specs = list(sample.args) + list(sample.kwargs.values())

    def conv(spec: Any, value: Any) -> Any:
        if isinstance(spec, (list, tuple)) and any(_is_spec_tensor(s) for s in spec):
            return [conv(s, v) for s, v in zip(spec, value, strict=True)]
        if not _is_spec_tensor(spec):
            return _convert_value(lib, value)
        t = lib.from_numpy(np.array(value, copy=True))
        if spec.grad and (t.dtype.is_floating_point or t.dtype.is_complex):
            t.requires_grad_(True)
            leaves.append(t)
        return t

    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for spec, value in zip(specs, arrays, strict=True):
        if isinstance(value, tuple) and len(value) == 3 and value[0] == "kw":
            kwargs[value[1]] = conv(spec, value[2])
        else:
            args.append(conv(spec, value))
    return args, kwargs, leaves


def _convert_value(lib: ModuleType, value: Any) -> Any:
    if isinstance(value, engine.dtype):
        return getattr(lib, value.name)
    return value


def torch_callable(torch: ModuleType, entry: Op | CompositeOp) -> Callable[..., Any]:
    """The torch function an entry mirrors: ``torch.ops.aten.<name>`` for a primitive op (its
    overload when named, e.g. ``pow.Tensor_Scalar``), ``torch.<name>`` or the Tensor method for a
    composite."""
    if isinstance(entry, Op):
        base, _, overload = entry.name.partition(".")
        packet = getattr(torch.ops.aten, base)
        return getattr(packet, overload) if overload else packet
    fn = getattr(torch, entry.name, None)
    if fn is not None:
        return fn  # type: ignore[no-any-return]
    return lambda *args, **kwargs: getattr(args[0], entry.name)(*args[1:], **kwargs)


def _flatten_outputs(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [o for o in out if hasattr(o, "requires_grad")]
    return [out]


def _draw(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Cotangent values in [-1, 1): float64 for real dtypes (cast to ``dtype``), and for complex
    ones an imaginary part too (drawn after the real part, so real samples see the same draws)."""
    values = rng.uniform(-1, 1, shape)
    if np.issubdtype(dtype, np.complexfloating):
        return np.asarray(values + 1j * rng.uniform(-1, 1, shape)).astype(dtype)
    return values.astype(dtype)


def run(lib: ModuleType, fn: Callable[..., Any], sample: SampleInput, arrays: list[Any], seed: int) -> Run:
    """Call ``fn`` under saved-tensor hooks, then backward (and double backward) with fixed
    cotangents drawn from ``seed``."""
    rec = Run()
    args, kwargs, leaves = build(lib, sample, arrays)
    packed: list[Any] = []

    def pack(t: Any) -> Any:
        packed.append(t)
        return (len(packed) - 1, t)

    def unpack(p: Any) -> Any:
        rec.unpacks.append(p[0])
        return p[1]

    try:
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = fn(*args, **kwargs)
    except Exception as e:  # the error itself is compared
        rec.error = f"{type(e).__name__}: {e}"
        return rec
    outs = _flatten_outputs(out)
    rec.outputs = [np.array(o.detach().numpy(), copy=True) for o in outs]
    rec.packs = [np.array(t.detach().numpy(), copy=True) for t in packed]
    rec.requires_grad = [bool(o.requires_grad) for o in outs]
    first = outs[0]
    rec.grad_fn = first.grad_fn.name() if first.grad_fn is not None else None
    diff_outs = [o for o in outs if o.requires_grad]
    if not leaves or not diff_outs:
        return rec
    rng = np.random.default_rng(seed + 1)
    cots = [lib.from_numpy(_draw(rng, tuple(o.shape), o.detach().numpy().dtype)) for o in diff_outs]
    grads = lib.autograd.grad(diff_outs, leaves, cots, create_graph=True, allow_unused=True)
    # clone() before numpy(): torch may return a ZeroTensor (the gradient of sgn for a real input),
    # whose numpy() reads unallocated memory.
    rec.grads = [None if g is None else np.array(g.detach().clone().numpy(), copy=True) for g in grads]
    if sample.gradgrad:
        live = [(g, leaf) for g, leaf in zip(grads, leaves, strict=True) if g is not None and g.requires_grad]
        if live:
            try:
                w = [
                    lib.from_numpy(
                        _draw(rng, tuple(g.shape), np.complex128 if g.is_complex() else np.float64)
                    )
                    for g, _ in live
                ]
                # A complex gradient enters a real scalar through Re(g * w) (w complex too, so
                # that both parts of g matter): backward needs a real root.
                total = sum(
                    ((g * wi).real if g.is_complex() else g * wi).sum()
                    for (g, _), wi in zip(live, w, strict=True)
                )
                gg = lib.autograd.grad(total, leaves, allow_unused=True)
                rec.gradgrads = [
                    None if g is None else np.array(g.detach().clone().numpy(), copy=True) for g in gg
                ]
            except RuntimeError as e:
                rec.gradgrads = None
                rec.error = f"double backward: {type(e).__name__}: {e}"
    return rec
