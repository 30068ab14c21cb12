"""Convolution, pooling, binary cross entropy, scaled dot-product attention, more activations and
their modules against torch 2.8.0: values, gradients, backward graphs (node names down to the
leaves), errors and module reprs. The op-table entries themselves (saved tensors, double
backward) are checked by test_ops.py.
"""

from __future__ import annotations

import math
import warnings
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from tests.engine._nn_helpers import _close, _compare, _error, _graph, _leaf, _np, _rand, _run

pytestmark = pytest.mark.oracle

F32 = {"rtol": 1e-5, "atol": 1e-6}


# --- a small CNN, float32, torch's initial parameters -------------------------------------------


def _cnn(lib: ModuleType) -> Any:
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 4 * 4, 5),
    )


def test_small_cnn_matches_torch(torch_oracle: ModuleType) -> None:
    torch_oracle.manual_seed(0)
    theirs = _cnn(torch_oracle)
    ours = _cnn(engine)
    ours.load_state_dict({k: engine.from_numpy(_np(v)) for k, v in theirs.state_dict().items()})
    assert repr(ours).replace("engine", "torch") == repr(theirs)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    target = np.array([1, 4])
    out, tout = ours(engine.from_numpy(x.copy())), theirs(torch_oracle.from_numpy(x.copy()))
    assert out.dtype == engine.float32
    np.testing.assert_allclose(_np(out), _np(tout), **F32)
    assert _graph(out) == _graph(tout)
    loss = engine.nn.functional.cross_entropy(out, engine.from_numpy(target))
    tloss = torch_oracle.nn.functional.cross_entropy(tout, torch_oracle.from_numpy(target))
    np.testing.assert_allclose(_np(loss), _np(tloss), **F32)
    loss.backward()
    tloss.backward()
    mine = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        assert mine[name].grad is not None, name
        np.testing.assert_allclose(_np(mine[name].grad), _np(p.grad), err_msg=name, **F32)


def test_conv_modules_init_like_torch(torch_oracle: ModuleType) -> None:
    engine.manual_seed(0)
    for make in (lambda lib: lib.nn.Conv2d(6, 8, (3, 2), groups=2), lambda lib: lib.nn.Conv1d(4, 2, 5)):
        ours, theirs = make(engine), make(torch_oracle)
        assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == [
            (n, tuple(p.shape)) for n, p in theirs.named_parameters()
        ]
        fan_in = math.prod(ours.weight.shape[1:])
        bound = 1 / math.sqrt(fan_in)
        assert np.abs(_np(ours.weight)).max() <= bound
        assert np.abs(_np(ours.bias)).max() <= bound
        assert np.abs(_np(ours.weight)).max() > bound / 2  # spread over the range, not near 0


# --- conv1d / conv2d ----------------------------------------------------------------------------

CONV2D_CASES = {
    "plain": ((2, 3, 6, 5), (4, 3, 3, 3), {}),
    "stride": ((1, 2, 7, 6), (3, 2, 3, 2), {"stride": (2, 3)}),
    "padding int": ((1, 2, 5, 5), (2, 2, 3, 3), {"padding": 2}),
    "padding tuple": ((1, 2, 5, 4), (2, 2, 3, 1), {"padding": (1, 0), "stride": 2}),
    "same": ((2, 2, 5, 6), (3, 2, 3, 5), {"padding": "same"}),
    "same dilation": ((1, 2, 7, 7), (2, 2, 3, 3), {"padding": "same", "dilation": 2}),
    "valid": ((1, 3, 6, 6), (2, 3, 4, 2), {"padding": "valid"}),
    "dilation": ((1, 2, 8, 7), (2, 2, 3, 2), {"dilation": (2, 3), "padding": 1}),
    "groups": ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2}),
    "depthwise": ((1, 3, 5, 5), (3, 1, 3, 3), {"groups": 3, "padding": 1, "stride": 2}),
    "unbatched": ((3, 5, 5), (2, 3, 2, 2), {}),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("case", list(CONV2D_CASES))
