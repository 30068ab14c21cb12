"""The hostile-input corpus: scenario texts aimed at the sandbox, each with what must hold.

Every entry is run as an uploaded scenario is (``tests/security/test_hostile.py``) and must end
one of three ways:

- ``refused``: the run fails with this exception type, its error naming this line of the text
  (``line=None``: text the parser cannot read at all, which has no line) and its message
  holding ``words``;
- ``limit``: the run fails with ``LimitExceeded`` naming this field of ``Limits``;
- ``harmless``: the run may finish; what it returns names none of the server's files.

In every case the canary file is never read and no file is written. ``CANARY`` in a text is the
canary's path, ``DROP`` a directory anyone may write to. ``isolated`` entries hit a limit that
holds for a whole process (CPU seconds, the hard kill), so they get a worker of their own.
"""

from __future__ import annotations

from dataclasses import dataclass

H = "import engine as torch\n"  # one line: texts after it start at line 2


@dataclass(frozen=True)
class Attack:
    id: str
    category: str
    text: str
    outcome: str  # "refused", "limit" or "harmless"
    error: str | None = None  # the exception type (refused)
    line: int | None = None
    words: str = ""
    limit: str | None = None
    isolated: bool = False
    limits: tuple[tuple[str, int], ...] = ()  # changes to the suite's limits (isolated entries)


CORPUS: list[Attack] = []


def refused(category: str, id: str, text: str, error: str, line: int | None, words: str = "") -> None:
    CORPUS.append(Attack(id, category, text, "refused", error, line, words))


def limit(category: str, id: str, text: str, name: str, *, isolated: bool = False, **limits: int) -> None:
    CORPUS.append(
        Attack(id, category, text, "limit", limit=name, isolated=isolated, limits=tuple(limits.items()))
    )


def harmless(category: str, id: str, text: str) -> None:
    CORPUS.append(Attack(id, category, text, "harmless"))


SYNTAX = "SyntaxError"
IMPORT = "ImportError"
ATTR = "AttributeError"
NAME = "NameError"

# --- RestrictedPython escapes (compile time) -------------------------------------------------------
C = "restricted"
refused(C, "subclasses_walk", "x = ().__class__.__bases__[0].__subclasses__()\n", SYNTAX, 1, '"__class__"')
refused(C, "dunder_import", "m = __import__('os')\n", SYNTAX, 1, '"__import__"')
refused(C, "eval", "x = 1\ny = eval('x')\n", SYNTAX, 2, "Eval calls are not allowed")
refused(C, "exec", "exec('import os')\n", SYNTAX, 1, "Exec calls are not allowed")
refused(C, "builtins_name", "b = __builtins__\n", SYNTAX, 1, '"__builtins__"')
refused(C, "underscore_name", "_secret = 1\n", SYNTAX, 1, '"_secret"')
refused(C, "underscore_argument", "def f(_a):\n    return _a\n", SYNTAX, 1, '"_a"')
refused(
    C,
    "dunder_method",
    "class A:\n    def __getattr__(self, n):\n        return n\n",
    SYNTAX,
    2,
    '"__getattr__"',
)
refused(C, "class_dict", "class A:\n    pass\nd = A.__dict__\n", SYNTAX, 3, '"__dict__"')
refused(C, "slots", "class A:\n    __slots__ = ()\n", SYNTAX, 2, '"__slots__"')
refused(C, "comprehension_walk", "x = [c for c in ().__class__.__mro__]\n", SYNTAX, 1, '"__class__"')
refused(C, "lambda_globals", "f = lambda: 1\ng = f.__globals__\n", SYNTAX, 2, '"__globals__"')
refused(C, "star_import", "from math import *\n", SYNTAX, 1, "imports are not allowed")
refused(C, "underscore_import", "import _thread\n", SYNTAX, 1, '"_thread"')
refused(C, "private_from_import", "from engine import _C\n", SYNTAX, 1, '"_C"')
refused(C, "assign_init", "class A:\n    pass\nA().__init__ = 1\n", SYNTAX, 3, "can be read but not assigned")
refused(C, "async_def", "async def f():\n    return 1\n", SYNTAX, 1, "AsyncFunctionDef")
refused(C, "except_star", "try:\n    pass\nexcept* ValueError:\n    pass\n", SYNTAX, 1, "TryStar")
refused(
    C,
    "global_statement_dunder",
    "def f():\n    global __name__\n    __name__ = 'x'\n",
    SYNTAX,
    3,
    '"__name__"',
)

