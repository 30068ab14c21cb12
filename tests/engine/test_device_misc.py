"""Device helpers, autocast, the legacy ``Variable``, ``set_warn_always``,
``set_multithreading_enabled`` and ``Module.register_backward_hook`` against torch 2.8.0.

torch here is a CUDA build on a machine without a GPU: its answers (no CUDA, no MPS, the
"Found no NVIDIA driver" error) are the ones the engine gives."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from engine.amp import autocast_mode

pytestmark = pytest.mark.oracle


def _outcome(fn: Callable[[], Any]) -> tuple[str, str]:
    """``("ok", repr(result))`` or ``(exception type, message)``, in torch spelling."""
    try:
        return "ok", repr(fn()).replace("engine.", "torch.")
    except Exception as e:  # noqa: BLE001 - compared across the two libraries
        return type(e).__name__, str(e)


def _warnings_of(fn: Callable[[], Any]) -> tuple[Any, list[tuple[str, str]]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, [(w.category.__name__, str(w.message)) for w in caught]


# --- devices -----------------------------------------------------------------------------------


def test_cuda_and_mps_are_absent(torch_oracle: ModuleType) -> None:
    for lib in (engine, torch_oracle):
        assert lib.cuda.is_available() is False
        assert lib.cuda.device_count() == 0
        assert lib.backends.mps.is_available() is False
        assert lib.backends.mps.is_built() is False
        assert lib.cuda.is_initialized() is False
        assert lib.cuda.manual_seed(0) is None
        assert lib.cuda.manual_seed_all(0) is None
        assert lib.cuda.empty_cache() is None
    for name in ("current_device", "synchronize", "get_device_name"):
        assert _outcome(getattr(engine.cuda, name)) == _outcome(getattr(torch_oracle.cuda, name))


DEVICE_ARGS: list[tuple[Any, ...]] = [
    ("cpu",),
    ("cuda",),
    ("cuda:1",),
    ("cpu:0",),
    ("cuda", 2),
    ("mps",),
    (3,),
    ("foo",),
    ("cuda:x",),
    ("cuda:-1",),
    ("cuda", -2),
    ("cpu", "a"),
    ("cuda:1", 0),
]


@pytest.mark.parametrize("args", DEVICE_ARGS, ids=[repr(a) for a in DEVICE_ARGS])
def test_device_objects_match_torch(args: tuple[Any, ...], torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> Any:
        out = _outcome(lambda: lib.device(*args))
        if out[0] != "ok":
            return out
        d = lib.device(*args)
        return out, str(d), d.type, d.index, d == lib.device(*args), d == lib.device("cpu"), d == "cpu"

    assert run(engine) == run(torch_oracle)


def test_device_is_hashable_and_copies(torch_oracle: ModuleType) -> None:
    for lib in (engine, torch_oracle):
        d = lib.device("cuda", 1)
        assert lib.device(d) == d
        assert len({d, lib.device("cuda:1"), lib.device("cpu")}) == 2
        assert lib.ones(2).device == lib.device("cpu")
        assert lib.ones(2).is_cuda is False


def test_to_cpu_and_cuda_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        t = lib.ones(2, 3)
        device = lib.device("cuda" if lib.cuda.is_available() else "cpu")
        out: list[Any] = [
            t.to(device) is t,
            t.to("cpu") is t,
            t.cpu() is t,
            t.to(device, lib.float64).dtype == lib.float64,
            t.to("cpu", copy=True) is t,
            t.to(lib.float32, copy=True) is t,
            t.to(device=device, dtype=lib.float64).dtype == lib.float64,
        ]
        m = lib.nn.Linear(3, 2)
        out += [m.to(device) is m, m.cpu() is m, lib.nn.ReLU().cuda().__class__.__name__]
        for call in (
            lambda: t.cuda(),
            lambda: t.to("cuda"),
            lambda: t.to(lib.device("cuda", 0)),
            lambda: t.to(device="cuda"),
            lambda: m.cuda(),
            lambda: m.to("cuda"),
        ):
            out.append(_outcome(call))
        return out

    assert run(engine) == run(torch_oracle)


# --- warn_always, multithreading ---------------------------------------------------------------


@pytest.fixture
def _restore_flags(torch_oracle: ModuleType) -> Iterator[None]:
    yield
    engine.set_warn_always(False)
    torch_oracle.set_warn_always(False)


@pytest.mark.usefixtures("_restore_flags")
def test_set_warn_always_matches_torch(torch_oracle: ModuleType) -> None:
    for lib in (engine, torch_oracle):
        assert lib.is_warn_always_enabled() is False
        assert lib.set_warn_always(True) is None
        assert lib.is_warn_always_enabled() is True
        lib.set_warn_always(False)
        assert lib.is_warn_always_enabled() is False


def test_set_multithreading_enabled_matches_torch(torch_oracle: ModuleType) -> None:
    from engine.autograd._multithreading import is_multithreading_enabled

    def run(lib: ModuleType, enabled: Callable[[], bool]) -> list[Any]:
        out = [enabled()]
        with lib.autograd.set_multithreading_enabled(False):
            out.append(enabled())
            x = lib.ones(2, requires_grad=True)
            (x * x).sum().backward()
            out.append(x.grad.tolist())
        out.append(enabled())
        mode = lib.autograd.set_multithreading_enabled(False)  # as a function: takes effect now
        out += [enabled(), mode.mode, mode.prev]
        lib.autograd.set_multithreading_enabled(True)

        @lib.autograd.set_multithreading_enabled(False)
        def inside() -> bool:
            return enabled()

        out += [inside(), enabled()]
        return out

    assert run(engine, is_multithreading_enabled) == run(
        torch_oracle, torch_oracle._C._is_multithreading_enabled
    )


# --- autocast ----------------------------------------------------------------------------------


@pytest.fixture
def _fresh_autocast_warning() -> Iterator[None]:
    autocast_mode_warned = "autocast" in engine._warnings._warned
    engine._warnings._warned.discard("autocast")
    yield
    if autocast_mode_warned:
        engine._warnings._warned.add("autocast")


def test_autocast_state_matches_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        out = [lib.is_autocast_enabled("cpu"), lib.is_autocast_enabled()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with lib.autocast(device_type="cpu"):
                out += [lib.is_autocast_enabled("cpu"), lib.is_autocast_enabled()]
                with lib.autocast("cpu", enabled=False):
                    out.append(lib.is_autocast_enabled("cpu"))
                out.append(lib.is_autocast_enabled("cpu"))
            with lib.amp.autocast("cpu", dtype=lib.float16):
                out.append(lib.is_autocast_enabled("cpu"))

            @lib.autocast("cpu")
            def f() -> bool:
                return bool(lib.is_autocast_enabled("cpu"))

            out.append(f())
        out.append(lib.is_autocast_enabled("cpu"))
        out.append(lib.amp.autocast is lib.autocast)
        out.append(lib.amp.is_autocast_available("cpu"))
        return out

    assert run(engine) == run(torch_oracle)


def test_autocast_warnings_and_errors_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        out: list[Any] = []

        def enter(**kwargs: Any) -> bool:
            with lib.autocast(**kwargs):
                return bool(lib.is_autocast_enabled(kwargs["device_type"]))

        for kwargs in ({"device_type": "cuda"}, {"device_type": "cpu", "dtype": lib.float32}):
            enabled, caught = _warnings_of(lambda kwargs=kwargs: enter(**kwargs))
            out.append((enabled, [w for w in caught if "engine.autocast" not in w[1]]))
        out.append(_outcome(lambda: lib.autocast(device_type="foo")))
        out.append(_outcome(lambda: lib.autocast(device_type=1)))
        return out

    assert run(engine) == run(torch_oracle)


@pytest.mark.usefixtures("_fresh_autocast_warning", "_restore_flags")
def test_autocast_computes_in_float32_and_warns_once() -> None:
    """The documented difference: no lower-precision compute, one clear warning per process
    (every time with set_warn_always)."""
    a = engine.ones(4, 4)
    lin = engine.nn.Linear(4, 2)

    def region() -> list[Any]:
        with engine.autocast("cpu", dtype=engine.float16):
            return [(a @ a).dtype, lin(a).dtype, (a + a).dtype]

    dtypes, caught = _warnings_of(region)
    assert dtypes == [engine.float32] * 3
    assert caught == [("UserWarning", autocast_mode.NO_POLICY_WARNING)]
    assert "run in their inputs' dtypes" in caught[0][1]
    assert _warnings_of(region)[1] == []
    engine.set_warn_always(True)
    assert len(_warnings_of(region)[1]) == 1


# --- Variable ----------------------------------------------------------------------------------


def test_variable_matches_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        Variable = lib.autograd.Variable  # noqa: N806
        t = lib.ones(2, 3)
        v = Variable(t, requires_grad=True)
        out: list[Any] = [
            type(v).__name__,
            v.requires_grad,
            v.is_leaf,
            v is t,
            isinstance(t, Variable),
            isinstance(1.0, Variable),
        ]
        (v * 2).sum().backward()
        out.append(v.grad.tolist())
        v.data.add_(1)  # shares t's memory, as torch's Variable does
        out.append(t.tolist())
        w = Variable(v * 3)
        out += [w.requires_grad, w.grad_fn is None, Variable().shape]
        out.append(_warnings_of(lambda: Variable(t, volatile=True).requires_grad))
        out.append(_outcome(lambda: Variable([1.0])))
        out.append(_outcome(lambda: Variable(lib.ones(2, dtype=lib.int64), requires_grad=True)))
        return out

    assert run(engine) == run(torch_oracle)
    assert engine.autograd.Variable._execution_engine is engine.autograd.get_default_engine()


# --- register_backward_hook --------------------------------------------------------------------


def _shapes(grads: Any) -> Any:
    return (type(grads).__name__, [None if g is None else tuple(g.shape) for g in grads])


def _values(grads: Any) -> list[Any]:
    return [None if g is None else np.round(g.detach().numpy(), 10).tolist() for g in grads]


def _copy_linear(lib: ModuleType, src: Any) -> Any:
    m = lib.nn.Linear(3, 2).double()
    with lib.no_grad():
        m.weight.copy_(lib.from_numpy(src.weight.detach().numpy().astype(np.float64)))
        m.bias.copy_(lib.from_numpy(src.bias.detach().numpy().astype(np.float64)))
    return m


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_register_backward_hook_on_linear_matches_torch(
    input_requires_grad: bool, torch_oracle: ModuleType
) -> None:
    src = torch_oracle.nn.Linear(3, 2)

    def run(lib: ModuleType) -> list[Any]:
        m = _copy_linear(lib, src)
        log: list[Any] = []

        def hook(mod: Any, grad_input: Any, grad_output: Any) -> Any:
            log.append((type(mod).__name__, _shapes(grad_input), _shapes(grad_output), _values(grad_input)))
            return None

        handle = m.register_backward_hook(hook)
        x = lib.from_numpy(np.arange(12.0).reshape(4, 3)).requires_grad_(input_requires_grad)
        _, caught = _warnings_of(lambda: m(x).sum().backward())
        log.append(caught)
        log.append(m.weight.grad.tolist())
        handle.remove()
        m(x).sum().backward()
        log.append(len(log))
        return log

    assert run(engine) == run(torch_oracle)


def test_register_backward_hook_can_replace_grad_input(torch_oracle: ModuleType) -> None:
    src = torch_oracle.nn.Linear(3, 2)

    def run(lib: ModuleType) -> Any:
        m = _copy_linear(lib, src)
        m.register_backward_hook(lambda mod, gi, go: tuple(None if g is None else g * 0 + 1 for g in gi))
        x = lib.from_numpy(np.arange(12.0).reshape(4, 3)).requires_grad_(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            m(x).sum().backward()
        return x.grad.tolist(), m.bias.grad.tolist(), m.weight.grad.tolist()

    assert run(engine) == run(torch_oracle)


def test_register_backward_hook_warnings_and_errors_match_torch(torch_oracle: ModuleType) -> None:
    def run(lib: ModuleType) -> list[Any]:
        out: list[Any] = []
        seq = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.ReLU()).double()
        seq.register_backward_hook(lambda mod, gi, go: out.append(("seq", _shapes(gi), _shapes(go))))
        x = lib.ones(4, 3, dtype=lib.float64, requires_grad=True)
        out.append(_warnings_of(lambda: seq(x).sum().backward())[1])

        class Two(lib.nn.Module):  # type: ignore[name-defined,misc]
            def forward(self, a: Any) -> Any:
                return a * 2, a.exp()

        two = Two()
        two.register_backward_hook(lambda mod, gi, go: out.append(("two", _shapes(gi), _shapes(go))))
        a, b = _warnings_of(lambda: two(x))[0], _warnings_of(lambda: two(x))[1]
        out.append(b)
        (a[0].sum() + a[1].sum()).backward()

        class Nested(lib.nn.Module):  # type: ignore[name-defined,misc]
            def forward(self, a: Any) -> Any:
                return {"y": a * 2}

        nested = Nested()
        nested.register_backward_hook(lambda mod, gi, go: None)
        out.append(_warnings_of(lambda: nested(x))[1])
        m = lib.nn.Linear(3, 2)
        m.register_backward_hook(lambda *a: None)
        out.append(_outcome(lambda: m.register_full_backward_hook(lambda *a: None)))
        m2 = lib.nn.Linear(3, 2)
        m2.register_full_backward_hook(lambda *a: None)
        out.append(_outcome(lambda: m2.register_backward_hook(lambda *a: None)))
        return out

    assert run(engine) == run(torch_oracle)


def test_register_full_backward_hook_still_matches_torch(torch_oracle: ModuleType) -> None:
    src = torch_oracle.nn.Linear(3, 2)

    def run(lib: ModuleType) -> list[Any]:
        m = _copy_linear(lib, src)
        log: list[Any] = []
        m.register_full_backward_hook(lambda mod, gi, go: log.append((_shapes(gi), _shapes(go), _values(gi))))
        x = lib.from_numpy(np.arange(12.0).reshape(4, 3)).requires_grad_(True)
        m(x).sum().backward()
        return log

    assert run(engine) == run(torch_oracle)