def test_conv2d_grid(case: str, bias: bool, torch_oracle: ModuleType) -> None:
    x_shape, w_shape, kwargs = CONV2D_CASES[case]
    arrays = [_rand(*x_shape), _rand(*w_shape, seed=1), _rand(w_shape[0], seed=2) if bias else None]
    _compare(lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, **kwargs), arrays, torch_oracle)


CONV1D_CASES = {
    "plain": ((2, 3, 7), (4, 3, 3), {}),
    "stride padding": ((1, 2, 9), (3, 2, 3), {"stride": 2, "padding": 1}),
    "same dilation": ((1, 2, 8), (2, 2, 3), {"padding": "same", "dilation": 3}),
    "valid groups": ((2, 4, 6), (4, 2, 2), {"padding": "valid", "groups": 2}),
    "unbatched": ((3, 6), (2, 3, 3), {"dilation": 2}),
}


@pytest.mark.parametrize("case", list(CONV1D_CASES))
def test_conv1d_grid(case: str, torch_oracle: ModuleType) -> None:
    x_shape, w_shape, kwargs = CONV1D_CASES[case]
    arrays = [_rand(*x_shape), _rand(*w_shape, seed=1), _rand(w_shape[0], seed=2)]
    _compare(lambda lib, x, w, b: lib.nn.functional.conv1d(x, w, b, **kwargs), arrays, torch_oracle)


