"""Checking a trace document read from outside: a file, an upload.

Note [Checking a trace document]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A trace the recorder writes is right by construction (the tests hold it to that). A document read
from a file may be anything, and the reducer (``state.step``), the captions and the viewer index
by the ids its events carry. So before any of them sees an outside document, ``check_document``
checks:

1. the JSON Schema, ``schema.json``: every event has its kind's fields, with their types;
2. what docs/trace.md promises and a schema cannot say: ``seq`` counts from 0; each sort of id
   (tensor, node, frame, holder) is introduced in order 0, 1, 2... by its ``*_new`` event (a
   holder by its ``pack``) and only referred to after that; a ``*_free``/``*_gc`` ends one that
   is alive; a node's edges point at older nodes; graph tasks are numbered in order of
   appearance.

The first problem found is raised as ``TraceDocumentError``, naming the event (its index and kind)
and the field, so whoever made the file can find it.

The schema is checked by compiling the few keywords ``schema.json`` uses into Python closures
(``_compile``) rather than by ``jsonschema``, which takes about 0.3 ms per event: 12 s for a
40,000-event trace, too long for an upload. The compiled checker refuses a keyword it does not
know, so the schema cannot outgrow it silently, and tests/trace/test_validate.py holds it to
``jsonschema``'s verdicts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from engine.trace import SCHEMA, schema

__all__ = ["INTRODUCES", "REFERS", "TraceDocumentError", "check_document", "check_event_ids"]

SCHEMA_NAME = SCHEMA

# Which id each kind introduces, and the fields of each kind that refer to ids of that sort.
INTRODUCES = {"tensor_new": "tensor", "node_new": "node", "frame_new": "frame", "pack": "holder"}
REFERS: dict[str, dict[str, str]] = {
    "tensor": {
        "tensor_free": "tensor",
        "saved": "tensor",
        "grad_accumulate": "tensor",
        "version_bump": "tensor",
        "pack": "tensor",
        "rpack": "tensor",
        "recomputed_take": "tensor",
    },
    "node": {
        "node_free": "node",
        "saved": "node",
        "saved_release": "node",
        "node_exec": "node",
        "node_exec_end": "node",
        "pack": "node",
        "unpack": "node",
        "inputs_saved": "node",
        "op": "node",
        "tensor_new": "node",
    },
    "frame": {
        "frame_gc": "frame",
        "fn_start": "frame",
        "fn_end": "frame",
        "inputs_saved": "frame",
        "pack": "frame",
        "unpack": "frame",
        "recompute_start": "frame",
        "rpack": "frame",
        "early_stop": "frame",
        "recompute_end": "frame",
        "recomputed_take": "frame",
        "holder_gc": "frame",
        "checkpoint_error": "frame",
        "hooks_push": "frame",
        "hooks_pop": "frame",
        "node_new": "frame",
        "frame_new": "parent",
    },
    "holder": {
        "unpack": "holder",
        "recomputed_take": "holder",
        "holder_gc": "holder",
        "saved": "holder",
        "rpack": "holder",
    },
}
ENDS = {"tensor_free": "tensor", "node_free": "node", "frame_gc": "frame", "holder_gc": "holder"}


class TraceDocumentError(ValueError):
    """A document that is not a valid trace. ``event`` is the index of the event at fault (None:
    the document's envelope)."""

    def __init__(self, message: str, event: int | None = None) -> None:
        super().__init__(message)
        self.event = event


def check_document(doc: Any) -> None:
    """Raise ``TraceDocumentError`` on the first problem of ``doc`` (Note [Checking a trace
    document]); return quietly if it is a valid trace document."""
    if not isinstance(doc, dict):
        raise TraceDocumentError(f"a trace document is a JSON object, not a {_json_type(doc)}")
    if "traceEvents" in doc and "events" not in doc:
        raise TraceDocumentError(
            "this is a Chrome trace (traceEvents), made for Perfetto: the viewer reads the "
            "autograd-lens JSON format (autograd-lens trace ... --format json, the default)"
        )
    if doc.get("schema") != SCHEMA_NAME:
        raise TraceDocumentError(
            f'not an autograd-lens trace: "schema" is {doc.get("schema")!r}, not {SCHEMA_NAME!r}'
        )
    if (problem := _envelope()({**doc, "events": []})) is not None:
        raise TraceDocumentError(f"the document: {_say(problem)}")
    events = doc["events"]
    kinds = _kinds()
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise TraceDocumentError(f"event {i}: an event is a JSON object, not a {_json_type(event)}", i)
        check = kinds.get(event.get("kind"))  # type: ignore[arg-type]
        if check is None:
            raise TraceDocumentError(f"event {i}: unknown kind {event.get('kind')!r}", i)
        if (problem := check(event)) is not None:
            raise TraceDocumentError(f"event {i} ({event['kind']}): {_say(problem)}", i)
        if event["seq"] != i:
            raise TraceDocumentError(f"event {i} ({event['kind']}): seq is {event['seq']}, not {i}", i)
    if doc["meta"]["n_events"] != len(events):
        raise TraceDocumentError(
            f"the document: meta.n_events is {doc['meta']['n_events']}, but it has {len(events)} events"
        )
    check_event_ids(events)


def check_event_ids(events: list[dict[str, Any]]) -> None:
    """Part 2 of Note [Checking a trace document], for events that passed the schema."""
    seen: dict[str, int] = dict.fromkeys(INTRODUCES.values(), 0)
    alive: dict[str, set[int]] = {sort: set() for sort in seen}
    gids = 0
    for i, e in enumerate(events):
        kind = e["kind"]

        def fail(message: str, i: int = i, kind: str = kind) -> TraceDocumentError:
            return TraceDocumentError(f"event {i} ({kind}): {message}", i)

        for ref_sort, fields in REFERS.items():
            field = fields.get(kind)
            if field is not None and e.get(field) is not None and e[field] >= seen[ref_sort]:
                raise fail(f"{field} refers to {ref_sort} {e[field]}, which no earlier event introduces")
        sort = INTRODUCES.get(kind)
        if sort is not None:
            if e[sort] != seen[sort]:
                raise fail(f"introduces {sort} {e[sort]}; the next new {sort} id is {seen[sort]}")
            seen[sort] += 1
            alive[sort].add(e[sort])
        if kind == "node_new":
            for n, _ in e["next"]:
                if n is not None and n >= e["node"]:
                    raise fail(f"an edge points at node {n}, which is not older than node {e['node']}")
        if (sort := ENDS.get(kind)) is not None:
            if e[sort] not in alive[sort]:
                raise fail(f"{sort} {e[sort]} is not alive (already freed)")
            alive[sort].remove(e[sort])
        if e["gid"] is not None and e["gid"] >= gids:
            if e["gid"] != gids:
                raise fail(f"graph task {e['gid']} appears before graph task {gids}")
            gids += 1


# --- the schema, compiled ------------------------------------------------------------------------

# A check returns None (valid) or (path, message): where in the value, and what is wrong.
Problem = tuple[tuple[str | int, ...], str]
Check = Callable[[Any], Problem | None]


@functools.cache
def _envelope() -> Check:
    root = {k: v for k, v in schema().items() if k not in ("$defs",)}
    root["properties"] = {**root["properties"], "events": {"type": "array"}}
    return _Compiler(schema()["$defs"]).compile(root)


@functools.cache
def _kinds() -> dict[str, Check]:
    defs = schema()["$defs"]
    compiler = _Compiler(defs)
    kinds = defs["event"]["properties"]["kind"]["enum"]
    return {kind: compiler.compile(defs[f"kind_{kind}"]) for kind in kinds}


def _say(problem: Problem) -> str:
    path, message = problem
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return f"{where}: {message}" if where else message


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


_TYPES: dict[str, Callable[[Any], bool]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _any_type(tests: list[Callable[[Any], bool]]) -> Callable[[Any], bool]:
    # Most fields have one or two types ("integer", ["integer", "null"]): no loop for those.
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:
        first, second = tests
        return lambda v: first(v) or second(v)
    return lambda v: any(t(v) for t in tests)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


_IGNORED = {"description", "title", "$schema", "$id", "$defs", "examples"}


class _Compiler:
    """JSON Schema (the keywords schema.json uses) to closures; ``$ref``s compiled once each."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.refs: dict[str, Check] = {}

    def compile(self, node: dict[str, Any] | bool) -> Check:
        if isinstance(node, bool):  # "items": false after "prefixItems": nothing more allowed
            return (lambda v: None) if node else (lambda v: ((), f"{_show(v)} is not allowed here"))
        compiled = (self._keyword(key, value, node) for key, value in node.items() if key not in _IGNORED)
        checks = [c for c in compiled if c is not None]

        def check(value: Any) -> Problem | None:
            for c in checks:
                if (problem := c(value)) is not None:
                    return problem
            return None

        return checks[0] if len(checks) == 1 else check

    def _ref(self, ref: str) -> Check:
        name = ref.removeprefix("#/$defs/")
        if name not in self.refs:
            self.refs[name] = self.compile(self.defs[name])
        return self.refs[name]

    def _keyword(self, key: str, value: Any, node: dict[str, Any]) -> Check | None:  # noqa: C901, PLR0911
        if key == "$ref":
            return self._ref(value)
        if key == "type":
            names = value if isinstance(value, list) else [value]
            test, wanted = _any_type([_TYPES[n] for n in names]), " or ".join(names)
            return lambda v: None if test(v) else ((), f"{_show(v)}{_TYPE_MISMATCH}{wanted}")
        if key == "const":
            return lambda v: None if _same(v, value) else ((), f"{_show(v)} is not {_show(value)}")
        if key == "enum":
            return lambda v: (
                None if any(_same(v, x) for x in value) else ((), f"{_show(v)} is not one of {value}")
            )
        if key == "minimum":
            return lambda v: (
                ((), f"{v} is less than the minimum of {value}")
                if _TYPES["number"](v) and v < value
                else None
            )
        if key == "minItems":
            return lambda v: (
                ((), f"has {len(v)} items, fewer than {value}")
                if isinstance(v, list) and len(v) < value
                else None
            )
        if key == "required":
            return lambda v: (
                next((((), f"{k!r} is missing") for k in value if k not in v), None)
                if isinstance(v, dict)
                else None
            )
        if key == "properties":
            props = {k: self.compile(sub) for k, sub in value.items()}
            return lambda v: _in_object(v, props)
        if key == "additionalProperties":
            known = set(node.get("properties", {}))
            if value is False:
                return lambda v: (
                    next((((), f"unexpected field {k!r}") for k in v if k not in known), None)
                    if isinstance(v, dict)
                    else None
                )
            extra = self.compile(value)
            return lambda v: (
                next(
                    ((((k, *p[0]), p[1]) for k in v if k not in known if (p := extra(v[k])) is not None)),
                    None,
                )
                if isinstance(v, dict)
                else None
            )
        if key == "prefixItems":
            firsts = [self.compile(sub) for sub in value]
            return lambda v: _in_items(v, firsts, None, 0)
        if key == "items":
            each = self.compile(value)
            start = len(node.get("prefixItems", []))
            return lambda v: _in_items(v, [], each, start)
        if key == "anyOf":
            options = [self.compile(sub) for sub in value]
            return lambda v: _any_of(v, options)
        if key == "allOf":
            parts = [self.compile(sub) for sub in value]
            return lambda v: next((p for part in parts if (p := part(v)) is not None), None)
        if key == "if":
            condition, then = self.compile(value), self.compile(node.get("then", {}))
            return lambda v: then(v) if condition(v) is None else None
        if key == "then":
            return None  # with "if"
        raise NotImplementedError(f"schema keyword {key!r} is not supported by engine/trace/validate.py")


def _any_of(v: Any, options: list[Check]) -> Problem | None:
    problems = [o(v) for o in options]
    if any(p is None for p in problems):
        return None
    # The option of the right type failed further in, and says why; if none is of the right
    # type, one message for all (null or object).
    deeper = [p for p in problems if p is not None and not (p[0] == () and _TYPE_MISMATCH in p[1])]
    if deeper:
        return deeper[0]
    return ((), f"{_show(v)} matches none of the allowed forms")


_TYPE_MISMATCH = " is not of type "


def _in_object(v: Any, props: dict[str, Check]) -> Problem | None:
    if not isinstance(v, dict):
        return None
    for k, check in props.items():
        if k in v and (p := check(v[k])) is not None:
            return ((k, *p[0]), p[1])
    return None


def _in_items(v: Any, firsts: list[Check], each: Check | None, start: int) -> Problem | None:
    if not isinstance(v, list):
        return None
    for i, item in enumerate(v):
        check = firsts[i] if i < len(firsts) else (each if i >= start else None)
        if check is not None and (p := check(item)) is not None:
            return ((i, *p[0]), p[1])
    return None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
