"""Differential testing for the autograd tests: run one scenario with ``lib = engine`` and with
``lib = torch`` and compare what it returns.

A scenario is a function ``(lib) -> record`` written once for both libraries, as a PyTorch test
would be written with ``import engine as torch``. The record may nest tuples, lists and dicts of
tensors, strings, numbers, bools and None. Tensors compare by dtype, shape and values (with a
float32 tolerance for float32, since NumPy's and PyTorch's float32 kernels may differ in the last
bit), strings exactly once torch's module name is replaced by the engine's. An exception raised
by the scenario is recorded as ``Raised(type, message)`` and compared the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

import engine

Scenario = Callable[[ModuleType], Any]


@dataclass(frozen=True)
class Raised:
    type: str
    message: str


_TRIGGERED = re.compile(r" \(Triggered internally at [^)]*\.\)")
# torch.Size, torch.float64, torch::autograd; not "PyTorch.". The public functions and modules a
# message cites keep torch's name in the engine's text too (the spec: messages are torch's word for
# word, torch names included; type names and reprs are the engine's own). Exception: the sizes of
# autograd.functional's "v has invalid size: should be torch.Size([..]) but got torch.Size([..])."
# are written as torch's text (PyTorch's own tests match "should be torch.Size").
_TORCH = re.compile(
    r"(?<![A-Za-z])(?!(?<=should be )torch\.Size|(?<=but got )torch\.Size)torch(?=\.|::)"
    r"(?!\.autograd\.(?:set_detect_anomaly|backward\b|functional\.jacobian)|\.utils\.checkpoint"
    r"|\.ops\.aten\.mm`|\.ops\.aten\.mm\.default`|\.tensor\(sourceTensor\)|\.sign is|\.sgn instead"
    r"|\.Tensor\(tensor, device=device\)|\.tensor\(\.\.\.\)|\.as_tensor\(\.\.\.\))"
)


def normalize(text: str) -> str:
    """Torch's names in a message, as the engine spells them (and without the C++ source location
    torch appends to warnings raised in C++)."""
    return _TORCH.sub("engine", _TRIGGERED.sub("", text))


def run(lib: ModuleType, scenario: Scenario) -> Any:
    try:
        return scenario(lib)
    except Exception as e:  # noqa: BLE001 - the error is part of the record
        return Raised(type(e).__name__, str(e))


def _is_tensor(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "numpy") and hasattr(x, "dtype")


def _tol(a: np.ndarray) -> dict[str, float]:
    if a.dtype in (np.float32, np.complex64):
        return {"rtol": 1e-5, "atol": 1e-6}
    return {"rtol": 1e-12, "atol": 1e-12}


def assert_same(ours: Any, theirs: Any, path: str = "record") -> None:
    if _is_tensor(theirs):
        assert _is_tensor(ours), f"{path}: engine gave {ours!r}, torch a tensor"
        assert normalize(str(theirs.dtype)) == str(ours.dtype), (
            f"{path}: dtype {ours.dtype} vs {theirs.dtype}"
        )
        a, b = ours.detach().numpy(), theirs.detach().numpy()
        assert a.shape == b.shape, f"{path}: shape {a.shape} vs torch {b.shape}"
        np.testing.assert_allclose(a, b, err_msg=path, **_tol(b))
    elif isinstance(theirs, Raised):
        assert isinstance(ours, Raised), f"{path}: torch raised {theirs}, engine returned {ours!r}"
        assert (ours.type, ours.message) == (theirs.type, normalize(theirs.message)), (
            f"{path}:\n  engine: {ours}\n  torch:  {theirs}"
        )
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), f"{path}: {ours!r} vs {theirs!r}"
        for i, (o, t) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(o, t, f"{path}[{i}]")
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys(), f"{path}: {ours!r} vs {theirs!r}"
        for k in theirs:
            assert_same(ours[k], theirs[k], f"{path}[{k!r}]")
    elif isinstance(theirs, str):
        assert ours == normalize(theirs), f"{path}:\n  engine: {ours!r}\n  torch:  {theirs!r}"
    elif isinstance(theirs, float) and not isinstance(theirs, bool):
        assert isinstance(ours, float) and np.isclose(ours, theirs, rtol=1e-6), f"{path}: {ours} vs {theirs}"
    else:
        assert ours == theirs, f"{path}: engine {ours!r}, torch {theirs!r}"


def _x(lib: ModuleType, values: Any = (0.5, 1.5, -0.3), grad: bool = True) -> Any:
    """The tests' usual input: a float64 leaf of ``values`` in ``lib``, requiring grad unless
    ``grad=False``."""
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=grad)


def run_both(scenario: Scenario, torch: ModuleType) -> Any:
    """Run ``scenario`` in both libraries, assert the records match, return the engine's."""
    theirs = run(torch, scenario)
    ours = run(engine, scenario)
    assert_same(ours, theirs)
    return ours


def raises_same(scenario: Scenario, torch: ModuleType, expected: str) -> None:
    """The scenario raises in both libraries with the same message, which is ``expected`` (written
    with ``torch`` where the message names the module)."""
    theirs = run(torch, scenario)
    assert isinstance(theirs, Raised), f"torch did not raise: {theirs!r}"
    assert theirs.message == expected, f"torch 2.8's message changed:\n{theirs.message}"
    ours = run(engine, scenario)
    assert isinstance(ours, Raised), f"engine did not raise: {ours!r}"
    assert (ours.type, ours.message) == (theirs.type, normalize(expected)), f"engine: {ours}"


BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward."
)