def test_conv_same_even_kernel_pads_first(torch_oracle: ModuleType) -> None:
    # An even kernel needs one more zero on the right: constant_pad_nd, then convolution.
    arrays = [_rand(1, 2, 5, 6), _rand(3, 2, 2, 4, seed=1), _rand(3, seed=2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ours = _compare(
            lambda lib, x, w, b: lib.nn.functional.conv2d(x, w, b, padding="same"), arrays, torch_oracle
        )
    assert ours["graph"][1][0][0] == "ConstantPadNdBackward0"


def test_conv_modules(torch_oracle: ModuleType) -> None:
    engine.manual_seed(1)
    for make, shape in (
        (lambda lib: lib.nn.Conv2d(2, 4, 3, stride=2, padding=1, bias=False), (2, 2, 6, 6)),
        (lambda lib: lib.nn.Conv1d(4, 2, 2, dilation=2, groups=2, padding="same"), (2, 4, 7)),
    ):
        ours = make(engine).double()
        theirs = make(torch_oracle).double()
        theirs.load_state_dict({k: torch_oracle.from_numpy(_np(v)) for k, v in ours.state_dict().items()})
        x = _rand(*shape)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out, tout = ours(_leaf(engine, x)), theirs(_leaf(torch_oracle, x))
        _close(out, tout)
        assert _graph(out) == _graph(tout)
        out.sum().backward()
        tout.sum().backward()
        for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
            _close(p.grad, tp.grad, n)


CONV_ERRORS = {
    "channels": lambda lib: lib.nn.functional.conv2d(lib.randn(2, 5, 5, 5), lib.randn(4, 3, 3, 3)),
    "rank": lambda lib: lib.nn.functional.conv2d(lib.randn(5, 5), lib.randn(4, 3, 3, 3)),
    "kernel too big": lambda lib: lib.nn.functional.conv2d(lib.randn(1, 3, 2, 2), lib.randn(4, 3, 3, 3)),
    "bias": lambda lib: lib.nn.functional.conv2d(lib.randn(1, 3, 5, 5), lib.randn(4, 3, 3, 3), lib.randn(5)),
    "groups": lambda lib: lib.nn.functional.conv2d(lib.randn(1, 4, 5, 5), lib.randn(3, 2, 3, 3), groups=2),
    "same strided": lambda lib: lib.nn.functional.conv2d(
        lib.randn(1, 3, 5, 5), lib.randn(4, 3, 3, 3), stride=2, padding="same"
    ),
    "padding string": lambda lib: lib.nn.functional.conv2d(
        lib.randn(1, 3, 5, 5), lib.randn(4, 3, 3, 3), padding="foo"
    ),
    "stride": lambda lib: lib.nn.functional.conv2d(lib.randn(1, 3, 5, 5), lib.randn(4, 3, 3, 3), stride=0),
    "negative padding": lambda lib: lib.nn.functional.conv2d(
        lib.randn(1, 3, 5, 5), lib.randn(4, 3, 3, 3), padding=-1
    ),
    "convolution rank": lambda lib: lib.convolution(
        lib.randn(1, 3, 5, 5), lib.randn(4, 3, 3), None, [1], [0], [1], False, [0], 1
    ),
    "module groups": lambda lib: lib.nn.Conv2d(3, 4, 3, groups=2),
    "module padding": lambda lib: lib.nn.Conv2d(3, 3, 3, padding="full"),
}


@pytest.mark.parametrize("case", list(CONV_ERRORS))
def test_conv_errors(case: str, torch_oracle: ModuleType) -> None:
    assert _error(lambda: CONV_ERRORS[case](engine)) == _error(lambda: CONV_ERRORS[case](torch_oracle))


# --- pooling ------------------------------------------------------------------------------------

POOL_CASES = {
    "max": lambda F, x: F.max_pool2d(x, 2),
    "max stride padding": lambda F, x: F.max_pool2d(x, 3, stride=2, padding=1),
    "max dilation": lambda F, x: F.max_pool2d(x, (2, 3), stride=1, dilation=(2, 1)),
    "max ceil_mode": lambda F, x: F.max_pool2d(x, 2, ceil_mode=True),
    "max ceil_mode padding": lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "max unbatched": lambda F, x: F.max_pool2d(x[0], 2),
    "max indices": lambda F, x: F.max_pool2d(x, 2, return_indices=True)[0],
    "avg": lambda F, x: F.avg_pool2d(x, 2),
    "avg padding": lambda F, x: F.avg_pool2d(x, 3, 2, 1),
    "avg exclude pad": lambda F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "avg ceil_mode": lambda F, x: F.avg_pool2d(x, 2, ceil_mode=True),
    "avg ceil_mode exclude pad": lambda F, x: F.avg_pool2d(x, 3, 2, 1, True, False),
    "avg divisor_override": lambda F, x: F.avg_pool2d(x, (2, 3), 1, divisor_override=4),
    "adaptive": lambda F, x: F.adaptive_avg_pool2d(x, (3, 2)),
    "adaptive int": lambda F, x: F.adaptive_avg_pool2d(x, 4),
    "adaptive none": lambda F, x: F.adaptive_avg_pool2d(x, (None, 3)),
    "adaptive 1": lambda F, x: F.adaptive_avg_pool2d(x, 1),
}


@pytest.mark.parametrize("case", list(POOL_CASES))
def test_pool_grid(case: str, torch_oracle: ModuleType) -> None:
    _compare(lambda lib, x: POOL_CASES[case](lib.nn.functional, x), [_rand(2, 3, 7, 5)], torch_oracle)


def test_max_pool_indices(torch_oracle: ModuleType) -> None:
    x = _rand(2, 3, 7, 6)
    x[0, 0, :2, :2] = 1.5  # a tie: the first maximum wins
    for kwargs in ({}, {"stride": 1, "padding": 1}, {"ceil_mode": True, "dilation": 2}):
        out, idx = engine.nn.functional.max_pool2d(_leaf(engine, x), 3, return_indices=True, **kwargs)
        tout, tidx = torch_oracle.nn.functional.max_pool2d(
            _leaf(torch_oracle, x), 3, return_indices=True, **kwargs
        )
        _close(out, tout)
        assert idx.dtype == engine.int64
        np.testing.assert_array_equal(_np(idx), _np(tidx))
        assert idx.requires_grad is False and out.grad_fn.name() == "MaxPool2DWithIndicesBackward0"


def test_pool_modules(torch_oracle: ModuleType) -> None:
    makes = [
        lambda nn: nn.MaxPool2d(3, 2, 1, ceil_mode=True),
        lambda nn: nn.MaxPool2d((2, 3), dilation=(1, 2), return_indices=True),
        lambda nn: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        lambda nn: nn.AvgPool2d(2, divisor_override=3),
        lambda nn: nn.AdaptiveAvgPool2d((2, None)),
        lambda nn: nn.AdaptiveAvgPool2d(1),
    ]
    x = _rand(2, 3, 7, 8)
    for make in makes:
        ours, theirs = make(engine.nn), make(torch_oracle.nn)
        assert repr(ours) == repr(theirs)
        out, tout = ours(_leaf(engine, x)), theirs(_leaf(torch_oracle, x))
        if isinstance(tout, tuple):
            np.testing.assert_array_equal(_np(out[1]), _np(tout[1]))
            out, tout = out[0], tout[0]
        _close(out, tout)
        assert _graph(out) == _graph(tout)


POOL_ERRORS = {
    "max pad": lambda lib: lib.nn.functional.max_pool2d(lib.randn(1, 1, 5, 5), 2, padding=2),
    "avg pad": lambda lib: lib.nn.functional.avg_pool2d(lib.randn(1, 1, 5, 5), 2, padding=2),
    "divisor": lambda lib: lib.nn.functional.avg_pool2d(lib.randn(1, 1, 5, 5), 2, divisor_override=0),
    "rank": lambda lib: lib.nn.functional.max_pool2d(lib.randn(5, 5), 2),
    "too small": lambda lib: lib.nn.functional.max_pool2d(lib.randn(1, 1, 1, 1), 2),
    "avg too small": lambda lib: lib.nn.functional.avg_pool2d(lib.randn(1, 1, 1, 3), 2),
}


@pytest.mark.parametrize("case", list(POOL_ERRORS))
def test_pool_errors(case: str, torch_oracle: ModuleType) -> None:
    assert _error(lambda: POOL_ERRORS[case](engine)) == _error(lambda: POOL_ERRORS[case](torch_oracle))


# --- binary cross entropy -----------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weight", [None, (4,), (3, 4), (3, 1)], ids=["no_weight", "w4", "w34", "w31"])
def test_bce_grid(reduction: str, weight: tuple[int, ...] | None, torch_oracle: ModuleType) -> None:
    p = _rand(3, 4, low=0.02, high=0.98)
    t = _rand(3, 4, seed=1, low=0.0, high=1.0)
    w = None if weight is None else _rand(*weight, seed=2, low=0.5, high=2.0)

    def fn(lib: ModuleType, p: Any, t: Any) -> Any:
        weight_t = None if w is None else lib.from_numpy(w.copy())
        return lib.nn.functional.binary_cross_entropy(p, t, weight_t, reduction=reduction)

    _compare(fn, [p, t], torch_oracle)


def test_bce_edges(torch_oracle: ModuleType) -> None:
    # Probabilities of exactly 0 and 1: the logs are clamped at -100.
    p = np.array([0.0, 1.0, 0.5, 1.0])
    t = np.array([1.0, 0.0, 1.0, 1.0])
    ours, theirs = (
        lib.nn.functional.binary_cross_entropy(
            lib.from_numpy(p.copy()), lib.from_numpy(t.copy()), reduction="none"
        )
        for lib in (engine, torch_oracle)
    )
    _close(ours, theirs)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "extra",
    [{}, {"weight": (4,)}, {"pos_weight": (4,)}, {"weight": (3, 4), "pos_weight": (1, 4)}],
    ids=["plain", "weight", "pos_weight", "both"],
)
def test_bce_with_logits_grid(
    reduction: str, extra: dict[str, tuple[int, ...]], torch_oracle: ModuleType
) -> None:
    x = _rand(3, 4, low=-5.0, high=5.0)
    t = _rand(3, 4, seed=1, low=0.0, high=1.0)
    tensors = {k: _rand(*shape, seed=3 + i, low=0.5, high=3.0) for i, (k, shape) in enumerate(extra.items())}

    def fn(lib: ModuleType, x: Any, t: Any) -> Any:
        kwargs = {k: lib.from_numpy(v.copy()) for k, v in tensors.items()}
        return lib.nn.functional.binary_cross_entropy_with_logits(x, t, reduction=reduction, **kwargs)

    _compare(fn, [x, t], torch_oracle)


def test_bce_modules(torch_oracle: ModuleType) -> None:
    w, pw = _rand(4, seed=5, low=0.5, high=2), _rand(4, seed=6, low=0.5, high=2)
    p, t = _rand(3, 4, low=0.1, high=0.9), _rand(3, 4, seed=1, low=0, high=1)
    for make in (
        lambda lib: lib.nn.BCELoss(),
        lambda lib: lib.nn.BCELoss(weight=lib.from_numpy(w.copy()), reduction="sum"),
        lambda lib: lib.nn.BCEWithLogitsLoss(pos_weight=lib.from_numpy(pw.copy())),
        lambda lib: lib.nn.BCEWithLogitsLoss(weight=lib.from_numpy(w.copy()), reduction="none"),
    ):
        ours, theirs = make(engine), make(torch_oracle)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        out = ours(_leaf(engine, p), engine.from_numpy(t.copy()))
        tout = theirs(_leaf(torch_oracle, p), torch_oracle.from_numpy(t.copy()))
        _close(out, tout)
        assert _graph(out) == _graph(tout)


BCE_ERRORS = {
    "input range": lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([1.5]), lib.tensor([1.0])),
    "target range": lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([0.5]), lib.tensor([1.5])),
    "size": lambda lib: lib.nn.functional.binary_cross_entropy(lib.rand(2, 3), lib.rand(3)),
    "weight size": lambda lib: lib.nn.functional.binary_cross_entropy(
        lib.rand(2, 3), lib.rand(2, 3), lib.rand(4)
    ),
    "logits size": lambda lib: lib.nn.functional.binary_cross_entropy_with_logits(
        lib.rand(2, 3), lib.rand(3)
    ),
    "reduction": lambda lib: lib.nn.functional.binary_cross_entropy(
        lib.rand(2), lib.rand(2), reduction="max"
    ),
}