# --- imports: nothing but engine and math ----------------------------------------------------------
C = "imports"
for module in (
    ["os", "sys", "subprocess", "ctypes", "importlib", "numpy", "io", "pathlib", "pickle",
     "shutil", "socket", "inspect", "gc", "linecache", "posix", "codecs", "marshal", "types", "string"]
):  # fmt: skip
    refused(
        C, f"import_{module}", H + f"import {module}\n", IMPORT, 2, f"import of '{module}' is not allowed"
    )
refused(C, "from_os_import_system", "from os import system\n", IMPORT, 1, "'os'")
refused(C, "import_engine_private", "import engine.ops._dispatch\n", IMPORT, 1, "engine.ops._dispatch")
refused(C, "from_trace_import_record", "from engine.trace import record\n", IMPORT, 1, "engine.trace.record")
refused(C, "import_trace_record", "import engine.trace.record as r\n", IMPORT, 1, "engine.trace.record")
refused(C, "import_builtins", "import builtins\n", SYNTAX, 1, '"builtins" is a reserved name')
refused(C, "relative_import", "from . import x\n", IMPORT, 1, "relative imports")
refused(C, "from_engine_module_import_os", "from engine.autograd.anomaly_mode import os\n", IMPORT, 1, "'os'")

# --- builtins that are not there -------------------------------------------------------------------
C = "builtins"
refused(C, "open_canary", "f = open('CANARY')\nprint(f.read())\n", NAME, 1, "open")
refused(C, "open_write", "f = open('DROP/x', 'w')\n", NAME, 1, "open")
refused(C, "builtin_breakpoint", "breakpoint()\n", SYNTAX, 1, '"breakpoint" is a reserved name')
for name in (["globals", "locals", "vars", "dir", "input", "help", "compile",
                          "memoryview", "bytearray", "exit", "format"]):  # fmt: skip
    refused(C, f"builtin_{name}", f"x = {name}()\n", NAME, 1, f"'{name}'")
refused(C, "getattr_dunder", "c = getattr(1, '__class__')\n", ATTR, 1, '"__class__"')
refused(C, "setattr_dunder", "class A:\n    pass\nsetattr(A(), '__class__', int)\n", ATTR, 3, '"__class__"')

