"""``engine.trace.diff``: aligning two traces (Note [Aligning two traces]) and comparing gradients.

Synthetic traces pin the rules down; real engine traces of every bundled scenario, edited the way
a second backend could differ (an event missing, two events swapped, a shape changed, other ids,
fewer non-checkpoint events), check that each change is found at its row and nothing else is.
"""

from __future__ import annotations

import copy
import itertools
import json
from functools import cache
from typing import Any

import pytest

from app.runner import list_scenarios, run_scenario
from engine.trace.diff import CHECKPOINT_KINDS, TraceDiff, compare_grads, diff_traces
from tests.scenarios._golden import GOLDEN_DIR

Event = dict[str, Any]
SCENARIOS = [s.id for s in list_scenarios()]


@cache
def _recorded(scenario: str) -> str:
    info = next(s for s in list_scenarios() if s.id == scenario)
    result = run_scenario(info.path, trusted=True)
    assert result.trace is not None
    return json.dumps(result.trace["events"])


def engine_events(scenario: str) -> list[Event]:
    """A fresh copy of the scenario's engine trace (recorded once per process)."""
    events: list[Event] = json.loads(_recorded(scenario))
    return events


def renumber(events: list[Event]) -> list[Event]:
    for seq, e in enumerate(events):
        e["seq"] = seq
    return events


def ev(kind: str, **fields: Any) -> Event:
    return {"kind": kind, **fields}


def seqs(events: list[Event]) -> list[Event]:
    return renumber([copy.deepcopy(e) for e in events])


def check_rows(d: TraceDiff) -> None:
    """Every event of each side is in exactly one row; side a reads in seq order."""
    a = [r["a"] for r in d.rows if r["a"] is not None]
    b = [r["b"] for r in d.rows if r["b"] is not None]
    assert a == list(range(len(d.events_a)))
    assert sorted(b) == list(range(len(d.events_b)))
    for r in d.rows:
        assert r["checkpoint"] == (r["kind"] in CHECKPOINT_KINDS) or r["kind"] == "inputs_saved"
        assert (r["status"] == "only_a") == (r["b"] is None)
        assert (r["status"] == "only_b") == (r["a"] is None)


def first(d: TraceDiff) -> dict[str, Any]:
    assert d.first_divergence is not None, d.summary()
    return dict(d.rows[d.first_divergence])


def index_of(events: list[Event], kind: str, n: int = 0) -> int:
    return [i for i, e in enumerate(events) if e["kind"] == kind][n]


# --- synthetic -----------------------------------------------------------------------------------

# A frame with two holders, one recomputation, and the holders' deaths.
BASE = [
    ev("tensor_new", tensor=0, shape=[3], dtype="float32", requires_grad=True, is_leaf=True, name="x"),
    ev("frame_new", frame=0, label="f", parent=None, early_stop=True, created_in="forward"),
    ev("fn_start", frame=0, mode="forward"),
    ev("pack", frame=0, index=0, holder=0, tensor=0, shape=[3], dtype="float32", node=1, slot="self"),
    ev("op", name="sin", inputs=[0], outputs=[1], node=1),
    ev("pack", frame=0, index=1, holder=1, tensor=2, shape=[3], dtype="float32", node=2, slot="result"),
    ev("fn_end", frame=0, outcome="returned"),
    ev(
        "backward_start", api="backward", roots=[], inputs=[], retain_graph=False, create_graph=False, depth=0
    ),
    ev("unpack", frame=0, index=1, holder=1, node=2, slot="result", hook_gid=0),
    ev("recompute_start", frame=0, trigger={"frame": 0, "index": 1}, hook_gid=0),
    ev("rpack", frame=0, index=0, outcome="keep", holder=0, tensor=5, shape=[3], hook_gid=0),
    ev("rpack", frame=0, index=1, outcome="keep", holder=1, tensor=6, shape=[3], hook_gid=0),
    ev("early_stop", frame=0, count=2, total=2, hook_gid=0),
    ev("recompute_end", frame=0, reason="early_stop", rpacks=2, total=2, hook_gid=0),
    ev("holder_gc", frame=0, index=1, holder=1),
    ev("tensor_free", tensor=0),
    ev("holder_gc", frame=0, index=0, holder=0),
    ev("frame_gc", frame=0),
    ev("backward_end", error=False),
]