@pytest.mark.parametrize("case", list(BCE_ERRORS))
def test_bce_errors(case: str, torch_oracle: ModuleType) -> None:
    assert _error(lambda: BCE_ERRORS[case](engine)) == _error(lambda: BCE_ERRORS[case](torch_oracle))


# --- scaled dot-product attention ---------------------------------------------------------------

SDPA_CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "flash": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), {}),
    "flash causal": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), {"is_causal": True}),
    "flash scale": ((1, 2, 4, 5), (1, 2, 4, 5), (1, 2, 4, 5), {"scale": 0.3}),
    "flash negative scale": ((1, 2, 4, 5), (1, 2, 4, 5), (1, 2, 4, 5), {"scale": -0.7}),
    "flash float mask": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), {"mask": ("float", (4, 6))}),
    "flash bool mask": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), {"mask": ("bool", (2, 1, 4, 6))}),
    "flash mask causal": (
        (1, 2, 4, 5),
        (1, 2, 6, 5),
        (1, 2, 6, 5),
        {"mask": ("float", (4, 6)), "is_causal": True},
    ),
    "math 3d": ((3, 4, 5), (3, 6, 5), (3, 6, 5), {}),
    "math 3d causal": ((3, 4, 5), (3, 6, 5), (3, 6, 5), {"is_causal": True, "scale": 0.5}),
    "math 3d mask": ((3, 4, 5), (3, 6, 5), (3, 6, 5), {"mask": ("bool", (4, 6))}),
    "math value dim": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7), {"mask": ("float", (4, 6))}),
    "math mask grad": ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), {"mask": ("grad", (4, 6))}),
    "math broadcast batch": ((1, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), {"scale": -0.5}),
}


