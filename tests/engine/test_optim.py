"""``engine.optim`` against torch 2.8.0: several steps from the same parameters and the same
gradients must give the same parameters and the same state (float64, 1e-10), and the optimizer
API (state_dict, load_state_dict, param groups, zero_grad, hooks, errors, repr) must match."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from tests.engine._autograd_diff import normalize

pytestmark = pytest.mark.oracle

TOL = {"rtol": 1e-10, "atol": 1e-10}


def _arrays(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4,))]


def _params(lib: ModuleType, arrays: list[np.ndarray]) -> list[Any]:
    return [lib.nn.Parameter(lib.from_numpy(a.copy())) for a in arrays]


def _loss(lib: ModuleType, params: list[Any], step: int) -> Any:
    # A smooth, step-dependent loss so that gradients change from step to step.
    w, b = params
    x = lib.from_numpy(np.linspace(-1, 1, 8).reshape(2, 4) * (step + 1))
    return ((x * w.select(0, 0)).sin().sum() + (w * w).sum() * 0.3 + (b * b * b).sum()) * 0.5


def _run(
    lib: ModuleType, make: Callable[[list[Any]], Any], steps: int = 5, seed: int = 0
) -> tuple[list[Any], Any]:
    params = _params(lib, _arrays(seed))
    opt = make(params)
    for i in range(steps):
        opt.zero_grad()
        _loss(lib, params, i).backward()
        opt.step()
    return params, opt


def _compare_params(ours: list[Any], theirs: list[Any]) -> None:
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL)


def _compare_state(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert sorted(ours["state"]) == sorted(theirs["state"])
    for k, state in theirs["state"].items():
        assert sorted(ours["state"][k]) == sorted(state), f"state keys of param {k}"
        for name, value in state.items():
            mine = ours["state"][k][name]
            if value is None:
                assert mine is None
                continue
            assert str(mine.dtype).replace("engine", "torch") == str(value.dtype), name
            np.testing.assert_allclose(mine.numpy(), value.numpy(), err_msg=name, **TOL)
    assert ours["param_groups"] == theirs["param_groups"]


SGD_CONFIGS = [
    {"lr": 0.1},
    {"lr": 0.1, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.3},
    {"lr": 0.05, "momentum": 0.8, "nesterov": True},
    {"lr": 0.1, "weight_decay": 0.01},
    {"lr": 0.1, "momentum": 0.5, "weight_decay": 0.1, "maximize": True},
]

ADAM_CONFIGS = [
    {"lr": 0.01},
    {"lr": 0.05, "betas": (0.8, 0.9)},
    {"lr": 0.01, "weight_decay": 0.1},
    {"lr": 0.01, "amsgrad": True},
    {"lr": 0.02, "maximize": True, "eps": 1e-6},
    {"lr": 0.01, "weight_decay": 0.05, "decoupled_weight_decay": True, "amsgrad": True},
]


@pytest.mark.parametrize("config", SGD_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_sgd_steps_match_torch(config: dict[str, Any], torch_oracle: ModuleType) -> None:
    ours, opt = _run(engine, lambda p: engine.optim.SGD(p, **config))
    theirs, topt = _run(torch_oracle, lambda p: torch_oracle.optim.SGD(p, foreach=False, **config))
    _compare_params(ours, theirs)
    expected = topt.state_dict()
    for g in expected["param_groups"]:
        g["foreach"] = None  # the engine has one implementation; foreach=False was only for torch
    _compare_state(opt.state_dict(), expected)


@pytest.mark.parametrize("config", ADAM_CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_adam_steps_match_torch(config: dict[str, Any], torch_oracle: ModuleType) -> None:
    ours, opt = _run(engine, lambda p: engine.optim.Adam(p, **config))
    theirs, topt = _run(torch_oracle, lambda p: torch_oracle.optim.Adam(p, foreach=False, **config))
    _compare_params(ours, theirs)
    expected = topt.state_dict()
    for g in expected["param_groups"]:
        g["foreach"] = None
    _compare_state(opt.state_dict(), expected)


def test_adamw_matches_torch(torch_oracle: ModuleType) -> None:
    ours, opt = _run(engine, lambda p: engine.optim.AdamW(p, lr=0.01))
    theirs, topt = _run(torch_oracle, lambda p: torch_oracle.optim.AdamW(p, lr=0.01, foreach=False))
    _compare_params(ours, theirs)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True
    assert opt.param_groups[0]["weight_decay"] == topt.param_groups[0]["weight_decay"] == 1e-2


def test_step_is_not_recorded_and_bumps_versions(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[Any, ...]:
        (w, b) = _params(lib, _arrays())
        opt = lib.optim.SGD([w, b], lr=0.1, momentum=0.9)
        _loss(lib, [w, b], 0).backward()
        v0 = w._version
        opt.step()
        return w.grad_fn, w.is_leaf, w.requires_grad, w._version - v0

    assert run(engine) == run(torch_oracle)


def test_modified_saved_parameter_error_matches_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> str:
        w, _ = _params(lib, _arrays())
        opt = lib.optim.SGD([w], lr=0.1)
        w.grad = lib.ones_like(w)
        y = (w * w).sum()  # MulBackward0 saves w
        opt.step()  # updates w in place
        with pytest.raises(RuntimeError) as info:
            y.backward()
        return str(info.value)

    assert run(engine) == normalize(run(torch_oracle))


def test_params_without_grad_are_skipped(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[list[np.ndarray], list[int]]:
        w, b = _params(lib, _arrays())
        opt = lib.optim.Adam([w, b], lr=0.1)
        (w * w).sum().backward()
        opt.step()
        return [w.detach().numpy().copy(), b.detach().numpy().copy()], sorted(opt.state_dict()["state"])

    (ours, ours_state), (theirs, theirs_state) = run(engine), run(torch_oracle)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, **TOL)
    assert ours_state == theirs_state == [0]


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_load_state_dict_resumes_training(name: str, torch_oracle: ModuleType) -> None:
    kwargs: dict[str, Any] = {"lr": 0.05, "momentum": 0.9} if name == "SGD" else {"lr": 0.05, "amsgrad": True}
    cls = getattr(engine.optim, name)
    straight, _ = _run(engine, lambda p: cls(p, **kwargs), steps=6)
    params = _params(engine, _arrays())
    opt = cls(params, **kwargs)
    for i in range(3):
        opt.zero_grad()
        _loss(engine, params, i).backward()
        opt.step()
    saved = opt.state_dict()
    # A new optimizer over the same parameters, restored from the state dict.
    opt2 = cls(params, lr=1.0)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == 0.05
    for i in range(3, 6):
        opt2.zero_grad()
        _loss(engine, params, i).backward()
        opt2.step()
    _compare_params(params, straight)
    theirs, _ = _run(
        torch_oracle, lambda p: getattr(torch_oracle.optim, name)(p, foreach=False, **kwargs), steps=6
    )
    _compare_params(params, theirs)


def test_load_state_dict_errors_match_torch(torch_oracle: ModuleType) -> None:
    def errors(lib: ModuleType) -> list[str]:
        w, b = _params(lib, _arrays())
        out = []
        opt = lib.optim.SGD([w, b], lr=0.1)
        one_group = lib.optim.SGD([w], lr=0.1).state_dict()
        two_groups = lib.optim.SGD([{"params": [w]}, {"params": [b]}], lr=0.1).state_dict()
        for sd in (one_group, two_groups):
            with pytest.raises(ValueError) as info:
                opt.load_state_dict(sd)
            out.append(str(info.value))
        return out

    assert errors(engine) == errors(torch_oracle)


def test_param_groups_and_add_param_group(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[Any, ...]:
        w, b = _params(lib, _arrays())
        opt = lib.optim.SGD([{"params": [w]}], lr=0.1, momentum=0.5)
        opt.add_param_group({"params": b, "lr": 0.01})
        for i in range(3):
            opt.zero_grad()
            _loss(lib, [w, b], i).backward()
            opt.step()
        groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
        return w.detach().numpy().copy(), b.detach().numpy().copy(), groups, opt.state_dict()["param_groups"]

    ours, theirs = run(engine), run(torch_oracle)
    np.testing.assert_allclose(ours[0], theirs[0], **TOL)
    np.testing.assert_allclose(ours[1], theirs[1], **TOL)
    assert ours[2] == theirs[2]
    assert ours[3] == theirs[3]


def test_named_params_are_kept_in_state_dict(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        w, b = _params(lib, _arrays())
        return lib.optim.Adam([("w", w), ("b", b)]).state_dict()["param_groups"][0]["param_names"]

    assert run(engine) == run(torch_oracle) == ["w", "b"]


@pytest.mark.parametrize(
    "bad",
    [
        "empty",
        "tensor",
        "set",
        "duplicate group",
        "non-leaf",
        "negative lr",
        "nesterov",
        "beta",
        "not a tensor",
    ],
)
def test_constructor_errors_match_torch(bad: str, torch_oracle: ModuleType) -> None:
    def error(lib: ModuleType) -> tuple[str, str]:
        w, b = _params(lib, _arrays())
        calls: dict[str, Callable[[], Any]] = {
            "empty": lambda: lib.optim.SGD([], lr=0.1),
            "tensor": lambda: lib.optim.SGD(w, lr=0.1),
            "set": lambda: lib.optim.SGD([w], lr=0.1).add_param_group({"params": {b}}),
            "duplicate group": lambda: lib.optim.SGD([{"params": [w]}, {"params": [w, b]}], lr=0.1),
            "non-leaf": lambda: lib.optim.SGD([w * 2], lr=0.1),
            "negative lr": lambda: lib.optim.Adam([w], lr=-1.0),
            "nesterov": lambda: lib.optim.SGD([w], lr=0.1, nesterov=True),
            "beta": lambda: lib.optim.Adam([w], betas=(1.0, 0.9)),
            "not a tensor": lambda: lib.optim.SGD([1.0], lr=0.1),
        }
        with pytest.raises((ValueError, TypeError)) as info:
            calls[bad]()
        return type(info.value).__name__, str(info.value).replace("torch.", "engine.")

    assert error(engine) == error(torch_oracle)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_matches_torch(set_to_none: bool, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[Any, ...]:
        w, b = _params(lib, _arrays())
        opt = lib.optim.SGD([w, b], lr=0.1)
        _loss(lib, [w, b], 0).backward()
        g = w.grad
        opt.zero_grad(set_to_none=set_to_none)
        if set_to_none:
            return w.grad is None, b.grad is None
        return w.grad is g, float(np.abs(w.grad.numpy()).sum()), w.grad.requires_grad

    assert run(engine) == run(torch_oracle)


def test_repr_matches_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[str]:
        w, b = _params(lib, _arrays())
        return [
            repr(lib.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.9)),
            repr(lib.optim.Adam([w, b], lr=0.01, amsgrad=True)),
        ]

    assert run(engine) == run(torch_oracle)


def test_step_hooks_and_closure(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[Any, ...]:
        w, b = _params(lib, _arrays())
        opt = lib.optim.SGD([w, b], lr=0.1)
        events: list[str] = []
        pre = opt.register_step_pre_hook(lambda o, args, kwargs: events.append("pre"))
        opt.register_step_post_hook(lambda o, args, kwargs: events.append(f"post {w.grad is not None}"))

        def closure() -> Any:
            events.append(f"closure grad_enabled={lib.is_grad_enabled()}")
            opt.zero_grad()
            loss = _loss(lib, [w, b], 0)
            loss.backward()
            return loss

        loss = opt.step(closure)
        pre.remove()
        opt.step(closure)
        return events, float(loss.item()), w.detach().numpy().copy()

    ours, theirs = run(engine), run(torch_oracle)
    assert ours[0] == theirs[0]
    assert ours[1] == pytest.approx(theirs[1], rel=1e-12)
    np.testing.assert_allclose(ours[2], theirs[2], **TOL)


def test_state_dict_is_loadable_by_torch(torch_oracle: ModuleType) -> None:
    """The engine's Adam state, converted to torch tensors, continues training in torch exactly
    like torch's own state would."""
    params, opt = _run(engine, lambda p: engine.optim.Adam(p, lr=0.02), steps=3)
    sd = opt.state_dict()
    tparams = [torch_oracle.nn.Parameter(torch_oracle.from_numpy(p.detach().numpy().copy())) for p in params]
    topt = torch_oracle.optim.Adam(tparams, lr=0.02, foreach=False)
    tsd = {
        "state": {
            k: {n: torch_oracle.from_numpy(np.array(v.numpy())) for n, v in s.items()}
            for k, s in sd["state"].items()
        },
        "param_groups": sd["param_groups"],
    }
    topt.load_state_dict(tsd)
    for i in range(3, 5):
        opt.zero_grad()
        _loss(engine, params, i).backward()
        opt.step()
        topt.zero_grad()
        _loss(torch_oracle, tparams, i).backward()
        topt.step()
    _compare_params(params, tparams)
