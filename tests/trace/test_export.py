"""Exports: JSON with the reducer's changes, Chrome Trace Event format, and DOT."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter, defaultdict
from typing import Any

import jsonschema
import pytest

from engine import trace
from engine.trace.captions import captions
from engine.trace.export import (
    TRACKS,
    annotate,
    chrome_trace,
    dot_classes,
    slot_id,
    to_chrome,
    to_dot,
    to_json,
)
from engine.trace.state import apply_changes, initial_state, revert_changes, state_at
from tests.trace import _synthetic
from tests.trace._real import retain_graph_double_backward, with_real

TRACES = with_real({name: build() for name, build in _synthetic.SCENARIOS.items()})
NAMES = sorted(TRACES)


# --- JSON -----------------------------------------------------------------------------------------


def test_json_document() -> None:
    events = TRACES["nested"]
    doc = json.loads(to_json(events))
    assert doc["schema"] == "autograd-lens/trace" and doc["version"] == 1
    assert doc["events"] == events and "derived" not in doc
    assert json.loads(to_json(doc)) == doc  # a document goes through unchanged


@pytest.mark.parametrize("name", NAMES)
def test_a_browser_can_step_with_the_derived_changes_alone(name: str) -> None:
    events = TRACES[name]
    derived = json.loads(to_json(events, annotate_events=True))["derived"]
    assert len(derived) == len(events)
    assert [d["caption"] for d in derived] == captions(events)
    state = json.loads(json.dumps(initial_state()))
    for n, d in enumerate(derived):
        apply_changes(state, d["changes"])
        if n % 17 == 0 or n == len(events) - 1:
            assert state == state_at(events, n)
    for d in reversed(derived):
        revert_changes(state, d["changes"])
    assert state == initial_state()


def test_annotate_accepts_a_recorder_like_object() -> None:
    class Recorded:
        events = TRACES["single"]

        def to_json(self) -> dict[str, Any]:
            return {
                "schema": "autograd-lens/trace",
                "version": 1,
                "meta": {"scenario": "s"},
                "events": self.events,
            }

    assert len(annotate(Recorded())) == len(TRACES["single"])
    assert json.loads(to_json(Recorded()))["meta"] == {"scenario": "s"}


# --- Chrome Trace Event format --------------------------------------------------------------------


def check_chrome(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The format's rules: required keys per phase type, durations, and slices nesting per track."""
    events = doc["traceEvents"]
    assert isinstance(events, list) and doc["displayTimeUnit"] in {"ms", "ns"}
    for ev in events:
        assert {"name", "ph", "pid"} <= set(ev), ev
        assert ev["ph"] in {"X", "i", "C", "M", "s", "f"}, ev
        if ev["ph"] != "M":
            assert isinstance(ev["ts"], int | float) and ev["ts"] >= 0, ev
        if ev["ph"] in {"X", "i"}:
            assert isinstance(ev["tid"], int), ev
        if ev["ph"] == "X":
            assert ev["dur"] >= 0, ev
        if ev["ph"] == "i":
            assert ev["s"] in {"t", "p", "g"}, ev
        if ev["ph"] == "C":
            assert all(isinstance(v, int | float) for v in ev["args"].values()), ev
    # Flow arrows: one start and one end per id, with the same name, the end not before the start.
    flows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for ev in events:
        if ev["ph"] in {"s", "f"}:
            assert isinstance(ev["id"], int) and isinstance(ev["tid"], int), ev
            assert ev["ph"] not in flows[ev["id"]], f"flow {ev['id']} has two {ev['ph']} events"
            flows[ev["id"]][ev["ph"]] = ev
    for pair in flows.values():
        assert set(pair) == {"s", "f"} and pair["s"]["name"] == pair["f"]["name"], pair
        assert pair["s"]["ts"] <= pair["f"]["ts"] and pair["f"]["bp"] == "e", pair
    by_track: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for ev in events:
        if ev["ph"] == "X":
            by_track[ev["tid"]].append(ev)
    for slices in by_track.values():
        # Sorted by start (parents first on ties), every slice ends before its enclosing one.
        stack: list[tuple[float, float]] = []
        for ev in sorted(slices, key=lambda e: (e["ts"], -e["dur"], e["args"]["seq"])):
            start, end = ev["ts"], ev["ts"] + ev["dur"]
            while stack and stack[-1][1] <= start and stack[-1][1] < end:
                stack.pop()
            if stack:
                assert end <= stack[-1][1], f"{ev['name']} overlaps its enclosing slice"
            stack.append((start, end))
    return events


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("clock", ["t_ns", "seq"])
def test_chrome_trace_is_valid_and_nested(name: str, clock: str) -> None:
    events = TRACES[name]
    chrome = check_chrome(json.loads(to_chrome(events, clock=clock)))
    kinds = Counter(e["kind"] for e in events)
    slices = Counter(ev["cat"] for ev in chrome if ev["ph"] == "X")
    assert slices["recompute_start"] == kinds["recompute_start"]
    assert slices["fn_start"] == kinds["fn_start"]
    assert slices["node_exec"] == kinds["node_exec"]
    assert slices["backward_start"] == kinds["backward_start"]
    instants = Counter(ev["cat"] for ev in chrome if ev["ph"] == "i")
    assert instants["pack"] == kinds["pack"] and instants["unpack"] == kinds["unpack"]
    assert instants["early_stop"] == kinds["early_stop"]
    tracks = {ev["args"]["name"]: ev["tid"] for ev in chrome if ev["name"] == "thread_name"}
    assert set(tracks) == {"forward", "backward", "recompute"}
    assert all(ev["tid"] == tracks["recompute"] for ev in chrome if ev.get("cat") == "recompute_start")
    assert any(ev["ph"] == "C" for ev in chrome)


