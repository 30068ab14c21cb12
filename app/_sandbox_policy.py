"""The RestrictedPython layer of the sandbox (``app/sandbox.py``, layer 4): what scenario text may
say, and what it may reach when it runs.

- Compile time: ``compile_untrusted`` compiles the text with ``compile_restricted_exec`` under
  ``_ScenarioTransformer`` (RestrictedPython's policy, plus reading ``x.__init__`` and augmented
  assignment to attributes and items), or raises ``ScenarioSyntaxError`` naming the first line.
- Run time: ``restricted_globals`` gives the guards the compiled code calls (``_getattr_``,
  ``_write_``, ``_getitem_``, ``__import__``, ...) and the builtins it sees.

The worker (``app/_worker.py``) uses both, through ``app.sandbox``; this module runs nothing itself.
The guards read the tables below (``DENIED_ATTRS``, ``_ALLOWED_ORIGINS``, ...) as globals of this
module at call time: setting one on ``app.sandbox`` would change nothing.
"""

from __future__ import annotations

import ast
import builtins
import operator
from collections.abc import Callable
from types import CodeType, ModuleType
from typing import Any

from RestrictedPython import RestrictingNodeTransformer, compile_restricted_exec, safe_builtins
from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence
from RestrictedPython.transformer import INSPECT_ATTRIBUTES, IOPERATOR_TO_STR, copy_locations

# The module name restricted scenarios run under: their functions and classes carry it.
SCENARIO_MODULE = "__scenario__"


# --- compiling -----------------------------------------------------------------------------------

# Attribute names allowed although they start with "_": ``super().__init__()`` in an
# ``nn.Module`` subclass. Reading a bound ``__init__`` gives nothing new (its dunders stay closed).
ALLOWED_DUNDER_ATTRS = frozenset({"__init__"})


class _ScenarioTransformer(RestrictingNodeTransformer):
    """RestrictedPython's policy, plus reading ``x.__init__`` (through ``_getattr_``)."""

    def visit_Attribute(self, node: ast.Attribute) -> Any:  # noqa: N802 - ast.NodeVisitor's name
        if node.attr not in ALLOWED_DUNDER_ATTRS:
            return super().visit_Attribute(node)
        if not isinstance(node.ctx, ast.Load):
            self.error(node, f'"{node.attr}" can be read but not assigned or deleted.')
            return node
        node = self.node_contents_visit(node)
        call = ast.Call(
            func=ast.Name("_getattr_", ast.Load()), args=[node.value, ast.Constant(node.attr)], keywords=[]
        )
        copy_locations(call, node)
        return call

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:  # noqa: N802
        """``obj.attr += v`` and ``obj[key] += v`` (common in PyTorch code: ``self.count += 1``),
        which RestrictedPython refuses: rewritten as ``_aug_attr_(_write_(obj), "attr", "+=", v)``
        and ``_aug_item_(_write_(obj), key, "+=", v)``, guarded like a read then a write."""
        if isinstance(node.target, ast.Name):
            return super().visit_AugAssign(node)
        node = self.node_contents_visit(node)  # checks the names; target.value becomes _write_(obj)
        op = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
        target = node.target
        if isinstance(target, ast.Attribute):
            args = [target.value, ast.Constant(target.attr), op, node.value]
            func = "_aug_attr_"
        elif isinstance(target, ast.Subscript):
            args = [target.value, _as_expression(target.slice), op, node.value]
            func = "_aug_item_"
        else:  # pragma: no cover - Name, Attribute and Subscript are the only targets
            raise NotImplementedError(type(target).__name__)
        call = ast.Expr(ast.Call(func=ast.Name(func, ast.Load()), args=args, keywords=[]))
        copy_locations(call, node)
        ast.fix_missing_locations(call)
        return call


