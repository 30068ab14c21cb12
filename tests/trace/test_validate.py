"""engine/trace/validate.py: the checks an outside trace document passes before the reducer or the
viewer see it (Note [Checking a trace document]). The compiled schema checker is held to
jsonschema's verdicts on the events of the scenarios' traces and on broken copies of them."""

from __future__ import annotations

import copy
import functools
from typing import Any

import jsonschema
import pytest

from app.runner import list_scenarios, run_scenario
from engine.trace import schema
from engine.trace.validate import TraceDocumentError, _Compiler, check_document
from tests.trace._check import validator

SCENARIOS = {s.id: s.path for s in list_scenarios()}


@functools.cache
def _trace(name: str) -> dict[str, Any]:
    result = run_scenario(SCENARIOS[name], trusted=True)
    assert result.trace is not None
    return result.trace


def _doc(name: str = "nested_checkpoint") -> dict[str, Any]:
    return copy.deepcopy(_trace(name))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_trace_passes(name: str) -> None:
    check_document(_trace(name))


# Values of every JSON type, and ones the schema's minimum/enum/const refuse.
WRONG: list[Any] = [None, True, -1, 0, 1.5, "x", [], [1, "a"], {}, {"a": 1}]


def _mutations(event: dict[str, Any]) -> list[dict[str, Any]]:
    out = [{**event, "surprise": 1}]
    for key in event:
        out.append({k: v for k, v in event.items() if k != key})
        out += [{**event, key: w} for w in WRONG]
        value = event[key]
        if isinstance(value, dict):
            for sub in value:
                out += [{**event, key: {**value, sub: w}} for w in WRONG[:6]]
        if isinstance(value, list) and value:
            out += [{**event, key: [w, *value[1:]]} for w in WRONG[:6]]
    return out


@pytest.mark.parametrize(
    "name", ["nested_checkpoint", "selective_checkpoint", "inplace_error", "early_stop_on", "dropout_rng"]
)
def test_compiled_schema_agrees_with_jsonschema(name: str) -> None:
    compiler = _Compiler(schema()["$defs"])
    checked = 0
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for event in _doc(name)["events"]:
        shape = (event["kind"], tuple(sorted(k for k, v in event.items() if v is None)))
        if shape in seen:  # one event per kind and pattern of nulls is plenty, and fast
            continue
        seen.add(shape)
        ours = compiler.compile(schema()["$defs"][f"kind_{event['kind']}"])
        theirs = validator(f"kind_{event['kind']}")
        for case in [event, *_mutations(event)]:
            assert (ours(case) is None) == theirs.is_valid(case), (case, ours(case))
            checked += 1
    assert checked > 1000


def test_the_document_envelope_agrees_with_jsonschema() -> None:
    whole = jsonschema.Draft202012Validator(
        {**schema(), "properties": {**schema()["properties"], "events": {}}}
    )
    doc = _doc()
    cases = [doc, {**doc, "version": 2}, {**doc, "meta": {}}, {**doc, "sources": {"a.py": 3}}]
    cases += [{**doc, "meta": {**doc["meta"], "error": {"type": "E"}}}]
    cases += [{**doc, "meta": {**doc["meta"], "error": {"type": "E", "message": "m"}}}]
    for case in cases:
        theirs = whole.is_valid({**case, "events": []})
        try:
            check_document({**case, "events": []} if "n_events" not in case["meta"] else case)
            ours = True
        except TraceDocumentError:
            ours = False
        assert ours == theirs, case


def _error(doc: Any) -> TraceDocumentError:
    with pytest.raises(TraceDocumentError) as info:
        check_document(doc)
    return info.value


def test_not_a_trace_document() -> None:
    assert str(_error([1, 2])) == "a trace document is a JSON object, not a array"
    assert "Chrome trace" in str(_error({"traceEvents": []}))
    assert (
        str(_error({"schema": "x"}))
        == "not an autograd-lens trace: \"schema\" is 'x', not 'autograd-lens/trace'"
    )
    doc = _doc()
    del doc["meta"]
    assert str(_error(doc)) == "the document: 'meta' is missing"


def test_a_broken_event_is_named_with_its_field() -> None:
    doc = _doc()
    i = next(i for i, e in enumerate(doc["events"]) if e["kind"] == "pack")
    doc["events"][i]["mem"]["live"] = -5
    err = _error(doc)
    assert err.event == i
    assert str(err) == f"event {i} (pack): mem.live: -5 is less than the minimum of 0"
    doc = _doc()
    doc["events"][3]["kind"] = "teleport"
    assert str(_error(doc)) == "event 3: unknown kind 'teleport'"
    doc = _doc()
    doc["events"][2]["seq"] = 7
    assert str(_error(doc)).endswith("seq is 7, not 2")
    doc = _doc()
    doc["meta"]["n_events"] += 1
    assert "meta.n_events" in str(_error(doc))


def _first(doc: dict[str, Any], kind: str) -> int:
    return next(i for i, e in enumerate(doc["events"]) if e["kind"] == kind)


def test_ids_must_be_introduced_before_use() -> None:
    doc = _doc()
    i = _first(doc, "pack")
    doc["events"][i]["tensor"] = 10_000
    assert str(_error(doc)) == (
        f"event {i} (pack): tensor refers to tensor 10000, which no earlier event introduces"
    )
    doc = _doc()
    i = _first(doc, "tensor_new")
    doc["events"][i]["tensor"] = 1
    assert str(_error(doc)) == f"event {i} (tensor_new): introduces tensor 1; the next new tensor id is 0"


def test_freed_ids_and_edges_and_graph_tasks() -> None:
    doc = _doc()
    i = _first(doc, "holder_gc")
    doc["events"].insert(i + 1, {**doc["events"][i], "seq": i + 1})
    for seq, e in enumerate(doc["events"]):
        e["seq"] = seq
    doc["meta"]["n_events"] += 1
    holder = doc["events"][i]["holder"]
    assert str(_error(doc)) == f"event {i + 1} (holder_gc): holder {holder} is not alive (already freed)"
    doc = _doc()
    i = next(i for i, e in enumerate(doc["events"]) if e["kind"] == "node_new" and e["next"])
    doc["events"][i]["next"][0][0] = doc["events"][i]["node"]
    assert "which is not older than node" in str(_error(doc))
    doc = _doc()
    i = next(i for i, e in enumerate(doc["events"]) if e["gid"] is not None)
    doc["events"][i]["gid"] = 1
    assert str(_error(doc)).endswith("graph task 1 appears before graph task 0")


def test_an_unknown_schema_keyword_is_refused_not_ignored() -> None:
    with pytest.raises(NotImplementedError, match="patternProperties"):
        _Compiler({}).compile({"patternProperties": {}})