def test_chrome_slices_have_names_and_captions() -> None:
    chrome = chrome_trace(TRACES["nested"], clock="seq")["traceEvents"]
    recomputes = [ev for ev in chrome if ev.get("cat") == "recompute_start"]
    assert [ev["name"] for ev in recomputes] == [
        "recompute outer#0 for g1",
        "recompute sub2#2 for g1",
        "recompute sub1#1 for g1",
    ]
    outer = recomputes[0]
    # It holds the re-run of outer, which holds nothing past the early stop.
    inner = [
        ev for ev in chrome if ev.get("cat") == "fn_start" and ev["name"] == "outer (recompute of outer#0)"
    ]
    assert (
        len(inner) == 1
        and outer["ts"] < inner[0]["ts"]
        and inner[0]["ts"] + inner[0]["dur"] < outer["ts"] + outer["dur"]
    )
    assert outer["args"]["caption"].startswith("Recomputing `outer#0` for g1")
    early = next(ev for ev in chrome if ev.get("cat") == "early_stop")
    assert early["name"] == "early_stop outer#0" and early["args"]["caption"].startswith("Early stop: all 4")
    memory = [ev["args"] for ev in chrome if ev["ph"] == "C"]
    assert max(m["recomputed"] for m in memory) > 0


@pytest.mark.parametrize("name", NAMES)
def test_chrome_flows_go_from_each_save_to_its_unpacks_recomputation_and_free(name: str) -> None:
    events = TRACES[name]
    by_seq = {e["seq"]: e for e in events}
    chrome = check_chrome(chrome_trace(events, clock="seq"))
    starts = {ev["id"]: ev for ev in chrome if ev["ph"] == "s"}
    ends = [ev for ev in chrome if ev["ph"] == "f"]
    packs = {e["holder"]: e for e in events if e["kind"] == "pack" and e.get("holder") is not None}
    for end in ends:
        target, start = by_seq[end["args"]["seq"]], starts[end["id"]]
        pack = by_seq[int(start["ts"])]
        assert pack["kind"] == "pack" and start["tid"] == TRACKS[pack["phase"]]
        if target["kind"] == "recompute_start":
            assert (pack["frame"], pack["index"]) == (target["trigger"]["frame"], target["trigger"]["index"])
            assert end["tid"] == TRACKS["recompute"] and end["name"].startswith("recompute ")
        else:
            assert target["kind"] in {"unpack", "holder_gc"} and target["holder"] == pack["holder"]
    # Every unpack and free of a packed holder has its arrow.
    expected = Counter(
        e["kind"] for e in events if e["kind"] in {"unpack", "holder_gc"} and e["holder"] in packs
    )
    got = Counter(by_seq[ev["args"]["seq"]]["kind"] for ev in ends)
    assert got - Counter({"recompute_start": got["recompute_start"]}) == expected


def test_chrome_flows_of_nested_checkpoints() -> None:
    ends = [ev for ev in chrome_trace(TRACES["nested"], clock="seq")["traceEvents"] if ev["ph"] == "f"]
    assert Counter(ev["name"].split()[0] for ev in ends) == {"unpack": 6, "free": 6, "recompute": 3}
    recomputes = [ev["name"] for ev in ends if ev["name"].startswith("recompute")]
    assert recomputes == ["recompute outer#0[2]", "recompute sub2#2[0]", "recompute sub1#1[0]"]