def _as_expression(index: ast.expr) -> ast.expr:
    """A subscript's index as a value: ``a:b`` becomes ``slice(a, b, None)``."""
    if isinstance(index, ast.Slice):
        parts = [p if p is not None else ast.Constant(None) for p in (index.lower, index.upper, index.step)]
        return ast.Call(func=ast.Name("slice", ast.Load()), args=parts, keywords=[])
    if isinstance(index, ast.Tuple):
        return ast.Tuple(elts=[_as_expression(e) for e in index.elts], ctx=ast.Load())
    return index


class ScenarioSyntaxError(SyntaxError):
    """The text does not compile, or uses what the sandbox forbids; ``lineno`` is the first one."""


def compile_untrusted(text: str, filename: str) -> CodeType:
    """Compile scenario text under RestrictedPython, or raise ``ScenarioSyntaxError``."""
    try:
        result = compile_restricted_exec(text, filename=filename, policy=_ScenarioTransformer)
    except SyntaxError as e:
        # Found by the final compile() after the checks: 'return' outside function, and the like.
        raise ScenarioSyntaxError(str(e.msg), (filename, e.lineno, e.offset or 0, e.text)) from None
    except (ValueError, UnicodeError, RecursionError, MemoryError) as e:
        # Lone surrogates, nesting too deep for the parser or the transformer.
        message = f"the scenario cannot be parsed: {type(e).__name__}: {e}"
        raise ScenarioSyntaxError(message, (filename, None, 0, None)) from None
    if result.errors or result.code is None:
        first = result.errors[0] if result.errors else "the scenario does not compile"
        line = _line_of(first)
        msg = "; ".join(_strip_line_prefix(e) for e in result.errors) or first
        raise ScenarioSyntaxError(msg, (filename, line, 0, _source_line(text, line)))
    return result.code


def _line_of(error: str) -> int | None:
    # RestrictedPython reports "Line 3: ..." (its own checks) or "Line 3: SyntaxError: ... at
    # statement: ..." (Python's parser).
    if error.startswith("Line "):
        head = error[5:].split(":", 1)[0]
        if head.isdigit():
            return int(head)
    return None


def _strip_line_prefix(error: str) -> str:
    return error.split(": ", 1)[1] if _line_of(error) is not None else error


def _source_line(text: str, line: int | None) -> str | None:
    lines = text.splitlines()
    return lines[line - 1] if line and 0 < line <= len(lines) else None


# --- the guards ----------------------------------------------------------------------------------

# Attributes refused on any object: NumPy escape hatches (raw arrays, files, raw memory) and the
# frame/code attributes RestrictedPython already refuses at compile time (again for getattr()).
DENIED_ATTRS = frozenset(
    {"numpy", "tofile", "dump", "dumps", "tobytes", "ctypes", "data_as", "from_numpy", "save", "load"}
) | frozenset(INSPECT_ATTRIBUTES)

_ALLOWED_MODULES = ("engine", "math")
# Where the functions and classes a scenario reaches may come from. An allowlist: engine modules
# import helpers (``inspect``, ``importlib``, ``typing.get_type_hints``, ``operator.attrgetter``...)
# that would open a way around the guards if a scenario could call them.
_ALLOWED_ORIGINS = frozenset({"engine", "math", "builtins", SCENARIO_MODULE})
# Builtins no scenario may reach, even through an engine module that happens to hold one.
_DANGEROUS_BUILTINS = frozenset(
    id(getattr(builtins, name))
    for name in (
        "open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
        "input", "getattr", "setattr", "delattr", "hasattr", "memoryview", "help", "exit", "quit", "dir",
        "type", "object",
    )
    if hasattr(builtins, name)
)  # fmt: skip


# Of ``engine.trace``, a scenario may only annotate its own trace: ``record(source_files=...)`` reads
# any file it is given, and a scenario already runs under the worker's recording.
_TRACE_API = frozenset({"mark"})


def _module_allowed(name: str) -> bool:
    parts = name.split(".")
    if parts[0] not in _ALLOWED_MODULES or name.startswith("engine.trace."):
        return False
    return not any(p.startswith("_") for p in parts[1:])


def _origin(value: Any) -> str:
    """The top-level module a value comes from: its own for classes and functions, else its type's."""
    if isinstance(value, type) or callable(value):
        mod = getattr(value, "__module__", None)
        if isinstance(mod, str):
            return mod.split(".")[0]
    return type(value).__module__.split(".")[0]