# --- attribute walks through engine objects and modules ------------------------------------------
C = "engine_walks"
refused(
    C, "function_globals_getattr", H + "g = getattr(torch.ones, '__globals__')\n", ATTR, 2, '"__globals__"'
)
refused(C, "tensor_private", H + "d = getattr(torch.ones(1), '_data')\n", ATTR, 2, '"_data"')
refused(C, "module_numpy", H + "np = torch.ops.pointwise.np\n", IMPORT, 2, "'numpy'")
refused(C, "module_weakref", H + "m = torch.utils.checkpoint.weakref\n", IMPORT, 2, "'weakref'")
refused(C, "module_os", H + "o = torch.autograd.anomaly_mode.os\n", IMPORT, 2, "'os'")
refused(C, "module_sys", H + "s = torch.autograd.anomaly_mode.sys\n", IMPORT, 2, "'sys'")
refused(C, "module_traceback", H + "t = torch.autograd.anomaly_mode.traceback\n", IMPORT, 2, "'traceback'")
refused(C, "module_threading", H + "t = torch.autograd.engine.threading\n", IMPORT, 2, "'threading'")
refused(C, "tensor_numpy", H + "a = torch.ones(3).numpy()\n", ATTR, 2, '"numpy"')
refused(C, "numpy_tofile", H + "torch.ones(3).numpy().tofile('DROP/x.bin')\n", ATTR, 2, '"numpy"')
refused(
    C, "kernel_tofile", H + "a = torch.ops.sin.kernel([1.0])\na.tofile('DROP/x.bin')\n", ATTR, 3, '"tofile"'
)
refused(C, "kernel_dump", H + "torch.ops.sin.kernel([1.0]).dump('DROP/x.pkl')\n", ATTR, 2, '"dump"')
refused(C, "kernel_save_attr", H + "torch.ops.sin.kernel([1.0]).base\n", ATTR, 2, "raw NumPy objects")
refused(
    C, "kernel_index", H + "a = torch.ops.sin.kernel([1.0, 2.0])\nb = a[0]\n", "TypeError", 3, "cannot index"
)
refused(
    C,
    "numpy_scalar_walk",
    H + "s = list(torch.ops.sin.kernel([1.0]))[0]\nf = s.tofile\n",
    ATTR,
    3,
    '"tofile"',
)
refused(
    C,
    "numpy_scalar_method",
    H + "s = list(torch.ops.sin.kernel([1.0]))[0]\nf = s.item\n",
    ATTR,
    3,
    "raw NumPy",
)
refused(C, "numpy_type", H + "t = type(torch.ops.sin.kernel([1.0]))\n", ATTR, 2, "raw NumPy objects")
refused(C, "tensor_ctypes", H + "p = torch.ones(2).ctypes\n", ATTR, 2, '"ctypes"')
refused(C, "data_as", H + "p = getattr(torch.ones(2), 'data_as')\n", ATTR, 2, '"data_as"')
refused(C, "torch_save", H + "torch.save(torch.ones(2), 'DROP/t.pt')\n", ATTR, 2, '"save"')
refused(C, "torch_load_canary", H + "print(torch.load('CANARY'))\n", ATTR, 2, '"load"')
refused(C, "from_numpy", H + "f = torch.from_numpy\n", ATTR, 2, '"from_numpy"')
refused(C, "tobytes", H + "b = getattr(torch.ones(2), 'tobytes')\n", ATTR, 2, '"tobytes"')
refused(C, "trace_record_canary", H + "r = torch.trace.record(source_files=['CANARY'])\n", ATTR, 2, "only")
refused(C, "trace_emit", H + "e = torch.trace.emit\n", ATTR, 2, "only")
refused(C, "write_module", H + "torch.zeros = None\n", "TypeError", 2, "cannot modify")
refused(C, "write_engine_class", H + "torch.Tensor.sin = None\n", "TypeError", 2, "cannot modify the class")
refused(C, "setattr_module", H + "setattr(torch, 'ones', None)\n", "TypeError", 2, "cannot modify")
refused(
    C,
    "foreign_class_from_module",
    "from engine.autograd.engine import Callable\n",
    IMPORT,
    1,
    "'collections'",
)
refused(C, "foreign_class_attribute", H + "c = torch.autograd.engine.Callable\n", ATTR, 2, "'collections'")
refused(
    C,
    "enum_metaclass",
    H + "from engine.utils.checkpoint import CheckpointPolicy\nm = type(CheckpointPolicy)\n",
    ATTR,
    3,
    "'enum'",
)  # noqa: E501
harmless(C, "module_repr_names_no_file", H + "print(torch, torch.autograd)\nimport math\nprint(math)\n")
harmless(
    C,
    "checkpoint_debug_tracebacks",
    H
    + "from engine.utils.checkpoint import checkpoint, set_checkpoint_debug_enabled\nx = torch.ones(2, requires_grad=True)\nwith set_checkpoint_debug_enabled(True):\n    y = checkpoint(lambda t: t.sin(), x, use_reentrant=False)\n    y.sum().backward()\n",
)  # noqa: E501