def _layout_free(graph: Any) -> Any:
    """The graph with ``ReshapeAliasBackward0`` read as ``ViewBackward0``: PyTorch's ``k.transpose(-2,
    -1) * s`` keeps the transposed strides, so matmul's reshape of it is a ``_reshape_alias``; the
    engine's elementwise results are always C-contiguous, so its reshape is a ``view``."""
    if graph is None:
        return None
    name, children = graph
    name = "ViewBackward0" if name == "ReshapeAliasBackward0" else name
    return (name, tuple(_layout_free(c) for c in children))


def _mask(kind: str, shape: tuple[int, ...]) -> Any:
    if kind == "bool":
        m = np.random.default_rng(7).random(shape) < 0.7
        m[..., 0] = True  # no fully masked row
        return m
    return _rand(*shape, seed=7)


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa(case: str, torch_oracle: ModuleType) -> None:
    qs, ks, vs, kwargs = SDPA_CASES[case]
    kwargs = dict(kwargs)
    mask_spec = kwargs.pop("mask", None)
    arrays: list[Any] = [_rand(*qs), _rand(*ks, seed=1), _rand(*vs, seed=2)]
    if mask_spec is not None and mask_spec[0] == "grad":
        arrays.append(_mask("float", mask_spec[1]))
    mask = None if mask_spec is None or mask_spec[0] == "grad" else _mask(*mask_spec)

    def fn(lib: ModuleType, q: Any, k: Any, v: Any, *rest: Any) -> Any:
        m = rest[0] if rest else (None if mask is None else lib.from_numpy(mask.copy()))
        return lib.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, **kwargs)

    ours, theirs = _run(engine, fn, arrays), _run(torch_oracle, fn, arrays)
    _close(ours["out"], theirs["out"], "output")
    assert _layout_free(ours["graph"]) == _layout_free(theirs["graph"])
    for i, (a, b) in enumerate(zip(ours["grads"], theirs["grads"], strict=True)):
        _close(a, b, f"grad {i}")
    expected = (
        "ScaledDotProductFlashAttentionForCpuBackward0" if case.startswith("flash") else "UnsafeViewBackward0"
    )
    assert ours["graph"][0] == expected


