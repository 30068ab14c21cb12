"""A small stand-in for ``torch.testing._internal.common_utils`` (Note [Conformance shim]).

It imports ``torch`` lazily, so it serves real torch and the engine alike: whichever module
``torch`` is in the worker process.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import re
import sys
import unittest
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

IS_WINDOWS = False
IS_MACOS = False
IS_FBCODE = False
IS_SANDCASTLE = False
IS_ARM64 = False
TEST_PRIVATEUSE1 = False
TEST_CUDA = False
TEST_WITH_ROCM = False
TEST_WITH_TORCHDYNAMO = False
TEST_WITH_CROSSREF = False
TEST_WITH_SLOW = False
load_tests = None
SEED = 1234


def _torch() -> Any:
    return sys.modules["torch"]


# ---- tolerances: torch.testing's defaults for assert_close / TestCase.assertEqual ----
_TOLERANCES = {  # dtype name -> (rtol, atol)
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


def _is_tensor(x: Any) -> bool:
    torch = _torch()
    return isinstance(x, torch.Tensor)


def _dtype_name(dtype: Any) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def _to_numpy(x: Any) -> Any:
    import numpy as np

    if _is_tensor(x):
        t = x.detach()
        if getattr(t, "is_conj", lambda: False)():
            t = t.resolve_conj()
        if getattr(t, "is_neg", lambda: False)():
            t = t.resolve_neg()
        if _dtype_name(t.dtype) == "bfloat16":
            t = t.float()
        return np.asarray(t.cpu().numpy() if hasattr(t, "cpu") else t.numpy())
    return np.asarray(x)


def _tolerance(x: Any, y: Any) -> tuple[float, float]:
    names = [_dtype_name(v.dtype) for v in (x, y) if _is_tensor(v)]
    if not names:
        return _TOLERANCES["float64"] if any(isinstance(v, float | complex) for v in (x, y)) else (0.0, 0.0)
    tols = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(t[0] for t in tols), max(t[1] for t in tols)


def _compare(
    x: Any, y: Any, atol: float | None, rtol: float | None, equal_nan: bool, exact_dtype: bool
) -> str | None:
    """None if equal, else why not (torch's TestCase.assertEqual, simplified)."""
    import numpy as np

    torch = _torch()
    if _is_tensor(x) or _is_tensor(y):
        if _is_tensor(x) and _is_tensor(y):
            if exact_dtype and x.dtype != y.dtype:
                return f"dtypes differ: {x.dtype} != {y.dtype}"
            if tuple(x.shape) != tuple(y.shape):
                return f"shapes differ: {tuple(x.shape)} != {tuple(y.shape)}"
        a, b = _to_numpy(x), _to_numpy(y)
        if a.shape != b.shape:
            if a.size == 1 and b.size == 1:
                a, b = a.reshape(()), b.reshape(())
            else:
                return f"shapes differ: {a.shape} != {b.shape}"
        r, t = _tolerance(x, y)
        r = r if rtol is None else rtol
        t = t if atol is None else atol
        if a.dtype == bool or b.dtype == bool or (a.dtype.kind in "iu" and b.dtype.kind in "iu"):
            ok = bool(np.array_equal(a, b))
        else:
            ok = bool(np.allclose(a, b, rtol=r, atol=t, equal_nan=equal_nan))
        return None if ok else f"tensor values differ (rtol={r}, atol={t}):\n{a}\n!=\n{b}"
    if isinstance(x, torch.Size) or isinstance(y, torch.Size):
        return None if tuple(x) == tuple(y) else f"{tuple(x)} != {tuple(y)}"
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        if set(x) != set(y):
            return f"keys differ: {sorted(map(str, x))} != {sorted(map(str, y))}"
        for k in x:
            why = _compare(x[k], y[k], atol, rtol, equal_nan, exact_dtype)
            if why:
                return f"at key {k!r}: {why}"
        return None
    if isinstance(x, Sequence) and isinstance(y, Sequence) and not isinstance(x, str | bytes):
        if isinstance(y, str | bytes):
            return f"{x!r} != {y!r}"
        if len(x) != len(y):
            return f"lengths differ: {len(x)} != {len(y)}"
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            why = _compare(u, v, atol, rtol, equal_nan, exact_dtype)
            if why:
                return f"at index {i}: {why}"
        return None
    if isinstance(x, bool) or isinstance(y, bool) or x is None or y is None:
        return None if x == y else f"{x!r} != {y!r}"
    if isinstance(x, int | float | complex) and isinstance(y, int | float | complex):
        if isinstance(x, int) and isinstance(y, int):
            return None if x == y else f"{x} != {y}"
        if equal_nan and all(isinstance(v, float) and math.isnan(v) for v in (x, y)):
            return None
        r, t = _TOLERANCES["float64"]
        r = r if rtol is None else rtol
        t = t if atol is None else atol
        return None if abs(x - y) <= t + r * abs(y) else f"{x} != {y} (rtol={r}, atol={t})"
    return None if x == y else f"{x!r} != {y!r}"


class TestCase(unittest.TestCase):
    """torch's TestCase, reduced to what the vendored tests call."""

    longMessage = True
    _do_cuda_memory_leak_check = False
    _do_cuda_non_default_stream = False

    def setUp(self) -> None:
        torch = _torch()
        with contextlib.suppress(Exception):
            torch.manual_seed(SEED)

    def tearDown(self) -> None:
        torch = _torch()
        with contextlib.suppress(Exception):
            torch.set_grad_enabled(True)

    def assertEqual(  # type: ignore[override]
        self,
        x: Any,
        y: Any,
        msg: Any = None,
        *,
        atol: float | None = None,
        rtol: float | None = None,
        equal_nan: bool = True,
        exact_dtype: bool = True,
        exact_device: bool = False,
        exact_layout: bool = False,
        exact_stride: bool = False,
        exact_is_coalesced: bool = False,
    ) -> None:
        why = _compare(x, y, atol, rtol, equal_nan, exact_dtype)
        if why is not None:
            extra = msg() if callable(msg) else msg
            raise self.failureException(f"{why}" + (f"\n{extra}" if extra else ""))

    def assertNotEqual(  # type: ignore[override]
        self,
        x: Any,
        y: Any,
        msg: Any = None,
        *,
        atol: float | None = None,
        rtol: float | None = None,
        **kwargs: Any,
    ) -> None:  # type: ignore[override]
        if _compare(x, y, atol, rtol, True, kwargs.get("exact_dtype", True)) is None:
            raise self.failureException(msg or f"{x!r} == {y!r}")

    def assertExpectedInline(self, actual: str, expect: str, skip: int = 0) -> None:
        def norm(s: str) -> str:
            import textwrap

            return textwrap.dedent(s).strip()

        self.assertEqual(norm(actual), norm(expect))

    def assertExpected(self, *args: Any, **kwargs: Any) -> None:
        raise unittest.SkipTest("assertExpected reads PyTorch's expect/ files, not vendored")

    @contextlib.contextmanager
    def assertNotWarn(self, msg: str = "") -> Iterator[None]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        if caught:
            raise self.failureException(f"{msg} warned: {caught[0].message}")

    @contextlib.contextmanager
    def assertWarnsOnceRegex(self, category: type[Warning], regex: str = "") -> Iterator[None]:
        pattern = re.compile(regex)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with set_warn_always_context(True):
                yield
        found = [w for w in caught if issubclass(w.category, category) and pattern.search(str(w.message))]
        if not found:
            raise self.failureException(f"no {category.__name__} matching {regex!r}")

    def assertLeaksNoCudaTensors(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def run(self, result: Any = None) -> Any:
        return super().run(result)


def run_tests(*args: Any, **kwargs: Any) -> None:
    unittest.main()


# ---- decorators: skips the harness does not model are no-ops ----
def _decorator_or_factory(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda fn: fn


skipIfTorchDynamo = _decorator_or_factory
xfailIfTorchDynamo = _decorator_or_factory
skipIfMps = _decorator_or_factory
skipIfNoLapack = _decorator_or_factory
skipIfRocm = _decorator_or_factory
skipIfCrossRef = _decorator_or_factory
skipIfXpu = _decorator_or_factory
skipIfWindows = _decorator_or_factory
skipIfTorchInductor = _decorator_or_factory
skipIfNoSciPy = _decorator_or_factory
markDynamoStrictTest = _decorator_or_factory


def slowTest(fn: Callable[..., Any]) -> Callable[..., Any]:
    """PyTorch skips slow tests unless PYTORCH_TEST_WITH_SLOW is set: so does the harness."""
    return unittest.skip("test is slow; run with PYTORCH_TEST_WITH_SLOW")(fn)


@contextlib.contextmanager
def disable_gc() -> Iterator[None]:
    if gc.isenabled():
        gc.disable()
        try:
            yield
        finally:
            gc.enable()
    else:
        yield


@contextlib.contextmanager
def set_warn_always_context(new_val: bool) -> Iterator[None]:
    torch = _torch()
    old = torch.is_warn_always_enabled()
    torch.set_warn_always(new_val)
    try:
        yield
    finally:
        torch.set_warn_always(old)


def gradcheck(fn: Callable[..., Any], inputs: Any, **kwargs: Any) -> bool:
    return bool(_torch().autograd.gradcheck(fn, inputs, **kwargs))


def gradgradcheck(fn: Callable[..., Any], inputs: Any, grad_outputs: Any = None, **kwargs: Any) -> bool:
    return bool(_torch().autograd.gradgradcheck(fn, inputs, grad_outputs, **kwargs))


# ---- parametrize: expanded by instantiate_parametrized_tests, named as PyTorch names them ----
class subtest:  # noqa: N801  (PyTorch's name)
    def __init__(self, arg_values: Any, name: str | None = None, decorators: Any = None) -> None:
        self.arg_values = arg_values
        self.name = name
        self.decorators = decorators or []


class parametrize:  # noqa: N801  (PyTorch's name)
    def __init__(self, arg_str: str, arg_values: Any, name_fn: Callable[..., str] | None = None) -> None:
        self.arg_names = [s.strip() for s in arg_str.split(",") if s.strip()]
        self.arg_values = list(arg_values)
        self.name_fn = name_fn

    def __call__(self, fn: Any) -> Any:
        fn.__dict__.setdefault("_conformance_params", []).insert(0, self)
        return fn

    def cases(self) -> list[tuple[str, dict[str, Any], list[Any]]]:
        out = []
        for v in self.arg_values:
            decorators: list[Any] = []
            name = None
            if isinstance(v, subtest):
                decorators, name, v = v.decorators, v.name, v.arg_values
            values = list(v) if len(self.arg_names) > 1 else [v]
            if name is None:
                if self.name_fn is not None:
                    name = self.name_fn(*values)
                else:
                    name = "_".join(
                        f"{n}_{_value_name(x)}" for n, x in zip(self.arg_names, values, strict=True)
                    )
            out.append((name, dict(zip(self.arg_names, values, strict=True)), decorators))
        return out


def _value_name(x: Any) -> str:
    if isinstance(x, type):
        return x.__name__
    return str(x).replace(".", "_").replace("torch_", "").replace(" ", "")


def instantiate_parametrized_tests(cls: type) -> type:
    for attr in list(vars(cls)):
        fn = vars(cls)[attr]
        params = getattr(fn, "__dict__", {}).get("_conformance_params")
        if not attr.startswith("test") or not params:
            continue
        delattr(cls, attr)
        for combo in itertools.product(*(p.cases() for p in params)):
            name = "_".join([attr] + [c[0] for c in combo if c[0]])
            kwargs: dict[str, Any] = {}
            decorators: list[Any] = []
            for _, kw, decs in combo:
                kwargs.update(kw)
                decorators.extend(decs)

            def make(fn: Any = fn, kwargs: dict[str, Any] = kwargs) -> Any:
                def test(self: Any) -> Any:
                    return fn(self, **kwargs)

                return test

            test = make()
            for d in decorators:
                test = d(test)
            test.__name__ = name
            test._conformance_origin = attr  # type: ignore[attr-defined]
            setattr(cls, name, test)
    return cls


def __getattr__(name: str) -> Any:
    # Any other decorator PyTorch's tests may import: a no-op; any other flag: off.
    if name.startswith(("skip", "xfail", "only")):
        return _decorator_or_factory
    if name.isupper():
        return False
    raise AttributeError(name)