# --- format strings and f-strings ------------------------------------------------------------------
C = "format"
refused(C, "format_method", "s = '{0.__class__}'.format(1)\n", ATTR, 1, "str.format")
refused(C, "format_map", "s = '{x.__class__}'.format_map({'x': 1})\n", ATTR, 1, "str.format")
refused(C, "unbound_str_format", "s = str.format('{0.__class__.__mro__}', 1)\n", ATTR, 1, "str.format")
refused(C, "unbound_format_map", "s = str.format_map('{a.__class__}', {'a': 1})\n", ATTR, 1, "str.format")
refused(C, "format_globals", H + "s = str.format('{0.__globals__[os]}', torch.ones)\n", ATTR, 2, "str.format")
refused(
    C,
    "str_subclass_format",
    "class S(str):\n    pass\ns = S('{0.__class__}').format(1)\n",
    ATTR,
    3,
    "str.format",
)  # noqa: E501
refused(C, "type_str_format", "f = type('').format\n", ATTR, 1, "str.format")
refused(C, "getattr_format", "f = getattr('{0.__class__}', 'format')\n", ATTR, 1, "str.format")
refused(C, "map_format", "r = list(map(str.format, ['{0.__class__}'], [1]))\n", ATTR, 1, "str.format")
refused(C, "fstring_dunder", "s = f'{(1).__class__}'\n", SYNTAX, 1, '"__class__"')
refused(C, "fstring_nested_spec", "s = f'{1:{\"{0.__class__}\"}}'\n", "ValueError", 1, "format")
harmless(C, "percent_format", H + "print('%s %r' % (torch, torch.ones(1)))\n")

# --- exceptions, tracebacks and frames -------------------------------------------------------------
C = "frames"
TRY = "try:\n    1 / 0\nexcept Exception as e:\n"
refused(C, "traceback_attribute", TRY + "    t = e.__traceback__\n", SYNTAX, 4, '"__traceback__"')
refused(C, "traceback_getattr", TRY + "    t = getattr(e, '__traceback__')\n", ATTR, 4, '"__traceback__"')
refused(C, "context_getattr", TRY + "    t = getattr(e, '__context__')\n", ATTR, 4, '"__context__"')
for attr in ("tb_frame", "f_globals", "f_back", "f_locals", "f_builtins", "f_code", "co_code", "tb_next"):
    refused(C, f"getattr_{attr}", TRY + f"    t = getattr(e, '{attr}')\n", ATTR, 4, f'"{attr}"')
refused(C, "tb_frame_attribute", TRY + "    f = e.tb_frame\n", SYNTAX, 4, '"tb_frame"')
refused(C, "system_exit", "raise SystemExit(0)\n", "SystemExit", 1)
refused(C, "keyboard_interrupt", "raise KeyboardInterrupt\n", NAME, 1, "KeyboardInterrupt")
refused(
    C,
    "anomaly_error",
    H
    + "with torch.autograd.detect_anomaly():\n    x = torch.ones(2, requires_grad=True)\n    y = (x * 0).sqrt() / 0\n    y.sum().backward()\n",
    "RuntimeError",
    5,
    "nan",
)  # noqa: E501
harmless(
    C,
    "exception_obj",
    H + "try:\n    torch.ones(1).nope\nexcept AttributeError as e:\n    print(e.obj, e.name)\n",
)

# --- generators and coroutines ---------------------------------------------------------------------
C = "generators"
G = "def g():\n    yield 1\nx = g()\n"
refused(C, "gi_frame", G + "f = x.gi_frame\n", SYNTAX, 4, '"gi_frame"')
refused(C, "gi_frame_getattr", G + "f = getattr(x, 'gi_frame')\n", ATTR, 4, '"gi_frame"')
refused(C, "gi_code_getattr", G + "f = getattr(x, 'gi_code')\n", ATTR, 4, '"gi_code"')
refused(C, "gi_yieldfrom", G + "f = getattr(x, 'gi_yieldfrom')\n", ATTR, 4, '"gi_yieldfrom"')
refused(C, "genexpr_frame", "f = getattr((i for i in ()), 'gi_frame')\n", ATTR, 1, '"gi_frame"')
refused(C, "cr_frame", "f = getattr(1, 'cr_frame')\n", ATTR, 1, '"cr_frame"')
refused(C, "ag_frame", "f = getattr(1, 'ag_frame')\n", ATTR, 1, '"ag_frame"')
refused(C, "await_outside", "await x\n", SYNTAX, 1, "")
refused(C, "yield_from_recursion", "def g():\n    yield from g()\nnext(g())\n", "RecursionError", 2)

