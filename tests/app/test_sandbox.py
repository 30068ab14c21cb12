"""The sandbox: hostile and malformed scenario text always ends in a clear error, within the limits.

Three layers are tested:
- compile time (``compile_untrusted``): what RestrictedPython and our policy refuse, with the line;
- the guards at run time, in this process (fast): imports, attributes, NumPy escapes, builtins;
- the worker process (``run_scenario(..., trusted=False)``): limits on CPU, wall time, memory,
  tensor size and trace length, crashes, privileges, and that legitimate scenarios still work.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.runner import RunResult, list_scenarios, run_scenario
from app.sandbox import (
    Limits,
    ScenarioSyntaxError,
    _outcome,
    compile_untrusted,
    restricted_globals,
)
from tests.scenarios._golden import normalize_trace

# Small limits keep every worker test short; the wall limit is the bound on any one run.
FAST = Limits(cpu_seconds=2, wall_seconds=20, max_events=20_000)
HEADER = "import engine as torch\n"


def run_untrusted(text: str, limits: Limits = FAST) -> tuple[RunResult, float]:
    start = time.monotonic()
    result = run_scenario(text, trusted=False, limits=limits)
    return result, time.monotonic() - start


def run_here(text: str) -> tuple[BaseException | None, list[str]]:
    """Compile and run restricted text in this process (guards only, no limits)."""
    printed: list[str] = []
    code = compile_untrusted(text, "<scenario>")
    namespace: dict[str, Any] = restricted_globals(printed.append)
    try:
        exec(code, namespace)
    except Exception as e:
        return e, printed
    return None, printed


# --- compile time ----------------------------------------------------------------------------------

COMPILE_REJECTS = {
    "syntax_error": ("x = 1\ny = (2,\n", 2, "SyntaxError"),
    "dunder_chain": ("x = ().__class__.__bases__[0].__subclasses__()\n", 1, '"__class__"'),
    "dunder_import": ("m = __import__('os')\n", 1, '"__import__"'),
    "eval": ("x = 1\ny = eval('x')\n", 2, "Eval calls are not allowed"),
    "exec": ("exec('import os')\n", 1, "Exec calls are not allowed"),
    "private_import": ("from engine import _C\n", 1, '"_C"'),
    "private_attribute": (HEADER + "x = torch.ones(2)._data\n", 2, '"_data"'),
    "generator_frame": ("def g():\n    yield 1\nf = g().gi_frame\n", 3, '"gi_frame"'),
    "function_globals": ("f = lambda: 1\ng = f.__globals__\n", 2, '"__globals__"'),
    "traceback": ("try:\n    1 / 0\nexcept Exception as e:\n    t = e.__traceback__\n", 4, '"__traceback__"'),
    "metaclass": ("class A(metaclass=type):\n    pass\n", 1, "metaclass"),
    "star_import": ("from math import *\n", 1, "imports are not allowed"),
    "assign_init": ("class A:\n    pass\nA().__init__ = 1\n", 3, "can be read but not assigned"),
}


@pytest.mark.parametrize("case", COMPILE_REJECTS, ids=list(COMPILE_REJECTS))
def test_compile_time_rejections_name_the_line(case: str) -> None:
    text, line, words = COMPILE_REJECTS[case]
    with pytest.raises(SyntaxError) as info:
        compile_untrusted(text, "<scenario>")
    assert info.value.lineno == line
    assert words in f"{type(info.value).__name__}: {info.value.msg}"
    assert isinstance(info.value, ScenarioSyntaxError)


TOKENS = [
    "import", "engine", "os", "__class__", "(", ")", "[", "]", ".", ":", "=", "+=", "lambda", "def",
    "class", "x", "torch", "yield", "\n", "    ", "'{0.__class__}'", "format", "__import__", "0",
    "exec", "eval", "open", "\x00", "\udcff", "#", "if", "else", ",", "*", "**", "from", "_x",
]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)))
def test_any_text_compiles_or_is_a_scenario_syntax_error(text: str) -> None:
    try:
        compile_untrusted(text, "<scenario>")
    except ScenarioSyntaxError as e:
        assert e.msg
        assert e.lineno is None or e.lineno >= 1


@pytest.mark.parametrize(
    "text",
    ["x = 1\x00\n", "\udcff = 1\n", "x = " + "(" * 5000 + ")" * 5000 + "\n"],
    ids=["nul", "surrogate", "nested"],
)
def test_unparsable_text_is_a_syntax_error(text: str) -> None:
    with pytest.raises(ScenarioSyntaxError):
        compile_untrusted(text, "<scenario>")


def test_super_init_and_augmented_assignment_compile() -> None:
    text = (
        "import engine as torch\nfrom engine import nn\n"
        "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = 0\n"
        "m = M()\nm.n += 2\nv = [1, 2]\nv[0] *= 5\nx = torch.zeros(2, 3)\nx[:, 1:] += 1.0\n"
        "print(m.n, v, x.tolist())\n"
    )
    error, printed = run_here(text)
    assert error is None
    assert printed == ["2 [5, 2] [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]\n"]


# --- the guards, in this process -------------------------------------------------------------------

RUNTIME_REJECTS = {
    "import_os": ("import os\n", ImportError, "import of 'os' is not allowed"),
    "import_sys": ("import sys\n", ImportError, "import of 'sys' is not allowed"),
    "import_subprocess": ("import subprocess\n", ImportError, "import of 'subprocess'"),
    "import_numpy": ("import numpy\n", ImportError, "import of 'numpy'"),
    "import_private_submodule": ("import engine.ops._dispatch\n", ImportError, "engine.ops._dispatch"),
    "from_engine_import_module": ("from engine.utils import importlib\n", ImportError, "importlib"),
    "module_attribute": (HEADER + "m = torch.utils.checkpoint.weakref\n", ImportError, "'weakref'"),
    "numpy_module_attribute": (HEADER + "np = torch.ops.pointwise.np\n", ImportError, "'numpy'"),
    "getattr_dunder": (HEADER + "c = getattr(torch.ones(1), '__class__')\n", AttributeError, '"__class__"'),
    "getattr_private": (HEADER + "d = getattr(torch.ones(1), '_data')\n", AttributeError, '"_data"'),
    "format_attribute": ("s = '{0.__class__}'.format(1)\n", AttributeError, "str.format"),
    "format_map": ("s = '{x.__class__}'.format_map({'x': 1})\n", AttributeError, "str.format"),
    "tensor_numpy": (HEADER + "a = torch.ones(3).numpy()\n", AttributeError, '"numpy"'),
    "kernel_array_tofile": (
        HEADER + "a = torch.ops.sin.kernel([1.0])\na.tofile('x.bin')\n",
        AttributeError,
        '"tofile"',
    ),
    "kernel_array_any_attribute": (
        HEADER + "b = torch.ops.sin.kernel([1.0]).base\n",
        AttributeError,
        "raw NumPy objects",
    ),
    "kernel_array_dump": (HEADER + "torch.ops.sin.kernel([1.0]).dump('x')\n", AttributeError, '"dump"'),
    "open": ("f = open('/etc/passwd')\n", NameError, "open"),
    "globals": ("g = globals()\n", NameError, "globals"),
    "vars": ("v = vars()\n", NameError, "vars"),
    "type_three_args": ("A = type('A', (), {})\n", TypeError, "argument"),
    "write_module": (HEADER + "torch.zeros = None\n", TypeError, "cannot modify"),
    "setattr_module": (HEADER + "setattr(torch, 'ones', None)\n", TypeError, "cannot modify"),
    "setattr_dunder": ("class A:\n    pass\nsetattr(A(), '__class__', int)\n", AttributeError, '"__class__"'),
    "write_engine_class": (HEADER + "torch.Tensor.sin = None\n", TypeError, "cannot modify the class"),
    # record() reads any file it is given: only mark() of engine.trace is available.
    "trace_record": (
        HEADER + "r = torch.trace.record(source_files=['/etc/passwd'])\n",
        AttributeError,
        "only",
    ),
    "from_trace_import_record": ("from engine.trace import record\n", ImportError, "engine.trace.record"),
    "import_trace_submodule": ("import engine.trace.record as r\n", ImportError, "engine.trace.record"),
    "from_import_missing": ("from engine import no_such_name\n", ImportError, "cannot import name"),
}


@pytest.mark.parametrize("case", RUNTIME_REJECTS, ids=list(RUNTIME_REJECTS))
def test_runtime_guards_refuse(case: str) -> None:
    text, exc_type, words = RUNTIME_REJECTS[case]
    error, _ = run_here(text)
    assert isinstance(error, exc_type), repr(error)
    assert words in str(error)


def test_the_engine_api_stays_usable() -> None:
    text = (
        HEADER + "import math\nfrom engine.utils.checkpoint import checkpoint, CheckpointPolicy\n"
        "x = torch.randn(3, requires_grad=True)\n"
        "y = checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False)\n"
        "y.sum().backward()\n"
        "from engine import trace\ntrace.mark('here', step=1)\n"
        "print(x.grad.shape, CheckpointPolicy.MUST_SAVE.name, round(math.pi, 2), hasattr(x, 'grad'))\n"
    )
    error, printed = run_here(text)
    assert error is None, repr(error)
    assert printed == ["engine.Size([3]) MUST_SAVE 3.14 True\n"]


# --- the worker process ----------------------------------------------------------------------------


def assert_limit(result: RunResult, limit: str, seconds: float, bound: float) -> None:
    assert not result.ok
    assert result.error is not None
    assert result.error.limit == limit, result.error
    assert result.error.type == "LimitExceeded"
    assert seconds < bound, f"took {seconds:.1f} s"


def test_syntax_error_in_the_worker_names_the_line() -> None:
    result, _ = run_untrusted("x = 1\nif x:\nprint(x)\n")
    assert result.error is not None and result.error.type == "SyntaxError"
    assert (result.error.file, result.error.line) == ("<scenario>", 3)
    assert result.trace is None


def test_unparsable_text_in_the_worker_is_a_syntax_error() -> None:
    result, _ = run_untrusted("x = 1\x00\n")
    assert result.error is not None and result.error.type == "SyntaxError"


def test_untrusted_text_naming_a_file_is_text_not_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text("print('the secret')\n")
    result, _ = run_untrusted(str(secret))
    assert result.error is not None and result.error.type == "SyntaxError"
    assert "the secret" not in result.stdout + result.error.message


def test_forbidden_import_in_the_worker_names_the_line() -> None:
    result, _ = run_untrusted(HEADER + "x = torch.ones(2)\nimport os\n")
    assert result.error is not None
    assert (result.error.type, result.error.line) == ("ImportError", 3)
    assert "os" in result.error.message
    # The trace ends with the error, after what ran before it.
    assert result.trace is not None
    kinds = [e["kind"] for e in result.trace["events"]]
    assert kinds[0] == "tensor_new" and kinds[-1] == "error"


def test_infinite_loop_hits_the_cpu_limit() -> None:
    result, seconds = run_untrusted("n = 0\nwhile True:\n    n = n + 1\n", Limits(cpu_seconds=1))
    assert_limit(result, "cpu_seconds", seconds, bound=10)
    assert result.error is not None and result.error.line in (2, 3)


def test_a_loop_that_swallows_the_limit_is_killed() -> None:
    text = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n"
    result, seconds = run_untrusted(text, Limits(cpu_seconds=1))
    assert_limit(result, "cpu_seconds", seconds, bound=12)


def test_wall_clock_limit_kills_the_process_group() -> None:
    limits = Limits(cpu_seconds=60, wall_seconds=1.5)
    result, seconds = run_untrusted("while True:\n    pass\n", limits)
    assert_limit(result, "wall_seconds", seconds, bound=8)
    assert "1.5 s" in result.error.message  # type: ignore[union-attr]


def test_a_killed_run_keeps_the_events_it_streamed() -> None:
    """A run that never ends is killed at the wall-clock limit: the worker never answers, and
    the events it sent while running are its trace (truncated, ending before the kill)."""
    text = HEADER + "x = torch.ones(2, requires_grad=True)\nwhile True:\n    y = x * 2\n"
    batches: list[list[dict[str, Any]]] = []
    limits = Limits(cpu_seconds=60, wall_seconds=3, max_events=10**7)
    result = run_scenario(text, trusted=False, limits=limits, on_events=batches.append)
    assert result.error is not None and result.error.limit == "wall_seconds"
    assert result.trace is not None
    events = result.trace["events"]
    assert len(batches) >= 1 and events == [e for batch in batches for e in batch]
    assert result.trace["meta"]["truncated"] and result.trace["meta"]["n_events"] == len(events)
    assert result.trace["sources"] == {"<scenario>": text}
    named = [e["name"] for e in events if e["kind"] == "tensor_new"]
    assert named[0] == "x" and set(named[1:]) == {"y"}


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (HEADER + "x = torch.zeros(10**9)\n", 2),
        (HEADER + "x = torch.randn(2000, 2000)\n", 2),
        (HEADER + "x = torch.full((3000, 3000), 1.0)\n", 2),
        (HEADER + "a = torch.ones(2000, 1)\nb = torch.ones(1, 2000)\nc = a + b\n", 4),
        (HEADER + "x = torch.tensor([0.0] * 2_000_000)\n", 2),
    ],
    ids=["zeros_1e9", "randn_4e6", "full_9e6", "broadcast_4e6", "tensor_from_list"],
)
def test_huge_tensors_hit_the_tensor_size_limit(text: str, line: int) -> None:
    result, seconds = run_untrusted(text)
    assert_limit(result, "max_tensor_numel", seconds, bound=10)
    assert result.error is not None and result.error.line == line
    assert "max_tensor_numel" in result.error.message


@pytest.mark.parametrize("text", ["x = [0] * (10**9)\n", "s = 'ab' * (10**9)\n"], ids=["list", "str"])
def test_huge_python_allocations_hit_the_memory_limit(text: str) -> None:
    result, seconds = run_untrusted(text)
    assert_limit(result, "memory_mb", seconds, bound=10)
    assert result.error is not None and result.error.line == 1


def test_deep_recursion_is_a_recursion_error_with_its_line() -> None:
    result, seconds = run_untrusted("def f(n):\n    return f(n + 1)\n\nf(0)\n")
    assert result.error is not None and result.error.type == "RecursionError"
    assert result.error.line == 2
    assert seconds < 10


def test_huge_trace_hits_the_event_limit() -> None:
    text = HEADER + "x = torch.ones(2, requires_grad=True)\nwhile True:\n    x = x * 1.5\n"
    result, seconds = run_untrusted(text, Limits(cpu_seconds=5, wall_seconds=20, max_events=3000))
    assert_limit(result, "max_events", seconds, bound=15)
    assert result.error is not None and result.error.line == 4
    assert result.trace is not None
    assert len(result.trace["events"]) == 3000
    assert result.trace["meta"]["truncated"] is True


def test_writing_a_file_through_numpy_is_refused() -> None:
    result, _ = run_untrusted(HEADER + "torch.ones(3).numpy().tofile('escape.bin')\n")
    assert result.error is not None and result.error.type == "AttributeError"
    assert result.error.line == 2


def test_printed_text_cannot_corrupt_the_answer() -> None:
    result, _ = run_untrusted('print("}{ not json")\nprint(printed)\n')
    assert result.ok, result.error
    assert result.stdout == "}{ not json\n}{ not json\n\n"
    labels = [e["label"] for e in result.trace["events"] if e["kind"] == "mark"]  # type: ignore[index]
    assert labels == ["}{ not json", "}{ not json"]


@pytest.mark.skipif(os.geteuid() != 0, reason="privileges are dropped only when the worker starts as root")
def test_the_worker_drops_root_privileges() -> None:
    result, _ = run_untrusted("x = 1\n")
    assert result.ok, result.error
    assert result.extra["privileges_dropped"] is True


def test_progress_is_reported_while_a_long_run_goes_on() -> None:
    seen: list[int] = []
    text = HEADER + "x = torch.ones(2, requires_grad=True)\nfor i in range(3000):\n    x = x * 1.0001\n"
    result = run_scenario(text, trusted=False, limits=FAST, on_progress=seen.append)
    assert result.ok, result.error
    assert seen, "no progress was reported"
    assert seen == sorted(seen)
    assert seen[-1] == len(result.trace["events"])  # type: ignore[index]


def test_oversized_text_is_refused_before_starting_a_worker() -> None:
    result, seconds = run_untrusted("x = 1\n" * 300_000)
    assert_limit(result, "max_source_bytes", seconds, bound=1)


def test_a_crashed_worker_is_a_clear_error() -> None:
    out = _outcome(-11, b"", ["Fatal Python error: Segmentation fault"], FAST, False, False)
    assert out["ok"] is False
    assert out["error"]["type"] == "WorkerError"
    assert "SIGSEGV" in out["error"]["message"]
    assert "Segmentation fault" in out["error"]["message"]
    garbled = _outcome(0, b"{not json", [], FAST, False, False)
    assert garbled["error"]["type"] == "WorkerError"


BUNDLED = list_scenarios()


@pytest.mark.parametrize("info", BUNDLED, ids=[s.id for s in BUNDLED])
def test_bundled_scenarios_run_the_same_in_the_sandbox(info: Any) -> None:
    trusted = run_scenario(info.path, trusted=True)
    batches: list[list[dict[str, Any]]] = []
    sandboxed = run_scenario(
        info.path, trusted=False, limits=Limits(cpu_seconds=20, wall_seconds=60), on_events=batches.append
    )
    assert sandboxed.trace is not None, sandboxed.error
    assert trusted.trace is not None
    assert (sandboxed.ok, sandboxed.stdout) == (trusted.ok, trusted.stdout)
    assert normalize_trace(sandboxed.trace) == normalize_trace(trusted.trace)
    # What was streamed while it ran is the start of its trace, and the answer said how much.
    streamed = [e for batch in batches for e in batch]
    assert streamed == sandboxed.trace["events"][: len(streamed)]
    assert sandboxed.extra["delivered"] == len(streamed)
