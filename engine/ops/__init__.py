"""The op table. ``engine.ops.<name>`` is an op object (``engine.ops.mm.name == "mm"``), the
engine's counterpart of ``torch.ops.aten.mm.default``, which ``engine.ops.aten.mm.default`` also
names (Note [Aten overload names] in ``_aten.py``); ``OPS`` maps every name to its entry.

Adding an op = one ``@op`` entry in the module of its family (kernel, formulas, samples); its
method, its ``engine.<name>`` function, its saved tensors and its tests all follow from it.
"""

from __future__ import annotations

from typing import Any, Protocol

from engine.ops import (  # noqa: F401  (each registers its ops)
    activation,
    attention,
    bucketing,
    complex,
    conv,
    copies,
    einsum,
    extrema,
    indexing,
    inplace_views,
    join,
    linalg,
    loss,
    nn_ops,
    norm,
    normalization,
    pointwise,
    pooling,
    power,
    reduction,
    sampling,
    shape,
    softmax,
    tensor_indexing,
)
from engine.ops._aten import aten
from engine.ops._dispatch import OPS, CompositeOp, DispatchMode, Op, composite, op

__all__ = ["OPS", "CompositeOp", "DispatchMode", "Op", "aten", "composite", "op"]

# engine.ops.sin, engine.ops.pow_Tensor_Scalar ("pow.Tensor_Scalar"), engine.ops.sum (a router).
for _name, _entry in OPS.items():
    globals()[_name.replace(".", "_")] = _entry


class _OpLike(Protocol):
    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def __getattr__(name: str) -> _OpLike:
    # Only reached for names that are not ops (the ops are set above); the return type tells type
    # checkers that engine.ops.<name> is an op.
    raise AttributeError(f"module 'engine.ops' has no attribute '{name}'")
