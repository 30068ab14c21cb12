"""In-place ops and views against torch 2.8.0 (indexing is in ``test_indexing.py``).

Every test runs one scenario twice, with ``lib = engine`` and ``lib = torch``, from the same NumPy
arrays, and compares what the scenario records: the backward graph (grad_fn names and the shape of
``next_functions``, so ``CopySlices`` and regenerated ``AsStridedBackward0`` nodes show), version
counters, values, saved tensors (pack order), gradients, and error messages.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.engine._inplace_helpers import (
    _RNG_PERM,
    MASK,
    A,
    B,
    G,
    Record,
    Scenario,
    _error,
    _graph,
    _t,
    _value,
    run_both,
)

pytestmark = pytest.mark.oracle


def _other(lib: ModuleType, like: Any) -> Any:
    """The second operand of an in-place op on ``like``: a leaf of the same shape."""
    return _t(lib, B.reshape(-1)[: like.numel()].reshape(tuple(like.shape)))


def _perm_like(lib: ModuleType, t: Any) -> Any:
    """An int64 index of ``t``'s shape, a permutation along dim 0 (no duplicate writes)."""
    keys = _RNG_PERM.reshape(-1)[: t.numel()].reshape(tuple(t.shape))
    return lib.from_numpy(np.argsort(keys, axis=0).astype(np.int64))


def _mask_like(lib: ModuleType, t: Any) -> Any:
    return lib.from_numpy(MASK.reshape(-1)[: t.numel()].reshape(tuple(t.shape)).copy())


# --- the in-place ops of the API, each as (lib, self, other leaf) -> None ----------------------

INPLACE: dict[str, Callable[[ModuleType, Any, Any], Any]] = {
    "add_": lambda lib, t, o: t.add_(o),
    "add_alpha": lambda lib, t, o: t.add_(o, alpha=2.0),
    "add_scalar": lambda lib, t, o: t.add_(1.5),
    "sub_": lambda lib, t, o: t.sub_(o),
    "mul_": lambda lib, t, o: t.mul_(o),
    "mul_scalar": lambda lib, t, o: t.mul_(3.0),
    "div_": lambda lib, t, o: t.div_(o),
    "pow_scalar": lambda lib, t, o: t.pow_(2),
    "pow_tensor": lambda lib, t, o: t.pow_(o),
    "exp_": lambda lib, t, o: t.exp_(),
    "relu_": lambda lib, t, o: t.sub_(1.0).relu_(),
    "sigmoid_": lambda lib, t, o: t.sigmoid_(),
    "tanh_": lambda lib, t, o: t.tanh_(),
    "clamp_": lambda lib, t, o: t.clamp_(0.8, 1.5),
    "clamp_min": lambda lib, t, o: t.clamp_(min=1.0),
    "clamp_tensor": lambda lib, t, o: t.clamp_(o * 0.5, o * 1.5),
    "zero_": lambda lib, t, o: t.zero_(),
    "fill_": lambda lib, t, o: t.fill_(1.5),
    "fill_tensor": lambda lib, t, o: t.fill_(o.sum()),
    "copy_": lambda lib, t, o: t.copy_(o),
    "copy_broadcast": lambda lib, t, o: t.copy_(o[0]),
    "masked_fill_": lambda lib, t, o: t.masked_fill_(_mask_like(lib, t), 0.25),
    "masked_fill_tensor": lambda lib, t, o: t.masked_fill_(_mask_like(lib, t), o.sum()),
    "setitem_int": lambda lib, t, o: t.__setitem__(0, o[1]),
    "setitem_scalar": lambda lib, t, o: t.__setitem__((Ellipsis, 1), 2.0),
    "setitem_mask": lambda lib, t, o: t.__setitem__(t > 1.0, 0.0),
    "setitem_index": lambda lib, t, o: t.__setitem__(lib.tensor([1, 0]), o[:2]),
    "iadd": lambda lib, t, o: t.__iadd__(o),
    "imul": lambda lib, t, o: t.__imul__(o),
    # the in-place indexing ops beyond the API's list
    "index_put_": lambda lib, t, o: t.index_put_((lib.tensor([1, 0]),), o[:2]),
    "index_put_accumulate": lambda lib, t, o: t.index_put_((lib.tensor([1, 1]),), o[:2], accumulate=True),
    "scatter_": lambda lib, t, o: t.scatter_(0, _perm_like(lib, t), o),
    "scatter_value": lambda lib, t, o: t.scatter_(0, _perm_like(lib, t)[:1], 1.5),
    "scatter_add_": lambda lib, t, o: t.scatter_add_(0, _perm_like(lib, t), o),
    "index_add_": lambda lib, t, o: t.index_add_(0, _perm_like(lib, t[..., 0]), o, alpha=3),
    "masked_scatter_": lambda lib, t, o: t.masked_scatter_(_mask_like(lib, t), o * 2),
}