def _is_numpy(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "numpy" or (
        isinstance(value, type) and value.__module__.split(".")[0] == "numpy"
    )


def check_value(value: Any, what: str) -> Any:
    """Refuse values a scenario must not hold: other modules, NumPy objects, dangerous callables."""
    if isinstance(value, ModuleType):
        if not _module_allowed(value.__name__):
            raise ImportError(f"{what}: module '{value.__name__}' is not available in a scenario")
        return value
    if _is_numpy(value):
        raise AttributeError(f"{what}: raw NumPy objects are not available in a scenario; use tensors")
    if id(value) in _DANGEROUS_BUILTINS:
        raise AttributeError(f"{what}: '{getattr(value, '__name__', value)}' is not available in a scenario")
    if (isinstance(value, type) or callable(value)) and _origin(value) not in _ALLOWED_ORIGINS:
        raise AttributeError(f"{what}: objects from '{_origin(value)}' are not available in a scenario")
    return value


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"attribute name must be a string, not {type(name).__name__}")
    if name.startswith("_") and name not in ALLOWED_DUNDER_ATTRS:
        raise AttributeError(f'"{name}" is an invalid attribute name because it starts with "_"')
    if name in DENIED_ATTRS:
        raise AttributeError(f'"{name}" is not available in a scenario')
    return name


def guarded_getattr(obj: Any, name: Any, *default: Any) -> Any:
    """``_getattr_`` and the ``getattr`` builtin of a scenario."""
    name = _check_name(name)
    if _is_numpy(obj):
        raise AttributeError("raw NumPy objects are not available in a scenario; use tensors")
    if name in ("format", "format_map") and (
        isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))
    ):
        # str.format reaches attributes by name ("{0.__class__}"), past every other guard; the
        # unbound method too: ``str.format("{0.__class__}", x)``.
        raise AttributeError("str.format is not available in a scenario; use f-strings or %")
    if isinstance(obj, ModuleType) and obj.__name__ == "engine.trace" and name not in _TRACE_API:
        raise AttributeError(f"engine.trace.{name} is not available in a scenario (only engine.trace.mark)")
    value = getattr(obj, name, *default)
    return check_value(value, f"{type(obj).__name__}.{name}")


def guarded_hasattr(obj: Any, name: Any) -> bool:
    try:
        guarded_getattr(obj, name)
    except (AttributeError, ImportError):
        return False
    return True


def _writable(obj: Any) -> Any:
    """``_write_``: attribute and item assignment. Modules, classes not defined by the scenario
    and NumPy objects are read-only; names starting with "_" were refused at compile time."""
    if isinstance(obj, ModuleType) or _is_numpy(obj):
        raise TypeError(f"a scenario cannot modify {type(obj).__name__} objects")
    if isinstance(obj, type) and obj.__module__ != SCENARIO_MODULE:
        raise TypeError(f"a scenario cannot modify the class {obj.__name__}")
    return obj


def guarded_setattr(obj: Any, name: Any, value: Any) -> None:
    setattr(_writable(obj), _check_name(name), value)


def guarded_delattr(obj: Any, name: Any) -> None:
    delattr(_writable(obj), _check_name(name))


def guarded_getitem(obj: Any, key: Any) -> Any:
    if isinstance(obj, ModuleType) or _is_numpy(obj):
        raise TypeError(f"a scenario cannot index {type(obj).__name__} objects")
    return obj[key]


def guarded_type(obj: Any) -> type:
    # One argument only: the three-argument form builds classes from a dict, dunders included.
    # Its answer is checked like an attribute: ``type(type(x))`` would be ``type`` itself, three
    # arguments and all, and ``type(x)`` of a NumPy value a NumPy class.
    result: type = check_value(type(obj), "type()")
    return result


