"""The workloads of ``make bench`` (bench/run_all.py), written once for any torch-like library.

Each ``build_*`` takes ``lib`` (``engine`` or ``torch``) and returns a call doing one forward and
backward; each ``numpy_*`` the same arithmetic in raw NumPy, without a graph (the floor). This
module imports neither library: the worker passes the one it runs, so the same text runs in the
project's venv (torch 2.8.0), in torch 2.13.0's venv and against a build of the engine without
emission.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

WIDTH, DEPTH, BATCH = 512, 8, 64  # the MLP: 8 Linear(512, 512), batch 64, float32
CHAIN_OPS, CHAIN_SIZE = 1000, 16  # the chain: 1,000 elementwise ops on 16-element tensors
SEQ, BSZ, HID, HEADS = 32, 4, 64, 4  # the transformer block (pre-LN attention + MLP, no dropout)

Step = Callable[[], object]


def _zero(params: list[Any]) -> None:
    for p in params:
        p.grad = None


def build_mlp(lib: Any, checkpointed: bool = False) -> Step:
    """8 x (Linear(512, 512), ReLU), batch 64; each layer under ``checkpoint(...,
    use_reentrant=False)`` when ``checkpointed``."""
    from importlib import import_module

    checkpoint = import_module(f"{lib.__name__}.utils.checkpoint").checkpoint
    lib.manual_seed(0)
    layers = [lib.nn.Sequential(lib.nn.Linear(WIDTH, WIDTH), lib.nn.ReLU()) for _ in range(DEPTH)]
    params = [p for layer in layers for p in layer.parameters()]
    x = lib.randn(BATCH, WIDTH)

    def step() -> None:
        _zero(params)
        h = x
        for layer in layers:
            h = checkpoint(layer, h, use_reentrant=False) if checkpointed else layer(h)
        h.sum().backward()

    return step


def build_chain(lib: Any) -> Step:
    """1,000 elementwise ops (sin, * 1.01, + 0.1, tanh, in turn) on a 16-element tensor."""
    x = lib.linspace(-1.0, 1.0, CHAIN_SIZE).requires_grad_()

    def step() -> None:
        x.grad = None
        h = x
        for _ in range(CHAIN_OPS // 4):
            h = (h.sin() * 1.01 + 0.1).tanh()
        h.sum().backward()

    return step


def build_transformer(lib: Any) -> Step:
    """One pre-LN transformer block (attention with 4 heads, then a GELU MLP), forward and
    backward; sequence 32, batch 4, hidden 64."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    ln1, qkv, proj = nn.LayerNorm(HID), nn.Linear(HID, 3 * HID), nn.Linear(HID, HID)
    ln2, fc1, fc2 = nn.LayerNorm(HID), nn.Linear(HID, 4 * HID), nn.Linear(4 * HID, HID)
    params = [p for m in (ln1, qkv, proj, ln2, fc1, fc2) for p in m.parameters()]
    x = lib.randn(SEQ, BSZ, HID, requires_grad=True)
    scale = 1 / math.sqrt(HID // HEADS)

    def step() -> None:
        _zero([*params, x])
        q, k, v = qkv(ln1(x)).split(HID, dim=-1)
        q, k, v = (t.reshape(SEQ, BSZ * HEADS, HID // HEADS).transpose(0, 1) for t in (q, k, v))
        attn = F.softmax(q @ k.transpose(1, 2) * scale, dim=-1) @ v
        h = x + proj(attn.transpose(0, 1).reshape(SEQ, BSZ, HID))
        out = h + fc2(F.gelu(fc1(ln2(h))))
        out.sum().backward()

    return step


# --- the floor: the same arithmetic in NumPy ------------------------------------------------------


def numpy_mlp(checkpointed: bool = False) -> Step:
    """The MLP's forward and backward by hand (``checkpointed``: each layer's forward twice)."""
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) * 0.04 for _ in range(DEPTH)]
    bs = [np.zeros(WIDTH, np.float32) for _ in range(DEPTH)]
    x = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)

    def step() -> object:
        hs = [x]
        for w, b in zip(ws, bs, strict=True):
            hs.append(np.maximum(hs[-1] @ w.T + b, 0))
        g = np.ones_like(hs[-1])
        grads = []
        for i in reversed(range(DEPTH)):
            if checkpointed:  # the recomputation of layer i from its input
                hs[i + 1] = np.maximum(hs[i] @ ws[i].T + bs[i], 0)
            g = g * (hs[i + 1] > 0)
            grads.append((g.T @ hs[i], g.sum(0)))
            g = g @ ws[i]
        return grads

    return step


def numpy_chain() -> Step:
    """The chain's forward (keeping what each op's backward needs) and backward by hand."""
    x = np.linspace(-1.0, 1.0, CHAIN_SIZE, dtype=np.float32)

    def step() -> object:
        saved = []
        h = x
        for _ in range(CHAIN_OPS // 4):
            s = np.sin(h)
            t = np.tanh(s * np.float32(1.01) + np.float32(0.1))
            saved.append((h, t))
            h = t
        g = np.ones_like(h)
        for a, t in reversed(saved):
            g = g * (1 - t * t)  # tanh
            g = g * np.float32(1.01)
            g = g * np.cos(a)  # sin
        return g

    return step


WORKLOADS: dict[str, str] = {
    "mlp": "MLP fwd+bwd (8 Linear(512,512), batch 64)",
    "chain": "1,000-op elementwise chain fwd+bwd (16 elements)",
    "ckpt_mlp": "MLP, each layer under checkpoint (non-reentrant)",
    "transformer": "transformer block fwd+bwd (s=32 b=4 h=64, 4 heads)",
}


def build(lib: Any, name: str) -> Step:
    if name == "mlp":
        return build_mlp(lib)
    if name == "ckpt_mlp":
        return build_mlp(lib, checkpointed=True)
    if name == "chain":
        return build_chain(lib)
    if name == "transformer":
        return build_transformer(lib)
    raise KeyError(name)


def build_numpy(name: str) -> Step:
    if name == "mlp":
        return numpy_mlp()
    if name == "ckpt_mlp":
        return numpy_mlp(checkpointed=True)
    if name == "chain":
        return numpy_chain()
    raise KeyError(name)
