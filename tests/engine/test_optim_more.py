"""RMSprop, Adagrad, AdamW and the learning-rate schedulers against torch 2.8.0.

Optimizers: many steps from the same parameters and the same gradients give the same parameters
and the same state (float64 to 1e-10, float32 to 1e-6 relative); state_dict round trips; param
groups. Schedulers: 50 steps of learning rates equal to torch's, their state_dict, and the
warning texts."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine

pytestmark = pytest.mark.oracle

TOL64 = {"rtol": 1e-10, "atol": 1e-12}
# float32: 1e-6 relative to the parameters' scale (they are O(1)). torch's CPU kernels fuse
# ``a + alpha * b`` into one FMA where NumPy rounds twice, so the last bit can differ.
TOL32 = {"rtol": 1e-6, "atol": 1e-6}


def _arrays(dtype: Any, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (3, 4)).astype(dtype), rng.uniform(-1, 1, (4,)).astype(dtype)]


def _params(lib: ModuleType, arrays: list[np.ndarray]) -> list[Any]:
    return [lib.nn.Parameter(lib.from_numpy(a.copy())) for a in arrays]


def _loss(lib: ModuleType, params: list[Any], step: int) -> Any:
    w, b = params
    x = lib.from_numpy(np.linspace(-1, 1, 8).reshape(2, 4).astype(w.detach().numpy().dtype) * (step + 1))
    return ((x * w.select(0, 0)).sin().sum() + (w * w).sum() * 0.3 + (b * b * b).sum()) * 0.5


def _run(
    lib: ModuleType, make: Callable[[list[Any]], Any], dtype: Any, steps: int = 20
) -> tuple[list[Any], Any]:
    params = _params(lib, _arrays(dtype))
    opt = make(params)
    for i in range(steps):
        opt.zero_grad()
        _loss(lib, params, i).backward()
        opt.step()
    return params, opt


def _compare_state(ours: dict[str, Any], theirs: dict[str, Any], tol: dict[str, float]) -> None:
    assert sorted(ours["state"]) == sorted(theirs["state"])
    for k, state in theirs["state"].items():
        assert sorted(ours["state"][k]) == sorted(state), f"state keys of param {k}"
        for name, value in state.items():
            mine = ours["state"][k][name]
            assert str(mine.dtype).replace("engine", "torch") == str(value.dtype), name
            np.testing.assert_allclose(mine.numpy(), value.numpy(), err_msg=name, **tol)
    assert ours["param_groups"] == theirs["param_groups"]


def _ids(c: dict[str, Any]) -> str:
    return "-".join(f"{k}={getattr(v, '__name__', v)}" for k, v in c.items()) or "defaults"


CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.005, "centered": True}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "maximize": True, "eps": 1e-6}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05}),
    ("Adagrad", {"lr": 0.1, "weight_decay": 0.1, "initial_accumulator_value": 0.5}),
    ("Adagrad", {"lr": 0.05, "maximize": True, "eps": 1e-6}),
    ("AdamW", {}),
    ("AdamW", {"lr": 0.02, "weight_decay": 0.3, "amsgrad": True}),
    ("AdamW", {"lr": 0.02, "betas": (0.8, 0.95), "maximize": True}),
]


def _grads(dtype: Any, steps: int, seed: int = 1) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.normal(0, 1, a.shape).astype(dtype) for a in _arrays(dtype)] for _ in range(steps)]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize(("name", "config"), CONFIGS, ids=[f"{n}-{_ids(c)}" for n, c in CONFIGS])
def test_steps_match_torch(name: str, config: dict[str, Any], dtype: Any, torch_oracle: ModuleType) -> None:
    """The same parameters and the same gradients, step by step for 30 steps. torch's default on
    CPU tensors is its single-tensor implementation, the engine's only one; foreach stays None on
    both sides."""
    tol = TOL64 if dtype is np.float64 else TOL32
    ours, theirs = _params(engine, _arrays(dtype)), _params(torch_oracle, _arrays(dtype))
    opt = getattr(engine.optim, name)(ours, **config)
    topt = getattr(torch_oracle.optim, name)(theirs, **config)
    for step, grads in enumerate(_grads(dtype, 30)):
        for lib, params, o in ((engine, ours, opt), (torch_oracle, theirs, topt)):
            for p, g in zip(params, grads, strict=True):
                p.grad = lib.from_numpy(g.copy())
            o.step()
        for a, b in zip(ours, theirs, strict=True):
            assert str(a.dtype).replace("engine", "torch") == str(b.dtype)
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), err_msg=f"step {step}", **tol)
    _compare_state(opt.state_dict(), topt.state_dict(), tol)


@pytest.mark.parametrize(("name", "config"), CONFIGS, ids=[f"{n}-{_ids(c)}" for n, c in CONFIGS])
def test_training_loop_matches_torch(name: str, config: dict[str, Any], torch_oracle: ModuleType) -> None:
    """Gradients from backward, 20 steps, float64."""
    ours, opt = _run(engine, lambda p: getattr(engine.optim, name)(p, **config), np.float64)
    theirs, topt = _run(torch_oracle, lambda p: getattr(torch_oracle.optim, name)(p, **config), np.float64)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL64)
    _compare_state(opt.state_dict(), topt.state_dict(), TOL64)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "AdamW"])
def test_step_by_step_with_foreach_flag(name: str, torch_oracle: ModuleType) -> None:
    """foreach=True is accepted and stored; torch's foreach kernels compute the same values, and
    the engine runs its single-tensor loop (the flag is otherwise ignored)."""
    kwargs = {"lr": 0.01, "foreach": True}
    ours = _params(engine, _arrays(np.float32))
    theirs = _params(torch_oracle, _arrays(np.float32))
    opt = getattr(engine.optim, name)(ours, **kwargs)
    topt = getattr(torch_oracle.optim, name)(theirs, **kwargs)
    assert opt.param_groups[0]["foreach"] is True
    for grads in _grads(np.float32, 15):
        for lib, params, o in ((engine, ours, opt), (torch_oracle, theirs, topt)):
            for p, g in zip(params, grads, strict=True):
                p.grad = lib.from_numpy(g.copy())
            o.step()
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL32)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True}),
        ("Adagrad", {"lr": 0.1, "lr_decay": 0.01}),
        ("AdamW", {"lr": 0.02}),
    ],
)
def test_state_dict_round_trip(name: str, kwargs: dict[str, Any], torch_oracle: ModuleType) -> None:
    straight, _ = _run(engine, lambda p: getattr(engine.optim, name)(p, **kwargs), np.float64, steps=8)
    params = _params(engine, _arrays(np.float64))
    opt = getattr(engine.optim, name)(params, **kwargs)
    for i in range(4):
        opt.zero_grad()
        _loss(engine, params, i).backward()
        opt.step()
    saved = opt.state_dict()
    opt2 = getattr(engine.optim, name)(params, lr=1.0)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    for i in range(4, 8):
        opt2.zero_grad()
        _loss(engine, params, i).backward()
        opt2.step()
    theirs, _ = _run(
        torch_oracle, lambda p: getattr(torch_oracle.optim, name)(p, **kwargs), np.float64, steps=8
    )
    for a, b, c in zip(params, straight, theirs, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL64)
        np.testing.assert_allclose(a.detach().numpy(), c.detach().numpy(), **TOL64)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "AdamW"])
def test_param_groups_and_zero_grad(name: str, torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> tuple[Any, ...]:
        w, b = _params(lib, _arrays(np.float64))
        opt = getattr(lib.optim, name)([{"params": [w]}, {"params": [b], "lr": 0.2}], lr=0.05)
        for i in range(5):
            opt.zero_grad()
            _loss(lib, [w, b], i).backward()
            opt.step()
        opt.zero_grad(set_to_none=False)
        zeroed = (float(np.abs(w.grad.numpy()).sum()), w.grad is not None)
        opt.zero_grad()
        return (
            w.detach().numpy().copy(),
            b.detach().numpy().copy(),
            opt.state_dict()["param_groups"],
            zeroed,
            w.grad is None,
            repr(opt),
        )

    ours, theirs = run(engine), run(torch_oracle)
    np.testing.assert_allclose(ours[0], theirs[0], **TOL64)
    np.testing.assert_allclose(ours[1], theirs[1], **TOL64)
    assert ours[2:] == theirs[2:]


@pytest.mark.parametrize(
    "call",
    [
        "RMSprop(lr=-1)",
        "RMSprop(eps=-1)",
        "RMSprop(momentum=-1)",
        "RMSprop(weight_decay=-1)",
        "RMSprop(alpha=-1)",
        "Adagrad(lr=-1)",
        "Adagrad(lr_decay=-1)",
        "Adagrad(weight_decay=-1)",
        "Adagrad(initial_accumulator_value=-1)",
        "Adagrad(eps=-1)",
    ],
)
def test_constructor_errors_match_torch(call: str, torch_oracle: ModuleType) -> None:
    def error(lib: ModuleType) -> str:
        w, _ = _params(lib, _arrays(np.float64))
        name, args = call.split("(")
        kwargs = eval(f"dict({args}")  # noqa: S307 - the parametrized calls above
        with pytest.raises(ValueError) as info:
            getattr(lib.optim, name)([w], **kwargs)
        return str(info.value)

    assert error(engine) == error(torch_oracle)


# --- learning-rate schedulers --------------------------------------------------------------------


def _lambda(epoch: int) -> float:
    return 0.95**epoch + 0.1 * (epoch % 3)


SCHEDULERS: list[tuple[str, str, dict[str, Any]]] = [
    ("StepLR", "SGD", {"step_size": 7, "gamma": 0.5}),
    ("MultiStepLR", "SGD", {"milestones": [5, 12, 12, 30], "gamma": 0.3}),
    ("ExponentialLR", "SGD", {"gamma": 0.93}),
    ("CosineAnnealingLR", "SGD", {"T_max": 20}),
    ("CosineAnnealingLR", "SGD", {"T_max": 15, "eta_min": 0.001}),
    ("LambdaLR", "SGD", {"lr_lambda": _lambda}),
    ("MultiplicativeLR", "SGD", {"lr_lambda": lambda e: 0.97}),
    ("OneCycleLR", "SGD", {"max_lr": 0.5, "total_steps": 50}),
    ("OneCycleLR", "SGD", {"max_lr": [0.5, 0.2], "total_steps": 50, "anneal_strategy": "linear"}),
    ("OneCycleLR", "Adam", {"max_lr": 0.01, "epochs": 5, "steps_per_epoch": 10, "three_phase": True}),
]


def _make_opt(lib: ModuleType, opt_name: str) -> Any:
    w = lib.nn.Parameter(lib.ones(3, dtype=lib.float64))
    b = lib.nn.Parameter(lib.zeros(2, dtype=lib.float64))
    if opt_name == "SGD":
        return lib.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1, momentum=0.9)
    return lib.optim.Adam([{"params": [w]}, {"params": [b], "lr": 0.05}], lr=0.1)


def _schedule(
    lib: ModuleType, name: str, opt_name: str, kwargs: dict[str, Any], steps: int = 50
) -> list[Any]:
    opt = _make_opt(lib, opt_name)
    sched = getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)
    out = [(sched.get_last_lr(), [g.get("momentum", g.get("betas")) for g in opt.param_groups])]
    for _ in range(steps - 1 if name == "OneCycleLR" else steps):
        opt.step()
        sched.step()
        out.append((sched.get_last_lr(), [g.get("momentum", g.get("betas")) for g in opt.param_groups]))
    return out


@pytest.mark.parametrize(
    ("name", "opt_name", "kwargs"), SCHEDULERS, ids=[f"{n}-{_ids(k)}" for n, _, k in SCHEDULERS]
)
def test_scheduler_lrs_match_torch(
    name: str, opt_name: str, kwargs: dict[str, Any], torch_oracle: ModuleType
) -> None:
    ours = _schedule(engine, name, opt_name, kwargs)
    theirs = _schedule(torch_oracle, name, opt_name, kwargs)
    assert len(ours) == len(theirs) >= 50
    for i, ((lr, mom), (tlr, tmom)) in enumerate(zip(ours, theirs, strict=True)):
        assert lr == pytest.approx(tlr, rel=1e-12, abs=1e-15), f"step {i}"
        assert mom == tmom, f"step {i}"


@pytest.mark.parametrize(
    "name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "OneCycleLR"]
)
def test_scheduler_state_dict_matches_torch_and_resumes(name: str, torch_oracle: ModuleType) -> None:
    kwargs = next(k for n, _, k in SCHEDULERS if n == name)

    def run(lib: ModuleType) -> tuple[dict[str, Any], list[float]]:
        opt = _make_opt(lib, "SGD")
        sched = getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)
        for _ in range(10):
            opt.step()
            sched.step()
        sd = sched.state_dict()
        opt2 = _make_opt(lib, "SGD")
        opt2.load_state_dict(opt.state_dict())
        sched2 = getattr(lib.optim.lr_scheduler, name)(opt2, **kwargs)
        sched2.load_state_dict(sd)
        lrs = []
        for _ in range(10):
            opt2.step()
            sched2.step()
            lrs.append(sched2.get_last_lr())
        return sd, lrs

    (sd, lrs), (tsd, tlrs) = run(engine), run(torch_oracle)
    assert sd == tsd
    for lr, tlr in zip(lrs, tlrs, strict=True):
        assert lr == pytest.approx(tlr, rel=1e-12)


def test_lambda_lr_state_dict_matches_torch(torch_oracle: ModuleType) -> None:
    class Factor:
        def __init__(self) -> None:
            self.k = 0.9

        def __call__(self, epoch: int) -> float:
            return float(self.k**epoch)

    def run(lib: ModuleType) -> Any:
        opt = _make_opt(lib, "SGD")
        sched = lib.optim.lr_scheduler.LambdaLR(opt, [Factor(), _lambda])
        opt.step()
        sched.step()
        return sched.state_dict()

    assert run(engine) == run(torch_oracle)


def _warnings_of(fn: Callable[[], Any]) -> list[tuple[str, str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [(w.category.__name__, str(w.message)) for w in caught]


def test_step_before_optimizer_step_warning_matches_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[tuple[str, str]]:
        opt = _make_opt(lib, "SGD")
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2)
        return _warnings_of(sched.step)

    ours = run(engine)
    assert ours == run(torch_oracle)
    assert len(ours) == 1
    assert ours[0][1].startswith("Detected call of `lr_scheduler.step()` before `optimizer.step()`. ")


def test_other_scheduler_warnings_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[list[tuple[str, str]]]:
        opt = _make_opt(lib, "SGD")
        sched = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        out = [_warnings_of(sched.get_lr), _warnings_of(lambda: sched.step(3))]
        opt2 = _make_opt(lib, "SGD")
        sched2 = lib.optim.lr_scheduler.StepLR(opt2, step_size=2)
        opt2.step = lambda closure=None: None  # overridden after the scheduler was built
        out.append(_warnings_of(sched2.step))
        out.append(_warnings_of(lambda: None))
        return out

    assert run(engine) == run(torch_oracle)


def test_scheduler_errors_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[str]:
        out = []
        calls: list[Callable[[], Any]] = [
            lambda: lib.optim.lr_scheduler.StepLR(object(), 3),
            lambda: lib.optim.lr_scheduler.StepLR(_make_opt(lib, "SGD"), 3, last_epoch=4),
            lambda: lib.optim.lr_scheduler.OneCycleLR(_make_opt(lib, "SGD"), 0.1),
            lambda: lib.optim.lr_scheduler.OneCycleLR(_make_opt(lib, "SGD"), [0.1], total_steps=5),
            lambda: lib.optim.lr_scheduler.LambdaLR(_make_opt(lib, "SGD"), [_lambda]),
        ]
        for call in calls:
            with pytest.raises((TypeError, KeyError, ValueError)) as info:
                call()
            out.append(f"{type(info.value).__name__}: {info.value}")
        opt = _make_opt(lib, "SGD")
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=2)
        opt.step()
        sched.step()
        sched.step()
        with pytest.raises(ValueError) as info:
            sched.step()
        out.append(str(info.value))
        return out

    assert run(engine) == run(torch_oracle)


def test_lr_scheduler_base_names(torch_oracle: ModuleType) -> None:
    assert (
        engine.optim.lr_scheduler._LRScheduler.__name__
        == torch_oracle.optim.lr_scheduler._LRScheduler.__name__
    )
    assert issubclass(engine.optim.lr_scheduler.StepLR, engine.optim.lr_scheduler.LRScheduler)