def test_a_synthetic_trace_equals_itself() -> None:
    d = diff_traces(seqs(BASE), seqs(BASE))
    check_rows(d)
    assert d.checkpoint_equal and d.first_divergence is None
    assert all(r["status"] == "same" and r["a"] == r["b"] for r in d.rows)
    assert d.summary().startswith("checkpoint events identical: 14 events")


def test_a_missing_event_is_a_gap_at_its_row() -> None:
    b = seqs(BASE)
    del b[12]  # early_stop
    d = diff_traces(seqs(BASE), renumber(b))
    check_rows(d)
    row = first(d)
    assert (row["a"], row["b"], row["status"], row["kind"]) == (12, None, "only_a", "early_stop")
    # Only that row differs: no cascade.
    assert [r["status"] for r in d.rows].count("same") == len(BASE) - 1
    assert "early_stop only in engine" in d.summary()


def test_an_extra_event_is_a_gap_on_the_other_side() -> None:
    b = seqs(BASE)
    b.insert(9, ev("unpack", frame=0, index=0, holder=0, node=1, slot="self", hook_gid=0))
    d = diff_traces(seqs(BASE), renumber(b), a_label="A", b_label="B")
    check_rows(d)
    row = first(d)
    assert (row["a"], row["b"], row["status"]) == (None, 9, "only_b")
    assert "unpack only in B" in d.verdict()


def test_a_changed_field_is_one_differing_row() -> None:
    b = seqs(BASE)
    b[5]["shape"] = [4]
    d = diff_traces(seqs(BASE), b)
    row = first(d)
    assert (row["a"], row["b"], row["status"], row["fields"]) == (5, 5, "differ", ["shape"])
    assert sum(r["status"] != "same" for r in d.rows) == 1
    assert "pack differs in shape" in d.summary()


def test_ids_the_backends_number_differently_do_not_matter() -> None:
    b = seqs(BASE)
    for e in b:
        for key in ("tensor", "holder", "node"):
            if isinstance(e.get(key), int):
                e[key] += 100
    d = diff_traces(seqs(BASE), b)
    assert d.checkpoint_equal
    assert all(r["status"] == "same" for r in d.rows)


def test_holder_gc_may_change_order_within_its_run() -> None:
    b = seqs(BASE)
    b[14], b[16] = b[16], b[14]  # the two holder_gc around a tensor_free
    d = diff_traces(seqs(BASE), renumber(b))
    check_rows(d)
    assert d.checkpoint_equal, d.summary()
    gc_rows = [r for r in d.rows if r["kind"] == "holder_gc"]
    assert [(r["a"], r["b"], r["reordered"]) for r in gc_rows] == [(14, 16, True), (16, 14, True)]
    assert d.counts()["reordered"] == 2
    assert "2 holder GC events in another order" in d.verdict()


def test_a_holder_may_die_after_its_frame_within_one_run_of_deaths() -> None:
    b = seqs(BASE)
    b.insert(18, b.pop(16))  # holder_gc f#0[0] after frame_gc: the same run of deaths
    d = diff_traces(seqs(BASE), renumber(b))
    check_rows(d)
    assert d.checkpoint_equal, d.summary()


def test_holder_gc_may_not_cross_another_checkpoint_event() -> None:
    b = seqs(BASE)
    b.insert(12, b.pop(14))  # holder_gc f#0[1] before early_stop: not a death run any more
    d = diff_traces(seqs(BASE), renumber(b))
    check_rows(d)
    assert not d.checkpoint_equal
    row = first(d)
    assert row["kind"] == "holder_gc" and row["status"] in ("only_a", "only_b")


def test_swapped_checkpoint_events_diverge_at_the_first() -> None:
    b = seqs(BASE)
    b[10], b[11] = b[11], b[10]  # the two rpacks
    d = diff_traces(seqs(BASE), renumber(b))
    check_rows(d)
    row = first(d)
    assert row["kind"] == "rpack" and 10 in (row["a"], row["b"])
    assert d.first_divergence == next(i for i, r in enumerate(d.rows) if 10 in (r["a"], r["b"]))