def test_sdpa_float32_and_saved(torch_oracle: ModuleType) -> None:
    q, k, v = (_rand(2, 2, 3, 4, seed=s).astype(np.float32) for s in range(3))
    for lib_name in ("flash", "math"):
        results = []
        for lib in (engine, torch_oracle):
            ts = [lib.from_numpy(a.copy()).requires_grad_() for a in (q, k, v)]
            mask = lib.from_numpy(_rand(3, 3, seed=9).astype(np.float32)).requires_grad_(lib_name == "math")
            out = lib.nn.functional.scaled_dot_product_attention(*ts, attn_mask=mask)
            saved = []
            if lib_name == "flash":
                fn = out.grad_fn
                names = ("query", "key", "value", "attn_mask", "output", "logsumexp")
                saved = [_np(getattr(fn, f"_saved_{n}")) for n in names]
            out.sum().backward()
            results.append((out, [t.grad for t in ts], saved))
        (out, grads, saved), (tout, tgrads, tsaved) = results
        np.testing.assert_allclose(_np(out), _np(tout), **F32)
        for g, tg in zip(grads, tgrads, strict=True):
            np.testing.assert_allclose(_np(g), _np(tg), **F32)
        for s, ts in zip(saved, tsaved, strict=True):
            np.testing.assert_allclose(s, ts, **F32)


def test_sdpa_flash_double_backward_raises(torch_oracle: ModuleType) -> None:
    # PyTorch has no formula for the flash kernel's backward op: the gradient of the gradient
    # reaches a NotImplemented node.
    errors = []
    for lib in (engine, torch_oracle):
        q, k, v = (_leaf(lib, _rand(1, 2, 3, 4, seed=i)) for i in range(3))
        out = lib.nn.functional.scaled_dot_product_attention(q, k, v)
        (g,) = lib.autograd.grad(out.sum(), q, create_graph=True)
        assert g.grad_fn.name().endswith("::autograd::NotImplemented")
        errors.append(_error(lambda g=g: g.sum().backward()))
    assert errors[0] == errors[1]


