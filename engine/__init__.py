"""Autograd Lens engine: PyTorch's eager autograd re-done in readable Python over NumPy.

``import engine as torch`` runs PyTorch snippets that use the features listed in
``docs/engine.md``; names, signatures, semantics and error messages follow PyTorch 2.8.
"""

from __future__ import annotations

import math as _math
from typing import Any

from engine import _C, _dtype, autograd, ops, random  # noqa: E402, I001  (ops need Tensor and autograd)
from engine._dtype import (
    bool_,
    complex64,
    complex128,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from engine._factories import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from engine._legacy_tensors import (
    BoolTensor,
    ByteTensor,
    DoubleTensor,
    FloatTensor,
    IntTensor,
    LongTensor,
)
from engine._tensor import Size, Tensor, device
from engine.autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled
from engine.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from engine.ops._methods import install as _install_ops  # noqa: E402
from engine.random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

bool = bool_  # noqa: A001 - engine.bool, like torch.bool
float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
cfloat = complex64
cdouble = complex128

# torch/__init__.py's constants (Python floats, from math).
inf = _math.inf
nan = _math.nan
pi = _math.pi
e = _math.e

_install_ops(globals())

from engine import _VF, amp, backends, cuda, nn, optim, utils  # noqa: E402
from engine._warnings import is_warn_always_enabled, set_warn_always  # noqa: E402
from engine.amp.autocast_mode import autocast, is_autocast_enabled  # noqa: E402


def is_tensor(obj: Any) -> builtins_bool:
    return isinstance(obj, Tensor)


def is_floating_point(t: Tensor) -> builtins_bool:
    return t.dtype.is_floating_point


def numel(t: Tensor) -> builtins_int:
    return t.numel()


def result_type(*operands: Any) -> dtype:
    return _dtype.result_type(operands)


import builtins as _builtins  # noqa: E402

builtins_bool = _builtins.bool
builtins_int = _builtins.int
