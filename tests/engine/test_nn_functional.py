"""``engine.nn.functional`` (and the modules that wrap one function) against torch 2.8.0: same
values, same backward graph (node names down to the leaves), same saved tensors where they
matter, same gradients, same errors. Dropout's mask cannot match torch's RNG, so its tests compare
structure and the gradient given the mask.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
import engine.nn.functional as F  # noqa: N812
from tests.engine._nn_helpers import (
    TOL,
    _close,
    _compare,
    _compare_grads,
    _error,
    _graph,
    _leaf,
    _np,
    _rand,
    _run,
    _twin,
)

pytestmark = pytest.mark.oracle


# --- linear -------------------------------------------------------------------------------------

LINEAR_CASES = {
    "2d": lambda lib, x: x,
    "3d": lambda lib, x: x.reshape(2, 3, 3),
    "4d": lambda lib, x: x.reshape(2, 1, 3, 3),
    "1d": lambda lib, x: x.select(0, 0).select(0, 0),
    "2d transposed": lambda lib, x: x.reshape(3, 6).t(),
    "3d non-contiguous": lambda lib, x: x.reshape(2, 3, 3).transpose(1, 2),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("case", list(LINEAR_CASES))
def test_linear_functional(case: str, bias: bool, torch_oracle: ModuleType) -> None:
    shape = {"1d": (1, 1, 3), "2d transposed": (18,)}.get(case, (6, 3))
    arrays = [_rand(*shape), _rand(4, 3, seed=1), _rand(4, seed=2) if bias else None]

    def fn(lib: ModuleType, x: Any, w: Any, b: Any) -> Any:
        return lib.nn.functional.linear(LINEAR_CASES[case](lib, x), w, b)

    _compare(fn, arrays, torch_oracle)


def test_linear_2d_is_addmm_over_t(torch_oracle: ModuleType) -> None:
    ours = _run(
        engine, lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), [_rand(2, 3), _rand(4, 3), _rand(4)]
    )
    assert ours["graph"] == (
        "AddmmBackward0",
        (
            ("engine::autograd::AccumulateGrad", ()),
            ("engine::autograd::AccumulateGrad", ()),
            ("TBackward0", (("engine::autograd::AccumulateGrad", ()),)),
        ),
    )


def test_linear_module(torch_oracle: ModuleType) -> None:
    ours, theirs = _twin(lambda lib: lib.nn.Linear(3, 4), torch_oracle)
    x = _rand(5, 3)
    out, tout = ours(_leaf(engine, x)), theirs(_leaf(torch_oracle, x))
    _close(out, tout)
    assert _graph(out) == _graph(tout)
    out.sum().backward()
    tout.sum().backward()
    _compare_grads(ours, theirs)


def test_linear_init_bounds_and_dtype(torch_oracle: ModuleType) -> None:
    engine.manual_seed(0)
    m = engine.nn.Linear(50, 20)
    bound = 1 / math.sqrt(50)
    for p in (m.weight, m.bias):
        a = _np(p)
        assert a.dtype == np.float32
        assert np.abs(a).max() <= bound
        assert np.abs(a).max() > 0.8 * bound  # spread over the whole interval
        assert p.is_leaf and p.requires_grad and p.grad_fn is None
    assert m.bias is not None
    assert engine.nn.Linear(3, 2, bias=False).bias is None
    assert engine.nn.Linear(3, 2, dtype=engine.float64).weight.dtype is engine.float64
    t = torch_oracle.nn.Linear(3, 2, bias=False)
    assert [n for n, _ in engine.nn.Linear(3, 2, bias=False).named_parameters()] == [
        n for n, _ in t.named_parameters()
    ]


# --- activations --------------------------------------------------------------------------------

ACTIVATIONS: dict[str, Callable[..., Any]] = {
    "relu": lambda lib, x: lib.nn.functional.relu(x),
    "relu inplace": lambda lib, x: lib.nn.functional.relu(x * 1, inplace=True),
    "gelu": lambda lib, x: lib.nn.functional.gelu(x),
    "gelu tanh": lambda lib, x: lib.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda lib, x: lib.nn.functional.silu(x),
    "silu inplace": lambda lib, x: lib.nn.functional.silu(x * 1, inplace=True),
    "tanh": lambda lib, x: lib.nn.functional.tanh(x),
    "sigmoid": lambda lib, x: lib.nn.functional.sigmoid(x),
    "softmax": lambda lib, x: lib.nn.functional.softmax(x, dim=1),
    "log_softmax": lambda lib, x: lib.nn.functional.log_softmax(x, dim=0),
    "ReLU": lambda lib, x: lib.nn.ReLU()(x),
    "GELU": lambda lib, x: lib.nn.GELU(approximate="tanh")(x),
    "Tanh": lambda lib, x: lib.nn.Tanh()(x),
    "Sigmoid": lambda lib, x: lib.nn.Sigmoid()(x),
    "SiLU": lambda lib, x: lib.nn.SiLU()(x),
    "Softmax": lambda lib, x: lib.nn.Softmax(dim=-1)(x),
    "LogSoftmax": lambda lib, x: lib.nn.LogSoftmax(dim=1)(x),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation(name: str, torch_oracle: ModuleType) -> None:
    _compare(ACTIVATIONS[name], [_rand(3, 4)], torch_oracle)


def test_softmax_implicit_dim_warns_like_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[str, np.ndarray]:
        with pytest.warns(UserWarning) as record:
            out = lib.nn.functional.softmax(lib.from_numpy(_rand(2, 3)))
        return str(record[0].message), _np(out)

    (msg, out), (tmsg, tout) = run(engine), run(torch_oracle)
    assert msg == tmsg
    np.testing.assert_allclose(out, tout, **TOL)


# --- layer norm ---------------------------------------------------------------------------------

LAYER_NORM_CASES: dict[str, tuple[Callable[..., Any], list[Any]]] = {
    "affine": (
        lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (4,), w, b),
        [_rand(3, 4), _rand(4, seed=1), _rand(4, seed=2)],
    ),
    "plain": (lambda lib, x: lib.nn.functional.layer_norm(x, [4], eps=1e-3), [_rand(2, 3, 4)]),
    "2d shape": (
        lambda lib, x, w, b: lib.nn.functional.layer_norm(x, (3, 4), w, b),
        [_rand(2, 3, 4), _rand(3, 4, seed=1), _rand(3, 4, seed=2)],
    ),
    "weight only": (
        lambda lib, x, w: lib.nn.functional.layer_norm(x, (4,), w),
        [_rand(5, 4), _rand(4, seed=1)],
    ),
}


@pytest.mark.parametrize("case", list(LAYER_NORM_CASES))
def test_layer_norm_functional(case: str, torch_oracle: ModuleType) -> None:
    fn, arrays = LAYER_NORM_CASES[case]
    ours = _compare(fn, arrays, torch_oracle)
    assert ours["graph"][0] == "NativeLayerNormBackward0"
    node = fn(engine, *[_leaf(engine, a) for a in arrays]).grad_fn
    tnode = fn(torch_oracle, *[_leaf(torch_oracle, a) for a in arrays]).grad_fn
    for name in ("result1", "result2", "input"):
        _close(getattr(node, f"_saved_{name}"), getattr(tnode, f"_saved_{name}"), name)
    assert list(node._saved_normalized_shape) == list(tnode._saved_normalized_shape)


def test_layer_norm_module_and_double_backward(torch_oracle: ModuleType) -> None:
    ours, theirs = _twin(lambda lib: lib.nn.LayerNorm(4), torch_oracle)
    with engine.no_grad():
        ours.weight.mul_(engine.from_numpy(_rand(4, seed=3)))
    theirs.load_state_dict({k: torch_oracle.from_numpy(_np(v)) for k, v in ours.state_dict().items()})
    x = _rand(3, 4)

    def second_order(lib: ModuleType, m: Any) -> list[Any]:
        xi = _leaf(lib, x)
        (g,) = lib.autograd.grad(m(xi).pow(3).sum(), xi, create_graph=True)
        return list(lib.autograd.grad(g.pow(2).sum(), [xi, m.weight, m.bias]))

    for a, b in zip(second_order(engine, ours), second_order(torch_oracle, theirs), strict=True):
        _close(a, b)
    assert repr(ours) == repr(theirs) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True)"
    np.testing.assert_array_equal(_np(engine.nn.LayerNorm(3).weight), np.ones(3, np.float32))
    assert engine.nn.LayerNorm(3, elementwise_affine=False).weight is None
    assert engine.nn.LayerNorm(3, bias=False).bias is None


# --- embedding ----------------------------------------------------------------------------------

EMBEDDING_CASES: dict[str, Callable[..., Any]] = {
    "plain": lambda lib, w: lib.nn.functional.embedding(lib.tensor([[0, 2, 5], [5, 5, 1]]), w),
    "padding_idx": lambda lib, w: lib.nn.functional.embedding(lib.tensor([0, 2, 2, 3]), w, padding_idx=2),
    "negative padding_idx": lambda lib, w: lib.nn.functional.embedding(
        lib.tensor([0, 5, 2]), w, padding_idx=-1
    ),
    "scale_grad_by_freq": lambda lib, w: lib.nn.functional.embedding(
        lib.tensor([4, 4, 1, 4]), w, scale_grad_by_freq=True
    ),
    "0-d index": lambda lib, w: lib.nn.functional.embedding(lib.tensor(3), w),
}


@pytest.mark.parametrize("case", list(EMBEDDING_CASES))
def test_embedding_functional(case: str, torch_oracle: ModuleType) -> None:
    ours = _compare(EMBEDDING_CASES[case], [_rand(6, 3)], torch_oracle)
    assert ours["graph"][0] == "EmbeddingBackward0"


def test_embedding_max_norm_renormalizes_in_place(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[np.ndarray, np.ndarray, int]:
        w = lib.from_numpy(_rand(5, 3, low=-3, high=3))
        out = lib.nn.functional.embedding(lib.tensor([1, 3, 3]), w, max_norm=1.5)
        return _np(out), _np(w), w._version

    for a, b in zip(run(engine), run(torch_oracle), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-7)


def test_embedding_module(torch_oracle: ModuleType) -> None:
    engine.manual_seed(0)
    ours, theirs = _twin(lambda lib: lib.nn.Embedding(10, 4, padding_idx=1), torch_oracle)
    np.testing.assert_array_equal(_np(engine.nn.Embedding(10, 4, padding_idx=1).weight)[1], np.zeros(4))
    idx = [[1, 2, 3], [9, 1, 0]]
    out, tout = ours(engine.tensor(idx)), theirs(torch_oracle.tensor(idx))
    _close(out, tout)
    assert _graph(out) == _graph(tout)
    out.pow(2).sum().backward()
    tout.pow(2).sum().backward()
    _compare_grads(ours, theirs)
    assert repr(ours) == repr(theirs) == "Embedding(10, 4, padding_idx=1)"
    pre = engine.nn.Embedding.from_pretrained(engine.ones(3, 2))
    tpre = torch_oracle.nn.Embedding.from_pretrained(torch_oracle.ones(3, 2))
    assert (pre.weight.requires_grad, repr(pre)) == (tpre.weight.requires_grad, repr(tpre))


# --- losses -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target_grad", [False, True])
def test_mse_loss(reduction: str, target_grad: bool, torch_oracle: ModuleType) -> None:
    def fn(lib: ModuleType, x: Any, y: Any) -> Any:
        return lib.nn.functional.mse_loss(x, y.detach().requires_grad_(target_grad), reduction=reduction)

    ours = _compare(fn, [_rand(3, 4), _rand(3, 4, seed=1)], torch_oracle)
    assert ours["graph"][0] == "MseLossBackward0"


def test_mse_loss_broadcast_warns_like_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[str, Any, Any]:
        x = _leaf(lib, _rand(4))
        with pytest.warns(UserWarning) as record:
            out = lib.nn.functional.mse_loss(x, lib.from_numpy(_rand(3, 4, seed=1)))
        out.backward()
        return str(record[0].message).replace("torch.", "engine."), _graph(out), _np(x.grad)

    ours, theirs = run(engine), run(torch_oracle)
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], **TOL)


def test_mse_loss_module_and_weight(torch_oracle: ModuleType) -> None:
    _compare(
        lambda lib, x, y: lib.nn.MSELoss(reduction="sum")(x, y),
        [_rand(2, 3), _rand(2, 3, seed=1)],
        torch_oracle,
    )
    _compare(
        lambda lib, x, y, w: lib.nn.functional.mse_loss(x, y, weight=w.detach()),
        [_rand(2, 3), _rand(2, 3, seed=1), _rand(2, 3, seed=2, low=0.1)],
        torch_oracle,
    )


CE_CASES: dict[str, tuple[tuple[int, ...], Any, dict[str, Any]]] = {
    "mean": ((4, 5), [0, 1, 4, 2], {}),
    "sum": ((4, 5), [0, 1, 4, 2], {"reduction": "sum"}),
    "none": ((4, 5), [0, 1, 4, 2], {"reduction": "none"}),
    "ignore_index": ((4, 5), [0, 1, 4, 1], {"ignore_index": 1}),
    "weight": ((4, 5), [0, 1, 4, 2], {"weight": [0.5, 1.0, 2.0, 1.5, 0.2]}),
    "weight none ignore": (
        (4, 5),
        [0, 1, 4, 2],
        {"weight": [0.5, 1.0, 2.0, 1.5, 0.2], "reduction": "none", "ignore_index": 4},
    ),
    "label_smoothing": ((4, 5), [0, 1, 4, 2], {"label_smoothing": 0.1}),
    "label_smoothing ignore": ((4, 5), [0, 3, 4, 3], {"label_smoothing": 0.2, "ignore_index": 3}),
    "label_smoothing sum": ((4, 5), [0, 1, 4, 2], {"label_smoothing": 0.3, "reduction": "sum"}),
    "label_smoothing none": ((4, 5), [0, 1, 4, 2], {"label_smoothing": 0.3, "reduction": "none"}),
    "label_smoothing weight": (
        (4, 5),
        [0, 1, 4, 1],
        {"label_smoothing": 0.1, "weight": [0.5, 1.0, 2.0, 1.5, 0.2], "ignore_index": 4},
    ),
    "1d input": ((5,), 3, {}),
    "3d input": ((2, 5, 3), [[0, 1, 4], [2, 2, 0]], {}),
    "3d input none": ((2, 5, 3), [[0, 1, 4], [2, 2, 0]], {"reduction": "none"}),
    "4d input": ((2, 5, 2, 2), [[[0, 1], [4, 3]], [[2, 2], [0, 1]]], {}),
    "5d input sum": ((1, 3, 2, 1, 2), [[[[0, 1]], [[2, 2]]]], {"reduction": "sum", "ignore_index": 2}),
    "prob targets": ((4, 5), "probs", {}),
    "prob targets smoothing sum": ((4, 5), "probs", {"label_smoothing": 0.2, "reduction": "sum"}),
    "prob targets weight none": ((4, 5), "probs", {"weight": [0.5, 1.0, 2.0, 1.5, 0.2], "reduction": "none"}),
}


@pytest.mark.parametrize("case", list(CE_CASES))
def test_cross_entropy(case: str, torch_oracle: ModuleType) -> None:
    shape, target, kwargs = CE_CASES[case]

    def fn(lib: ModuleType, x: Any) -> Any:
        kw = dict(kwargs)
        if "weight" in kw:
            kw["weight"] = lib.tensor(kw["weight"], dtype=lib.float64)
        if isinstance(target, str):
            t = lib.from_numpy(_rand(*shape, seed=5, low=0, high=1)).softmax(1)
        else:
            t = lib.tensor(target)
        return lib.nn.functional.cross_entropy(x, t, **kw)

    _compare(fn, [_rand(*shape)], torch_oracle)


def test_cross_entropy_is_log_softmax_then_nll(torch_oracle: ModuleType) -> None:
    out = engine.nn.functional.cross_entropy(_leaf(engine, _rand(2, 3)), engine.tensor([1, 0]))
    assert _graph(out) == (
        "NllLossBackward0",
        (("LogSoftmaxBackward0", (("engine::autograd::AccumulateGrad", ()),)),),
    )
    node = out.grad_fn
    assert (node._saved_reduction, node._saved_ignore_index, node._saved_weight) == (1, -100, None)
    assert float(node._saved_total_weight) == 2.0


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_and_module(reduction: str, torch_oracle: ModuleType) -> None:
    def fn(lib: ModuleType, x: Any) -> Any:
        w = lib.tensor([1.0, 2.0, 0.5], dtype=lib.float64)
        return lib.nn.NLLLoss(weight=w, reduction=reduction, ignore_index=0)(
            x.log_softmax(1), lib.tensor([1, 0, 2, 2])
        )

    _compare(fn, [_rand(4, 3)], torch_oracle)


def test_cross_entropy_module(torch_oracle: ModuleType) -> None:
    def fn(lib: ModuleType, x: Any) -> Any:
        loss = lib.nn.CrossEntropyLoss(
            weight=lib.tensor([1.0, 2.0, 0.5], dtype=lib.float64), label_smoothing=0.05
        )
        return loss(x, lib.tensor([1, 0, 2, 2]))

    _compare(fn, [_rand(4, 3)], torch_oracle)
    ours = engine.nn.CrossEntropyLoss(weight=engine.ones(3))
    theirs = torch_oracle.nn.CrossEntropyLoss(weight=torch_oracle.ones(3))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert list(engine.nn.CrossEntropyLoss().state_dict()) == list(
        torch_oracle.nn.CrossEntropyLoss().state_dict()
    )
    assert repr(ours) == repr(theirs)


ERRORS: dict[str, Callable[[ModuleType], Any]] = {
    "target out of bounds": lambda lib: lib.nn.functional.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 5])),
    "batch mismatch": lambda lib: lib.nn.functional.cross_entropy(lib.zeros(2, 3), lib.tensor([0, 1, 2])),
    "0-d input": lambda lib: lib.nn.functional.nll_loss(lib.zeros(()), lib.tensor(0)),
    "bad reduction": lambda lib: lib.nn.functional.mse_loss(lib.zeros(3), lib.zeros(3), reduction="foo"),
    "label_smoothing": lambda lib: lib.nn.functional.cross_entropy(
        lib.zeros(2, 3), lib.tensor([0, 1]), label_smoothing=1.5
    ),
    "prob target int": lambda lib: lib.nn.functional.cross_entropy(
        lib.zeros(2, 3), lib.zeros(2, 3, dtype=lib.int64)
    ),
    "prob target ignore_index": lambda lib: lib.nn.functional.cross_entropy(
        lib.zeros(2, 3), lib.zeros(2, 3), ignore_index=1
    ),
    "weight requires grad": lambda lib: lib.nn.functional.nll_loss(
        lib.zeros(2, 3), lib.tensor([0, 1]), weight=lib.ones(3, requires_grad=True)
    ),
    "layer_norm shape": lambda lib: lib.nn.functional.layer_norm(lib.zeros(2, 3), (4,)),
    "layer_norm weight": lambda lib: lib.nn.functional.layer_norm(lib.zeros(2, 3), (3,), lib.ones(4)),
    "embedding index": lambda lib: lib.nn.functional.embedding(lib.tensor([7]), lib.zeros(3, 2)),
    "embedding float index": lambda lib: lib.nn.functional.embedding(lib.zeros(2), lib.zeros(3, 2)),
    "dropout p": lambda lib: lib.nn.functional.dropout(lib.zeros(3), 1.5),
    "Dropout p": lambda lib: lib.nn.Dropout(-0.1),
    "mse weight size": lambda lib: lib.nn.functional.mse_loss(lib.zeros(3), lib.zeros(3), weight=lib.ones(2)),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_torch(case: str, torch_oracle: ModuleType) -> None:
    assert _error(lambda: ERRORS[case](engine)) == _error(lambda: ERRORS[case](torch_oracle))


# --- dropout ------------------------------------------------------------------------------------


def _dropout_run(lib: ModuleType, inplace: bool = False, p: float = 0.4) -> dict[str, Any]:
    x = _leaf(lib, _rand(20, 30))
    y = lib.nn.functional.dropout(x * 1 if inplace else x, p, training=True, inplace=inplace)
    mask = y.grad_fn._saved_other
    cot = lib.from_numpy(_rand(20, 30, seed=1))
    y.backward(cot)
    return {
        "graph": _graph(y),
        "mask": _np(mask),
        "y": _np(y),
        "x": _np(x),
        "grad": _np(x.grad),
        "cot": _np(cot),
    }


@pytest.mark.parametrize("inplace", [False, True])
def test_dropout_training_structure_and_gradient(inplace: bool, torch_oracle: ModuleType) -> None:
    engine.manual_seed(0)
    ours, theirs = _dropout_run(engine, inplace), _dropout_run(torch_oracle, inplace)
    assert ours["graph"] == theirs["graph"]
    assert ours["graph"][0] == "MulBackward0"
    scale = 1 / (1 - 0.4)
    for r in (ours, theirs):
        np.testing.assert_allclose(np.unique(r["mask"]), [0.0, scale], **TOL)
        np.testing.assert_allclose(r["y"], r["x"] * r["mask"], **TOL)
        np.testing.assert_allclose(r["grad"], r["cot"] * r["mask"], **TOL)
        kept = (r["mask"] != 0).mean()
        assert 0.5 < kept < 0.7  # 600 draws of keep probability 0.6


def test_dropout_uses_the_engine_generator() -> None:
    x = engine.ones(50)
    engine.manual_seed(123)
    a = F.dropout(x, 0.5)
    b = F.dropout(x, 0.5)
    engine.manual_seed(123)
    np.testing.assert_array_equal(_np(F.dropout(x, 0.5)), _np(a))
    assert not np.array_equal(_np(a), _np(b))
    with engine.random.fork_rng():
        c = F.dropout(x, 0.5)
    np.testing.assert_array_equal(_np(F.dropout(x, 0.5)), _np(c))


def test_dropout_identity_and_p1_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[Any, ...]:
        x = _leaf(lib, _rand(3, 4))
        model = lib.nn.Dropout(0.3)
        model.eval()
        evaluated = model(x)
        zero = lib.nn.functional.dropout(x, 1.0)
        return (
            evaluated is x,
            lib.nn.functional.dropout(x, 0.0) is x,
            lib.nn.functional.dropout(x, 0.5, training=False) is x,
            _graph(zero),
            float(np.abs(_np(zero)).sum()),
            repr(model),
            model.training,
        )

    assert run(engine) == run(torch_oracle)
