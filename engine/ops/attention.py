"""Scaled dot-product attention as PyTorch 2.8 runs it on the CPU.

``scaled_dot_product_attention`` is a composite that picks a backend the way ATen's
``_fused_sdp_choice_cpp`` does (``use_flash_attention_cpp``'s checks, in order):

* **Flash** (``_scaled_dot_product_flash_attention_for_cpu``): 4-d query/key/value with the same
  batch size, head count and head dim, no dropout, an ``attn_mask`` that does not require grad
  and is 2-d or 4-d broadcastable to ``(B, H, L, S)``, last-dim stride 1. One node,
  ``ScaledDotProductFlashAttentionForCpuBackward0``, saving query, key, value, the (float)
  attn_mask, the output and the row ``logsumexp``. PyTorch has no formula for its backward op, so
  the gradient of a gradient raises "derivative for ... is not implemented"; so does the engine.
* **Math** (``_scaled_dot_product_attention_math``) otherwise: ``q * sqrt(scale)``,
  ``matmul(q, k.transpose(-2, -1) * sqrt(scale))``, ``add_`` of the mask, ``_safe_softmax``,
  dropout, ``matmul`` with v. Its graph is built from ordinary ops (``MulBackward1``,
  ``UnsafeViewBackward0``, ``SafeSoftmaxBackward0``...), so it is differentiable any number of
  times.

A boolean ``attn_mask`` becomes an additive one first (``-inf`` where False), as in ATen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine._tensor import Tensor, _wrap_dim
from engine.ops._dispatch import composite, op
from engine.ops._samples import SampleInput, T
from engine.ops.nn_ops import dropout, mul_Scalar
from engine.ops.softmax import _softmax_backward_data

Array = np.ndarray

# caffe2::TypeMeta names, which ATen's sdpa messages print.
_TYPE_META_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "c10::Half",
    "int64": "long int",
    "int32": "int",
    "uint8": "unsigned char",
    "bool": "bool",
    "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


# --- _safe_softmax ------------------------------------------------------------------------------


@op(
    derivatives={
        "self": lambda grad, result, dim, self_scalar_type: _softmax_backward_data(
            grad, result, dim, self_scalar_type
        )
    },
    method=False,
    function=False,
    samples=lambda: [
        SampleInput((T.of(2, 3), -1)),
        SampleInput((T.of(2, 3, 4), 1), note="dim 1"),
    ],
)
def _safe_softmax(self: Tensor, dim: int, dtype: Any = None) -> Array:
    """Softmax whose fully masked rows (all ``-inf``) are 0 instead of NaN."""
    x = self.astype(dtype._np) if dtype is not None else self
    d = _wrap_dim(dim, x.ndim)
    masked_rows = np.all(x == -np.inf, axis=d, keepdims=True)
    shifted = x - np.where(masked_rows, 0, np.max(x, axis=d, keepdims=True))
    with np.errstate(invalid="ignore"):
        e = np.exp(shifted)
        out = e / np.sum(e, axis=d, keepdims=True)
    return np.where(masked_rows, 0, out).astype(x.dtype, copy=False)


# --- flash attention (CPU) ----------------------------------------------------------------------


def _scores(query: Array, key: Array, is_causal: bool, attn_mask: Array | None, scale: float | None) -> Array:
    """Scaled scores ``q k^T * scale + mask`` in float64, causal positions at ``-inf``."""
    sc = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    s = np.matmul(query.astype(np.float64), np.swapaxes(key, -2, -1).astype(np.float64)) * sc
    if attn_mask is not None:
        s = s + attn_mask.astype(np.float64)
    if is_causal:
        n_q, n_k = s.shape[-2:]
        s = np.where(np.tril(np.ones((n_q, n_k), bool)), s, -np.inf)
    return s


def _flash_samples() -> list[SampleInput]:
    q, k, v = T.of(2, 3, 4, 5), T.of(2, 3, 6, 5), T.of(2, 3, 6, 5)
    # No double backward in PyTorch (see test_nn_more.py's test_sdpa_flash_double_backward_raises).
    return [
        SampleInput((q, k, v), gradgrad=False),
        SampleInput((q, k, v, 0.0, True), note="causal", gradgrad=False),
        SampleInput(
            (q, k, v), {"attn_mask": T((4, 6), grad=False), "scale": 0.3}, note="mask scale", gradgrad=False
        ),
    ]


@op(
    derivatives={
        name: (
            lambda i: (
                lambda grad, query, key, value, output, logsumexp, dropout_p, is_causal, attn_mask, scale: (
                    _scaled_dot_product_flash_attention_for_cpu_backward(
                        grad,
                        query,
                        key,
                        value,
                        output,
                        logsumexp,
                        dropout_p,
                        is_causal,
                        attn_mask=attn_mask,
                        scale=scale,
                    )[i]
                )
            )
        )(i)
        for i, name in enumerate(("query", "key", "value"))
    },
    outputs=("output", "logsumexp"),
    differentiable_outputs=(True, False),
    method=False,
    function=False,
    samples=_flash_samples,
)
def _scaled_dot_product_flash_attention_for_cpu(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    attn_mask: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Array, Array]:
    s = _scores(query, key, is_causal, attn_mask, scale)
    m = np.max(s, axis=-1, keepdims=True)
    empty = m == -np.inf  # a fully masked row: output 0, logsumexp -inf
    e = np.exp(s - np.where(empty, 0, m))
    total = e.sum(-1, keepdims=True)
    p = np.where(empty, 0, e / np.where(empty, 1, total))
    out = np.matmul(p, value.astype(np.float64)).astype(query.dtype)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(total))[..., 0].astype(query.dtype)
    # ATen's kernel writes the output as (B, L, H, E) and returns it transposed to (B, H, L, E);
    # the engine's results are C-contiguous (so ``out.transpose(1, 2).view(...)`` needs a
    # ``contiguous()`` here, not in PyTorch). Values are the same.
    return out, lse


def _not_implemented() -> Tensor:
    raise RuntimeError(
        "derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is not implemented"
    )


@op(
    derivatives={
        "grad_out": _not_implemented,
        "query": _not_implemented,
        "key": _not_implemented,
        "value": _not_implemented,
    },
    node="engine::autograd::NotImplemented",
    outputs=("grad_query", "grad_key", "grad_value"),
    method=False,
    function=False,
)
def _scaled_dot_product_flash_attention_for_cpu_backward(
    grad_out: Tensor,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    out: Tensor,
    logsumexp: Tensor,
    dropout_p: float,
    is_causal: bool,
    *,
    attn_mask: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Array, Array, Array]:
    sc = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    s = _scores(query, key, is_causal, attn_mask, scale)
    lse = logsumexp.astype(np.float64)[..., None]
    with np.errstate(invalid="ignore"):
        p = np.where(lse == -np.inf, 0, np.exp(s - lse))
    go = grad_out.astype(np.float64)
    grad_value = np.matmul(np.swapaxes(p, -2, -1), go)
    dp = np.matmul(go, np.swapaxes(value, -2, -1).astype(np.float64))
    d = np.sum(go * out.astype(np.float64), axis=-1, keepdims=True)
    ds = p * (dp - d)
    grad_query = np.matmul(ds, key.astype(np.float64)) * sc
    grad_key = np.matmul(np.swapaxes(ds, -2, -1), query.astype(np.float64)) * sc
    dt = query.dtype
    return grad_query.astype(dt), grad_key.astype(dt), grad_value.astype(dt)


# --- the composites -----------------------------------------------------------------------------


def _convert_boolean_attn_mask(attn_mask: Tensor | None, dtype: Any) -> Tensor | None:
    if attn_mask is None or attn_mask.dtype.name != "bool":
        return attn_mask
    additive = np.where(attn_mask._data, 0.0, -np.inf).astype(dtype._np)
    return Tensor._make(additive)


@composite(method=False, function=False)
def _scaled_dot_product_attention_math(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    dropout_mask: Tensor | None = None,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> tuple[Tensor, Tensor]:
    """ATen's math backend, op for op (its graph is the one PyTorch records)."""
    negative = scale is not None and scale < 0
    softmax_scale = abs(scale) if scale is not None else 1.0 / math.sqrt(query.size(-1))
    scaling_factor = math.sqrt(softmax_scale)
    q = mul_Scalar(query, 0.0 - scaling_factor if negative else scaling_factor)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError(
                "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
            )
        n_q, n_k = q.size(-2), key.size(-2)
        attn_mask = Tensor._make(
            np.where(np.tril(np.ones((n_q, n_k), bool)), 0.0, -np.inf).astype(q.dtype._np)
        )
    if enable_gqa and (key.size(-3) != query.size(-3) or value.size(-3) != query.size(-3)):
        raise NotImplementedError("engine: scaled_dot_product_attention(enable_gqa=True) with grouped heads")
    attn: Tensor = q.matmul(mul_Scalar(key.transpose(-2, -1), scaling_factor))
    if attn_mask is not None:
        attn.add_(attn_mask)
    attn = _safe_softmax(attn, -1)
    if dropout_p > 0.0:
        if dropout_mask is not None:
            attn.masked_fill_(dropout_mask.logical_not(), 0.0)
            return attn.matmul(mul_Scalar(value, 1.0 / (1.0 - dropout_p))), attn
        attn = dropout(attn, dropout_p, True)
    return attn.matmul(value), attn