# --- metaclasses and classes -----------------------------------------------------------------------
C = "metaclasses"
refused(C, "metaclass_keyword", "class A(metaclass=type):\n    pass\n", SYNTAX, 1, "metaclass")
refused(C, "type_of_type", "T = type(type(1))\n", ATTR, 1, "'type' is not available")
refused(C, "type_three_args", "A = type('A', (), {})\n", "TypeError", 1, "argument")
refused(
    C,
    "type_of_class",
    "class A:\n    pass\nT = type(A)\nB = T('B', (), {'__getattr__': 1})\n",
    ATTR,
    3,
    "'type'",
)  # noqa: E501
refused(C, "subclass_type_name", "class M(type):\n    pass\n", "TypeError", 1, "")
refused(C, "function_type", "FT = type(lambda: 0)\nf = FT(1, {})\n", "TypeError", 2, "")
refused(C, "object_subclasses", "s = getattr(object, '__subclasses__')\n", ATTR, 1, '"__subclasses__"')
refused(C, "mro_walk", "o = int.mro()[-1]\ns = getattr(o, '__subclasses__')\n", ATTR, 2, '"__subclasses__"')

# --- decorators ------------------------------------------------------------------------------------
C = "decorators"
refused(
    C, "decorator_globals", "@(lambda f: f.__globals__)\ndef h():\n    pass\n", SYNTAX, 1, '"__globals__"'
)
refused(
    C,
    "decorator_getattr",
    "def steal(f):\n    return getattr(f, '__globals__')\n@steal\ndef h():\n    pass\n",
    ATTR,
    2,
    '"__globals__"',
)  # noqa: E501
refused(
    C,
    "decorator_import",
    "import functools\n@functools.wraps(print)\ndef h():\n    pass\n",
    IMPORT,
    1,
    "functools",
)  # noqa: E501
refused(C, "decorator_type", "@type\ndef h():\n    pass\nk = h(lambda: 0, {})\n", "TypeError", 4, "")

# --- huge allocations ------------------------------------------------------------------------------
C = "allocations"
N = "max_tensor_numel"
limit(C, "zeros_1e9", H + "x = torch.zeros(10**9)\n", N)
limit(C, "zeros_1e30", H + "x = torch.zeros(10**30)\n", N)
limit(C, "randn_4e6", H + "x = torch.randn(2000, 2000)\n", N)
limit(C, "full_9e6", H + "x = torch.full((3000, 3000), 1.0)\n", N)
limit(C, "size_keyword", H + "x = torch.zeros(size=(10**4, 10**4))\n", N)
limit(C, "broadcast", H + "a = torch.ones(2000, 1)\nb = torch.ones(1, 2000)\nc = a + b\n", N)
limit(C, "expand_view", H + "x = torch.ones(10**6).unsqueeze(0).expand(10**6, 10**6)\n", N)
limit(C, "repeat", H + "x = torch.ones(2000).repeat(1000)\n", N)
limit(C, "arange", H + "x = torch.arange(10**7)\n", N)
limit(C, "eye", H + "x = torch.eye(5000)\n", N)
limit(C, "tensor_from_list", H + "x = torch.tensor([0.0] * 2_000_000)\n", N)
limit(C, "python_list", "x = [0] * (10**9)\n", "memory_mb")
limit(C, "python_str", "s = 'ab' * (10**9)\n", "memory_mb")
limit(C, "doubling_str", "s = 'x'\nwhile True:\n    s = s + s\n", "memory_mb")
limit(C, "range_list", "x = list(range(10**9))\n", "memory_mb")
refused(C, "int_to_huge_str", "s = str(10**100000)\n", "ValueError", 1, "digits")

