"""The reducer: what the state holds at given steps, and that every way of reaching a step agrees."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.trace.state import (
    Cursor,
    apply,
    apply_changes,
    diff,
    initial_state,
    revert_changes,
    state_at,
    step,
)
from tests.trace import _synthetic
from tests.trace._real import with_real

TRACES = {name: build() for name, build in _synthetic.SCENARIOS.items()}


def all_traces() -> dict[str, list[dict[str, Any]]]:
    return with_real(TRACES)


def index_of(events: list[dict[str, Any]], kind: str, nth: int = 0, **fields: Any) -> int:
    hits = [e["seq"] for e in events if e["kind"] == kind and all(e.get(k) == v for k, v in fields.items())]
    return hits[nth]


# --- what the state holds -------------------------------------------------------------------------


def test_initial_state_is_empty() -> None:
    s = initial_state()
    assert s["now"]["seq"] == -1
    assert s["frames"] == {} and s["nodes"] == {} and s["tensors"] == {} and s["hooks"] == []
    assert s["mem"] == {"live": 0, "saved": 0, "recomputed": 0}


def test_forward_of_a_nested_checkpoint() -> None:
    events = TRACES["nested"]
    s = state_at(events, index_of(events, "fn_start", frame=2))  # sub2's body starts
    assert [h["hooks"] for h in s["hooks"]] == ["checkpoint", "checkpoint"]
    assert [h["frame"] for h in s["hooks"]] == [0, 2]
    outer, sub1 = s["frames"]["0"], s["frames"]["1"]
    assert outer["running"] == ["forward"] and s["frames"]["2"]["running"] == ["forward"]
    assert sub1["running"] == [] and sub1["outcome"] == "returned"
    assert sub1["parent"] == 0 and sub1["name"] == "sub1#1"
    # Rule 2: sub1's and sub2's dummies and inputs are holders of outer.
    assert [outer["holders"][str(i)]["shape"] for i in range(4)] == [[0], [2, 3], [0], [2, 3]]
    assert all(h["alive"] and h["handles"] == {} for h in outer["holders"].values())
    noop = s["nodes"]["2"]
    assert noop["saved"]["saved_tensors[1]"]["packed"] == "holder"
    assert noop["saved"]["saved_tensors[1]"]["holder"] == outer["holders"]["1"]["holder"]
    sin = s["nodes"]["3"]
    assert sin["frame"] == 1 and sin["saved"]["self"]["holder"] == sub1["holders"]["0"]["holder"]
    assert s["holders"][str(sub1["holders"]["0"]["holder"])] == [1, 0]


def test_recomputation_with_early_stop() -> None:
    events = TRACES["nested"]
    n = index_of(events, "early_stop", frame=0)
    s = state_at(events, n)
    outer = s["frames"]["0"]
    assert outer["recomp_counter"] == {"1": 4}
    assert outer["early_stopped"] == {"1": {"count": 4, "total": 4}}
    assert outer["is_recomputed"] == {}  # set when the recomputation is over
    assert set(outer["recomputed"]["1"]) == {"0", "1", "2", "3"}
    assert all(h["handles"] == {"1": "set"} for h in outer["holders"].values())
    assert [r["frame"] for r in s["recomputing"]] == [0]
    assert [h["hooks"] for h in s["hooks"]] == ["recomputation"]
    assert [u["frame"] for u in s["unpacking"]] == [2, 0]
    # Rule 3: the frames met while re-running outer are new ones.
    assert s["frames"]["3"]["created_in"] == {"recompute": 0} and s["frames"]["3"]["parent"] is None
    assert s["nodes"]["8"]["recompute"] == [0, "1"] and s["nodes"]["8"]["phase"] == "recompute"

    s = state_at(events, index_of(events, "recompute_end", frame=0))
    assert s["frames"]["0"]["is_recomputed"] == {"1": True}
    assert s["recomputing"] == [] and s["hooks"] == []

    # Rule 4: taking a tensor clears the handle and drops the entry.
    s = state_at(events, index_of(events, "recomputed_take", frame=0))
    assert s["frames"]["0"]["holders"]["2"]["handles"] == {"1": "cleared"}
    assert set(s["frames"]["0"]["recomputed"]["1"]) == {"0", "1", "3"}
    assert [u["frame"] for u in s["unpacking"]] == [2]


def test_holder_gc_drops_its_recomputed_entry() -> None:
    events = TRACES["single"]
    before = state_at(events, index_of(events, "holder_gc", index=1) - 1)
    assert before["frames"]["0"]["recomputed"]["1"] == {"0": 0}  # holder 0's entry waits for its unpack
    s = state_at(events, index_of(events, "holder_gc", index=1))
    assert s["frames"]["0"]["holders"]["1"]["alive"] is False
    assert s["frames"]["0"]["holders"]["1"]["handles"] == {}
    assert s["nodes"]["3"]["name"] == "ExpBackward0" and s["nodes"]["3"]["released"] is True

    # A holder that dies before its unpack (a partial backward) takes its entry with it.
    gc0 = dict(events[index_of(events, "holder_gc", index=1)], index=0, holder=0)
    after = apply(s, gc0)
    assert after["frames"]["0"]["recomputed"]["1"] == {}
    assert after["frames"]["0"]["holders"]["0"]["alive"] is False

    end = state_at(events, len(events) - 1)
    assert end["frames"]["0"]["alive"] is False and end["frames"]["0"]["recomputed"] == {}
    assert end["nodes"]["3"]["status"] == "executed" and end["nodes"]["3"]["runs"] == 1
    assert end["tensors"]["0"]["grads"] == 1
    assert end["counts"]["recomputations"] == 1 and end["counts"]["unpacks"] == 2


def test_retain_graph_twice_has_handles_per_gid() -> None:
    events = TRACES["retain_twice"]
    s = state_at(events, index_of(events, "backward_end"))
    holders = s["frames"]["0"]["holders"]
    assert all(h["alive"] and h["handles"] == {"1": "cleared"} for h in holders.values())
    assert s["frames"]["0"]["is_recomputed"] == {"1": True}

    s = state_at(events, index_of(events, "early_stop", 1))
    assert s["frames"]["0"]["recomp_counter"] == {"1": 2, "2": 2}
    assert holders["0"]["handles"] == {"1": "cleared"}  # the old state object is untouched
    assert s["frames"]["0"]["holders"]["0"]["handles"] == {"1": "cleared", "2": "set"}
    assert s["counts"]["backwards"] == 2 and [b["gid"] for b in s["backward"]] == [2]


def test_rule6_dead_holders_are_skipped_and_errors_recorded() -> None:
    events = TRACES["rule6_skip"]
    s = state_at(events, index_of(events, "recompute_end", 1))
    frame = s["frames"]["0"]
    assert frame["recomp_counter"] == {"1": 3, "2": 3}
    assert frame["early_stop"] is False and frame["early_stopped"] == {}
    assert frame["holders"]["0"]["alive"] is False and frame["holders"]["0"]["handles"] == {}
    assert frame["holders"]["2"]["handles"] == {"2": "set"}
    assert frame["recomputed"]["2"] == {"2": 0}

    end = state_at(events, len(events) - 1)
    assert end["frames"]["0"]["error"]["type"] == "CheckpointError"
    assert end["error"] == {"type": "CheckpointError", "message": events[-1]["message"]}
    assert end["tensors"][str(events[index_of(events, "version_bump")]["tensor"])]["version"] == 1
    assert end["unpacking"] == []  # the failed unpack is over


def test_memory_and_peak_follow_the_events() -> None:
    events = TRACES["nested"]
    peak = 0
    cursor = Cursor(events)
    for event in events:
        s = cursor.forward()
        assert s["mem"] == event["mem"]
        peak = max(peak, event["mem"]["live"])
        assert s["peak"]["live"] == peak
    assert s["peak"]["recomputed"] > 0 and s["mem"]["recomputed"] == 0


def test_marks_unknown_kinds_and_source_lines() -> None:
    events = TRACES["nested"]
    end = state_at(events, len(events) - 1)
    assert end["mark"] == {"label": "done", "note": "end of scenario"}
    assert end["now"]["src"] == {"file": "scenario.py", "line": 1}
    s = step(end, {"seq": len(events), "kind": "something_new", "phase": "forward", "gid": None, "src": None})
    assert [c.path for c in s] == [("now",)]


def test_apply_is_pure_and_states_are_json() -> None:
    events = TRACES["nested"]
    s = initial_state()
    for event in events:
        frozen = json.dumps(s, sort_keys=True)
        after = apply(s, event)
        assert json.dumps(s, sort_keys=True) == frozen
        assert json.loads(json.dumps(after)) == after
        s = after
    assert s == state_at(events, len(events) - 1)


def test_tuples_in_events_become_lists() -> None:
    event = {"seq": 0, "kind": "tensor_new", "tensor": 0, "shape": (2, 3), "dtype": "float64", "nbytes": 48}
    s = apply(initial_state(), event)
    assert s["tensors"]["0"]["shape"] == [2, 3]
    assert s == json.loads(json.dumps(s))


def test_state_at_bounds() -> None:
    events = TRACES["single"]
    assert state_at(events, -1) == initial_state()
    with pytest.raises(IndexError):
        state_at(events, len(events))


# --- deltas ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(all_traces()))
def test_reverting_each_event_restores_the_previous_state(name: str) -> None:
    events = all_traces()[name]
    s = initial_state()
    for event in events:
        before = json.loads(json.dumps(s))
        changes = step(s, event)
        after = json.loads(json.dumps(s))
        # The changes travel as JSON; the browser applies and reverts them from there.
        wire = json.loads(json.dumps(changes))
        assert revert_changes(json.loads(json.dumps(after)), wire) == before
        assert apply_changes(json.loads(json.dumps(before)), wire) == after
        assert apply_changes(json.loads(json.dumps(before)), diff(before, after)) == after
        assert revert_changes(json.loads(json.dumps(after)), diff(before, after)) == before


@pytest.mark.parametrize("name", sorted(all_traces()))
def test_recorded_changes_never_change_afterwards(name: str) -> None:
    # Note [Values replaced whole]: "now", "mem" and "peak" share their value between the state
    # and the change, which holds only while nothing writes into them.
    s = initial_state()
    kept = []
    for event in all_traces()[name]:
        changes = step(s, event)
        assert all(c.path[0] not in ("now", "mem", "peak") or len(c.path) == 1 for c in changes)
        kept.append((changes, json.dumps(changes)))
    assert all(json.dumps(changes) == text for changes, text in kept)


def test_change_format() -> None:
    events = TRACES["single"]
    s = state_at(events, index_of(events, "rpack") - 1)
    changes = step(s, events[index_of(events, "rpack")])
    by_path = {tuple(c.path): c for c in changes}
    assert by_path["frames", "0", "recomp_counter", "1"] == (
        "set",
        ("frames", "0", "recomp_counter", "1"),
        0,
        1,
    )
    assert by_path["frames", "0", "holders", "0", "handles", "1"].op == "add"
    assert json.loads(json.dumps(by_path["counts", "rpacks"])) == ["set", ["counts", "rpacks"], 0, 1]
    # A pop of a stack is a "remove" of its last index.
    n = index_of(events, "hooks_pop")
    changes = step(state_at(events, n - 1), events[n])
    assert next(c for c in changes if c.path[0] == "hooks")[:2] == ("remove", ("hooks", 0))


def test_diff_rejects_a_non_dict_root_and_handles_lists() -> None:
    with pytest.raises(ValueError):
        diff(1, 2)
    before, after = {"a": [1, 2, 3]}, {"a": [1, 5]}
    changes = diff(before, after)
    assert [c.op for c in changes] == ["set", "remove"]
    assert apply_changes(json.loads(json.dumps(before)), changes) == after
    with pytest.raises(ValueError):
        apply_changes({"a": [1, 2]}, [("add", ["a", 5], None, 1)])


# --- the cursor -----------------------------------------------------------------------------------


def test_cursor_ends() -> None:
    cursor = Cursor(TRACES["single"])
    with pytest.raises(IndexError):
        cursor.back()
    cursor.jump(len(cursor) - 1)
    with pytest.raises(IndexError):
        cursor.forward()
    with pytest.raises(IndexError):
        cursor.jump(len(cursor))


def test_cursor_changes_and_copy() -> None:
    events = TRACES["nested"]
    cursor = Cursor(events, snapshot_every=8)
    assert cursor.changes(40) == step(state_at(events, 39), events[40])
    assert cursor.position == -1
    cursor.jump(60)
    mine = cursor.copy()
    cursor.jump(10)
    assert mine == state_at(events, 60)


@pytest.mark.parametrize("name", sorted(all_traces()))
def test_forward_back_and_jump_agree_everywhere(name: str) -> None:
    events = all_traces()[name]
    expected = [json.dumps(state_at(events, n), sort_keys=True) for n in range(-1, len(events))]
    cursor = Cursor(events, snapshot_every=16)
    for n in range(len(events)):
        assert json.dumps(cursor.forward(), sort_keys=True) == expected[n + 1]
    for n in range(len(events) - 2, -2, -1):
        assert json.dumps(cursor.back(), sort_keys=True) == expected[n + 1]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_path_to_a_step_gives_the_same_state(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(all_traces())))
    events = all_traces()[name]
    prefix = data.draw(st.integers(min_value=1, max_value=len(events)))
    events = events[:prefix]
    n = data.draw(st.integers(min_value=-1, max_value=len(events) - 1))
    snapshot_every = data.draw(st.sampled_from([1, 3, 16, 512]))
    expected = state_at(events, n)

    forward = Cursor(events, snapshot_every=snapshot_every)
    for _ in range(n + 1):
        forward.forward()
    assert forward.state == expected

    backward = Cursor(events, snapshot_every=snapshot_every)
    backward.jump(len(events) - 1)
    for _ in range(len(events) - 1 - n):
        backward.back()
    assert backward.state == expected

    # Wander first, so that snapshots, copies on write and cached changes are all in play.
    jumper = Cursor(events, snapshot_every=snapshot_every)
    for m in data.draw(st.lists(st.integers(min_value=-1, max_value=len(events) - 1), max_size=6)):
        jumper.jump(m)
        assert jumper.state == state_at(events, m)
    assert jumper.jump(n) == expected
    # Stepping from there still agrees (the snapshot it came from was not written through).
    if n + 1 < len(events):
        assert jumper.forward() == state_at(events, n + 1)
        assert jumper.back() == expected


def test_a_long_trace_is_reduced_once() -> None:
    events: list[dict[str, Any]] = []
    for _ in range(40):
        events += [dict(e, seq=len(events) + i) for i, e in enumerate(_synthetic.nested())]
    calls = 0

    cursor = Cursor(events, snapshot_every=64)
    reduce = cursor._reduce

    def counting(tx: Any, event: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        reduce(tx, event)

    cursor._reduce = counting
    cursor.jump(len(events) - 1)
    assert calls == len(events)
    for n in (17, len(events) // 2, 5, len(events) - 3, 1000):
        assert cursor.jump(n) == state_at(events, n)
    assert calls == len(events)