def _use_flash(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float) -> bool:
    """ATen's ``use_flash_attention_cpp`` for dense CPU tensors."""
    if dropout_p > 0.0:
        return False
    if not (query.dim() == key.dim() == value.dim() == 4):
        return False
    if not (query.size(0) == key.size(0) == value.size(0) and query.size(1) == key.size(1) == value.size(1)):
        return False
    if attn_mask is not None:
        if attn_mask.requires_grad:
            return False
        shape: Sequence[int] = tuple(attn_mask.shape)
        if shape[-2] not in (query.size(2), 1) or shape[-1] not in (key.size(2), 1):
            return False
        if len(shape) == 4:
            if shape[0] not in (1, query.size(0)) or shape[1] not in (1, query.size(1)):
                return False
        elif len(shape) != 2:
            return False
    if not (query.size(-1) == key.size(-1) == value.size(-1)):
        return False
    if query.size(-2) == 0 or key.size(-2) == 0:
        return False
    if any(t.stride()[-1] != 1 for t in (query, key, value)):
        return False
    return query.dtype.name in ("float32", "float64", "float16")


@composite(method=False, function=False)
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``F.scaled_dot_product_attention``: the flash CPU kernel when ATen would pick it, the math
    backend otherwise (see the module docstring)."""
    names = [_TYPE_META_NAMES.get(t.dtype.name, t.dtype.name) for t in (query, key, value)]
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(
            f"Expected query, key, and value to have the same dtype, but got query.dtype: {names[0]} "
            f"key.dtype: {names[1]} and value.dtype: {names[2]} instead."
        )
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
            f"{query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} instead."
        )
    if attn_mask is not None and attn_mask.dtype.name not in ("bool", "float32", query.dtype.name):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
            f"{_TYPE_META_NAMES.get(attn_mask.dtype.name, attn_mask.dtype.name)} and  query.dtype: "
            f"{names[0]} instead."
        )
    flash = _use_flash(query, key, value, attn_mask, dropout_p)
    mask = _convert_boolean_attn_mask(attn_mask, query.dtype)
    if flash:
        return _scaled_dot_product_flash_attention_for_cpu(  # type: ignore[no-any-return]
            query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale
        )[0]
    return _scaled_dot_product_attention_math(
        query, key, value, mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa
    )[0]