def test_unfinished_slices_are_closed_at_the_end() -> None:
    chrome = chrome_trace(TRACES["rule6_skip"], clock="seq")["traceEvents"]
    open_ = [ev for ev in chrome if ev["ph"] == "X" and ev["args"].get("unfinished")]
    assert {ev["cat"] for ev in open_} == {"backward_start", "node_exec"}
    assert all(ev["ts"] + ev["dur"] == len(TRACES["rule6_skip"]) - 1 for ev in open_)


# --- DOT ------------------------------------------------------------------------------------------


def cluster_tree(source: str) -> dict[str, str]:
    """cluster name -> enclosing cluster name ("" at the top), read from the DOT text."""
    parents, stack = {}, [""]
    for line in source.splitlines():
        m = re.match(r"\s*subgraph (cluster_\w+) \{", line)
        if m:
            parents[m.group(1)] = stack[-1]
            stack.append(m.group(1))
        elif line.strip() == "}" and len(stack) > 1:
            stack.pop()
    return parents


def dot_ids(source: str) -> set[str]:
    return set(re.findall(r'\bid="?([\w.]+)"?', source))


@pytest.mark.usefixtures("graphviz_dot")
@pytest.mark.parametrize("name", NAMES)
def test_dot_renders_with_graphviz(name: str) -> None:
    source = to_dot(TRACES[name]).source
    svg = subprocess.run(["dot", "-Tsvg"], input=source, capture_output=True, text=True, check=True).stdout
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    # Graphviz keeps our ids in the SVG, which is what lets a front end restyle without re-layout.
    for node in {e["node"] for e in TRACES[name] if e["kind"] == "node_new"}:
        assert f'id="n{node}"' in svg
    for frame in {e["frame"] for e in TRACES[name] if e["kind"] == "frame_new"}:
        assert f'id="f{frame}"' in svg


def test_dot_of_nested_checkpoints() -> None:
    events = TRACES["nested"]
    source = to_dot(events).source
    ids = dot_ids(source)
    assert {"n3", "n5", "h0", "h2", "t3", "f0", "f1", "f2", "f3", "f4", "r0_1", "r2_1", "r1_1"} <= ids
    assert slot_id(1, "saved_tensors[1]") == "s1_saved_tensors_1_" and "s1_saved_tensors_1_" in ids
    tree = cluster_tree(source)
    assert tree["cluster_f1"] == "cluster_f0" and tree["cluster_f2"] == "cluster_f0"
    # Frames created by the recomputation of outer belong to that recomputation (Rule 3).
    assert tree["cluster_f3"] == "cluster_r0_1" and tree["cluster_r0_1"] == ""
    assert "(nothing saved)" in source  # sub2#4 never ran: early stop fired on its inputs
    assert 'label="holder outer#0[2]' in source
    assert re.search(r"n0 -> n3 \[id=e3_0\]", source)  # x's AccumulateGrad feeds SinBackward0
    assert "n5 -> h5" in source and "n1 -> s1_saved_tensors_1_" in source
    assert to_dot(events, show_saved=False).source.count("class=holder") == 0


def test_dot_ids_are_stable_across_traces_of_the_same_run() -> None:
    assert to_dot(TRACES["nested"]).source == to_dot(_synthetic.nested()).source


