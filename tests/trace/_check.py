"""Checks every trace the tests produce must pass: the JSON Schema, and the invariants of
docs/trace.md that a schema cannot express (contiguous seq, ids in creation order, references to
ids that exist, memory replayed from the events equal to ``mem``)."""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema

from engine import trace
from engine.trace.validate import check_event_ids


@functools.cache
def validator(ref: str | None = None) -> jsonschema.protocols.Validator:
    """A validator for the whole document, or (``ref``) for one of schema.json's definitions."""
    schema = trace.schema()
    if ref is not None:
        return jsonschema.Draft202012Validator(_inline(schema["$defs"][ref], schema["$defs"]))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/x"}`` replaced by ``x`` (schema.json has no cycles):
    jsonschema resolves references slowly."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].split("/")[-1]], defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def validate(doc: dict[str, Any], whole: bool = False) -> None:
    """Validate against schema.json. The event schema dispatches on ``kind`` through one
    ``if``/``then`` per kind, slow in jsonschema; by default each event is validated against its
    kind's definition directly (what the dispatch selects) and the envelope without events."""
    if whole:
        errors = list(validator().iter_errors(doc))
    else:
        errors = list(validator().iter_errors({**doc, "events": []}))
        known = set(trace.schema()["$defs"]["event"]["properties"]["kind"]["enum"])
        for i, e in enumerate(doc["events"]):
            assert e.get("kind") in known, f"event {i}: unknown kind {e.get('kind')!r}"
            errors += [
                jsonschema.ValidationError(f"event {i} ({e['kind']}): {err.message}")
                for err in validator(f"kind_{e['kind']}").iter_errors(e)
            ]
    assert not errors, "\n".join(e.message for e in errors[:5])


def check(tr: trace.Trace, whole: bool = False) -> dict[str, Any]:
    """Validate ``tr`` (schema + invariants); returns its JSON document, round-tripped."""
    doc = json.loads(json.dumps(tr.to_json()))
    validate(doc, whole)
    events = doc["events"]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert doc["meta"]["n_events"] == len(events)
    check_invariants(events)
    t = [e["t_ns"] for e in events]
    assert t == sorted(t)
    return doc


def check_invariants(events: list[dict[str, Any]]) -> None:
    """What a schema cannot say (engine/trace/validate.py, Note [Checking a trace document]), and
    memory replayed from the events equal to ``mem``."""
    check_event_ids(events)
    check_live_memory(events)


def check_live_memory(events: list[dict[str, Any]]) -> None:
    """``mem.live`` is the bytes of the distinct storages of the tensors alive."""
    storages: dict[int, list[int]] = {}  # storage -> [tensors alive, bytes]
    tensor_storage: dict[int, int] = {}
    for e in events:
        if e["kind"] == "tensor_new":
            entry = storages.setdefault(e["storage"], [0, e["storage_nbytes"]])
            entry[0] += 1
            tensor_storage[e["tensor"]] = e["storage"]
        elif e["kind"] == "tensor_free":
            s = tensor_storage.pop(e["tensor"])
            storages[s][0] -= 1
            if storages[s][0] == 0:
                del storages[s]
        assert e["mem"]["live"] == sum(b for _, b in storages.values()), e
        assert min(e["mem"].values()) >= 0