def test_other_events_never_make_traces_differ() -> None:
    b = [e for e in seqs(BASE) if e["kind"] not in ("op", "tensor_free")]
    b.insert(3, ev("tensor_new", tensor=9, shape=[0], dtype="float32", requires_grad=False, is_leaf=True))
    d = diff_traces(seqs(BASE), renumber(b))
    check_rows(d)
    assert d.checkpoint_equal
    plain = {(r["kind"], r["status"]) for r in d.rows if not r["checkpoint"]}
    assert (
        ("op", "only_a") in plain and ("tensor_free", "only_a") in plain and ("tensor_new", "only_b") in plain
    )


def test_what_one_trace_lacks_is_not_compared_and_is_said() -> None:
    a = seqs(BASE)
    a.insert(2, ev("inputs_saved", frame=0, tensors=[0], node=0))
    b = seqs(BASE)
    for e in b:
        if e["kind"] == "pack":
            del e["dtype"]
    d = diff_traces(renumber(a), b)
    assert d.checkpoint_equal
    assert d.ignored == {"inputs_saved": ["*"], "pack": ["dtype"]}
    assert "not compared (missing from one trace): inputs_saved: *; pack: dtype" in d.summary()
    # Once both have it, an optional kind is compared like any other.
    b2 = seqs(BASE)
    b2.insert(2, ev("inputs_saved", frame=1, tensors=[0], node=0))
    assert first(diff_traces(renumber(a), renumber(b2)))["kind"] == "inputs_saved"


def test_empty_traces() -> None:
    assert diff_traces([], []).checkpoint_equal
    d = diff_traces(seqs(BASE), [])
    check_rows(d)
    assert first(d)["kind"] == "frame_new"
    assert d.counts()["only_a"] == 14


def test_to_json_is_json_with_each_sides_text() -> None:
    b = seqs(BASE)
    b[5]["shape"] = [4]
    doc = diff_traces({"events": seqs(BASE)}, {"events": b}).to_json()
    assert json.loads(json.dumps(doc)) == doc
    assert doc["checkpoint_equal"] is False and doc["first_divergence"] == 5
    row = doc["rows"][5]
    assert row["a_text"] == "f#0[1] [3] ← node 2.result"
    assert row["b_text"] == "f#0[1] [4] ← node 2.result"
    assert set(doc) >= {"a_label", "b_label", "verdict", "counts", "ignored", "rows"}


# --- real engine traces --------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_bundled_trace_equals_itself(scenario: str) -> None:
    d = diff_traces(engine_events(scenario), engine_events(scenario))
    check_rows(d)
    assert d.checkpoint_equal and not d.ignored
    assert all(r["status"] == "same" and r["a"] == r["b"] for r in d.rows)


# The scenarios whose trace packs holders (read from their goldens): not mlp_memory_none, which
# checkpoints nothing, nor a reentrant checkpoint over inputs that need no grad (a pitfall's point).
CHECKPOINTED = [
    s
    for s in SCENARIOS
    if any(e["kind"] == "pack" for e in json.loads((GOLDEN_DIR / f"{s}.json").read_text())["trace"]["events"])
]