def test_sdpa_dropout_graph(torch_oracle: ModuleType) -> None:
    # Dropout forces the math backend; the mask is random (engine and torch differ), the graph not.
    graphs = []
    for lib in (engine, torch_oracle):
        q = lib.randn(2, 2, 3, 4, requires_grad=True)
        out = lib.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        graphs.append(_layout_free(_graph(out)))
    assert graphs[0] == graphs[1]


SDPA_ERRORS = {
    "dtypes": lambda lib: lib.nn.functional.scaled_dot_product_attention(
        lib.randn(2, 3), lib.randn(2, 3, dtype=lib.float64), lib.randn(2, 3)
    ),
    "mask dtype": lambda lib: lib.nn.functional.scaled_dot_product_attention(
        lib.randn(2, 3), lib.randn(2, 3), lib.randn(2, 3), attn_mask=lib.ones(2, 2, dtype=lib.long)
    ),
    "1d": lambda lib: lib.nn.functional.scaled_dot_product_attention(
        lib.randn(3), lib.randn(3), lib.randn(3)
    ),
    "mask and causal": lambda lib: lib.nn.functional.scaled_dot_product_attention(
        lib.randn(2, 3), lib.randn(2, 3), lib.randn(2, 3), attn_mask=lib.randn(2, 2), is_causal=True
    ),
}


@pytest.mark.parametrize("case", list(SDPA_ERRORS))
def test_sdpa_errors(case: str, torch_oracle: ModuleType) -> None:
    assert _error(lambda: SDPA_ERRORS[case](engine)) == _error(lambda: SDPA_ERRORS[case](torch_oracle))


# --- activations --------------------------------------------------------------------------------

ACTIVATIONS = {
    "softplus": lambda F, x: F.softplus(x),
    "softplus beta threshold": lambda F, x: F.softplus(x, beta=2.0, threshold=1.5),
    "leaky_relu": lambda F, x: F.leaky_relu(x),
    "leaky_relu slope": lambda F, x: F.leaky_relu(x, 0.3),
    "leaky_relu inplace": lambda F, x: F.leaky_relu(x * 1, 0.2, inplace=True),
    "elu": lambda F, x: F.elu(x),
    "elu alpha": lambda F, x: F.elu(x, 0.5),
    "elu inplace": lambda F, x: F.elu(x * 1, 1.5, inplace=True),
    "mish": lambda F, x: F.mish(x),
    "mish inplace": lambda F, x: F.mish(x * 1, inplace=True),
    "silu": lambda F, x: F.silu(x),
    "gelu tanh": lambda F, x: F.gelu(x, approximate="tanh"),
}


@pytest.mark.parametrize("case", list(ACTIVATIONS))
def test_activations(case: str, torch_oracle: ModuleType) -> None:
    _compare(
        lambda lib, x: ACTIVATIONS[case](lib.nn.functional, x), [_rand(3, 4, low=-3, high=3)], torch_oracle
    )


def test_inplace_negative_slope_errors(torch_oracle: ModuleType) -> None:
    for call in (
        lambda lib, x: lib.nn.functional.leaky_relu(x * 1, -0.5, inplace=True),
        lambda lib, x: lib.nn.functional.elu(x * 1, -0.5, inplace=True),
    ):
        msgs = []
        for lib in (engine, torch_oracle):
            x = _leaf(lib, _rand(3))
            out = call(lib, x)
            msgs.append(_error(lambda out=out: out.sum().backward()))
        assert msgs[0] == msgs[1]


def test_activation_modules(torch_oracle: ModuleType) -> None:
    makes = [
        lambda nn: nn.Softplus(),
        lambda nn: nn.Softplus(beta=2, threshold=10),
        lambda nn: nn.SiLU(),
        lambda nn: nn.GELU(approximate="tanh"),
        lambda nn: nn.LeakyReLU(0.2, inplace=True),
        lambda nn: nn.ELU(alpha=0.5),
        lambda nn: nn.Mish(),
        lambda nn: nn.Flatten(0, 1),
        lambda nn: nn.Unflatten(1, (2, -1)),
    ]
    x = _rand(3, 4, 2)
    for make in makes:
        ours, theirs = make(engine.nn), make(torch_oracle.nn)
        assert repr(ours) == repr(theirs)
        out, tout = ours(_leaf(engine, x) * 1), theirs(_leaf(torch_oracle, x) * 1)
        _close(out, tout)
        assert _graph(out) == _graph(tout)