def _packing(lib: ModuleType) -> tuple[Any, list[Any]]:
    packed: list[Any] = []

    def pack(t: Any) -> Any:
        packed.append(t)
        return t

    return lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t), packed


def _inplace_on_non_leaf(op: str) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x, o = _t(lib, A), _t(lib, B)
        y = x * 1
        hooks, packed = _packing(lib)
        with hooks:
            out = INPLACE[op](lib, y, o)
        rec = {
            "same object": out is None or out is y,
            "graph": _graph(y.grad_fn),
            "version": y._version,
            "value": _value(y),
            "packed": [_value(p) for p in packed],
        }
        (y * lib.from_numpy(G)).sum().backward()
        rec["grads"] = [_value(x.grad), _value(o.grad)]
        return rec

    return scenario


def _inplace_on_view(op: str, make_view: Callable[[Any], Any]) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        base = x * 1
        view = make_view(base)
        o = _other(lib, view)
        other = base[2]  # another view of the same base: its grad_fn is rebuilt
        other_fn_before = _graph(other.grad_fn)
        INPLACE[op](lib, view, o)
        rec = {
            "base graph": _graph(base.grad_fn),
            "view graph": _graph(view.grad_fn),
            "other before": other_fn_before,
            "other graph": _graph(other.grad_fn),
            "versions": [base._version, view._version, other._version],
            "base value": _value(base),
            "is view": [view._base is base, other._base is base],
        }
        loss = (base * lib.from_numpy(G)).sum() + (other * lib.from_numpy(G[0])).sum()
        loss.backward()
        rec["grads"] = [_value(x.grad), _value(o.grad)]
        return rec

    return scenario


VIEWS: dict[str, Callable[[Any], Any]] = {
    "slice": lambda b: b[:2],
    "select": lambda b: b[1],
    "transpose": lambda b: b.t()[:, :2].t(),
    "view_of_view": lambda b: b[:2][:, 1:3],
}


def _leaf_error(op: str) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x, o = _t(lib, A), _t(lib, B)
        INPLACE[op](lib, x, o)
        return {"value": _value(x)}

    return scenario


def _view_of_leaf_error(op: str) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        INPLACE[op](lib, x[:2], _other(lib, x[:2]))
        return {"value": _value(x)}

    return scenario


def _no_grad_leaf(op: str) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x, o = _t(lib, A), _t(lib, B)
        with lib.no_grad():
            INPLACE[op](lib, x, o)
        return {"value": _value(x), "version": x._version, "leaf": x.is_leaf, "graph": _graph(x.grad_fn)}

    return scenario


def _no_grad_view(op: str) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        y = x * 1
        with lib.no_grad():
            v = y[:2]
        INPLACE[op](lib, v, _other(lib, v))
        return {"value": _value(y)}

    return scenario


def _multi_output_view(op: str, split: Callable[[Any], Any]) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        parts = split(x * 1)
        INPLACE[op](lib, parts[0], _other(lib, parts[0]))
        return {"value": _value(parts[0])}

    return scenario


