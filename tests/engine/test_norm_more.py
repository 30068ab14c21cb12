"""Batch, instance and group normalization against torch 2.8.0: modules (reprs, parameters and
buffers, running statistics, train/eval), ``F.batch_norm``/``instance_norm``/``group_norm``
values, gradients, double backward, backward graphs, the saved tensors of
``NativeBatchNormBackward0`` and the errors. The op-table entries themselves are also checked
by test_ops.py.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from tests.engine._nn_helpers import _close, _compare, _graph, _np, _rand, _twin

pytestmark = pytest.mark.oracle


def _state(m: Any) -> dict[str, Any]:
    return {
        k: (tuple(v.shape), str(v.dtype).split(".")[-1], _np(v).tolist()) for k, v in m.state_dict().items()
    }


@pytest.mark.parametrize(
    "make",
    [
        lambda nn: nn.BatchNorm1d(3),
        lambda nn: nn.BatchNorm1d(3, affine=False),
        lambda nn: nn.BatchNorm2d(4, eps=1e-3, momentum=None),
        lambda nn: nn.BatchNorm2d(2, track_running_stats=False),
        lambda nn: nn.InstanceNorm2d(3),
        lambda nn: nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        lambda nn: nn.InstanceNorm1d(2),
        lambda nn: nn.GroupNorm(2, 4),
        lambda nn: nn.GroupNorm(1, 3, affine=False, eps=1e-3),
    ],
)
def test_modules_repr_and_init(make: Any, torch_oracle: ModuleType) -> None:
    ours, theirs = make(engine.nn), make(torch_oracle.nn)
    assert repr(ours) == repr(theirs)
    assert _state(ours) == _state(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize(
    ("cls", "shape"), [("BatchNorm1d", (5, 3)), ("BatchNorm1d", (4, 3, 6)), ("BatchNorm2d", (2, 3, 4, 5))]
)
def test_batch_norm_training_steps_and_eval(
    cls: str, shape: tuple[int, ...], momentum: float | None, torch_oracle: ModuleType
) -> None:
    ours, theirs = _twin(lambda lib: getattr(lib.nn, cls)(3, momentum=momentum), torch_oracle)
    with engine.no_grad():
        ours.weight.copy_(engine.from_numpy(_rand(3, seed=7)))
    theirs.load_state_dict({k: torch_oracle.from_numpy(_np(v)) for k, v in ours.state_dict().items()})
    for step in range(3):
        x = _rand(*shape, seed=step)
        out = _compare(lambda lib, t: (ours if lib is engine else theirs)(t), [x], torch_oracle)
        assert out["graph"][0] == "NativeBatchNormBackward0"
    _close_states(ours, theirs)
    ours.eval()
    theirs.eval()
    _compare(lambda lib, t: (ours if lib is engine else theirs)(t), [_rand(*shape, seed=9)], torch_oracle)
    _close_states(ours, theirs)


def _close_states(ours: Any, theirs: Any) -> bool:
    mine, other = ours.state_dict(), theirs.state_dict()
    assert list(mine) == list(other)
    for k in mine:
        _close(mine[k], other[k], k)
        assert str(mine[k].dtype).split(".")[-1] == str(other[k].dtype).split(".")[-1]
    return True


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_saved_tensors(training: bool, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        bn = lib.nn.BatchNorm1d(3).double()
        bn.train(training)
        x = lib.from_numpy(_rand(4, 3)).requires_grad_()
        return bn(x).grad_fn

    ours, theirs = run(engine), run(torch_oracle)
    assert ours.name() == theirs.name() == "NativeBatchNormBackward0"
    names = sorted(a for a in dir(theirs) if a.startswith("_saved_"))
    assert len(names) == 8
    for a in names:
        mine, other = getattr(ours, a), getattr(theirs, a)
        if hasattr(other, "shape"):
            assert tuple(mine.shape) == tuple(other.shape), a
            _close(mine, other, a)
        else:
            assert mine == other, a


def test_hooks_on_batch_norm_eval(torch_oracle: ModuleType) -> None:
    """PyTorch's test_hooks_cpp: a hook on the output of an eval-mode, non-affine batch norm."""
    for lib in (engine, torch_oracle):
        bn = lib.nn.BatchNorm1d(5, affine=False).double()
        bn.eval()
        calls = []
        x = lib.ones(5, 5, dtype=lib.double, requires_grad=True)
        z = bn(x)
        z.register_hook(lambda g, calls=calls: calls.append(1) or g * 2)
        z.sum().backward()
        assert calls == [1]
        np.testing.assert_allclose(_np(x.grad), np.full((5, 5), 2 / np.sqrt(1 + 1e-5)))


