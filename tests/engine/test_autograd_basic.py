"""Backward basics against torch 2.8.0 (ported from test/test_autograd.py): retain_graph and
freed saved tensors, version-counter errors, ``grad()`` vs ``backward(inputs=...)``, multiple roots,
higher-order gradients and gradient accumulation."""

from __future__ import annotations

import subprocess
import sys
import warnings
from types import ModuleType
from typing import Any

import pytest

import engine
from tests.engine._autograd_diff import BACKWARD_TWICE, Raised, _x, normalize, raises_same, run_both

pytestmark = pytest.mark.oracle

HINT = (
    " Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
    "torch.autograd.set_detect_anomaly(True)."
)
ANOMALY_HINT = (
    " Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
    "variable in question was changed in there or anywhere later. Good luck!"
)
INPLACE = "one of the variables needed for gradient computation has been modified by an inplace operation: "


# --- retain_graph and freed buffers -------------------------------------------------------------


def test_retain_graph_allows_second_backward(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = (x.exp() * x.sin()).sum()
        y.backward(retain_graph=True)
        first = x.grad.clone()
        y.backward()
        return first, x.grad

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize("via_grad", [False, True])
def test_backward_twice_error(torch_oracle: ModuleType, via_grad: bool) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = x.exp().sum()
        if via_grad:
            lib.autograd.grad(y, x)
            lib.autograd.grad(y, x)
        else:
            y.backward()
            y.backward()

    raises_same(scenario, torch_oracle, BACKWARD_TWICE)


@pytest.mark.parametrize("attr", ["_saved_result", "_saved_self_of_sin", "_saved_other_of_mul"])
def test_saved_tensor_access_after_release(torch_oracle: ModuleType, attr: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        w = _x(lib, (2.0, 3.0, 4.0))
        if attr == "_saved_result":
            y, name = x.exp(), "_saved_result"
        elif attr == "_saved_self_of_sin":
            y, name = x.sin(), "_saved_self"
        else:
            y, name = x * w, "_saved_other"
        before = getattr(y.grad_fn, name)
        y.sum().backward()
        return before, getattr(y.grad_fn, name)

    theirs = run_both(scenario, torch_oracle)
    assert theirs == Raised("RuntimeError", BACKWARD_TWICE)


def test_saved_tensors_survive_retain_graph(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        a = x * 2
        y = a.exp()
        y.sum().backward(retain_graph=True)
        r, s = y.grad_fn._saved_result, a.sin().grad_fn._saved_self
        return r, r is y, r.grad_fn is y.grad_fn, s is a, s.grad_fn.name(), x.grad

    run_both(scenario, torch_oracle)


# --- version counter ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("saved_output", INPLACE + "[torch.DoubleTensor [3]], which is output 0 of ExpBackward0, is at version 1; "
         "expected version 0 instead." + HINT),
        ("saved_nonleaf_input", INPLACE + "[torch.DoubleTensor [3]], which is output 0 of MulBackward0, is at "
         "version 1; expected version 0 instead." + HINT),
        ("saved_leaf_input", INPLACE + "[torch.DoubleTensor [3]] is at version 2; expected version 0 instead." + HINT),
        ("detached_alias", INPLACE + "[torch.DoubleTensor [3]], which is output 0 of SinBackward0, is at version "
         "1; expected version 0 instead." + HINT),
    ],
)  # fmt: skip
def test_version_counter_errors(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        if case == "saved_output":
            y = x.exp()
            y.add_(1)
            out = y
        elif case == "saved_nonleaf_input":
            a = x * 2
            out = a.sin()
            a.mul_(2)
        elif case == "saved_leaf_input":
            w = _x(lib, grad=False)
            out = x * w
            w.add_(1)
            w.mul_(2)
        else:
            y = x.sin()
            out = y.exp() * y  # MulBackward0 saves y; exp saves its result
            y.detach().zero_()  # a detach() shares the version counter
        out.sum().backward()

    raises_same(scenario, torch_oracle, expected)


def test_version_counter_error_in_anomaly_mode(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        with pytest.warns(UserWarning), lib.autograd.set_detect_anomaly(True):
            x = _x(lib)
            y = x.exp()
            y.add_(1)
            y.sum().backward()

    expected = INPLACE + "[torch.DoubleTensor [3]], which is output 0 of ExpBackward0, is at version 1; "
    raises_same(scenario, torch_oracle, expected + "expected version 0 instead." + ANOMALY_HINT)
    assert not engine.is_anomaly_enabled()


def test_version_counts_every_inplace(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib, grad=False)
        v = [x._version]
        x.add_(1)
        x.mul_(2)
        v.append(x._version)
        view = x[1:]
        view.zero_()
        v += [x._version, view._version, x.detach()._version]
        x.data.add_(1)  # .data does not share the version counter
        v.append(x._version)
        return v

    assert run_both(scenario, torch_oracle) == [0, 2, 3, 3, 3, 3]


# --- grad() and backward(inputs=...) ----------------------------------------------------------------


def test_grad_does_not_touch_dot_grad(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (1.0, 2.0, 3.0))
        a = x * w * 2
        y = a.sin().sum()
        gx, ga = lib.autograd.grad(y, [x, a])
        return gx, ga, x.grad, w.grad

    run_both(scenario, torch_oracle)


def test_backward_inputs_leaf_and_nonleaf(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (1.0, 2.0, 3.0))
        y = x * w
        y.exp().sum().backward(inputs=[x, y])
        return x.grad, w.grad, y.grad, y.retains_grad, y.is_leaf

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unused_leaf", "One of the differentiated Tensors appears to not have been used in the graph. Set "
         "allow_unused=True if this is the desired behavior."),
        ("unused_nonleaf", "One of the differentiated Tensors appears to not have been used in the graph. Set "
         "allow_unused=True if this is the desired behavior."),
        ("no_grad_input", "One of the differentiated Tensors does not require grad"),
        ("no_grad_output", "element 0 of tensors does not require grad and does not have a grad_fn"),
        ("empty_inputs", "`inputs` argument to `backward()` cannot be empty."),
        ("nonscalar", "grad can be implicitly created only for scalar outputs"),
        ("shape", "Mismatch in shape: grad_output[0] has a shape of torch.Size([4]) and output[0] has a shape "
         "of torch.Size([3])."),
    ],
)  # fmt: skip
def test_grad_argument_errors(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (1.0, 2.0, 3.0))
        if case == "unused_leaf":
            lib.autograd.grad((x * 2).sum(), [x, w])
        elif case == "unused_nonleaf":
            lib.autograd.grad((x * 2).sum(), [x * 3])
        elif case == "no_grad_input":
            lib.autograd.grad((x * 2).sum(), [x, _x(lib, grad=False)])
        elif case == "no_grad_output":
            _x(lib, grad=False).sum().backward()
        elif case == "empty_inputs":
            (x * 2).sum().backward(inputs=[])
        elif case == "nonscalar":
            (x * 2).backward()
        else:
            (x * 2).backward(lib.ones(4, dtype=lib.float64))

    raises_same(scenario, torch_oracle, expected)


