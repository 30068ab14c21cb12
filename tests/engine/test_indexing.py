"""Indexing against torch 2.8.0: ``Tensor.__getitem__`` and ``__setitem__`` with every kind of
index (ints, slices, None, Ellipsis, bools, lists, index and mask tensors, and the errors they
raise), and the gradient of an indexing op's gradient. As in ``test_inplace_views.py``, each test
runs one scenario with ``lib = engine`` and ``lib = torch`` from the same NumPy arrays and compares
the backward graphs, version counters, values, gradients, warnings and error messages.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.engine._inplace_helpers import _M, X3, A, G, Record, _graph, _t, _value, run_both

pytestmark = pytest.mark.oracle


# --- Tensor.__getitem__ / __setitem__ -----------------------------------------------------------

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


# --- the gradient of an indexing op's gradient --------------------------------------------------

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