def _saved_then_modified(op: str) -> Scenario:
    def scenario(lib: ModuleType) -> Record:
        x, o = _t(lib, A), _t(lib, B)
        y = x.exp()  # saves its result
        INPLACE[op](lib, y, o)
        rec = {"version": y._version}
        y.sum().backward()
        return rec

    return scenario


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_non_leaf(op: str, torch_oracle: ModuleType) -> None:
    run_both(_inplace_on_non_leaf(op), torch_oracle)


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_view(op: str, view: str, torch_oracle: ModuleType) -> None:
    run_both(_inplace_on_view(op, VIEWS[view]), torch_oracle)


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_leaf_is_an_error(op: str, torch_oracle: ModuleType) -> None:
    run_both(_leaf_error(op), torch_oracle)


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_view_of_leaf_is_an_error(op: str, torch_oracle: ModuleType) -> None:
    run_both(_view_of_leaf_error(op), torch_oracle)


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_leaf_in_no_grad(op: str, torch_oracle: ModuleType) -> None:
    run_both(_no_grad_leaf(op), torch_oracle)


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_no_grad_view_is_an_error(op: str, torch_oracle: ModuleType) -> None:
    run_both(_no_grad_view(op), torch_oracle)


@pytest.mark.parametrize(
    "split",
    [lambda t: t.split(2), lambda t: t.unbind(0), lambda t: t.chunk(2, 1)],
    ids=["split", "unbind", "chunk"],
)
@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_multi_output_view_is_an_error(
    op: str, split: Callable[[Any], Any], torch_oracle: ModuleType
) -> None:
    run_both(_multi_output_view(op, split), torch_oracle)


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_saved_tensor_fails_backward(op: str, torch_oracle: ModuleType) -> None:
    run_both(_saved_then_modified(op), torch_oracle)


# --- more view + in-place bookkeeping ------------------------------------------------------------


@pytest.mark.parametrize(
    "op", ["mul_", "pow_tensor", "sigmoid_", "setitem_int", "masked_fill_tensor", "index_put_"]
)
def test_double_backward_through_inplace_on_view(op: str, torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        base = x * x
        view = base[1:]
        o = _other(lib, view)
        INPLACE[op](lib, view, o)
        loss = (base * lib.from_numpy(G)).sum()
        gx, go = lib.autograd.grad(loss, (x, o), create_graph=True, allow_unused=True)
        rec = {"first": [_value(gx), _value(go)]}
        live = [g for g in (gx, go) if g is not None and g.requires_grad]
        if live:
            rec["second"] = [
                _value(g) for g in lib.autograd.grad(sum(g.sum() for g in live), (x, o), allow_unused=True)
            ]
        return rec

    run_both(scenario, torch_oracle)


def test_detach_shares_the_version_counter(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        y = x.exp()
        d = y.detach()
        d.add_(1.0)
        rec = {"versions": [y._version, d._version], "value": _value(y)}
        y.sum().backward()
        return rec

    run_both(scenario, torch_oracle)


def test_views_share_the_version_counter_with_their_base(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        base = x * 1
        views = [base[0], base[:, 1], base.t(), base.view(12), base[None], base[...], base.unbind(1)[2]]
        base.mul_(2.0)
        views[1].add_(1.0)
        return {
            "versions": [v._version for v in views],
            "graphs": [_graph(v.grad_fn) for v in views[:-1]],  # the unbind output is tested below
            "bases": [v._base is base for v in views],
            "values": [_value(v) for v in views],
        }

    run_both(scenario, torch_oracle)


def test_multi_output_view_grad_fn_after_base_modified(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        base = x * 1
        _, b = base.split(2)
        base.add_(1.0)
        return {"graph": _graph(b.grad_fn), "version": b._version}

    run_both(scenario, torch_oracle)


def test_inplace_on_view_keeps_hooks_and_retain_grad(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        base = x * 1
        base.retain_grad()
        seen: list[Any] = []
        base.register_hook(lambda g: seen.append(_value(g)))
        base[0] = 2.0
        base.register_hook(lambda g: seen.append(_value(g * 10)))
        (base * lib.from_numpy(G)).sum().backward()
        return {"seen": seen, "retained": _value(base.grad), "grad": _value(x.grad)}

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize("make", ["x[0]", "(x * 1)[0]", "x.detach()", "x.view(6)"])
def test_views_made_in_inference_mode(make: str, torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Record:
        x = lib.ones(2, 3, requires_grad=True)
        with lib.inference_mode():
            v = eval(make, {"x": x})
        rec = {"inference": v.is_inference(), "requires_grad": v.requires_grad, "leaf": v.is_leaf}
        try:
            v.mul_(2.0)
        except RuntimeError as e:
            rec["in-place"] = _error(e)
        return rec

    run_both(scenario, torch_oracle)