def test_allow_unused_and_materialize_grads(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x, w = _x(lib), _x(lib, (1.0, 2.0, 3.0))
        unused = lib.autograd.grad((x * 2).sum(), [x, w], allow_unused=True)
        mat = lib.autograd.grad((x * 2).sum(), [x, w], materialize_grads=True)
        return unused, mat, mat[1].requires_grad

    run_both(scenario, torch_oracle)
    raises_same(
        lambda lib: lib.autograd.grad(
            (_x(lib) * 2).sum(), [_x(lib)], materialize_grads=True, allow_unused=False
        ),
        torch_oracle,
        "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False.",
    )


def test_grad_of_leaf_with_respect_to_itself(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        (g,) = lib.autograd.grad(x, x, lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64))
        return g, x.grad

    run_both(scenario, torch_oracle)


# --- several roots ------------------------------------------------------------------------------


def test_multiple_roots(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        order: list[str] = []
        x = _x(lib)
        a, b = x * 2, x.exp()
        a.grad_fn.register_prehook(lambda g: order.append("a"))
        b.grad_fn.register_prehook(lambda g: order.append("b"))
        lib.autograd.backward(
            [b, a], [lib.ones(3, dtype=lib.float64), lib.full((3,), 2.0, dtype=lib.float64)]
        )
        first = x.grad.clone()
        g = lib.autograd.grad([a.sum(), b.sum()], x)
        return order, first, g

    run_both(scenario, torch_oracle)


# --- higher order -------------------------------------------------------------------------------


def test_third_derivative_of_polynomial_times_sin(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = (x**3 * x.sin()).sum()
        (g1,) = lib.autograd.grad(y, x, create_graph=True)
        (g2,) = lib.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = lib.autograd.grad(g2.sum(), x)
        return g1, g2, g3, g1.requires_grad, g3.requires_grad

    run_both(scenario, torch_oracle)


def test_backward_create_graph_then_backward_of_grad(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = (x.exp() * x.sin()).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the reference-cycle warning, tested below
            y.backward(create_graph=True)
        g = x.grad
        name = g.grad_fn.name()
        x.grad = None
        g.sum().backward()
        return g, name, x.grad

    assert run_both(scenario, torch_oracle)[1] == "engine::autograd::CopyBackwards"


CYCLE_WARNING_SCRIPT = """
import warnings, {lib} as lib
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    x = lib.ones(2, requires_grad=True)
    lib.autograd.grad((x * x).sum(), x, create_graph=True)  # grad() does not warn
    (x * x).sum().backward(create_graph=True)
    (x * x).sum().backward(create_graph=True)  # warned once per process
print(len(w)); print(w[0].message)
"""


def test_backward_create_graph_warns_once_per_process(torch_oracle: ModuleType) -> None:
    out = {}
    for lib in ("engine", "torch"):
        proc = subprocess.run(
            [sys.executable, "-c", CYCLE_WARNING_SCRIPT.format(lib=lib)],
            capture_output=True,
            text=True,
            check=True,
        )
        out[lib] = proc.stdout
    assert out["torch"].startswith("1\nUsing backward() with create_graph=True will create a reference cycle")
    assert out["engine"] == normalize(out["torch"])


# --- accumulation -------------------------------------------------------------------------------


def test_grad_accumulates_in_place(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        (x * 2).sum().backward()
        g = x.grad
        v = g._version
        (x * x).sum().backward()
        return g is x.grad, g._version - v, x.grad, x.grad.requires_grad

    assert run_both(scenario, torch_oracle)[:2] == (True, 1)


def test_grad_accumulation_with_create_graph_is_out_of_place(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        (x * 2).sum().backward()
        g = x.grad
        (x * x).sum().backward(create_graph=True)
        return g is x.grad, x.grad, x.grad.grad_fn.name(), g.requires_grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_both(scenario, torch_oracle)[2] == "AddBackward0"


def test_non_leaf_grad_access_warns(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        y = x * 2
        y.sum().backward()
        with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed") as w:
            g = y.grad
        return g, str(w[0].message)

    run_both(scenario, torch_oracle)


def test_requires_grad_of_non_leaf_cannot_be_cleared(torch_oracle: ModuleType) -> None:
    expected = (
        "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in "
        "a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
    )
    raises_same(lambda lib: (_x(lib) * 2).requires_grad_(False), torch_oracle, expected)
    raises_same(
        lambda lib: lib.tensor([1, 2]).requires_grad_(),
        torch_oracle,
        "only Tensors of floating point dtype can require gradients",
    )
    raises_same(
        lambda lib: setattr(lib.tensor([1, 2]), "requires_grad", True),
        torch_oracle,
        "only Tensors of floating point and complex dtype can require gradients",
    )
    raises_same(
        lambda lib: lib.tensor([1, 2], requires_grad=True),
        torch_oracle,
        "Only Tensors of floating point and complex dtype can require gradients",
    )
    raises_same(
        lambda lib: setattr(_x(lib) * 2, "requires_grad", True),
        torch_oracle,
        "you can only change requires_grad flags of leaf variables.",
    )


def test_leaf_inplace_errors(torch_oracle: ModuleType) -> None:
    raises_same(
        lambda lib: _x(lib).add_(1),
        torch_oracle,
        "a leaf Variable that requires grad is being used in an in-place operation.",
    )
    raises_same(
        lambda lib: _x(lib)[1:].mul_(2),
        torch_oracle,
        "a view of a leaf Variable that requires grad is being used in an in-place operation.",
    )


def test_gradient_edges_and_batched_grads(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        get_edge = lib.autograd.graph.get_gradient_edge
        x = _x(lib)
        a = x.sin()
        y = (a * x).sum()
        by_edge = lib.autograd.grad(y, [get_edge(x), get_edge(a)], retain_graph=True)
        by_tensor = lib.autograd.grad(y, [x, a], retain_graph=True)
        root_edge = lib.autograd.grad(get_edge(y), x, retain_graph=True)  # an implicit 1 for the root
        edge = get_edge(x)
        batched = lib.autograd.grad(x * x, x, lib.eye(3, dtype=lib.float64), is_grads_batched=True)
        return by_edge, by_tensor, root_edge, edge.node.name(), edge.output_nr, batched

    run_both(scenario, torch_oracle)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("empty_grad_inputs", "grad requires non-empty inputs."),
        ("int_input", "all inputs have to be Tensors or GradientEdges, but got int"),
        ("edge_no_grad", "It is not possible to get the gradient edge for a Tensor that does not require "
         "gradients"),
        ("batched_shape", "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the "
         "batch dimension. The sizes of the remaining dimensions are expected to match the shape of corresponding "
         "output, but a mismatch was detected: grad_output[0] has a shape of torch.Size([]) and output[0] has a "
         "shape of torch.Size([3]). If you only want some tensors in `grad_output` to be considered batched, "
         "consider using vmap."),
        ("grad_variables", "`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
         "`backward()`. Please only use `grad_tensors`."),
    ],
)  # fmt: skip
def test_more_argument_errors(torch_oracle: ModuleType, case: str, expected: str) -> None:
    def scenario(lib: ModuleType) -> Any:
        x = _x(lib)
        if case == "empty_grad_inputs":
            lib.autograd.grad((x * 2).sum(), [])
        elif case == "int_input":
            lib.autograd.grad((x * 2).sum(), [x, 3])
        elif case == "edge_no_grad":
            lib.autograd.graph.get_gradient_edge(_x(lib, grad=False))
        elif case == "batched_shape":
            lib.autograd.grad(x * 2, x, lib.ones(2, 4, dtype=lib.float64), is_grads_batched=True)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                lib.autograd.backward(x.sum(), lib.tensor(1.0), grad_variables=lib.tensor(1.0))

    raises_same(scenario, torch_oracle, expected)