@pytest.mark.parametrize("name", NAMES)
def test_dot_classes_name_only_elements_of_the_graph(name: str) -> None:
    events = TRACES[name]
    ids = dot_ids(to_dot(events).source)
    for n in range(-1, len(events), max(1, len(events) // 25)):
        classes = dot_classes(state_at(events, n))
        assert set(classes) <= ids, set(classes) - ids


def test_dot_classes_follow_the_run() -> None:
    events = TRACES["single"]
    before = dot_classes(state_at(events, next(e["seq"] for e in events if e["kind"] == "node_exec") - 1))
    assert before["n3"] == ["created"] and before["h1"] == ["alive"] and before["f0"] == ["alive"]
    n = next(e["seq"] for e in events if e["kind"] == "rpack")
    during = dot_classes(state_at(events, n))
    assert during["n3"] == ["executing", "running"] and during["f0"] == ["alive", "running-recompute"]
    assert during["h0"] == ["alive", "handle-set"] and during["r0_1"] == ["active"]
    end = dot_classes(state_at(events, len(events) - 1))
    assert end["n3"] == ["executed", "released"] and end["h1"] == ["dead"] and end["f0"] == ["dead"]
    loss = next(e["tensor"] for e in events if e["kind"] == "tensor_new" and e["name"] == "loss")
    assert end["r0_1"] == ["done"] and end[f"t{loss}"] == ["alive"]


def test_the_chrome_checker_rejects_overlapping_slices() -> None:
    def x(name: str, ts: float, dur: float, seq: int) -> dict[str, Any]:
        return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": 1, "args": {"seq": seq}}

    check_chrome(
        {"traceEvents": [x("a", 0, 10, 0), x("b", 2, 3, 1), x("c", 10, 1, 2)], "displayTimeUnit": "ns"}
    )
    with pytest.raises(AssertionError, match="overlaps"):
        check_chrome({"traceEvents": [x("a", 0, 10, 0), x("b", 5, 10, 1)], "displayTimeUnit": "ns"})


def test_exports_take_a_recorder_and_plain_json_validates() -> None:
    with trace.record() as tr:
        retain_graph_double_backward()
    doc = json.loads(to_json(tr))
    jsonschema.validate(doc, trace.schema())
    assert doc["events"] == tr.events and doc["meta"]["n_events"] == len(tr.events)
    derived = json.loads(to_json(tr, annotate_events=True))["derived"]
    assert len(derived) == len(tr.events)
    check_chrome(chrome_trace(tr))
    assert "f0" in dot_ids(to_dot(tr).source)


# --- Note [Folded blocks] -----------------------------------------------------------------------


def _folds(name: str) -> dict[str, list[str]]:
    """Fold group label -> the ids of its member clusters, in the DOT of a golden trace."""
    from tests.scenarios._golden import GOLDEN_DIR

    document = json.loads((GOLDEN_DIR / f"{name}.json").read_text())["trace"]
    source = to_dot(document).source
    groups: dict[str, list[str]] = defaultdict(list)
    for block in re.finditer(r"subgraph cluster_(\w+) \{(.*?)\n\t*(?:subgraph|\})", source, re.S):
        found = re.search(r'fold=(\w+)\s+foldlabel="([^"]*)"', block.group(2))
        if found:
            groups[found.group(2)].append(block.group(1))
    return dict(groups)


def test_identical_checkpointed_blocks_fold_and_different_ones_do_not() -> None:
    times = "\N{MULTIPLICATION SIGN}"
    assert _folds("chain_of_blocks") == {
        f"checkpoint Block {times} 3": ["f0", "f1", "f2"],
        f"recomputation of Block {times} 3": ["r2_0", "r1_0", "r0_0"],  # in the order they ran
    }
    assert _folds("mlp_memory_per_block") == {
        f"checkpoint Sequential {times} 4": ["f0", "f1", "f2", "f3"],
        f"recomputation of Sequential {times} 4": ["r3_0", "r2_0", "r1_0", "r0_0"],
    }
    # Nested frames differ from their parents and from each other: nothing to fold.
    assert _folds("nested_checkpoint") == {}


def test_identical_module_instances_fold_outside_checkpoints() -> None:
    """Without checkpointing, the blocks are module instances: blocks.0 takes the input, which does
    not require grad, so its graph differs; blocks.1 to blocks.3 are the same block."""
    folds = _folds("mlp_memory_none")
    assert list(folds) == ["Sequential \N{MULTIPLICATION SIGN} 3 (blocks.1 … blocks.3)"]
    (members,) = folds.values()
    assert len(members) == 3 and all(re.fullmatch(r"m\d+", m) for m in members)


def test_a_checkpoints_inputs_node_and_dummy_fold_with_its_frame() -> None:
    """The _NoopSaveInputsBackward of each checkpoint and its dummy leaf are made just before the
    frame, outside it: they fold with the frame's group, so a folded model is one box."""
    from tests.scenarios._golden import GOLDEN_DIR

    document = json.loads((GOLDEN_DIR / "chain_of_blocks.json").read_text())["trace"]
    source = to_dot(document).source
    statements = re.finditer(r"^\t(n\d+) \[(.*?)\]$", source, re.S | re.M)  # labels span lines
    folding = sorted(m.group(1) for m in statements if "foldwith=g0" in m.group(2))
    names = {f"n{e['node']}": e["name"] for e in document["events"] if e["kind"] == "node_new"}
    assert [names[n] for n in folding].count("_NoopSaveInputsBackward") == 3
    assert len(folding) == 6, "three inputs nodes and their three dummies"
