"""In-place ops, views and indexing against torch 2.8.0.

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

import engine

pytestmark = pytest.mark.oracle

Record = dict[str, Any]
Scenario = Callable[[ModuleType], Record]

_RNG = np.random.default_rng(1234)
A = _RNG.uniform(0.5, 2.0, (3, 4))  # positive, so that pow/log formulas stay finite
B = _RNG.uniform(0.5, 2.0, (3, 4))
ROW = _RNG.uniform(-1.0, 1.0, 4)
G = _RNG.uniform(-1.0, 1.0, (3, 4))
MASK = _RNG.random((3, 4)) < 0.5
_RNG_PERM = _RNG.random((3, 4))


def _graph(fn: Any, depth: int = 0) -> Any:
    """A grad_fn as nested (name, next_functions) tuples, with torch's C++ prefix normalised."""
    if fn is None:
        return None
    name = fn.name().replace("torch::", "engine::")
    if depth > 10:
        return name
    return (name, tuple((_graph(n, depth + 1), nr) for n, nr in fn.next_functions))


def _value(t: Any) -> Any:
    if t is None:
        return None
    a = t.detach().numpy()
    return (np.round(a, 12) if a.dtype.kind in "fc" else a).tolist()


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".replace("torch.", "engine.").replace("torch::", "engine::")


def run_both(scenario: Scenario, torch: ModuleType) -> None:
    ours, theirs = {}, {}
    for lib, rec in ((engine, ours), (torch, theirs)):
        try:
            rec.update(scenario(lib))
        except Exception as e:  # noqa: BLE001 - the error itself is compared
            rec["error"] = _error(e)
    assert ours.keys() == theirs.keys(), f"engine: {ours}\ntorch: {theirs}"
    for k in theirs:
        assert ours[k] == theirs[k], f"{k}:\n  engine: {ours[k]}\n  torch:  {theirs[k]}"


def _t(lib: ModuleType, a: np.ndarray, grad: bool = True) -> Any:
    return lib.tensor(a, dtype=lib.float64, requires_grad=grad)


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


# --- Tensor.__getitem__ / __setitem__ -----------------------------------------------------------

X3 = _RNG.standard_normal((2, 3, 4))

GETITEM = [
    "x[0]",
    "x[-1]",
    "x[:]",
    "x[:, :]",
    "x[..., :]",
    "x[:, 1:]",
    "x[0, 1:]",
    "x[1:2, ::2]",
    "x[-10:2]",
    "x[1:100]",
    "x[:, 2:1]",
    "x[None]",
    "x[None, ...]",
    "x[..., None]",
    "x[...]",
    "x[..., ...]",
    "x[()]",
    "x[0, None, :, 1]",
    "x[1, ..., 2]",
    "x[(0, 1)]",
    "x[True]",
    "x[False]",
    "x[np.int64(1)]",
    "x[lib.tensor(1)]",
    "x[lib.tensor(True)]",
    "x[lib.tensor([0, 1])]",
    "x[lib.tensor([0, 1]).int()]",
    "x[[0, 1]]",
    "x[[]]",
    "x[[0.7, 1.2]]",
    "x[[True, False]]",
    "x[np.array([0, 1])]",
    "x[[0, 1], [1, 2]]",
    "x[:, [0, 2]]",
    "x[0, [0, 2]]",
    "x[x > 0]",
    "x[x > 0, ]",
    "x[:, None, [1, 0]]",
    "x[[0, 1], :, [1, 2]]",
    "x[lib.tensor([[0, 1], [1, 0]]), 1:]",
    "x[:, lib.tensor([True, False, True])]",
    "x[lib.tensor([True, False]), None]",
    "x[lib.tensor([1, 0], dtype=lib.uint8)]",
    "x[[0, slice(None)]]",
    # errors
    "x[5]",
    "x[0, 7]",
    "x[None, 5]",
    "x[0, 0, 0, 0]",
    "x[0, ..., 0, 0]",
    "x[1.5]",
    "x['ab']",
    "x[::0]",
    "x[::-1]",
    "x[lib.tensor([5])]",
    "x[lib.tensor([0]), lib.tensor([-5])]",
    "x[lib.tensor([0.5])]",
    "x[lib.tensor(1.0)]",
    "x[lib.tensor([[True, False]])]",
    "x[lib.tensor([0, 1]), lib.tensor([0, 1, 2])]",
    "s[0]",
    "s[1]",
    "s[None]",
    "s[...]",
    "s[:]",
    "s[()]",
    "s[True]",
    "s[0,]",
]


def _warnings(caught: list[Any]) -> list[str]:
    # torch appends where in its C++ sources the warning was raised.
    return [str(w.message).split(" (Triggered internally")[0] for w in caught]


@pytest.mark.parametrize("expr", GETITEM)
def test_getitem(expr: str, torch_oracle: ModuleType) -> None:
    import warnings

    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, X3)
        s = lib.tensor(1.5, dtype=lib.float64, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = eval(expr, {"x": x, "s": s, "lib": lib, "np": np})
            rec = {"shape": tuple(y.shape), "graph": _graph(y.grad_fn), "value": _value(y)}
            rec.update(version=y._version, is_view=y._base is not None, leaf=y.is_leaf)
            y.backward(lib.from_numpy(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape))))
        rec["grads"] = [_value(x.grad), _value(s.grad)]
        rec["warnings"] = _warnings(caught)
        return rec

    run_both(scenario, torch_oracle)


