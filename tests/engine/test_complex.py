"""Complex autograd against torch 2.8.0: PyTorch's conjugate Wirtinger convention end to end.

For a real loss L of z = x + iy, ``z.grad`` is dL/dz* (up to PyTorch's factor 2: dL/dx + i dL/dy).
The op table's complex samples (tests/engine/test_ops.py) check every formula alone; here whole
functions are checked: values and gradients against torch, and gradcheck / gradgradcheck (which
must also *fail* when a backward forgets a conjugate). Then the views between real and complex
tensors (``z.real``, ``view_as_real``) under in-place ops, type promotion, error messages and
printing.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from engine.autograd.gradcheck import GradcheckError
from tests.engine._autograd_diff import Raised, normalize, run_both

pytestmark = pytest.mark.oracle

_RNG = np.random.default_rng(0)
Z = _RNG.uniform(-2, 2, (2, 3)) + 1j * _RNG.uniform(-2, 2, (2, 3))
W = _RNG.uniform(-2, 2, (3, 2)) + 1j * _RNG.uniform(-2, 2, (3, 2))
X = _RNG.uniform(0.5, 2, (2, 3))
MASK = np.array([[True, False, True], [False, False, True]])


def _leaf(lib: ModuleType, a: np.ndarray) -> Any:
    return lib.from_numpy(a.copy()).requires_grad_()


# Each function takes (lib, z (2, 3) complex, w (3, 2) complex, x (2, 3) real) and returns a real
# scalar: z.grad is then PyTorch's dL/dz*.
FUNCTIONS: dict[str, Callable[[ModuleType, Any, Any, Any], Any]] = {
    "|z|^2 via conj": lambda lib, z, w, x: (z * z.conj()).real.sum(),
    "abs": lambda lib, z, w, x: z.abs().sum(),
    "matmul": lambda lib, z, w, x: (z @ w).sum().real,
    "view_as_real": lambda lib, z, w, x: lib.view_as_real(z).pow(2).sum(),
    "exp sin": lambda lib, z, w, x: (z.exp() * w.t().sin()).abs().pow(2).sum(),
    "angle polar": lambda lib, z, w, x: lib.angle(z).sum() + lib.polar(x, x * z.real).imag.sum(),
    "complex div": lambda lib, z, w, x: (lib.complex(x, x.sin()) / z).imag.sum(),
    "sgn reciprocal": lambda lib, z, w, x: z.sgn().real.sum() + z.reciprocal().imag.sum(),
    "log sqrt rsqrt": lambda lib, z, w, x: (z.log() * z.sqrt() + z.rsqrt()).real.sum(),
    "tanh sigmoid tan cos": lambda lib, z, w, x: (z.tanh() + z.sigmoid() * z.tan() - z.cos()).imag.sum(),
    "powers": lambda lib, z, w, x: (z**2.5 + z ** w.t() + 2**z + x ** (1 + 1j)).abs().sum(),
    "real and complex mixed": lambda lib, z, w, x: ((x * z + x) / (z - x) * (1 - 2j)).real.sum(),
    "cat prod": lambda lib, z, w, x: lib.cat([z, x]).prod(0).sum().real,
    "stack cumsum mean": lambda lib, z, w, x: lib.stack([z, x]).cumsum(1).mean().imag,
    "where masked_fill": lambda lib, z, w, x: (
        lib.where(lib.from_numpy(MASK), z, w.t()).masked_fill(lib.from_numpy(~MASK), 1j).abs().sum()
    ),
    "dot mv outer": lambda lib, z, w, x: (
        lib.dot(z[0], w[:, 1]).real
        + lib.mv(w, z[1, :2]).imag.sum()
        + lib.outer(z[0], w[0]).abs().sum()
        + lib.bmm(z.unsqueeze(0), w.unsqueeze(0)).real.sum()
    ),
    "indexing": lambda lib, z, w, x: (
        z[0, lib.from_numpy(np.array([2, 0, 2]))] * z[:, 1:].reshape(-1)[:3]
    ).real.sum(),
    "views": lambda lib, z, w, x: (z.t().reshape(6).expand(2, 6) * z.permute(1, 0).flatten()).imag.sum(),
}


def _grads(lib: ModuleType, name: str) -> Any:
    z, w, x = _leaf(lib, Z), _leaf(lib, W), _leaf(lib, X)
    loss = FUNCTIONS[name](lib, z, w, x)
    grads = lib.autograd.grad(loss, (z, w, x), allow_unused=True, create_graph=True)
    # Second order: the gradient of Re(sum(conj(v) * g)) for a fixed complex v.
    v = lib.from_numpy(np.full(Z.shape, 0.3 - 0.7j))
    live = [g for g in grads if g is not None and g.requires_grad]
    gg = None
    if live and live[0].is_complex():
        gg = lib.autograd.grad((live[0] * v.conj()).real.sum(), (z, w, x), allow_unused=True)
    # torch may hand back lazily conjugated tensors, which numpy() refuses to read.
    return loss, [[None if g is None else g.resolve_conj() for g in gs] for gs in (grads, gg or ())]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_matches_torch(name: str, torch_oracle: ModuleType) -> None:
    run_both(lambda lib: _grads(lib, name), torch_oracle)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_passes_gradcheck(name: str, fast_mode: bool) -> None:
    inputs = (_leaf(engine, Z), _leaf(engine, W), _leaf(engine, X))

    def fn(z: Any, w: Any, x: Any) -> Any:
        return FUNCTIONS[name](engine, z, w, x)

    assert engine.autograd.gradcheck(fn, inputs, fast_mode=fast_mode)
    assert engine.autograd.gradgradcheck(fn, inputs, fast_mode=fast_mode)


def test_complex_outputs_pass_gradcheck(torch_oracle: ModuleType) -> None:
    """A C -> C function is checked through the real and the imaginary part of its output."""

    def scenario(lib: ModuleType) -> Any:
        z, w = _leaf(lib, Z), _leaf(lib, W)
        checks = [
            lambda z, w: z @ w,
            lambda z, w: (z * z.conj(), z.abs()),
            lambda z, w: lib.view_as_complex(lib.view_as_real(z) * 2) / w.t(),
            lambda z, w: z.sum(0) * w[:, 0],
        ]
        return [lib.autograd.gradcheck(f, (z, w)) for f in checks] + [
            lib.autograd.gradgradcheck(f, (z, w)) for f in checks
        ]

    assert run_both(scenario, torch_oracle) == [True] * 8


def _square(lib: ModuleType, conj: bool) -> Any:
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, z: Any) -> Any:
            ctx.save_for_backward(z)
            return z * z

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (z,) = ctx.saved_tensors
            # The right formula is g * conj(2z); without the conj it is the JAX convention.
            return g * (2 * z).conj() if conj else g * 2 * z

    return Square


def test_gradcheck_rejects_a_missing_conjugate(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        z = lib.tensor([1 + 2j, 0.5 - 1j], dtype=lib.complex128, requires_grad=True)
        right, wrong = _square(lib, True), _square(lib, False)
        out: list[Any] = [lib.autograd.gradcheck(right.apply, (z,))]
        out.append(lib.autograd.gradcheck(wrong.apply, (z,), raise_exception=False))
        out.append(lib.autograd.gradcheck(lambda z: wrong.apply(z).abs(), (z,), raise_exception=False))
        out.append(lib.autograd.gradcheck(wrong.apply, (z,), fast_mode=True, raise_exception=False))
        try:
            lib.autograd.gradcheck(wrong.apply, (z,))
        except Exception as e:  # noqa: BLE001 - the message is compared
            out.append(str(e))
        return out

    right, *rejected, message = run_both(scenario, torch_oracle)
    assert right is True and rejected == [False, False, False]
    assert message.startswith(
        "While considering the imaginary part of complex outputs only, Jacobian mismatch"
    )
    with pytest.raises(GradcheckError):
        z = engine.tensor([1 + 2j], dtype=engine.complex128, requires_grad=True)
        engine.autograd.gradcheck(_square(engine, False).apply, (z,))


# --- views between real and complex, and in-place ops ----------------------------------------------


def _chain(t: Any) -> list[str]:
    names, fn = [], t.grad_fn
    while fn is not None:
        names.append(fn.name())
        fn = fn.next_functions[0][0] if fn.next_functions else None
    return names


def _inplace_scenario(kind: str) -> Callable[[ModuleType], Any]:
    def scenario(lib: ModuleType) -> Any:
        leaf = _leaf(lib, Z[0])
        w = lib.from_numpy(W[:, 0].copy())
        z = leaf * 1
        out = z
        if kind == "real.mul_":
            z.real.mul_(2)
        elif kind == "imag.add_":
            z.imag.add_(lib.from_numpy(np.array([1.0, 2.0, 3.0])))
        elif kind == "view_as_real.mul_":
            lib.view_as_real(z).mul_(3)
        elif kind == "base mul_, then read real":
            r, i = z.real, z.imag
            z.mul_(w)
            out = lib.stack([r, i])
        elif kind == "view_as_complex of real":
            x = lib.view_as_real(z) * 1
            c = lib.view_as_complex(x)
            x.mul_(2)
            c2 = lib.view_as_complex(x[1:])
            c2.mul_(1j)
            out = lib.stack([c[:2], c2])
        elif kind == "real and imag setters":
            z.real = lib.from_numpy(np.array([1.0, -2.0, 0.5])) * w.imag
            z.imag = 0.25
        elif kind == "select mul_":
            z[1].mul_(w[0])
        elif kind == "setitem":
            z[lib.from_numpy(np.array([2, 0]))] = w[:2] * 2
            z[lib.from_numpy(np.array([False, True, False]))] = 0.5j
        else:
            getattr(z, kind)(*([w] if kind in ("add_", "sub_", "mul_", "div_", "copy_") else []))
        loss = (out * out.conj()).real.sum() if out.is_complex() else out.pow(2).sum()
        (grad,) = lib.autograd.grad(loss, leaf)
        return out, _chain(out), grad, z._version

    return scenario


@pytest.mark.parametrize(
    "kind",
    [
        "real.mul_",
        "imag.add_",
        "view_as_real.mul_",
        "base mul_, then read real",
        "view_as_complex of real",
        "select mul_",
        "setitem",
        "real and imag setters",
        *["add_", "sub_", "mul_", "div_", "copy_", "neg_", "exp_", "log_", "sqrt_", "rsqrt_", "sin_"],
        *["cos_", "tan_", "tanh_", "sigmoid_", "reciprocal_", "sgn_", "zero_", "abs_"],
    ],
)
def test_inplace_and_views(kind: str, torch_oracle: ModuleType) -> None:
    run_both(_inplace_scenario(kind), torch_oracle)


def test_real_and_imag_are_views(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        z = _leaf(lib, Z)
        x = _leaf(lib, X)
        r, i, v = z.real, z.imag, lib.view_as_real(z[:, 1:])
        return [
            [(t.grad_fn.name(), t._base is z, t.is_leaf, t.stride(), t.storage_offset()) for t in (r, i, v)],
            [n.name() for n, _ in r.grad_fn.next_functions],
            x.real is x,
            lib.real(x) is x,
            x.conj() is x,
            x.conj_physical() is x,
            z.is_complex(),
            z.conj_physical().grad_fn.name(),
            (z.conj().grad_fn.name(), z.conj().conj().grad_fn.name()),
            lib.view_as_complex(lib.view_as_real(z)).grad_fn.name(),
            lib.is_complex(z),
            lib.is_complex(x),
            z.resolve_conj() is z,
        ]

    run_both(scenario, torch_oracle)


# --- type promotion ------------------------------------------------------------------------------


def test_real_to_complex_promotion(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        f32 = lib.ones(2, dtype=lib.float32, requires_grad=True)
        f64 = lib.ones(2, dtype=lib.float64)
        c64 = lib.tensor([1 + 1j, 2j], dtype=lib.complex64)
        c128 = lib.tensor([1 + 1j, 2j], dtype=lib.complex128)
        c128_0d = lib.tensor(1j, dtype=lib.complex128)
        i64 = lib.tensor([1, 2])
        pairs = [
            (f32, c128),
            (f64, c64),
            (c64, f64),
            (f32, c128_0d),
            (f32, 1j),
            (i64, 1j),
            (i64, c64),
            (c64, 2.5),
        ]
        out = [(str((a + b).dtype), str(lib.result_type(a, b))) for a, b in pairs]
        y = f32 * c128_0d  # complex64: the 0-dim complex128 only brings its category
        (g,) = lib.autograd.grad((y * y.conj()).real.sum(), f32)
        return out, str(y.dtype), g, str(lib.tensor([1 + 2j]).dtype), str(lib.tensor([1, 2j]).dtype)

    run_both(scenario, torch_oracle)


# --- errors ------------------------------------------------------------------------------------------


ERRORS: dict[str, Callable[[ModuleType], Any]] = {
    "backward of a complex scalar": lambda lib: _leaf(lib, Z).sum().backward(),
    "grad of a complex output": lambda lib: lib.autograd.grad(_leaf(lib, Z).sum(), _leaf(lib, Z)),
    "real grad_output for a complex output": lambda lib: (_leaf(lib, Z) * 2).backward(
        lib.ones(2, 3, dtype=lib.float64)
    ),
    "complex grad_output for a real output": lambda lib: (_leaf(lib, X) * 2).backward(
        lib.ones(2, 3, dtype=lib.complex128)
    ),
    "complex into real, in place": lambda lib: lib.ones(2, dtype=lib.float64).add_(lib.tensor([1j, 2j])),
    "complex alpha for real inputs": lambda lib: lib.sub(lib.ones(2), lib.ones(2), alpha=1j),
    "where: real input, complex gradient": lambda lib: (
        lib.where(lib.from_numpy(MASK), _leaf(lib, X), _leaf(lib, Z)).abs().sum().backward()
    ),
    "masked_fill: real value tensor, complex gradient": lambda lib: (
        _leaf(lib, Z).masked_fill(lib.from_numpy(MASK), _leaf(lib, np.array(2.0))).abs().sum().backward()
    ),
    "sum of a real tensor as complex: complex gradient": lambda lib: (
        _leaf(lib, X).sum(dtype=lib.complex128).abs().backward()
    ),
    "mm of real and complex": lambda lib: lib.mm(_leaf(lib, X), _leaf(lib, W)),
    "imag of a real tensor": lambda lib: _leaf(lib, X).imag,
    "view_as_real of a real tensor": lambda lib: lib.view_as_real(_leaf(lib, X)),
    "view_as_complex, last dim 3": lambda lib: lib.view_as_complex(_leaf(lib, X)),
    "view_as_complex, stride": lambda lib: lib.view_as_complex(lib.ones(2, 2, dtype=lib.float64).t()),
    "view_as_complex, offset": lambda lib: lib.view_as_complex(
        lib.ones(6, dtype=lib.float64)[1:5].view(2, 2)
    ),
    "view_as_complex of integers": lambda lib: lib.view_as_complex(lib.tensor([1, 2])),
    "complex(): dtypes differ": lambda lib: lib.complex(lib.ones(2, dtype=lib.float64), lib.ones(2)),
    "complex(): integers": lambda lib: lib.complex(lib.tensor([1]), lib.tensor([1])),
    "polar(): complex inputs": lambda lib: lib.polar(_leaf(lib, Z), _leaf(lib, Z)),
    "in-place abs": lambda lib: (_leaf(lib, Z) * 1).abs_(),
    "sign": lambda lib: _leaf(lib, Z).sign(),
    "maximum": lambda lib: lib.maximum(_leaf(lib, Z), _leaf(lib, Z)),
    "masked_fill of a real tensor with 1j": lambda lib: lib.ones(2).masked_fill(
        lib.tensor([True, False]), 1j
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name: str, torch_oracle: ModuleType) -> None:
    theirs = run_both(ERRORS[name], torch_oracle)
    assert isinstance(theirs, Raised), f"no error: {theirs!r}"


def test_complex_leaves_require_grad(torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        a = lib.tensor([1 + 1j], requires_grad=True)
        b = lib.zeros(2, dtype=lib.complex128).requires_grad_()
        c = lib.ones(2, dtype=lib.complex64)
        c.requires_grad = True
        (a.abs().sum() + b.abs().sum() + (c * c).real.sum()).backward()
        return a.grad, b.grad, c.grad, str(a.dtype), str(lib.cfloat), str(lib.cdouble)

    run_both(scenario, torch_oracle)


# --- optimizers work on complex parameters (the point of the conjugate convention) -----------------


@pytest.mark.parametrize(
    "opt",
    ["SGD", "Adam"],
)
def test_optimizer_steps_on_complex_parameters(opt: str, torch_oracle: ModuleType) -> None:
    def scenario(lib: ModuleType) -> Any:
        z = lib.nn.Parameter(lib.from_numpy(Z.copy()))
        optimizer = getattr(lib.optim, opt)([z], lr=0.1)
        target = lib.from_numpy(Z.conj() * 0.5)
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            loss = (z - target).abs().pow(2).sum()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return z.detach(), losses

    run_both(scenario, torch_oracle)


# --- printing -------------------------------------------------------------------------------------

REPRS = [
    "lib.tensor([1+2j, 3-1j], dtype=lib.complex128)",
    "lib.tensor([1+2j, 3-1j])",
    "lib.tensor([0.5+2.25j, -3.125-1j])",
    "lib.tensor([[1e-5+1j, 2.0+0j], [3.0-1e5j, 0j]], dtype=lib.complex128)",
    "lib.tensor(1.5-0.5j)",
    "lib.tensor([1+0j, 100000+1j])",
    "lib.tensor([0.1+1e-6j])",
    "lib.tensor([complex(float('nan'), 1), 2j])",
    "lib.tensor([-0.0+0j, -1-0j])",
    "lib.tensor([1+1j, 2+2j], requires_grad=True) * 2",
    "lib.tensor([1+2j, 3-1j]).imag",
    "(lib.arange(40.) / 3).reshape(2, 4, 5).to(lib.complex128) * (1+2j)",
    "lib.tensor([[1+2j]*12]*2)",
    "lib.zeros(2, 0, dtype=lib.complex128)",
    # Real tensors: zeros, nan and inf do not decide the notation.
    "lib.tensor([0.5477, 0.7303, 0.0])",
    "lib.tensor([[1.5, 0.0], [2.25, 3.0]], dtype=lib.float64)",
    "lib.tensor([float('nan'), 1.5, float('inf'), 0.0])",
    "lib.tensor([float('nan'), 1.0])",
    "lib.tensor([1e10, 1.0])",
    "lib.tensor([123456789.0, 0.0])",
    "lib.tensor([-0.0, 1.0])",
    "lib.arange(30.) / 7",
    "lib.arange(2000.).reshape(40, 50) / 3",
    "lib.tensor([], dtype=lib.int64)",
]


@pytest.mark.parametrize("expr", REPRS)
def test_repr_matches_torch(expr: str, torch_oracle: ModuleType) -> None:
    theirs = normalize(repr(eval(expr, {"lib": torch_oracle})))  # noqa: S307 - fixed test expressions
    assert repr(eval(expr, {"lib": engine})) == theirs  # noqa: S307