@pytest.mark.parametrize("scenario", CHECKPOINTED)
def test_a_deleted_checkpoint_event_is_found_at_its_row(scenario: str) -> None:
    a = engine_events(scenario)
    ck = [i for i, e in enumerate(a) if e["kind"] in CHECKPOINT_KINDS and e["kind"] != "holder_gc"]
    gone = ck[len(ck) // 2]
    b = engine_events(scenario)
    del b[gone]
    d = diff_traces(a, renumber(b))
    check_rows(d)
    row = first(d)
    assert (row["a"], row["b"], row["status"]) == (gone, None, "only_a")
    assert d.counts()["only_a"] == 1 and d.counts()["only_b"] == 0 and d.counts()["differ"] == 0


@pytest.mark.parametrize("scenario", ["nested_checkpoint", "chain_of_blocks", "checkpoint_sequential"])
def test_a_moved_checkpoint_event_is_found(scenario: str) -> None:
    a = engine_events(scenario)
    i = index_of(a, "recompute_start")
    b = engine_events(scenario)
    b.insert(i - 1, b.pop(i))  # before the unpack that triggers it
    d = diff_traces(a, renumber(b))
    check_rows(d)
    row = first(d)
    assert {row["a"], row["b"]} & {i - 1, i}, d.summary()
    assert row["kind"] in ("recompute_start", "unpack")


@pytest.mark.parametrize("scenario", CHECKPOINTED)
def test_a_changed_pack_shape_is_a_divergence(scenario: str) -> None:
    a = engine_events(scenario)
    i = index_of(a, "pack", 1)
    b = engine_events(scenario)
    b[i]["shape"] = [*b[i]["shape"], 7]
    d = diff_traces(a, b)
    row = first(d)
    assert (row["a"], row["b"], row["status"], row["fields"]) == (i, i, "differ", ["shape"])
    assert d.counts()["differ"] == 1


def test_holder_gc_runs_of_a_real_trace_may_be_reordered() -> None:
    a = engine_events("nested_checkpoint")
    ck = [i for i, e in enumerate(a) if e["kind"] in CHECKPOINT_KINDS]
    # Two holder_gc next to each other among the checkpoint events (other events may sit between).
    pairs = [(x, y) for x, y in itertools.pairwise(ck) if a[x]["kind"] == a[y]["kind"] == "holder_gc"]
    assert pairs, "nested_checkpoint has a run of holder GCs"
    x, y = pairs[0]
    b = engine_events("nested_checkpoint")
    b[x], b[y] = b[y], b[x]
    d = diff_traces(a, renumber(b))
    check_rows(d)
    assert d.checkpoint_equal
    assert d.counts()["reordered"] == 2


def test_fewer_other_events_and_other_ids_keep_a_real_trace_equal() -> None:
    a = engine_events("nested_checkpoint")
    b = [e for e in engine_events("nested_checkpoint") if e["kind"] not in ("op", "saved", "node_free")]
    for e in b:
        if e["kind"] in ("tensor_new", "tensor_free") and isinstance(e.get("tensor"), int):
            e["tensor"] += 1000
    d = diff_traces(a, renumber(b))
    check_rows(d)
    assert d.checkpoint_equal, d.summary()


# --- gradients -----------------------------------------------------------------------------------


def test_compare_grads() -> None:
    g = {"x": [[1.0, 2.0], [3.0, 4.0]], "w": [0.5], "s": 2.0, "none": None}
    assert compare_grads(g, copy.deepcopy(g)) == []
    assert compare_grads(g, {**g, "x": [[1.0, 2.0], [3.0, 4.0 + 1e-7]]}) == []  # within tolerance
    problems = compare_grads(
        g,
        {"x": [[1.0, 2.0], [3.0, 4.5]], "w": [0.5, 0.5], "s": 2.0, "none": [1.0], "extra": [1.0]},
        a_label="engine",
        b_label="torch",
    )
    assert problems == [
        "extra: only in torch",
        "none: no gradient in engine",
        "w: shape [1] in engine, [2] in torch",
        "x: max abs difference 0.5 (rtol=1e-05, atol=1e-06)",
    ]
    assert compare_grads({"x": [1.0]}, {}) == ["x: only in engine"]
    nan = float("nan")
    assert compare_grads({"x": [nan, 1.0]}, {"x": [nan, 1.0]}) == []
    assert compare_grads({"x": [nan, 1.0]}, {"x": [1.0, 1.0]}) == [
        "x: max abs difference 0 (rtol=1e-05, atol=1e-06), NaN in different places"
    ]


def test_a_pack_for_another_nodes_slot_is_a_divergence() -> None:
    # Which saved variable a holder stands for is compared on its unpacks, by name
    # ("AddmmBackward0.mat1"): the node ids of two backends differ, the names must not.
    ours = engine_events("nested_checkpoint")
    theirs = copy.deepcopy(ours)
    i = next(i for i, e in enumerate(theirs) if e["kind"] == "unpack" and e["slot"] == "mat2")
    theirs[i]["slot"] = "mat1"
    diff = diff_traces(ours, theirs)
    assert not diff.checkpoint_equal
    row = diff.rows[diff.first_divergence]
    assert (row["kind"], row["fields"], row["b"]) == ("unpack", ["saved_for"], i)