SETITEM = [
    "y[0] = w",
    "y[0] = 1.0",
    "y[0, 1] = 1.0",
    "y[:] = 1.0",
    "y[...] = 1.0",
    "y[...] = w",
    "y[:, :] = w",
    "y[0] = w14",
    "y[1:] = w24",
    "y[lib.tensor([1, 0])] = w",
    "y[y > 0] = 0.0",
    "y[0, lib.tensor([1, 0])] = 0.0",
    "y[lib.tensor([0, 2])] = w114",
    "y[None] = w",
    "y[True] = w",
    "y[False] = w",
    "y[1] = 5",
    "y[:, 1] = w[:3]",
    "y[0][1] = 7.0",
    "y[[0, 1], [1, 2]] = w[:2]",
    "y[1, ...] = w",
    "y[x > 0.5] = w[:3].sum()",
    "v = y[1]; v[0] = 3.0; rec['view'] = _graph(v.grad_fn)",
    # errors
    "y[0] = 'a'",
    "y[0] = lib.ones(2, dtype=lib.float64)",
    "y[lib.tensor([0])] = lib.ones(2, dtype=lib.float64)",
    "y[lib.tensor([0])] = lib.ones(4)",
    "x[0] = 1.0",
    "x[lib.tensor([0])] = 1.0",
    "x[...] = 1.0",
]


@pytest.mark.parametrize("stmt", SETITEM)
def test_setitem(stmt: str, torch_oracle: ModuleType) -> None:
    rng = np.random.default_rng(7)
    w4, w14, w24, w114 = (
        rng.standard_normal(4),
        rng.standard_normal((1, 4)),
        rng.standard_normal((2, 4)),
        rng.standard_normal((1, 1, 4)),
    )

    def scenario(lib: ModuleType) -> Record:
        x, leaves = _t(lib, A), [_t(lib, a) for a in (w4, w14, w24, w114)]
        y = x * 1
        rec: Record = {}
        env = {"x": x, "y": y, "lib": lib, "rec": rec, "_graph": _graph, "w": leaves[0] * 1}
        env.update(zip(("w4", "w14", "w24", "w114"), leaves, strict=True))
        exec(stmt, env)
        rec.update(graph=_graph(y.grad_fn), version=y._version, value=_value(y))
        (y * lib.from_numpy(G)).sum().backward()
        rec["grads"] = [_value(t.grad) for t in (x, *leaves)]
        return rec

    run_both(scenario, torch_oracle)


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


# --- the gradient of an indexing op's gradient --------------------------------------------------

_M = _RNG.random((3, 4)) < 0.5
GRAD_OF_GRAD: dict[str, Callable[[ModuleType, Any], Any]] = {
    "getitem_mask": lambda lib, x: x[lib.from_numpy(_M)],
    "getitem_tensor": lambda lib, x: x[lib.tensor([2, 0, 2]), 1:],
    "gather": lambda lib, x: x.gather(1, lib.tensor([[0, 0, 3], [1, 2, 2], [3, 3, 3]])),
    "index_select": lambda lib, x: x.index_select(1, lib.tensor([3, 3, 0])),
    "masked_select": lambda lib, x: x.masked_select(lib.from_numpy(_M)),
    "masked_fill": lambda lib, x: x.masked_fill(lib.from_numpy(_M), 0.5),
    "scatter": lambda lib, x: lib.zeros(3, 5, dtype=lib.float64).scatter(
        1, lib.tensor([[0, 2, 4, 1]] * 3), x
    ),
    "scatter_add": lambda lib, x: lib.zeros(3, 5, dtype=lib.float64).scatter_add(
        1, lib.tensor([[0, 0, 4, 1]] * 3), x
    ),
    "index_add": lambda lib, x: lib.zeros(5, 4, dtype=lib.float64).index_add(0, lib.tensor([4, 0, 4]), x),
    "index_put": lambda lib, x: lib.zeros(5, 4, dtype=lib.float64).index_put(
        (lib.tensor([4, 0, 4]),), x, True
    ),
    "masked_scatter": lambda lib, x: lib.zeros(4, 4, dtype=lib.float64).masked_scatter(
        lib.from_numpy(np.r_[_M, _M[:1]]), x
    ),
}


@pytest.mark.parametrize("op", sorted(GRAD_OF_GRAD))
def test_gradient_of_indexing_gradient(op: str, torch_oracle: ModuleType) -> None:
    """A gradient that requires grad (its cotangent does) is itself an indexing op's output, with
    PyTorch's node (``index`` -> IndexPutImplBackward0, ``gather`` -> ScatterAddBackward0 ...)."""

    def scenario(lib: ModuleType) -> Record:
        x = _t(lib, A)
        y = GRAD_OF_GRAD[op](lib, x)
        v = lib.tensor(np.linspace(-1, 1, y.numel()).reshape(tuple(y.shape)), requires_grad=True)
        (g,) = lib.autograd.grad(y, x, v, create_graph=True)
        gg = lib.autograd.grad((g * lib.from_numpy(G)).sum(), (x, v), allow_unused=True)
        return {"graph": _graph(g.grad_fn), "grad": _value(g), "grad of grad": [_value(t) for t in gg]}

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
