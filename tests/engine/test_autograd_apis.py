"""Autograd APIs and legacy names against torch 2.8.0: ``allow_mutation_on_saved_tensors``,
``save_on_cpu``, ``_force_original_view_tracking`` (view replay), ``SavedTensor``,
``InplaceFunction``, ``_functions.Resize``, ``_construct_standard_basis_for``,
``_C.is_grad_enabled``, the typed legacy constructors (``LongTensor([1, 2])``), the constants
``inf``/``nan``/``pi``/``e``, and deleting ``.data`` and other attributes."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType
from typing import Any

import pytest

from tests.engine._autograd_diff import raises_same, run_both

pytestmark = pytest.mark.oracle


def _cloned(ctx: Any) -> int:
    return len(list(ctx.cloned.items()))


def _tids(ctx: Any) -> int:
    return len(list(ctx.tid_to_weakhandle.items()))


# --- allow_mutation_on_saved_tensors -----------------------------------------------------------


def test_allow_mutation_on_saved_clones_on_inplace(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        records = []
        for modify in ("self", "view", "base"):
            with lib.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
                a = lib.tensor([[0.5, 1.5, -0.3], [2.0, -1.0, 0.25]], dtype=lib.float64, requires_grad=True)
                b = a.clone()
                c = b[:1]
                saved = c if modify == "base" else b
                out = (saved**2).sum()
                {"self": b, "view": c, "base": b}[modify].mul_(10)
                records.append(_cloned(ctx))
                out.backward()
                records += [_cloned(ctx), a.grad]
            records.append(_cloned(ctx))
        return records

    run_both(scenario, torch_oracle)


def test_allow_mutation_on_saved_bookkeeping(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        counts = []
        with lib.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
            a = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True).clone()
            out = (a**2).sum()
            counts += [_tids(ctx), _cloned(ctx)]
            out.backward()
            a.sin_()  # saved once, but freed by backward: nothing to clone
            counts.append(_cloned(ctx))
            b = a**2
            c = a**2  # the same tensor at the same version: one handle, cloned once
            a.sin_()
            counts.append(_cloned(ctx))
            d = a**2
            a.sin_()
            counts.append(_cloned(ctx))
            del b, c
            counts.append(_cloned(ctx))
            del d
            counts.append(_cloned(ctx))
        return counts

    assert run_both(scenario, torch_oracle) == [1, 0, 0, 1, 2, 1, 0]


def test_allow_mutation_on_saved_double_backward(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        with lib.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
            a = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
            b = a.clone()
            out = (b**3).sum()
            b.sin_()
            (da,) = lib.autograd.grad(out, a, create_graph=True)
            (d2a,) = lib.autograd.grad(da.sum(), a)
        return da, d2a, _cloned(ctx)

    run_both(scenario, torch_oracle)


def test_allow_mutation_on_saved_errors(torch_oracle: ModuleType) -> None:
    def outside(lib: ModuleType) -> Any:
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            out = (lib.ones(2, requires_grad=True) ** 2).sum()
        out.backward()

    def other_context(lib: ModuleType) -> Any:
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            out = (lib.ones(2, requires_grad=True) ** 2).sum()
        with lib.autograd.graph.allow_mutation_on_saved_tensors():
            out.backward()

    def nested(lib: ModuleType) -> Any:
        with (
            lib.autograd.graph.allow_mutation_on_saved_tensors(),
            lib.autograd.graph.allow_mutation_on_saved_tensors(),
        ):
            pass

    msg = (
        "Trying to backward outside of the 'allow_mutation_on_saved_tensors' contextin which the "
        "graph was originally recorded."
    )
    raises_same(outside, torch_oracle, msg)
    raises_same(other_context, torch_oracle, msg)
    raises_same(nested, torch_oracle, "allow_mutation_on_saved_tensors contexts cannot be nested")


# --- save_on_cpu ---------------------------------------------------------------------------------


def test_save_on_cpu(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        checkpoint = importlib.import_module(lib.__name__ + ".utils.checkpoint").checkpoint
        a = lib.tensor([[0.5, 1.5], [-0.3, 0.8]], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.save_on_cpu(pin_memory=True):
            h = checkpoint(lambda x: x.pow(2).pow(2), a.pow(2), use_reentrant=False)
            c = h.pow(2)
            saved = c.grad_fn._saved_self
        c.sum().backward()
        b = a.detach().clone()
        with lib.autograd.graph.save_on_cpu():
            y = b.clone().requires_grad_() * b
        b.add_(1)  # saved through hooks: no version check
        y.sum().backward()
        return a.grad, saved, type(saved).__name__

    run_both(scenario, torch_oracle)


# --- view replay ---------------------------------------------------------------------------------


def test_force_original_view_tracking(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = lib.ones(2, 2, requires_grad=True)

        def f() -> Any:
            out = x.clone().view(-1)
            out.add_(1)
            return type(out.grad_fn).__name__, lib.autograd.is_view_replay_enabled()

        record: list[Any] = []
        with lib.autograd._force_original_view_tracking(False):
            record.append(f())
        with lib.autograd._force_original_view_tracking(True):
            record.append(f())
            b = x.clone()
            v = b.t()[0]
            w = v[1:]
            w.mul_(3)
            record += [type(w.grad_fn).__name__, type(v.grad_fn).__name__]
            (b * lib.arange(4.0).view(2, 2)).sum().backward()
            c = x.clone()
            cv = c.view(4)
        with lib.autograd._force_original_view_tracking(False):
            cw = cv[1:3]  # made without replay, of a view with a view function: as_strided
            cw.mul_(2)
            record += [type(cw.grad_fn).__name__, type(cv.grad_fn).__name__]
            lib.autograd._force_original_view_tracking(True)  # a plain call sets the mode
            record.append(f())
        record += [f(), x.grad]
        return record

    run_both(scenario, torch_oracle)


# --- SavedTensor, InplaceFunction, Resize, _C, functional ---------------------------------------


def test_saved_tensor_type(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        y = lib.ones(2, requires_grad=True).exp()
        return isinstance(y.grad_fn._raw_saved_result, lib.autograd.SavedTensor)

    assert run_both(scenario, torch_oracle) is True
    raises_same(
        lambda lib: lib.autograd.SavedTensor(),
        torch_oracle,
        "Trying to create a SavedTensor object from Python is forbidden.",
    )


def test_inplace_function_and_resize(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        function = importlib.import_module(lib.__name__ + ".autograd.function")
        functions = importlib.import_module(lib.__name__ + ".autograd._functions")
        x = lib.tensor([0.5, 1.5, -0.3, 2.0], dtype=lib.float64, requires_grad=True)
        y = functions.Resize.apply(x, (2, 2))
        (y * lib.arange(4.0, dtype=lib.float64).view(2, 2)).sum().backward()
        with warnings.catch_warnings():
            # Instantiating a Function warns (DeprecationWarning), in both.
            warnings.simplefilter("ignore", DeprecationWarning)
            inplace = function.InplaceFunction(inplace=True).inplace
        return (
            inplace,
            issubclass(function.InplaceFunction, lib.autograd.Function),
            y.shape,
            x.grad,
        )

    run_both(scenario, torch_oracle)
    raises_same(
        lambda lib: importlib.import_module(lib.__name__ + ".autograd._functions").Resize.apply(
            lib.ones(2, 3), (4,)
        ),
        torch_oracle,
        "requested resize to 4 (4 elements in total), but the given tensor has a size of 2x3 (6 "
        "elements). autograd's resize can only change the shape of a given tensor, while "
        "preserving the number of elements. ",
    )


def test_c_is_grad_enabled_and_standard_basis(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        functional = importlib.import_module(lib.__name__ + ".autograd.functional")
        with lib.no_grad():
            off = lib._C.is_grad_enabled()
        inputs = (lib.ones(2, dtype=lib.float64), lib.ones(()), lib.ones(2, 2))
        basis = functional._construct_standard_basis_for(inputs, tuple(t.numel() for t in inputs))
        return off, lib._C.is_grad_enabled(), basis

    run_both(scenario, torch_oracle)


# --- legacy constructors, constants, attribute deletion -----------------------------------------

_TYPES = ("FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor", "ByteTensor")


def test_legacy_typed_constructors(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        record = []
        for name in _TYPES:
            T = getattr(lib, name)  # noqa: N806 - a class
            record += [
                T([1, 0, 2]),
                T([[1.5, 2.7]]),
                T(2, 3).shape,
                T(lib.Size([4])).shape,
                T().shape,
                str(T.dtype),
                isinstance(T([1]), T),
                isinstance(lib.ones(1, dtype=lib.float16), T),
            ]
        t = lib.tensor([1.0, 2.0])
        alias = lib.FloatTensor(t)
        alias.add_(1)
        record += [t, alias is t, t._version, isinstance(t, lib.DoubleTensor), repr(lib.LongTensor)]
        return record

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.LongTensor(lib.tensor([1.0])),
        lambda lib: lib.FloatTensor(lib.tensor([1])),
        lambda lib: lib.LongTensor(2.5),
        lambda lib: lib.LongTensor("a"),
        lambda lib: lib.LongTensor(2, 3.0),
        lambda lib: lib.LongTensor([1, 2], dtype=lib.float32),
        lambda lib: lib.FloatTensor([1.0], requires_grad=True),
        lambda lib: lib.FloatTensor(lib.ones(1), device="cpu"),
    ],
)
def test_legacy_typed_constructor_errors(torch_oracle: ModuleType, call: Any) -> None:
    run_both(call, torch_oracle)


def test_constants(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        return lib.inf, lib.pi, lib.e, str(lib.nan), type(lib.inf).__name__

    run_both(scenario, torch_oracle)


def test_attribute_deletion(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = lib.ones(2, requires_grad=True)
        x.grad = lib.ones(2)
        del x.grad
        record: list[Any] = [x.grad]
        for name in ("data", "requires_grad", "_grad_fn", "_backward_hooks"):
            try:
                delattr(x, name)
            except RuntimeError as e:
                record.append(str(e))
        return record, x.requires_grad, x.sum()

    run_both(scenario, torch_oracle)