# --- one_hot ------------------------------------------------------------------------------------

ONE_HOT = {
    "default": lambda lib: lib.nn.functional.one_hot(lib.tensor([1, 0, 3])),
    "num_classes": lambda lib: lib.nn.functional.one_hot(lib.tensor([[1, 0], [2, 2]]), 5),
    "empty num_classes": lambda lib: lib.nn.functional.one_hot(lib.tensor([], dtype=lib.long), 3),
}

ONE_HOT_ERRORS = {
    "too small": lambda lib: lib.nn.functional.one_hot(lib.tensor([1, 2]), 2),
    "negative": lambda lib: lib.nn.functional.one_hot(lib.tensor([-1, 2])),
    "float": lambda lib: lib.nn.functional.one_hot(lib.tensor([1.0, 2.0])),
    "empty": lambda lib: lib.nn.functional.one_hot(lib.tensor([], dtype=lib.long)),
    "empty zero classes": lambda lib: lib.nn.functional.one_hot(lib.tensor([], dtype=lib.long), 0),
    "negative classes": lambda lib: lib.nn.functional.one_hot(lib.tensor([1]), -2),
}


@pytest.mark.parametrize("case", list(ONE_HOT))
def test_one_hot(case: str, torch_oracle: ModuleType) -> None:
    ours, theirs = ONE_HOT[case](engine), ONE_HOT[case](torch_oracle)
    assert ours.dtype == engine.int64 and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(_np(ours), _np(theirs))


@pytest.mark.parametrize("case", list(ONE_HOT_ERRORS))
def test_one_hot_errors(case: str, torch_oracle: ModuleType) -> None:
    assert _error(lambda: ONE_HOT_ERRORS[case](engine)) == _error(lambda: ONE_HOT_ERRORS[case](torch_oracle))


# --- module reprs -------------------------------------------------------------------------------

REPRS = [
    lambda nn: nn.Conv2d(3, 8, 3),
    lambda nn: nn.Conv2d(4, 8, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1), groups=2, bias=False),
    lambda nn: nn.Conv2d(3, 3, 2, padding="same"),
    lambda nn: nn.Conv1d(16, 33, 3, stride=2, padding="valid"),
    lambda nn: nn.Conv1d(2, 2, 1, padding_mode="reflect"),
    lambda nn: nn.MaxPool2d(3, stride=2),
    lambda nn: nn.MaxPool2d((3, 2), padding=1, dilation=2, return_indices=True, ceil_mode=True),
    lambda nn: nn.AvgPool2d(3),
    lambda nn: nn.AvgPool2d((3, 2), stride=(2, 1), padding=1, ceil_mode=True, count_include_pad=False),
    lambda nn: nn.AdaptiveAvgPool2d((5, 7)),
    lambda nn: nn.AdaptiveAvgPool2d(None),
    lambda nn: nn.Flatten(),
    lambda nn: nn.Unflatten(1, (2, 5, 5)),
    lambda nn: nn.BCELoss(),
    lambda nn: nn.BCEWithLogitsLoss(reduction="sum"),
    lambda nn: nn.Softplus(beta=0.5),
    lambda nn: nn.SiLU(inplace=True),
    lambda nn: nn.GELU(approximate="tanh"),
    lambda nn: nn.LeakyReLU(),
    lambda nn: nn.ELU(inplace=True),
    lambda nn: nn.Mish(),
]


@pytest.mark.parametrize("index", range(len(REPRS)))
def test_module_reprs(index: int, torch_oracle: ModuleType) -> None:
    assert repr(REPRS[index](engine.nn)) == repr(REPRS[index](torch_oracle.nn))
