"""``engine.ops.aten``: every entry of the op table is reachable under torch's name for it, and that
name is the torch 2.8 overload whose schema matches the entry's signature (Note [Aten overload
names] in engine/ops/_aten.py). So a selective-checkpointing policy written for PyTorch
(``func == torch.ops.aten.mm.default``) decides the same on the engine."""

from __future__ import annotations

from types import ModuleType

import pytest

import engine
from engine.ops import OPS, Op
from engine.ops._aten import ENGINE_ONLY, aten_name
from engine.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from tests.utils._vs_torch import op_name

pytestmark = pytest.mark.oracle

ENTRIES = sorted(k for k, v in OPS.items() if isinstance(v, Op) and k not in ENGINE_ONLY)


@pytest.mark.parametrize("key", ENTRIES)
def test_each_entry_has_torchs_name(key: str, torch_oracle: ModuleType) -> None:
    entry = OPS[key]
    assert isinstance(entry, Op)
    base, overload = aten_name(entry)
    assert getattr(getattr(engine.ops.aten, base), overload) is entry
    theirs = getattr(getattr(torch_oracle.ops.aten, base), overload)._schema
    types = {a.name: str(a.type) for a in theirs.arguments}
    # The entry's parameters are the schema's (a few entries take fewer: _to_copy's dtype only),
    # and a tensor is a tensor on both sides: that singles out the overload (Tensor vs Scalar).
    for name in entry.param_names:
        their_name = "grad_output" if name == "grad" and "grad_output" in types else name
        assert their_name in types, (key, name, types)
        is_tensor = "Tensor" in types[their_name]
        assert (name in entry.tensor_params) == is_tensor, (key, name, types[their_name])


def test_the_namespace_says_what_is_missing(torch_oracle: ModuleType) -> None:
    for lib in (engine, torch_oracle):
        with pytest.raises(AttributeError) as no_overload:
            _ = lib.ops.aten.mm.foo
        with pytest.raises(AttributeError) as no_op:
            _ = lib.ops.aten.nosuch
        assert str(no_overload.value) == "The underlying op of 'aten.mm' has no overload name 'foo'"
        assert str(no_op.value) == "'_OpNamespace' 'aten' object has no attribute 'nosuch'"
        assert repr(lib.ops.aten.mm) == "<OpOverloadPacket(op='aten.mm')>"
    x = engine.ones(2, 2)
    assert (engine.ops.aten.mm(x, x) == x @ x).all().item()  # a packet calls its plain entry


def _decisions(lib: ModuleType) -> list[tuple[str, str]]:
    """A PyTorch-style policy on both libraries: which ops it saves, by the op's short name."""
    seen: list[tuple[str, str]] = []

    def policy(ctx: object, func: object, *args: object, **kwargs: object) -> CheckpointPolicy:
        save = func in (lib.ops.aten.mm.default, lib.ops.aten.add.Tensor)
        seen.append((op_name(func), "save" if save else "recompute"))
        return (
            lib.utils.checkpoint.CheckpointPolicy.MUST_SAVE
            if save
            else lib.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE
        )

    lib.manual_seed(0)
    x = lib.randn(2, 3, requires_grad=True)
    w = lib.randn(3, 3, requires_grad=True)

    def f(a: object, b: object) -> object:
        return ((a @ b).tanh() + a).sin()  # type: ignore[operator]

    out = lib.utils.checkpoint.checkpoint(
        f,
        x,
        w,
        use_reentrant=False,
        context_fn=lambda: lib.utils.checkpoint.create_selective_checkpoint_contexts(policy),
    )
    out.sum().backward()
    return seen


def test_a_pytorch_policy_decides_the_same(torch_oracle: ModuleType) -> None:
    ours, theirs = _decisions(engine), _decisions(torch_oracle)
    assert ours == theirs
    assert ("mm", "save") in ours and ("add", "save") in ours and ("tanh", "recompute") in ours


def test_an_op_list_of_aten_names_is_accepted() -> None:
    # create_selective_checkpoint_contexts([torch.ops.aten.mm.default]), PyTorch's usual call.
    x = engine.randn(2, 3, requires_grad=True)
    w = engine.randn(3, 3, requires_grad=True)
    out = checkpoint(
        lambda a, b: (a @ b).tanh(),
        x,
        w,
        use_reentrant=False,
        context_fn=lambda: create_selective_checkpoint_contexts([engine.ops.aten.mm.default]),
    )
    out.sum().backward()
    assert x.grad is not None and w.grad is not None