# --- recursion -------------------------------------------------------------------------------------
C = "recursion"
refused(C, "plain_recursion", "def f(n):\n    return f(n + 1)\n\nf(0)\n", "RecursionError", 2)
refused(
    C,
    "mutual_recursion",
    "def a(n):\n    return b(n)\n\ndef b(n):\n    return a(n)\n\na(0)\n",
    "RecursionError",
    5,
)  # noqa: E501
refused(C, "nested_repr", "x = []\nfor i in range(200000):\n    x = [x]\ns = str(x)\n", "RecursionError", 4)
refused(
    C,
    "nested_mark",
    H + "l = []\nfor i in range(100000):\n    l = [l]\ntorch.trace.mark('x', data=l)\n",
    "RecursionError",
    5,
)  # noqa: E501
refused(C, "nested_parentheses", "x = " + "(" * 5000 + ")" * 5000 + "\n", SYNTAX, 1, "")
refused(C, "long_expression", "x = " + "1 + " * 100_000 + "1\n", SYNTAX, None, "cannot be parsed")
refused(
    C,
    "deep_indentation",
    "".join(" " * i + "if True:\n" for i in range(120)) + " " * 120 + "x = 1\n",
    SYNTAX,
    101,
    "indentation",
)  # noqa: E501

# --- processes, threads and signals ----------------------------------------------------------------
C = "processes"
for module in ("threading", "signal", "multiprocessing", "asyncio", "concurrent.futures", "resource", "pty",
               "time", "select"):  # fmt: skip
    refused(C, f"import_{module.replace('.', '_')}", f"import {module}\n", IMPORT, 1, f"'{module}'")
refused(
    C, "engine_thread_class", H + "t = torch.autograd.engine.threading.Thread\n", IMPORT, 2, "'threading'"
)
refused(
    C,
    "dataloader_workers",
    H + "from engine.utils.data import DataLoader\nd = list(DataLoader([1, 2], num_workers=2))\n",
    "NotImplementedError",
    3,
    "num_workers",
)  # noqa: E501

# --- endless loops and giant output (a worker each: the CPU limit holds for a process) ------------
C = "loops_and_output"
limit(C, "while_true", "n = 0\nwhile True:\n    n = n + 1\n", "cpu_seconds", isolated=True)
limit(
    C,
    "swallowing_loop",
    "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n",
    "cpu_seconds",
    isolated=True,
)  # noqa: E501
limit(C, "iter_sentinel", "for i in iter(int, 1):\n    pass\n", "cpu_seconds", isolated=True)
limit(C, "huge_power", "x = 10 ** 10 ** 10\n", "cpu_seconds", isolated=True)
limit(C, "print_loop", "while True:\n    print('x' * 100)\n", "max_events", isolated=True, max_events=2000)
limit(
    C,
    "tensor_loop",
    H + "x = torch.ones(2, requires_grad=True)\nwhile True:\n    x = x * 1.5\n",
    "max_events",
    isolated=True,
    max_events=2000,
)  # noqa: E501
limit(C, "giant_print", "print('x' * 20_000_000)\n", "max_output_mb", isolated=True, max_output_mb=8)
limit(
    C,
    "giant_print_lines",
    "for i in range(2000):\n    print('y' * 10_000)\n",
    "max_output_mb",
    isolated=True,
    max_output_mb=8,
)  # noqa: E501
limit(C, "huge_source", "x = 1\n" * 300_000, "max_source_bytes", isolated=True)

# --- invalid text ----------------------------------------------------------------------------------
C = "invalid_text"
refused(C, "null_byte", "x = 1\x00\n", SYNTAX, None, "")
refused(C, "lone_surrogate_name", "\udcff = 1\n", SYNTAX, None, "cannot be parsed")
refused(C, "lone_surrogate_literal", "s = '\udcff'\n", SYNTAX, None, "cannot be parsed")
refused(
    C, "bad_utf8_surrogateescape", b"s = '\xff\xfe'\n".decode("utf-8", "surrogateescape"), SYNTAX, None, ""
)
refused(C, "tab_error", "if True:\n        x = 1\n\ty = 2\n", SYNTAX, 3, "")
harmless(C, "printed_surrogate", "print('\\udcff')\n")
harmless(C, "bom", "\ufeffx = 1\nprint(x)\n")
harmless(C, "coding_cookie", "# -*- coding: latin-1 -*-\nprint('\u00e9')\n")
harmless(C, "trojan_source_bidi", "s = 'user\u202e \u2066# admin\u2069 \u2066'\nprint(s)\n")
harmless(C, "carriage_returns", "x = 1\ry = 2\rprint(x + y)\r")
