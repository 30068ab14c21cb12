"""What the op-table samples cannot say about the ops of issue 13 (part 1), against torch 2.8.0:
sort stability and topk ties, einsum equations (values, gradients, graph), var_mean's argument
forms, ``//`` and ``%`` with negatives, ``x.new(...)``, ``del x.grad``, multinomial, the random
fills and ``nn.init``, and error texts."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from engine.nn import init

pytestmark = pytest.mark.oracle


def _both(torch: ModuleType, fn: Callable[[ModuleType], Any]) -> tuple[Any, Any]:
    return fn(engine), fn(torch)


def _np(t: Any) -> np.ndarray:
    return np.asarray(t.detach().numpy())


def _error(lib: ModuleType, fn: Callable[[ModuleType], Any]) -> tuple[type, str]:
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is compared with torch's
        fn(lib)
    return type(info.value), str(info.value)


def _same_error(torch: ModuleType, fn: Callable[[ModuleType], Any]) -> None:
    ours, theirs = _error(engine, fn), _error(torch, fn)
    assert ours[0].__name__ == theirs[0].__name__, (ours, theirs)
    assert ours[1] == theirs[1].replace("torch.", "engine.")


# --- sort, argsort, topk ----------------------------------------------------------------------

TIES = [[1.0, 3.0, 3.0, 2.0, 3.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 1.0, 2.0, 1.0, 3.0, 2.0, 1.0, 3.0, 3.0]]


@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_keeps_the_order_of_ties(descending: bool, torch_oracle: ModuleType) -> None:
    ours, theirs = _both(torch_oracle, lambda lib: lib.tensor(TIES).sort(stable=True, descending=descending))
    np.testing.assert_array_equal(_np(ours.values), _np(theirs.values))
    np.testing.assert_array_equal(_np(ours.indices), _np(theirs.indices))
    a, b = _both(torch_oracle, lambda lib: lib.argsort(lib.tensor(TIES), descending=descending, stable=True))
    np.testing.assert_array_equal(_np(a), _np(b))


def test_sort_puts_nan_last_ascending_first_descending(torch_oracle: ModuleType) -> None:
    data = [2.0, float("nan"), -1.0, 5.0]
    for descending in (False, True):
        ours, theirs = _both(torch_oracle, lambda lib: lib.tensor(data).sort(descending=descending))
        np.testing.assert_array_equal(_np(ours.values), _np(theirs.values))
        np.testing.assert_array_equal(_np(ours.indices), _np(theirs.indices))


def test_topk_with_ties_selects_tied_values(torch_oracle: ModuleType) -> None:
    # Values match torch; among equal values the indices may differ (see topk's docstring), but
    # they always point at the values returned, and the gradient lands on them.
    for largest in (True, False):
        ours, theirs = _both(torch_oracle, lambda lib: lib.tensor(TIES).topk(5, largest=largest))
        np.testing.assert_array_equal(_np(ours.values), _np(theirs.values))
        np.testing.assert_array_equal(
            np.take_along_axis(np.array(TIES), _np(ours.indices), 1), _np(ours.values)
        )
    x = engine.tensor(TIES, requires_grad=True)
    x.topk(4).values.sum().backward()
    assert x.grad is not None and float(x.grad.sum()) == 4.0
    assert set(np.flatnonzero(_np(x.grad))) <= set(np.flatnonzero(np.array(TIES[0]) == 3.0))


def test_sort_topk_return_types_and_errors(torch_oracle: ModuleType) -> None:
    ours, theirs = _both(torch_oracle, lambda lib: lib.tensor([[3.0, 1.0, 2.0]]).topk(2))
    assert type(ours).__name__ == type(theirs).__name__ == "topk"
    np.testing.assert_array_equal(_np(ours.indices), _np(theirs[1]))
    ours, theirs = _both(torch_oracle, lambda lib: lib.tensor([3.0, 1.0]).sort())
    assert type(ours).__name__ == type(theirs).__name__ == "sort"
    _same_error(torch_oracle, lambda lib: lib.ones(3, 4).topk(5))
    _same_error(torch_oracle, lambda lib: lib.ones(3, 4).topk(-1))
    _same_error(torch_oracle, lambda lib: lib.ones(3, 4).topk(1, 2))
    _same_error(torch_oracle, lambda lib: lib.ones(3, 4).sort(2))


# --- einsum -----------------------------------------------------------------------------------

EQUATIONS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,kj->ik", [(3, 4), (2, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij", [(2, 3)]),
    ("ji", [(2, 3)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
    ("i...->...", [(2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 2), (2, 2), (2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("i j , j k -> i k", [(2, 3), (3, 2)]),
    ("ij,j->i", [(2, 3), (1,)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_einsum_matches_torch_with_gradients_and_graph(
    equation: str, shapes: list[tuple[int, ...]], torch_oracle: ModuleType
) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]

    def run(lib: ModuleType) -> tuple[np.ndarray, list[np.ndarray], list[str]]:
        xs = [lib.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
        out = lib.einsum(equation, *xs)
        cot = lib.from_numpy(np.random.default_rng(1).standard_normal(tuple(out.shape)))
        grads = lib.autograd.grad(out, xs, cot)
        names, node = [], out.grad_fn
        while node is not None:  # the chain of first edges: the graph's spine
            names.append(node.name().replace("engine::", "torch::"))
            node = next((f for f, _ in node.next_functions if f is not None), None)
        return _np(out), [_np(g) for g in grads], names

    (out, grads, names), (t_out, t_grads, t_names) = run(engine), run(torch_oracle)
    np.testing.assert_allclose(out, t_out, rtol=1e-12, atol=1e-12)
    for g, tg in zip(grads, t_grads, strict=True):
        np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-12)
    assert names == t_names


def test_einsum_gradcheck() -> None:
    a = engine.randn(2, 3, dtype=engine.float64, requires_grad=True)
    b = engine.randn(3, 3, dtype=engine.float64, requires_grad=True)
    assert engine.autograd.gradcheck(lambda x, y: engine.einsum("ij,jk->ik", x, y), (a, b))
    assert engine.autograd.gradgradcheck(lambda x, y: engine.einsum("ij,jj->ij", x, y), (a, b))


def test_einsum_other_call_forms(torch_oracle: ModuleType) -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    for call in (
        lambda lib, x, y: lib.einsum("ij,jk->ik", [x, y]),
        lambda lib, x, y: lib.einsum(x, [0, 1], y, [1, 2], [0, 2]),
        lambda lib, x, y: lib.einsum(x, [0, 1], y, [1, 2]),
        lambda lib, x, y: lib.einsum(x, [Ellipsis, 1], y, [1, 2], [Ellipsis, 2]),
    ):
        ours = call(engine, engine.from_numpy(a), engine.from_numpy(b))
        theirs = call(torch_oracle, torch_oracle.from_numpy(a), torch_oracle.from_numpy(b))
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-12)
    ours, theirs = _both(
        torch_oracle,
        lambda lib: lib.einsum("ij,jk->ik", lib.ones(2, 3, dtype=lib.long), lib.ones(3, 2, dtype=lib.long)),
    )
    assert ours.dtype.name == "int64" and _np(ours).tolist() == _np(theirs).tolist()


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.einsum("ij,jk", lib.ones(2, 3)),
        lambda lib: lib.einsum("ij", lib.ones(2, 3), lib.ones(2, 3)),
        lambda lib: lib.einsum("ij,jk->ik", lib.ones(3, 4), lib.ones(3, 4)),
        lambda lib: lib.einsum("ijk->", lib.ones(2, 3)),
        lambda lib: lib.einsum("...ijk->", lib.ones(2, 3)),
        lambda lib: lib.einsum("ij->k", lib.ones(2, 3)),
        lambda lib: lib.einsum("ij->ii", lib.ones(2, 3)),
        lambda lib: lib.einsum("i1->i", lib.ones(2, 3)),
        lambda lib: lib.einsum("ii->i", lib.ones(2, 3)),
        lambda lib: lib.einsum("i.j->", lib.ones(2, 3)),
        lambda lib: lib.einsum("ij"),
        lambda lib: lib.einsum(lib.ones(2), [60]),
    ],
)
def test_einsum_errors(call: Callable[[ModuleType], Any], torch_oracle: ModuleType) -> None:
    _same_error(torch_oracle, call)


# --- var_mean, std_mean -----------------------------------------------------------------------

VAR_FORMS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((False,), {}),
    ((True,), {}),
    ((1,), {}),
    ((1, False), {}),
    ((1, True, True), {}),
    (((0, 1),), {"keepdim": True}),
    ((), {"unbiased": False}),
    ((), {"dim": 0, "correction": 0}),
    ((1,), {"correction": 2, "keepdim": True}),
    ((None,), {"correction": 0.5}),
    ((), {"dim": [0], "unbiased": True, "keepdim": False}),
]


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@pytest.mark.parametrize(("args", "kwargs"), VAR_FORMS)
def test_var_mean_argument_forms(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], torch_oracle: ModuleType
) -> None:
    data = np.random.default_rng(3).standard_normal((3, 4))

    def run(lib: ModuleType) -> list[np.ndarray]:
        x = lib.from_numpy(data.copy()).requires_grad_(True)
        first, mean = getattr(lib, name)(x, *args, **kwargs)
        (grad,) = lib.autograd.grad(first.sum() * 2 + (mean * mean).sum(), x)
        return [_np(first), _np(mean), _np(grad)]

    for ours, theirs in zip(run(engine), run(torch_oracle), strict=True):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_var_mean_only_one_output_used(torch_oracle: ModuleType) -> None:
    data = np.random.default_rng(4).standard_normal((3, 4))
    for which in (0, 1):
        for name in ("var_mean", "std_mean"):

            def run(lib: ModuleType, name: str = name, which: int = which) -> np.ndarray:
                x = lib.from_numpy(data.copy()).requires_grad_(True)
                out = getattr(lib, name)(x, 1)[which]
                return _np(lib.autograd.grad(out.sum(), x)[0])

            np.testing.assert_allclose(run(engine), run(torch_oracle), rtol=1e-12)


def test_var_mean_errors(torch_oracle: ModuleType) -> None:
    _same_error(torch_oracle, lambda lib: lib.var_mean(lib.ones(3, dtype=lib.long)))
    _same_error(torch_oracle, lambda lib: lib.std_mean(lib.ones(3, dtype=lib.long)))


# --- // and % ---------------------------------------------------------------------------------

SIGNED = [7.0, -7.0, 7.5, -7.5, 0.0, 3.0, -3.0]
DIVISORS = [2.0, 2.0, -2.0, -2.0, 3.0, -1.5, 1.5]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_floor_divide_and_remainder_with_negatives(dtype: str, torch_oracle: ModuleType) -> None:
    a = np.array(SIGNED).astype(dtype)
    b = np.array(DIVISORS).astype(dtype)
    if dtype.startswith("int"):
        b[b == 0] = 1
    calls: list[Callable[[Any, Any], Any]] = [
        lambda x, y: x // y,
        lambda x, y: x % y,
        lambda x, y: x // 2,
        lambda x, y: x % -2,
        lambda x, y: 5 // y,
        lambda x, y: -5 % y,
        lambda x, y: x // 2.5,
        lambda x, y: x % 2.5,
        lambda x, y: x.floor_divide(y),
        lambda x, y: x.remainder(y),
        lambda x, y: x.reshape(-1, 1) // y,  # broadcasting
        lambda x, y: x.reshape(-1, 1) % y,
    ]
    for call in calls:
        ours = call(engine.from_numpy(a.copy()), engine.from_numpy(b.copy()))
        theirs = call(torch_oracle.from_numpy(a.copy()), torch_oracle.from_numpy(b.copy()))
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-6)


def test_in_place_floor_divide_and_remainder(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[np.ndarray]:
        x = lib.tensor(SIGNED)
        y = lib.tensor(SIGNED)
        x //= 2
        y %= lib.tensor(DIVISORS)
        return [_np(x), _np(y)]

    for ours, theirs in zip(run(engine), run(torch_oracle), strict=True):
        np.testing.assert_allclose(ours, theirs)


def test_floor_divide_and_remainder_gradients(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        x = lib.tensor([5.5, -5.5, 2.0], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([2.0, 2.0, -3.0], dtype=lib.float64, requires_grad=True)
        out = [x % y, x % 2, x // y, 2 % x]
        names = [o.grad_fn.name().replace("torch::", "engine::") for o in out]
        gx, gy = lib.autograd.grad((x % y).sum(), (x, y))
        errors = []
        for o in out[2:]:
            with pytest.raises(RuntimeError) as info:
                o.sum().backward()
            errors.append(str(info.value))
        return [names, _np(gx).tolist(), _np(gy).tolist(), errors]

    assert run(engine) == run(torch_oracle)


def test_division_errors(torch_oracle: ModuleType) -> None:
    _same_error(torch_oracle, lambda lib: lib.tensor([1, 2]) // 0)
    _same_error(torch_oracle, lambda lib: lib.tensor([1, 2]) % lib.tensor([1, 0]))
    _same_error(torch_oracle, lambda lib: lib.tensor([True]) // lib.tensor([True]))
    _same_error(torch_oracle, lambda lib: lib.ones(2, 3) // lib.ones(2))


# --- tril / triu, diagonal, trace, atan2, isclose ---------------------------------------------


def test_tril_triu_in_place_and_diagonal_view(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        x = lib.arange(12.0).reshape(3, 4)
        lib_x = x.clone()
        lib_x.tril_(1)
        y = x.clone()
        y.triu_(-1)
        z = x.clone()
        d = z.diagonal(1)
        d.mul_(10)  # a view: writes reach z
        return [_np(lib_x), _np(y), _np(z), d._is_view(), z._version]

    ours, theirs = run(engine), run(torch_oracle)
    for a, b in zip(ours[:3], theirs[:3], strict=True):
        np.testing.assert_array_equal(a, b)
    assert ours[3:] == theirs[3:]


def test_shape_op_errors(torch_oracle: ModuleType) -> None:
    _same_error(torch_oracle, lambda lib: lib.tril(lib.ones(3)))
    _same_error(torch_oracle, lambda lib: lib.ones(3).triu())
    _same_error(torch_oracle, lambda lib: lib.ones(3, 4).diagonal(0, 1, -1))
    _same_error(torch_oracle, lambda lib: lib.ones(3).diagonal())
    _same_error(torch_oracle, lambda lib: lib.ones(2, 2, 2).trace())
    _same_error(torch_oracle, lambda lib: lib.ones(2, 2, dtype=lib.bool).trace())


def test_isclose_allclose_equal(torch_oracle: ModuleType) -> None:
    a = [1.0, 1.0 + 1e-9, float("nan"), float("inf"), -float("inf"), 2.0]
    b = [1.0, 1.0, float("nan"), float("inf"), float("inf"), 2.1]
    for kwargs in ({}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 0.0, "rtol": 0.0}):
        ours, theirs = _both(torch_oracle, lambda lib: lib.isclose(lib.tensor(a), lib.tensor(b), **kwargs))
        assert _np(ours).tolist() == _np(theirs).tolist()
        ours, theirs = _both(torch_oracle, lambda lib: lib.allclose(lib.tensor(a), lib.tensor(b), **kwargs))
        assert ours is theirs
    for x, y in (([1.0, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, 2.5]), ([1.0], [1.0, 1.0])):
        ours, theirs = _both(torch_oracle, lambda lib: lib.equal(lib.tensor(x), lib.tensor(y)))
        assert ours is theirs
        ours, theirs = _both(torch_oracle, lambda lib: lib.tensor(x).allclose(lib.tensor(x[:1])))
        assert ours is theirs
    ours, theirs = _both(torch_oracle, lambda lib: lib.equal(lib.ones(2), lib.ones(2, dtype=lib.float64)))
    assert ours is theirs
    _same_error(torch_oracle, lambda lib: lib.isclose(lib.ones(2), lib.ones(2, dtype=lib.float64)))
    _same_error(torch_oracle, lambda lib: lib.allclose(lib.ones(2), lib.ones(2), rtol=-1))
    _same_error(torch_oracle, lambda lib: lib.isclose(lib.ones(2), lib.ones(2), atol=-0.5))


def test_atan2_quadrants(torch_oracle: ModuleType) -> None:
    y = [1.0, 1.0, -1.0, -1.0, 0.0, 0.0, -0.0]
    x = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, -1.0]
    ours, theirs = _both(torch_oracle, lambda lib: lib.atan2(lib.tensor(y), lib.tensor(x)))
    np.testing.assert_allclose(_np(ours), _np(theirs))
    ours, theirs = _both(torch_oracle, lambda lib: lib.tensor(y).atan2(lib.tensor(x)))
    np.testing.assert_allclose(_np(ours), _np(theirs))


# --- Tensor.new, del x.grad -------------------------------------------------------------------


NEW_FORMS: list[Callable[[ModuleType, Any], Any]] = [
    lambda lib, x: x.new(),
    lambda lib, x: x.new(2, 3),
    lambda lib, x: x.new(4),
    lambda lib, x: x.new(lib.Size([2, 3])),
    lambda lib, x: x.new([1, 2]),
    lambda lib, x: x.new((2, 3)),
    lambda lib, x: x.new([[1.5, 2.5], [3.5, 4.5]]),
    lambda lib, x: x.new([]),
    lambda lib, x: x.new(np.ones(3)),
    lambda lib, x: x.new_tensor([1, 2]),
    lambda lib, x: x.new_zeros(2, 3),
    lambda lib, x: x.new_ones((2,)),
    lambda lib, x: x.new_full((2, 2), 7),
    lambda lib, x: x.new_empty(3),
    lambda lib, x: x.new_zeros(2, dtype=lib.float64),
]


@pytest.mark.parametrize("form", range(len(NEW_FORMS)))
@pytest.mark.parametrize("dtype", ["float32", "int64", "float64"])
def test_tensor_new_forms(form: int, dtype: str, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        return NEW_FORMS[form](lib, lib.ones(2, dtype=getattr(lib, dtype)))

    ours, theirs = run(engine), run(torch_oracle)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.dtype.name == str(theirs.dtype).split(".")[1]
    assert ours.requires_grad == theirs.requires_grad
    if form not in (1, 2, 3, 13):  # uninitialised memory in torch
        np.testing.assert_array_equal(_np(ours), _np(theirs))


def test_tensor_new_of_a_tensor_is_an_alias(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        y = lib.ones(3, requires_grad=True)
        z = lib.ones(2).new(y)
        return [z._base is y, z.requires_grad, z.grad_fn.name()]

    assert run(engine) == run(torch_oracle)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.ones(2).new(2, 3.0),
        lambda lib: lib.ones(2).new(2, [3]),
        lambda lib: lib.ones(2).new(2.5),
        lambda lib: lib.ones(2).new(-1),
        lambda lib: lib.ones(2).new(lib.ones(2, dtype=lib.long)),
        lambda lib: lib.ones(2).new(2, dtype=lib.float64),
        lambda lib: lib.ones(2).new(2, 3, dtype=lib.float64),
        lambda lib: lib.ones(2).new(2, requires_grad=True),
    ],
)
def test_tensor_new_errors(call: Callable[[ModuleType], Any], torch_oracle: ModuleType) -> None:
    ours, theirs = _error(engine, call), _error(torch_oracle, call)
    assert ours[0].__name__ == theirs[0].__name__
    assert ours[1] == theirs[1]


def test_del_grad(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        x = lib.ones(2, requires_grad=True)
        (x * 3).sum().backward()
        before = _np(x.grad).tolist()
        del x.grad
        after = x.grad
        del x.grad  # again: still fine
        (x * 2).sum().backward()
        return [before, after, _np(x.grad).tolist()]

    assert run(engine) == run(torch_oracle)


# --- multinomial --------------------------------------------------------------------------------


def test_multinomial_shapes_dtypes_and_support(torch_oracle: ModuleType) -> None:
    probs = [[0.0, 1.0, 2.0, 0.0, 3.0], [5.0, 0.0, 0.0, 1.0, 1.0]]
    for args in ((1,), (3,), (3, False), (10, True)):
        ours, theirs = _both(torch_oracle, lambda lib: lib.multinomial(lib.tensor(probs), *args))
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype.name == "int64"
        values = _np(ours)
        assert (np.take_along_axis(np.array(probs), values, 1) > 0).all()
    ours, theirs = _both(torch_oracle, lambda lib: lib.tensor(probs[0]).multinomial(2))
    assert tuple(ours.shape) == tuple(theirs.shape) == (2,)


def test_multinomial_without_replacement_is_unique() -> None:
    engine.manual_seed(0)
    for _ in range(20):
        out = engine.multinomial(engine.rand(3, 6) + 0.01, 6)
        assert all(sorted(row) == list(range(6)) for row in _np(out).tolist())


def test_multinomial_is_deterministic_under_manual_seed() -> None:
    p = engine.tensor([0.1, 0.2, 0.3, 0.4])
    engine.manual_seed(7)
    a = [_np(engine.multinomial(p, 3)), _np(engine.multinomial(p, 8, True))]
    engine.manual_seed(7)
    b = [_np(engine.multinomial(p, 3)), _np(engine.multinomial(p, 8, True))]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    g = engine.Generator().manual_seed(3)
    c = engine.multinomial(p, 2, generator=g)
    g.manual_seed(3)
    np.testing.assert_array_equal(_np(c), _np(engine.multinomial(p, 2, generator=g)))


def test_multinomial_frequencies() -> None:
    engine.manual_seed(1)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    counts = np.bincount(_np(engine.multinomial(engine.tensor(p), 20000, True)), minlength=4)
    np.testing.assert_allclose(counts / 20000, p, atol=0.02)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.multinomial(lib.ones(3), 4),
        lambda lib: lib.multinomial(lib.tensor([1.0, -1.0]), 1),
        lambda lib: lib.multinomial(lib.zeros(3), 1),
        lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1),
        lambda lib: lib.multinomial(lib.tensor(1.0), 1),
        lambda lib: lib.multinomial(lib.ones(3, dtype=lib.long), 1),
        lambda lib: lib.multinomial(lib.ones(3), 0),
        lambda lib: lib.multinomial(lib.tensor([1.0, float("inf")]), 1),
        lambda lib: lib.multinomial(lib.tensor([1.0, float("nan")]), 2),
        lambda lib: lib.multinomial(lib.tensor([1.0, -1.0]), 2, True),
        lambda lib: lib.multinomial(lib.zeros(2), 2, True),
    ],
)
def test_multinomial_errors(call: Callable[[ModuleType], Any], torch_oracle: ModuleType) -> None:
    _same_error(torch_oracle, call)


# --- random fills and nn.init -------------------------------------------------------------------


def _fills(lib: ModuleType) -> dict[str, Callable[[Any], Any]]:
    return {
        "uniform_": lambda t: t.uniform_(-1.0, 3.0),
        "normal_": lambda t: t.normal_(2.0, 0.5),
        "bernoulli_": lambda t: t.bernoulli_(0.3),
        "bernoulli_tensor": lambda t: t.bernoulli_(lib.full(tuple(t.shape), 0.3)),
        "exponential_": lambda t: t.exponential_(2.0),
        "random_": lambda t: t.random_(),
        "random_to": lambda t: t.random_(10),
        "random_from_to": lambda t: t.random_(-3, 4),
        "fill_": lambda t: t.fill_(1.5),
        "zero_": lambda t: t.zero_(),
    }


@pytest.mark.parametrize("name", list(_fills(engine)))
def test_random_fills_in_place(name: str, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        lib.manual_seed(0)
        leaf = lib.zeros(200, 100, requires_grad=True)
        x = leaf * 1
        out = _fills(lib)[name](x)
        (grad,) = lib.autograd.grad(x.sum(), leaf)
        return [out is x, x._version, x.grad_fn.name(), float(grad.abs().sum())]

    assert run(engine) == run(torch_oracle)


STATS = {
    "uniform_": (1.0, 4.0 / math.sqrt(12.0)),
    "normal_": (2.0, 0.5),
    "bernoulli_": (0.3, math.sqrt(0.21)),
    "exponential_": (0.5, 0.5),
    "random_to": (4.5, math.sqrt(99 / 12)),
    "random_from_to": (0.0, 2.0),
}


@pytest.mark.parametrize("name", list(STATS))
def test_random_fills_statistics(name: str) -> None:
    engine.manual_seed(0)
    t = _fills(engine)[name](engine.empty(200, 100, dtype=engine.float64))
    mean, std = STATS[name]
    values = _np(t)
    assert abs(values.mean() - mean) < 0.03 and abs(values.std() - std) < 0.03
    engine.manual_seed(0)
    again = _fills(engine)[name](engine.empty(200, 100, dtype=engine.float64))
    np.testing.assert_array_equal(values, _np(again))


def test_random_integers_ranges(torch_oracle: ModuleType) -> None:
    for dtype in ("float32", "int64", "uint8", "bool"):
        for lib in (engine, torch_oracle):
            x = lib.zeros(1000, dtype=getattr(lib, dtype)).random_(0, 2)
            assert set(np.unique(_np(x).astype(np.int64)).tolist()) == {0, 1}
    x = engine.zeros(1000, dtype=engine.uint8).random_()
    assert _np(x).max() > 200


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.zeros(3).uniform_(2, 1),
        lambda lib: lib.zeros(3).normal_(0, -1),
        lambda lib: lib.zeros(3).bernoulli_(2.0),
        lambda lib: lib.zeros(3).bernoulli_(-0.5),
        lambda lib: lib.zeros(3).exponential_(0),
        lambda lib: lib.zeros(3).exponential_(-1.5),
        lambda lib: lib.zeros(3).random_(3, 3),
        lambda lib: lib.zeros(3).random_(0),
        lambda lib: lib.ones(3, requires_grad=True).uniform_(),
    ],
)
def test_random_fill_errors(call: Callable[[ModuleType], Any], torch_oracle: ModuleType) -> None:
    _same_error(torch_oracle, call)


INITS: dict[str, tuple[Callable[..., Any], Callable[[int, int], tuple[float, float]]]] = {
    # name: (call, (mean, std) of the distribution for a (fan_out, fan_in) weight)
    "uniform_": (lambda m, t: m.uniform_(t, -0.5, 1.5), lambda o, i: (0.5, 2.0 / math.sqrt(12.0))),
    "normal_": (lambda m, t: m.normal_(t, 1.0, 0.2), lambda o, i: (1.0, 0.2)),
    "xavier_uniform_": (
        lambda m, t: m.xavier_uniform_(t, gain=2.0),
        lambda o, i: (0.0, 2.0 * math.sqrt(2.0 / (i + o))),
    ),
    "xavier_normal_": (lambda m, t: m.xavier_normal_(t), lambda o, i: (0.0, math.sqrt(2.0 / (i + o)))),
    "kaiming_uniform_": (
        lambda m, t: m.kaiming_uniform_(t, a=math.sqrt(5)),
        lambda o, i: (0.0, math.sqrt(2.0 / 6.0) / math.sqrt(i)),
    ),
    "kaiming_normal_": (
        lambda m, t: m.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
        lambda o, i: (0.0, math.sqrt(2.0) / math.sqrt(o)),
    ),
    "trunc_normal_": (lambda m, t: m.trunc_normal_(t, 0.0, 1.0, -1.0, 1.0), lambda o, i: (0.0, 0.5379)),
    "constant_": (lambda m, t: m.constant_(t, 0.25), lambda o, i: (0.25, 0.0)),
    "zeros_": (lambda m, t: m.zeros_(t), lambda o, i: (0.0, 0.0)),
    "ones_": (lambda m, t: m.ones_(t), lambda o, i: (1.0, 0.0)),
}


@pytest.mark.parametrize("name", list(INITS))
def test_init_functions_against_torch(name: str, torch_oracle: ModuleType) -> None:
    call, stats = INITS[name]
    fan_out, fan_in = 300, 400

    def run(lib: ModuleType) -> tuple[Any, np.ndarray]:
        lib.manual_seed(0)
        w = lib.empty(fan_out, fan_in, requires_grad=True)
        out = call(lib.nn.init, w)
        return [out is w, w.requires_grad, w.grad_fn is None, w._version > 0], _np(w)

    (ours_meta, ours), (theirs_meta, theirs) = run(engine), run(torch_oracle)
    assert ours_meta == theirs_meta  # (torch's trunc_normal_ bumps the version 5 times, the engine's once)
    mean, std = stats(fan_out, fan_in)
    for values in (ours, theirs):
        assert abs(values.mean() - mean) < 0.01 + 0.02 * std
        assert abs(values.std() - std) < 0.03 * std + 1e-12
    assert ours.min() >= theirs.min() - 0.05 * (std + 1) and ours.max() <= theirs.max() + 0.05 * (std + 1)


def test_trunc_normal_bounds_and_warning(torch_oracle: ModuleType) -> None:
    t = init.trunc_normal_(engine.empty(10000), mean=0.5, std=2.0, a=0.0, b=1.0)
    assert 0.0 <= float(t.min()) and float(t.max()) <= 1.0
    for lib in (engine, torch_oracle):
        with pytest.warns(UserWarning, match="mean is more than 2 std from"):
            lib.nn.init.trunc_normal_(lib.empty(10), mean=10.0, std=1.0, a=-2.0, b=2.0)
