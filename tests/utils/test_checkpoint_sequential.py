"""``engine.utils.checkpoint.checkpoint_sequential``: the ``TestCheckpoint`` tests of
test/test_utils.py and the use_reentrant warning test of test/test_autograd.py.

Ported from PyTorch with the upstream assertions; sizes are smaller (NumPy), ``nn.Linear`` is the
engine's, CUDA memory becomes holders / recomputed tensors alive. The other
``test_checkpoint_*.py`` files cover the rest of ``engine.utils.checkpoint``.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import engine
import engine.nn as nn
from engine.utils.checkpoint import checkpoint_sequential
from tests.utils._checkpoint_helpers import USE_REENTRANT_WARNING, assert_equal

pytestmark = pytest.mark.usefixtures("engine_seed")


# === test/test_autograd.py: TestAutograd =========================================================


def test_checkpoint_sequential_warns_if_use_reentrant_not_passed_explcitly() -> None:
    a = engine.randn(3, requires_grad=True)
    modules_list = [nn.Linear(3, 3), nn.Linear(3, 3), nn.Linear(3, 3)]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint_sequential(modules_list, 3, a, use_reentrant=False)

    with pytest.warns(
        UserWarning, match=".*the use_reentrant parameter should be passed explicitly.*"
    ) as record:
        checkpoint_sequential(modules_list, 3, a)
    assert str(record[0].message) == USE_REENTRANT_WARNING.replace(
        "torch.utils.checkpoint:", "torch.utils.checkpoint.checkpoint_sequential:"
    )


# === test/test_utils.py: TestCheckpoint ============================================================


def _check_checkpoint_sequential(
    model: nn.Module,
    module_lists_to_compare: list[Any],
    num_chunks: int,
    input: Any,
    use_reentrant: bool,  # noqa: A002
) -> None:
    # not checkpointed
    out = model(input)
    out_not_checkpointed = out.detach().clone()
    model.zero_grad()
    out.sum().backward()
    grad_not_checkpointed = {name: param.grad.detach().clone() for name, param in model.named_parameters()}
    input_grad_not_checkpointed = input.grad.detach().clone()
    for model_to_compare in module_lists_to_compare:
        # checkpointed model by passing list of modules
        detached = input.detach()
        detached.requires_grad = True

        # pass list of modules to checkpoint
        out = checkpoint_sequential(model_to_compare, num_chunks, detached, use_reentrant=use_reentrant)
        out_checkpointed = out.detach().clone()
        model.zero_grad()
        out.sum().backward()
        grad_checkpointed = {name: param.grad.detach().clone() for name, param in model.named_parameters()}
        input_grad_checkpointed = detached.grad.detach().clone()
        # compare outputs as well as the gradients of input and parameters
        assert_equal(out_checkpointed, out_not_checkpointed)
        assert_equal(input_grad_not_checkpointed, input_grad_checkpointed)
        for name in grad_checkpointed:
            assert_equal(grad_checkpointed[name], grad_not_checkpointed[name])


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_trigger(use_reentrant: bool) -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.counter = 0

        def forward(self, input_var: Any) -> Any:
            self.counter += 1
            # For reentrant, need to have autograd actually
            # pack a tensor to trigger recomp
            return input_var * engine.tensor(2.0)

    modules = [Net() for _ in range(10)]
    for m in modules:
        assert m.counter == 0
    input_var = engine.randn(3, 4, requires_grad=True)
    out = checkpoint_sequential(modules, 2, input_var, use_reentrant=use_reentrant)
    for m in modules:
        assert m.counter == 1
    out.sum().backward()
    for m in modules[: (len(modules) // 2)]:
        assert m.counter == 2
    for m in modules[(len(modules) // 2) :]:
        assert m.counter == 1


def _mlp() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(100, 50), nn.ReLU(), nn.Linear(50, 20), nn.ReLU(), nn.Linear(20, 5), nn.ReLU()
    )


def test_checkpoint_valid() -> None:
    model = _mlp()
    input_var = engine.randn(1, 100, requires_grad=True)

    # checkpointed
    chunks = 2
    modules = list(model.children())
    out = checkpoint_sequential(modules, chunks, input_var, use_reentrant=True)
    with pytest.raises(RuntimeError, match=r"torch\.utils\.checkpoint is incompatible"):
        engine.autograd.grad(
            outputs=[out], grad_outputs=[engine.ones(1, 5)], inputs=[input_var], create_graph=True
        )
    # works with use_reentrant=False, and grads are the same
    out = model(input_var)
    grads_no_checkpoint = engine.autograd.grad(
        outputs=[out], grad_outputs=[engine.ones(1, 5)], inputs=[input_var], create_graph=True
    )
    out_checkpoint = checkpoint_sequential(modules, chunks, input_var, use_reentrant=False)
    # check outputs are the same
    assert_equal(out_checkpoint, out)
    grads_checkpoint = engine.autograd.grad(
        outputs=[out_checkpoint], grad_outputs=[engine.ones(1, 5)], inputs=[input_var], create_graph=True
    )
    assert_equal(grads_no_checkpoint[0], grads_checkpoint[0])


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint(use_reentrant: bool) -> None:
    model = _mlp()
    # Compare uncheckpointed model with its checkpointed counterparts
    # In addition to running checkpoint_sequential on the nn.Sequential
    # instance, we also run the function on the list of functions within
    # the module.
    _check_checkpoint_sequential(
        model,
        [list(model.children()), model],
        2,
        engine.randn(1, 100, requires_grad=True),
        use_reentrant=use_reentrant,
    )


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_module_list(use_reentrant: bool) -> None:
    class ModuleListNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.module_list = nn.ModuleList(list(_mlp().children()))

        def forward(self, input: Any) -> Any:  # noqa: A002
            for layer in self.module_list:
                input = layer(input)
            return input

    model = ModuleListNet()
    # Compare uncheckpointed model with its checkpointed counterparts.
    _check_checkpoint_sequential(
        model,
        [list(model.module_list.children()), model.module_list],
        2,
        engine.randn(1, 100, requires_grad=True),
        use_reentrant=use_reentrant,
    )


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_deprecated_multiple_args(use_reentrant: bool) -> None:
    class Two(nn.Module):
        def forward(self, a: Any, b: Any) -> Any:
            return a, b

    model = nn.Sequential(Two())
    a = engine.randn(1, 100, requires_grad=True)
    b = engine.randn(1, 100, requires_grad=True)
    with pytest.raises(TypeError):
        checkpoint_sequential(model, 1, a, b, use_reentrant=use_reentrant)  # type: ignore[misc]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_sequential_deprecated_no_args(use_reentrant: bool) -> None:
    class Noop(nn.Module):
        def forward(self) -> None:
            pass

    model = nn.Sequential(Noop())
    with pytest.raises(TypeError):
        checkpoint_sequential(model, 1, use_reentrant=use_reentrant)  # type: ignore[call-arg]