@pytest.mark.parametrize(
    ("fn", "arrays"),
    [
        (
            lambda lib, x, w, b: lib.nn.functional.batch_norm(x, None, None, w, b, True),
            [_rand(4, 3, 2), _rand(3, seed=1), _rand(3, seed=2)],
        ),
        (lambda lib, x: lib.nn.functional.instance_norm(x), [_rand(2, 3, 4, 4)]),
        (
            lambda lib, x, w, b: lib.nn.functional.instance_norm(x, weight=w, bias=b),
            [_rand(2, 3, 5), _rand(3, seed=1), _rand(3, seed=2)],
        ),
        (
            lambda lib, x, w, b: lib.nn.functional.group_norm(x, 2, w, b),
            [_rand(2, 4, 3, 3), _rand(4, seed=1), _rand(4, seed=2)],
        ),
        (lambda lib, x: lib.nn.functional.group_norm(x, 3), [_rand(2, 3, 5)]),
    ],
    ids=["batch_norm", "instance_norm", "instance_norm_affine", "group_norm", "group_norm_no_affine"],
)
def test_functional_values_grads_graphs(fn: Any, arrays: list[Any], torch_oracle: ModuleType) -> None:
    _compare(fn, arrays, torch_oracle)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x, w: lib.nn.functional.batch_norm(x, None, None, w, None, True),
        lambda lib, x, w: lib.nn.functional.batch_norm(
            x, lib.zeros(3, dtype=lib.double), lib.ones(3, dtype=lib.double) * 2, w, None, False
        ),
        lambda lib, x, w: lib.nn.functional.instance_norm(x, weight=w),
        lambda lib, x, w: lib.nn.functional.group_norm(x, 3, w),
    ],
    ids=["batch_norm_train", "batch_norm_eval", "instance_norm", "group_norm"],
)
def test_double_backward(fn: Any, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[np.ndarray]:
        x = lib.from_numpy(_rand(4, 3, 2)).requires_grad_()
        w = lib.from_numpy(_rand(3, seed=3)).requires_grad_()
        out = fn(lib, x, w)
        cot = lib.from_numpy(_rand(*out.shape, seed=5))
        gx, gw = lib.autograd.grad(out, [x, w], cot, create_graph=True)
        total = (gx * gx).sum() + (gw * lib.from_numpy(_rand(3, seed=6))).sum()
        return [_np(g) for g in lib.autograd.grad(total, [x, w])]

    for a, b in zip(run(engine), run(torch_oracle), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_instance_norm_relu_double_backward(torch_oracle: ModuleType) -> None:
    """PyTorch's test_inplace_on_view_backward, with an out-of-place ReLU: instance norm's output
    is a view, and the double backward goes through it. (With ReLU(True) the engine fails: the
    in-place op on a view saves its output re-linked to the op's own node, where torch keeps the
    view's grad_fn, SavedVariable's is_inplace_on_view; see the report of this change.)"""

    def run(lib: ModuleType) -> tuple[Any, ...]:
        net = lib.nn.Sequential(lib.nn.InstanceNorm2d(2), lib.nn.ReLU())
        x = lib.tensor([[[[1.0, 3.0]]]], requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = net(x)
        (g,) = lib.autograd.grad(y.pow(2), [x], grad_outputs=x.new_ones(x.shape), create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), [x])
        return _graph(y), _np(g), _np(gg), [str(w.message) for w in caught]

    ours, theirs = run(engine), run(torch_oracle)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], atol=1e-6)
    np.testing.assert_allclose(ours[2], theirs[2], atol=1e-6)
    assert ours[3] == theirs[3]


def test_instance_norm_running_stats_and_unbatched(torch_oracle: ModuleType) -> None:
    ours, theirs = _twin(
        lambda lib: lib.nn.InstanceNorm2d(3, affine=True, track_running_stats=True), torch_oracle
    )
    for seed in range(2):
        _compare(
            lambda lib, t: (ours if lib is engine else theirs)(t),
            [_rand(2, 3, 3, 3, seed=seed)],
            torch_oracle,
        )
    _close_states(ours, theirs)
    _compare(lambda lib, t: (ours if lib is engine else theirs)(t), [_rand(3, 3, 3, seed=4)], torch_oracle)
    ours.eval()
    theirs.eval()
    _compare(lambda lib, t: (ours if lib is engine else theirs)(t), [_rand(2, 3, 3, 3, seed=5)], torch_oracle)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.nn.BatchNorm1d(3)(lib.ones(1, 3)),
        lambda lib: lib.nn.BatchNorm1d(3)(lib.ones(2, 3, 4, 5)),
        lambda lib: lib.nn.BatchNorm2d(3)(lib.ones(2, 3)),
        lambda lib: lib.nn.InstanceNorm2d(3)(lib.ones(2, 3)),
        lambda lib: lib.nn.InstanceNorm2d(3, affine=True)(lib.ones(2, 4, 3, 3)),
        lambda lib: lib.nn.functional.instance_norm(lib.ones(2, 3, 1, 1)),
        lambda lib: lib.nn.GroupNorm(2, 3),
        lambda lib: lib.nn.functional.group_norm(lib.ones(2, 3, 4), 2),
        lambda lib: lib.nn.functional.group_norm(lib.ones(3), 1),
        lambda lib: lib.nn.functional.batch_norm(lib.ones(2, 3), None, None, training=False),
    ],
)
def test_errors(call: Any, torch_oracle: ModuleType) -> None:
    def error(lib: ModuleType) -> tuple[str, str]:
        with pytest.raises(Exception) as info:  # noqa: PT011 - the type itself is compared
            call(lib)
        return type(info.value).__name__, str(info.value)

    assert error(engine) == error(torch_oracle)