def guarded_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> ModuleType:
    """``import engine``, ``from engine.utils.checkpoint import checkpoint``, ``import math``."""
    if level != 0:
        raise ImportError("relative imports are not available in a scenario")
    if not _module_allowed(name):
        raise ImportError(f"import of '{name}' is not allowed: a scenario may import engine and math only")
    module = builtins.__import__(name, globals, locals, fromlist or (), 0)
    for item in fromlist or ():
        # ``from m import x`` reads x with a plain getattr, past ``_getattr_``: check it here.
        if item == "*":
            raise ImportError("'from ... import *' is not available in a scenario")
        try:
            guarded_getattr(module, item)
        except AttributeError as e:
            raise ImportError(f"cannot import name {item!r} from {name!r}: {e}") from None
    return module


_INPLACE_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior,
    "^=": operator.ixor,
}  # fmt: skip


def inplacevar(op: str, x: Any, y: Any) -> Any:
    """``_inplacevar_``: ``x += y`` on a plain name."""
    return _INPLACE_OPS[op](x, y)


def aug_attr(obj: Any, name: str, op: str, value: Any) -> None:
    """``_aug_attr_``: ``obj.name op= value`` (``obj`` already through ``_write_``)."""
    guarded_setattr(obj, name, _INPLACE_OPS[op](guarded_getattr(obj, name), value))


def aug_item(obj: Any, key: Any, op: str, value: Any) -> None:
    """``_aug_item_``: ``obj[key] op= value`` (``obj`` already through ``_write_``)."""
    obj[key] = _INPLACE_OPS[op](guarded_getitem(obj, key), value)


class PrintCollector:
    """``_print_``: RestrictedPython routes ``print(...)`` here; each line goes to ``sink``."""

    sink: Callable[[str], None] = staticmethod(lambda text: None)

    def __init__(self, _getattr_: Any = None) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)

    def __call__(self) -> str:  # the value of ``printed``
        return "".join(self.parts)

    def _call_print(self, *objects: Any, **kwargs: Any) -> None:
        sep = kwargs.get("sep", " ")
        end = kwargs.get("end", "\n")
        sep = " " if sep is None else str(sep)
        end = "\n" if end is None else str(end)
        text = sep.join(str(o) for o in objects) + end
        self.parts.append(text)
        type(self).sink(text)


_EXTRA_BUILTINS: dict[str, Any] = {
    name: getattr(builtins, name)
    for name in (
        "all", "any", "dict", "enumerate", "filter", "frozenset", "iter", "list", "map", "max", "min",
        "next", "object", "property", "reversed", "set", "sorted", "staticmethod", "classmethod", "sum",
        "super", "tuple", "zip", "NotImplemented", "StopIteration",
    )
}  # fmt: skip


def restricted_globals(print_sink: Callable[[str], None]) -> dict[str, Any]:
    """The globals a restricted scenario runs with. ``print_sink`` receives each printed text."""
    collector = type("ScenarioPrint", (PrintCollector,), {"sink": staticmethod(print_sink)})
    scenario_builtins = dict(safe_builtins)
    scenario_builtins.update(_EXTRA_BUILTINS)
    scenario_builtins.update(
        {
            "__import__": guarded_import,
            "getattr": guarded_getattr,
            "hasattr": guarded_hasattr,
            "setattr": guarded_setattr,
            "delattr": guarded_delattr,
            "type": guarded_type,
        }
    )
    scenario_builtins.pop("_getattr_", None)
    # The runner lets KeyboardInterrupt through (Ctrl-C stops a local run): raised by a scenario
    # it would take the worker down instead of ending the run with the line that raised it.
    scenario_builtins.pop("KeyboardInterrupt", None)
    return {
        "__builtins__": scenario_builtins,
        "__name__": SCENARIO_MODULE,
        "__metaclass__": type,
        "_getattr_": guarded_getattr,
        "_getitem_": guarded_getitem,
        "_write_": _writable,
        "_getiter_": iter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_inplacevar_": inplacevar,
        "_aug_attr_": aug_attr,
        "_aug_item_": aug_item,
        "_apply_": lambda f, *a, **kw: f(*a, **kw),
        "_print_": collector,
    }
