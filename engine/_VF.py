"""``engine._VF``: the few ATen functions PyTorch reaches through ``torch._VF`` rather than the
``torch`` namespace (``torch/functional.py`` wraps them), mirrored as op-table entries."""

from __future__ import annotations

from engine.ops.extrema import unique_dim

__all__ = ["unique_dim"]
