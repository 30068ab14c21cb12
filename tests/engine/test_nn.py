"""``engine.nn`` modules against torch 2.8.0: weights are copied from the engine module into the
torch module through NumPy, then outputs, gradients, ``named_parameters``, ``state_dict``,
``repr``, the registration API, hooks and ``init`` are compared.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from tests.engine._nn_helpers import (
    TOL,
    _close,
    _compare_grads,
    _error,
    _graph,
    _leaf,
    _np,
    _rand,
    _twin,
)

pytestmark = pytest.mark.oracle


# --- modules: a small model ---------------------------------------------------------------------


def _make_model(lib: ModuleType) -> Any:
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d), nn.Dropout(0.1))

        def forward(self, x: Any) -> Any:
            return x + self.ff(self.norm(x))

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(11, 4)
            self.blocks = nn.ModuleList([Block(4) for _ in range(2)])
            self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "aux": nn.Linear(4, 1, bias=False)})
            self.register_buffer("scale", lib.tensor(0.5))
            self.register_buffer("cache", lib.zeros(2), persistent=False)

        def forward(self, idx: Any) -> Any:
            h = self.embed(idx)
            for block in self.blocks:
                h = block(h)
            return self.heads["cls"](h) * self.scale, self.heads["aux"](h)

    return Model()


def test_model_forward_backward_and_registries(torch_oracle: ModuleType) -> None:
    engine.manual_seed(0)
    ours, theirs = _twin(_make_model, torch_oracle)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in theirs.named_parameters()
    ]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [type(m).__name__ for m in ours.modules()] == [type(m).__name__ for m in theirs.modules()]
    assert repr(ours).replace("engine", "torch") == repr(theirs)
    ours.eval()
    theirs.eval()
    idx = [[1, 2, 3], [10, 0, 3]]
    (a, b), (ta, tb) = ours(engine.tensor(idx)), theirs(torch_oracle.tensor(idx))
    _close(a, ta)
    _close(b, tb)
    assert _graph(a) == _graph(ta)
    loss = (
        engine.nn.functional.cross_entropy(a.reshape(6, 3), engine.tensor([0, 1, 2, 2, 1, 0]))
        + b.pow(2).mean()
    )
    tloss = (
        torch_oracle.nn.functional.cross_entropy(ta.reshape(6, 3), torch_oracle.tensor([0, 1, 2, 2, 1, 0]))
        + tb.pow(2).mean()
    )
    _close(loss, tloss)
    loss.backward()
    tloss.backward()
    _compare_grads(ours, theirs)


def test_training_loop_matches_torch(torch_oracle: ModuleType) -> None:
    engine.manual_seed(1)

    def make(lib: ModuleType) -> Any:
        nn = lib.nn
        return nn.Sequential(
            nn.Linear(4, 8), nn.Tanh(), nn.LayerNorm(8), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3)
        )

    ours, theirs = _twin(make, torch_oracle)
    x, y = _rand(16, 4, seed=7), np.random.default_rng(8).integers(0, 3, 16)
    opt = engine.optim.Adam(ours.parameters(), lr=0.01)
    topt = torch_oracle.optim.Adam(theirs.parameters(), lr=0.01, foreach=False)
    for _ in range(5):
        for lib, model, o in ((engine, ours, opt), (torch_oracle, theirs, topt)):
            o.zero_grad()
            lib.nn.functional.cross_entropy(
                model(lib.from_numpy(x.copy())), lib.from_numpy(y.copy())
            ).backward()
            o.step()
    for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        np.testing.assert_allclose(_np(p), _np(tp), rtol=1e-9, atol=1e-10, err_msg=n)


# --- modules: API -------------------------------------------------------------------------------


REPRS: dict[str, Callable[[ModuleType], Any]] = {
    "Linear": lambda lib: lib.nn.Linear(3, 4, bias=False),
    "Sequential": lambda lib: lib.nn.Sequential(
        lib.nn.Linear(2, 2), lib.nn.ReLU(inplace=True), lib.nn.Identity()
    ),
    "Sequential OrderedDict": lambda lib: lib.nn.Sequential(
        OrderedDict([("fc", lib.nn.Linear(2, 3)), ("act", lib.nn.GELU(approximate="tanh"))])
    ),
    "ModuleList repeated": lambda lib: lib.nn.ModuleList(
        [lib.nn.Linear(2, 2) for _ in range(3)] + [lib.nn.Tanh()]
    ),
    "ModuleList empty": lambda lib: lib.nn.ModuleList(),
    "ModuleDict": lambda lib: lib.nn.ModuleDict(
        {"a": lib.nn.Sigmoid(), "b": lib.nn.Dropout(0.2, inplace=True)}
    ),
    "losses": lambda lib: lib.nn.Sequential(lib.nn.MSELoss(), lib.nn.CrossEntropyLoss(label_smoothing=0.1)),
    "softmax": lambda lib: lib.nn.Sequential(lib.nn.Softmax(dim=1), lib.nn.LogSoftmax(dim=-1), lib.nn.SiLU()),
    "embedding": lambda lib: lib.nn.Embedding(5, 2, max_norm=1.0, scale_grad_by_freq=True),
    "layer norm": lambda lib: lib.nn.LayerNorm((2, 3), eps=1e-6, elementwise_affine=False),
}


@pytest.mark.parametrize("name", list(REPRS))
def test_repr_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    assert repr(REPRS[name](engine)) == repr(REPRS[name](torch_oracle))


def test_parameter(torch_oracle: ModuleType) -> None:
    data = engine.tensor([1.0, 2.0])
    p = engine.nn.Parameter(data)
    assert repr(p) == repr(torch_oracle.nn.Parameter(torch_oracle.tensor([1.0, 2.0]))) and p.requires_grad
    assert isinstance(p, engine.Tensor) and isinstance(p, engine.nn.Parameter) and p.is_leaf
    with engine.no_grad():
        data.add_(1.0)
    np.testing.assert_array_equal(_np(p), [2.0, 3.0])  # shares memory with data
    assert p._version == data._version
    assert type(p * 2) is engine.Tensor and type(p.detach()) is engine.Tensor
    assert not engine.nn.Parameter(engine.ones(2), requires_grad=False).requires_grad
    q = copy.deepcopy(p)
    assert type(q) is engine.nn.Parameter and q.requires_grad and q.data_ptr() != p.data_ptr()
    empty = engine.nn.Parameter()
    assert tuple(empty.shape) == tuple(torch_oracle.nn.Parameter().shape)


def test_registration_and_attribute_errors(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        m = lib.nn.Linear(2, 2)
        out: list[Any] = []
        for fn in (
            lambda: setattr(m, "weight", lib.ones(2, 2)),
            lambda: m.register_buffer("weight", lib.ones(2)),
            lambda: m.register_parameter("a.b", None),
            lambda: m.register_buffer("buf", 3),
            lambda: m.add_module("x", 3),
            lambda: m.register_parameter("p", lib.ones(2)),
            lambda: m.register_parameter("q", lib.nn.Parameter(lib.ones(2)) * 2),
            lambda: m.missing,
            lambda: m.get_submodule("a.b"),
            lambda: lib.nn.Sequential(m).get_parameter("0.nothing"),
            lambda: lib.nn.Linear(2, 2)(),
            lambda: lib.nn.Module()(lib.ones(1)),
        ):
            out.append(_error(fn))
        m.extra = lib.nn.Tanh()
        m.register_buffer("running", lib.zeros(2))
        m.register_parameter("gain", None)
        m.running = lib.ones(2)
        out.append([n for n, _ in m.named_children()])
        out.append(sorted(m.state_dict()))
        out.append([n for n, _ in m.named_parameters()])
        del m.extra
        m.bias = None
        out.append([n for n, _ in m.named_parameters()])
        out.append([n for n, _ in m.named_children()])
        out.append(m.get_submodule("") is m)
        return out

    assert run(engine) == [
        x if not isinstance(x, tuple) else (x[0], x[1].replace("torch.", "engine."))
        for x in run(torch_oracle)
    ]


def test_buffers_and_state_dict(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.LayerNorm(3))
        m[0].register_buffer("steps", lib.tensor(3))
        m[1].register_buffer("tmp", lib.ones(1), persistent=False)
        m[1].b2 = lib.nn.Buffer(lib.zeros(2), persistent=False)
        sd = m.state_dict()
        kv = m.state_dict(keep_vars=True)
        return [
            list(sd),
            [n for n, _ in m.named_buffers()],
            sd["0.weight"].requires_grad,
            kv["0.weight"].requires_grad,
            kv["0.weight"] is m[0].weight,
            sd["0.weight"].data_ptr() == m[0].weight.data_ptr(),
            dict(sd._metadata),
            [n for n, _ in m.named_parameters(prefix="net", recurse=True)],
            [n for n, _ in m[0].named_parameters(recurse=False)],
            len(list(m.buffers())),
        ]

    assert run(engine) == run(torch_oracle)


def test_load_state_dict(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1))
        src = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1))
        v0 = m[0].weight._version
        result = m.load_state_dict(src.state_dict())
        out: list[Any] = [
            repr(result),
            np.array_equal(_np(m[0].weight), _np(src[0].weight)),
            m[0].weight._version - v0,
        ]
        out.append(m[0].weight.requires_grad)
        sd = src.state_dict()
        del sd["2.bias"]
        sd["extra"] = lib.zeros(1)
        out.append(_error(lambda: m.load_state_dict(sd)))
        out.append(repr(m.load_state_dict(sd, strict=False)))
        bad = src.state_dict()
        bad["0.weight"] = lib.zeros(4, 2)
        out.append(_error(lambda: m.load_state_dict(bad)))
        out.append(_error(lambda: m.load_state_dict([1, 2])))
        w = lib.zeros(3, 2)
        res = m.load_state_dict({**src.state_dict(), "0.weight": w}, assign=True)
        out.append((repr(res), m[0].weight.data_ptr() == w.data_ptr(), type(m[0].weight).__name__))
        return out

    ours, theirs = run(engine), run(torch_oracle)
    theirs = [
        x if not isinstance(x, tuple) else tuple(str(y).replace("torch.", "engine.") for y in x)
        for x in theirs
    ]
    ours = [x if not isinstance(x, tuple) else tuple(str(y) for y in x) for x in ours]
    assert ours == theirs


def test_train_eval_zero_grad_apply_requires_grad(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType, set_to_none: bool) -> list[Any]:
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Sequential(lib.nn.Dropout(), lib.nn.Linear(2, 1)))
        out: list[Any] = [[x.training for x in m.modules()]]
        m.eval()
        out.append([x.training for x in m.modules()])
        m[1].train()
        out.append([x.training for x in m.modules()])
        out.append(_error(lambda: m.train("yes")))
        m(lib.ones(3, 2)).sum().backward()
        m.zero_grad(set_to_none=set_to_none)
        out.append([None if p.grad is None else float(np.abs(_np(p.grad)).sum()) for p in m.parameters()])
        visited: list[str] = []
        m.apply(lambda mod: visited.append(type(mod).__name__))
        out.append(visited)
        m.requires_grad_(False)
        out.append([p.requires_grad for p in m.parameters()])
        out.append(m.double() is m and m[0].weight.dtype == lib.float64)
        return out

    for set_to_none in (True, False):
        ours, theirs = run(engine, set_to_none), run(torch_oracle, set_to_none)
        assert ours[:3] == theirs[:3]
        assert ours[3][0] == theirs[3][0] and ours[3][1] == theirs[3][1]
        assert ours[4:] == theirs[4:]


def test_containers(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        nn = lib.nn
        seq = nn.Sequential(nn.Linear(1, 1), nn.ReLU(), nn.Tanh())
        out: list[Any] = [type(seq[-1]).__name__, [type(x).__name__ for x in seq[1:]], len(seq)]
        del seq[0]
        seq.append(nn.Sigmoid())
        seq.insert(0, nn.Identity())
        out.append(list(seq._modules))
        out.append([type(x).__name__ for x in seq + nn.Sequential(nn.ReLU())])
        out.append(_error(lambda: seq[10]))
        ml = nn.ModuleList([nn.ReLU()])
        ml += [nn.Tanh()]
        ml.append(nn.Sigmoid()).extend([nn.Identity()])
        ml.insert(1, nn.GELU())
        ml[0] = nn.SiLU()
        out.append([type(x).__name__ for x in ml])
        out.append(_error(lambda: ml[7]))
        out.append(type(ml.pop(1)).__name__)
        md = nn.ModuleDict([("a", nn.ReLU()), ("b", nn.Tanh())])
        md["c"] = nn.Linear(1, 1)
        out.append((list(md.keys()), "a" in md, len(md), type(md.pop("b")).__name__, list(md)))
        out.append([n for n, _ in md.named_parameters()])
        return out

    assert run(engine) == run(torch_oracle)


# --- hooks --------------------------------------------------------------------------------------


def test_forward_hooks(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        log: list[Any] = []
        m = lib.nn.Linear(2, 2).double()
        with lib.no_grad():
            m.weight.copy_(lib.from_numpy(_rand(2, 2)))
            m.bias.zero_()
        h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        m.register_forward_pre_hook(lambda mod, args: log.append(("pre", float(args[0].detach().sum()))))
        m.register_forward_pre_hook(lambda mod, args: log.append("pre first"), prepend=True)
        m.register_forward_hook(lambda mod, args, out: log.append(("fwd", float(out.detach().sum()))))
        h2 = m.register_forward_hook(lambda mod, args, out: out + 1)
        m.register_forward_hook(
            lambda mod, args, kwargs, out: log.append(("kw", sorted(kwargs))), with_kwargs=True
        )
        x = lib.ones(1, 2, dtype=lib.float64)
        log.append(float(m(x).detach().sum()))
        h1.remove()
        h2.remove()
        log.append(float(m(x).detach().sum()))
        calls: list[str] = []
        bad = lib.nn.Module()
        bad.register_forward_hook(lambda mod, args, out: calls.append(f"always {out}"), always_call=True)
        bad.register_forward_hook(lambda mod, args, out: calls.append("normal"))
        log.append(_error(lambda: bad(x))[0])
        log.append(calls)
        return log

    assert run(engine) == run(torch_oracle)


def test_a_pre_hook_that_replaces_forward_changes_the_next_call(torch_oracle: ModuleType) -> None:
    # torch's _call_impl reads self.forward before the pre-hooks run (its forward_call): what a
    # pre-hook puts in self.forward runs from the next call on (app/whatif.py relies on it).
    def run(lib: ModuleType) -> list[Any]:
        m = lib.nn.Identity()
        calls: list[str] = []

        def replace(mod: Any, args: Any) -> None:
            calls.append("pre")
            mod.forward = lambda x: calls.append("replaced") or x

        handle = m.register_forward_pre_hook(replace)
        m(lib.ones(1))
        handle.remove()
        m(lib.ones(1))
        global_handle = lib.nn.modules.module.register_module_forward_pre_hook(
            lambda mod, args: calls.append("global")
        )
        try:
            del m.forward
            m(lib.ones(1))
        finally:
            global_handle.remove()
        return calls

    assert run(engine) == run(torch_oracle) == ["pre", "replaced", "global"]


def test_full_backward_hooks(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        log: list[Any] = []
        m = lib.nn.Linear(3, 2).double()
        with lib.no_grad():
            m.weight.copy_(lib.from_numpy(_rand(2, 3)))
            m.bias.fill_(0.5)

        def hook(mod: Any, grad_input: Any, grad_output: Any) -> Any:
            log.append(
                (
                    "hook",
                    [None if g is None else _np(g).round(12).tolist() for g in grad_input],
                    [_np(g).round(12).tolist() for g in grad_output],
                )
            )
            return (grad_input[0] * 10,)

        def pre_hook(mod: Any, grad_output: Any) -> Any:
            log.append(("pre", _np(grad_output[0]).round(12).tolist()))
            return (grad_output[0] * 2,)

        m.register_full_backward_hook(hook)
        m.register_full_backward_pre_hook(pre_hook)
        x = _leaf(lib, _rand(4, 3, seed=1))
        y = m(x)
        log.append(_graph(y))
        y.pow(2).sum().backward()
        log.append(_np(x.grad).round(10).tolist())
        log.append(_np(m.weight.grad).round(10).tolist())
        log.append(
            _error(lambda: m.register_backward_hook(hook)) if hasattr(m, "register_backward_hook") else None
        )
        return log

    ours, theirs = run(engine), run(torch_oracle)
    assert ours[:-1] == theirs[:-1]
    assert ours[0][0] == "BackwardHookFunctionBackward"


def test_module_forward_hooks_global(torch_oracle: ModuleType) -> None:
    from engine.nn.modules import module as module_mod

    seen: list[str] = []
    handle = module_mod.register_module_forward_hook(lambda m, args, out: seen.append(type(m).__name__))
    try:
        engine.nn.Sequential(engine.nn.ReLU(), engine.nn.Tanh())(engine.ones(2))
    finally:
        handle.remove()
    engine.nn.ReLU()(engine.ones(2))
    assert seen == ["ReLU", "Tanh", "Sequential"]


# --- init ---------------------------------------------------------------------------------------


def test_init_gains_and_fans(torch_oracle: ModuleType) -> None:
    init, tinit = engine.nn.init, torch_oracle.nn.init
    for args in (
        ("linear",),
        ("sigmoid",),
        ("tanh",),
        ("relu",),
        ("leaky_relu",),
        ("leaky_relu", 0.2),
        ("selu",),
    ):
        assert init.calculate_gain(*args) == tinit.calculate_gain(*args)
    assert _error(lambda: init.calculate_gain("foo")) == _error(lambda: tinit.calculate_gain("foo"))
    for shape in ((3, 4), (5, 2, 3, 3)):
        assert init._calculate_fan_in_and_fan_out(
            engine.zeros(*shape)
        ) == tinit._calculate_fan_in_and_fan_out(torch_oracle.zeros(*shape))
    assert _error(lambda: init._calculate_fan_in_and_fan_out(engine.zeros(3))) == _error(
        lambda: tinit._calculate_fan_in_and_fan_out(torch_oracle.zeros(3))
    )
    assert _error(lambda: init.kaiming_uniform_(engine.zeros(2, 2), mode="fan")) == _error(
        lambda: tinit.kaiming_uniform_(torch_oracle.zeros(2, 2), mode="fan")
    )


@pytest.mark.parametrize(
    ("name", "kwargs", "bound", "std"),
    [
        ("uniform_", {"a": -0.5, "b": 2.0}, (-0.5, 2.0), 2.5 / math.sqrt(12)),
        ("normal_", {"mean": 1.0, "std": 0.5}, None, 0.5),
        ("xavier_uniform_", {"gain": 2.0}, (-2 * math.sqrt(6 / 300), 2 * math.sqrt(6 / 300)), None),
        ("xavier_normal_", {}, None, math.sqrt(2 / 300)),
        ("kaiming_uniform_", {"a": math.sqrt(5)}, (-1 / math.sqrt(100), 1 / math.sqrt(100)), None),
        ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, None, math.sqrt(2 / 200)),
    ],
)
def test_random_init(name: str, kwargs: dict[str, Any], bound: Any, std: float | None) -> None:
    w = engine.nn.Parameter(engine.zeros(200, 100))
    v0 = w._version
    engine.manual_seed(3)
    out = getattr(engine.nn.init, name)(w, **kwargs)
    a = _np(w)
    assert out is w and w._version > v0 and w.grad_fn is None and w.is_leaf
    if bound is not None:
        assert bound[0] <= a.min() and a.max() <= bound[1]
        assert a.min() < bound[0] + 0.01 * (bound[1] - bound[0]) and a.max() > bound[1] - 0.01 * (
            bound[1] - bound[0]
        )
    if std is not None:
        assert a.std() == pytest.approx(std, rel=0.03)
    engine.manual_seed(3)
    again = engine.zeros(200, 100)
    getattr(engine.nn.init, name)(again, **kwargs)
    np.testing.assert_array_equal(_np(again), a)
    g = engine.Generator().manual_seed(3)
    getattr(engine.nn.init, name)(again, generator=g, **kwargs)
    np.testing.assert_array_equal(_np(again), a)


def test_constant_inits(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        w = lib.nn.Parameter(lib.empty(2, 3))
        return [
            _np(lib.nn.init.constant_(w, 0.25)).tolist(),
            _np(lib.nn.init.ones_(w)).tolist(),
            _np(lib.nn.init.zeros_(w)).tolist(),
            w._version,
            w.grad_fn is None,
        ]

    assert run(engine) == run(torch_oracle)


def test_full_backward_hook_without_input_grad_warns_like_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        log: list[Any] = []
        m = lib.nn.Linear(2, 1).double()
        m.register_full_backward_hook(lambda mod, gi, go: log.append((gi, _np(go[0]).tolist())))
        with pytest.warns(UserWarning) as record:
            m(lib.ones(3, 2, dtype=lib.float64)).sum().backward()
        log.append(str(record[0].message))
        return log

    assert run(engine) == run(torch_oracle)


@pytest.mark.parametrize(
    ("max_norm", "norm_type"), [(1.0, 2.0), (100.0, 2.0), (0.5, float("inf")), (2.0, 1.0)]
)
def test_clip_grad_norm_matches_torch(max_norm: float, norm_type: float, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        ps = [
            lib.nn.Parameter(lib.from_numpy(_rand(3, 2))),
            lib.nn.Parameter(lib.from_numpy(_rand(4, seed=1))),
        ]
        ps.append(lib.nn.Parameter(lib.zeros(2, dtype=lib.float64)))  # no grad: skipped
        for p, seed in zip(ps[:2], (2, 3), strict=True):
            p.grad = lib.from_numpy(_rand(*p.shape, seed=seed))
        total = lib.nn.utils.clip_grad_norm_(iter(ps), max_norm, norm_type=norm_type)
        return [_np(total), *[_np(p.grad) for p in ps[:2]], ps[2].grad is None]

    ours, theirs = run(engine), run(torch_oracle)
    for a, b in zip(ours[:-1], theirs[:-1], strict=True):
        np.testing.assert_allclose(a, b, **TOL)
    assert ours[-1] is theirs[-1] is True


def test_clip_grad_value_and_nonfinite_error(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        p = lib.nn.Parameter(lib.from_numpy(_rand(5)))
        p.grad = lib.from_numpy(_rand(5, seed=1))
        lib.nn.utils.clip_grad_value_(p, 0.5)
        q = lib.nn.Parameter(lib.ones(2))
        q.grad = lib.tensor([float("inf"), 1.0])
        return [_np(p.grad), _error(lambda: lib.nn.utils.clip_grad_norm_([q], 1.0, error_if_nonfinite=True))]

    ours, theirs = run(engine), run(torch_oracle)
    np.testing.assert_allclose(ours[0], theirs[0], **TOL)
    assert ours[1] == theirs[1]
