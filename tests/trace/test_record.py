"""engine.trace.record(): every kind, the fields of docs/trace.md, the schema, ids, phases and
gids, memory, names, determinism, and that recording leaves the engine's behaviour alone."""

from __future__ import annotations

import gc
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import engine
from engine import trace
from engine.trace import emit
from engine.utils.checkpoint import checkpoint
from tests.trace import _scenarios as S
from tests.trace._check import check

# The required fields of each kind (../shared/spec/trace_events.md, table by table).
SPEC: dict[str, set[str]] = {
    "frame_new": {"frame", "label", "parent", "early_stop", "created_in"},
    "fn_start": {"frame", "mode"},
    "fn_end": {"frame", "outcome"},
    "inputs_saved": {"frame", "tensors"},
    "hooks_push": {"hooks", "frame", "gid"},
    "hooks_pop": {"hooks", "frame", "gid"},
    "pack": {"frame", "index", "holder", "tensor", "shape", "dtype", "nbytes", "node", "slot"},
    "unpack": {"frame", "index", "holder"},
    "recompute_start": {"frame", "trigger"},
    "rpack": {"frame", "index", "outcome", "tensor"},
    "early_stop": {"frame", "count", "total"},
    "recompute_end": {"frame", "reason", "rpacks", "total"},
    "recomputed_take": {"frame", "index", "holder"},
    "holder_gc": {"frame", "index", "holder"},
    "frame_gc": {"frame"},
    "checkpoint_error": {"frame", "type", "message"},
    "tensor_new": {"tensor", "shape", "dtype", "nbytes", "requires_grad", "is_leaf", "node", "base", "name"},
    "tensor_free": {"tensor"},
    "node_new": {"node", "name", "seq_nr", "next", "frame"},
    "saved": {"node", "slot", "tensor", "packed", "version"},
    "saved_release": {"node"},
    "node_free": {"node"},
    "backward_start": {"api", "roots", "inputs", "retain_graph", "create_graph"},
    "node_exec": {"node"},
    "node_exec_end": {"node"},
    "grad_accumulate": {"tensor"},
    "backward_end": set(),
    "version_bump": {"tensor", "version"},
    "error": {"type", "message"},
    "mark": {"label"},
}
COMMON = {"seq", "kind", "t_ns", "phase", "gid", "src", "mem"}


def record(
    fn: Callable[[], Any], *, expect: type[BaseException] | None = None, source: str = S.__file__
) -> trace.Trace:
    """Record ``fn()`` with the cyclic GC off (deaths by reference counting only, as in the
    differential tests), check the trace (tests/trace/_check.py) and return it."""
    gc.collect()
    gc.disable()
    try:
        if expect is None:
            with trace.record(source_files=[source]) as tr:
                fn()
        else:
            with pytest.raises(expect), trace.record(source_files=[source]) as tr:
                fn()
    finally:
        gc.enable()
    check(tr)
    return tr


def full_run() -> None:
    S.full()
    raise ValueError("the scenario's last line raises")


@pytest.fixture(scope="module")
def full() -> trace.Trace:
    return record(full_run, expect=ValueError)


def kinds(tr: trace.Trace, *names: str) -> Iterator[dict[str, Any]]:
    return (e for e in tr.events if e["kind"] in names)


# --- coverage of the spec --------------------------------------------------------------------------


def test_every_kind_appears_with_its_fields(full: trace.Trace) -> None:
    seen = Counter(e["kind"] for e in full.events)
    assert set(SPEC) <= set(seen), f"missing kinds: {set(SPEC) - set(seen)}"
    schema_kinds = set(trace.schema()["$defs"]["event"]["properties"]["kind"]["enum"])
    assert set(seen) <= schema_kinds
    for e in full.events:
        missing = (COMMON | SPEC.get(e["kind"], set())) - set(e) - {"gid"}
        assert not missing, (e["kind"], missing)
    # Outcomes a learner should see in this scenario.
    assert {e["outcome"] for e in kinds(full, "rpack")} == {"keep", "skip"}
    assert {e["reason"] for e in kinds(full, "recompute_end")} == {"early_stop"}
    assert {e["hooks"] for e in kinds(full, "hooks_push")} == {"checkpoint", "recomputation", "user"}
    assert {e["packed"] for e in kinds(full, "saved")} == {"tensor", "holder"}
    assert {e["api"] for e in kinds(full, "backward_start")} == {"backward", "grad"}
    # Everything the scenario made died inside the recording (its function returned).
    assert seen["tensor_new"] == seen["tensor_free"] and seen["node_new"] == seen["node_free"]
    assert seen["frame_new"] == seen["frame_gc"] and seen["pack"] == seen["holder_gc"]


def test_document(full: trace.Trace) -> None:
    doc = check(full, whole=True)  # the whole document against schema.json, as is
    assert doc["schema"] == "autograd-lens/trace" and doc["version"] == 1
    assert list(doc["sources"]) == [S.__file__]
    assert doc["sources"][S.__file__].startswith('"""Scenarios recorded')
    assert doc["meta"]["error"] == {"type": "ValueError", "message": "the scenario's last line raises"}
    assert full.events[-1]["kind"] == "error"


def test_src_points_at_scenario_lines(full: trace.Trace) -> None:
    lines = S.__loader__.get_source(S.__name__).splitlines()  # type: ignore[union-attr]
    for e in kinds(full, "frame_new"):
        assert "checkpoint(" in lines[e["src"]["line"] - 1]
    marks = list(kinds(full, "mark"))
    assert [m["label"] for m in marks] == ["forward", "backward"] and marks[0]["step"] == 1
    assert "trace.mark(" in lines[marks[0]["src"]["line"] - 1]
    (error,) = kinds(full, "checkpoint_error")
    assert "ctx.saved_tensors" in lines[error["src"]["line"] - 1]  # the second read, in Twice.backward
    assert error["type"] == "CheckpointError" and "already unpacked" in error["message"]


def test_names(full: trace.Trace) -> None:
    names = [e["name"] for e in kinds(full, "tensor_new")]
    for name in ("x", "w1", "w2", "ws[0]", "ws[1]", "loss", "out", "v", "a", "b", "seen"):
        assert name in names
    tr = record(lambda: S.mlp())
    named = {e["name"] for e in kinds(tr, "tensor_new")}
    assert {"inp", "hidden", "out"} <= named  # from the frame of mlp()


def test_parameter_names_at_the_end() -> None:
    with trace.record(source_files=[__file__]) as tr:
        model = engine.nn.Linear(2, 3)
        model(engine.ones(1, 2)).sum().backward()
    names = {e["name"] for e in kinds(tr, "tensor_new")}
    assert {"model.weight", "model.bias"} <= names
    del model


# --- ids, phases, gids -----------------------------------------------------------------------------


def test_phase_and_gid_inside_recomputation(full: trace.Trace) -> None:
    depth = 0
    backward_gids: list[int] = []
    for e in full.events:
        if e["kind"] == "backward_start":
            backward_gids.append(e["gid"])
        if e["kind"] == "recompute_start":
            depth += 1
        if depth:
            assert e["phase"] == "recompute", e
        if e["kind"] == "recompute_end":
            depth -= 1
        if e["kind"] in ("unpack", "recompute_start", "rpack", "recomputed_take"):
            # The checkpoint's gid is the running backward's, or a temporary one outside backward.
            assert e["hook_gid"] == e["gid"] or (e["gid"] is None and e["hook_gid"].startswith("tmp"))
    assert backward_gids == sorted(backward_gids) == list(range(len(backward_gids)))
    recomputed_frames = [e for e in kinds(full, "frame_new") if e["created_in"] != "forward"]
    assert recomputed_frames and all(e["phase"] == "recompute" for e in recomputed_frames)
    for e in recomputed_frames:
        assert e["parent"] == e["created_in"]["recompute"]
    # Nodes made during a recomputation say so.
    assert any(e["recompute"] for e in kinds(full, "node_new"))


def test_retain_graph_backwards_have_their_own_gids(full: trace.Trace) -> None:
    first_two = [e for e in full.events if e["kind"] == "recompute_start" and e["gid"] in (0, 1)]
    # The outer frame and both inner frames are recomputed once per backward (Rule 4).
    assert Counter(e["gid"] for e in first_two) == {0: 3, 1: 3}
    triggers = [e["trigger"] for e in first_two]
    assert all(t is not None and t["frame"] is not None for t in triggers)


def test_nested_record_is_an_error() -> None:
    with trace.record() as tr:
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with trace.record():
                pass
        trace.mark("still recording")
    assert [e["kind"] for e in tr.events] == ["mark"]
    assert not emit.enabled
    trace.mark("ignored: not recording")


def test_other_threads_are_not_recorded() -> None:
    def work() -> None:
        engine.ones(3, requires_grad=True).sin().sum().backward()

    with trace.record() as tr:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert tr.events == []


def test_event_limit() -> None:
    with pytest.raises(trace.TraceLimitExceeded), trace.record(max_events=10) as tr:
        S.chain()
    assert len(tr.events) == 10 and tr.meta["truncated"]
    assert not emit.enabled


# --- memory ----------------------------------------------------------------------------------------


def test_memory_plain_graph() -> None:
    tr = record(S.plain)
    saved = [e["mem"]["saved"] for e in tr.events]
    assert max(saved) == 5 * 4 * 2  # sin saves x, exp its result (float32[5] each)
    (end,) = kinds(tr, "backward_end")
    assert end["mem"]["saved"] == 0  # released by backward (no retain_graph)
    pairs = list(zip(tr.events, tr.events[1:], strict=False))
    releases = [(a, b) for a, b in pairs if b["kind"] == "saved_release"]
    assert len(releases) == 2 and all(b["mem"]["saved"] < a["mem"]["saved"] for a, b in releases)
    # Live bytes drop when the last tensor of a storage dies (y, z at `del`, the grads...).
    assert sum(b["mem"]["live"] < a["mem"]["live"] for a, b in pairs if b["kind"] == "tensor_free") >= 3
    assert tr.events[-1]["mem"] == {"live": 0, "saved": 0, "recomputed": 0}


def test_memory_recomputed_rises_and_falls_at_take() -> None:
    tr = record(lambda: S.chain(3))
    events = tr.events
    start = 0
    for i, e in enumerate(events):
        if e["kind"] == "recompute_start":
            start = e["mem"]["recomputed"]
        if e["kind"] == "recompute_end":
            assert e["mem"]["recomputed"] > start  # the recomputation kept tensors for backward
        if e["kind"] == "recomputed_take":
            assert e["mem"]["recomputed"] <= events[i - 1]["mem"]["recomputed"]
        if e["kind"] == "rpack" and e["outcome"] == "keep":
            assert e["mem"]["recomputed"] >= events[i - 1]["mem"]["recomputed"]
    assert events[-1]["mem"]["recomputed"] == 0
    # With checkpoints, no activation is held by the graph: only the blocks' inputs.
    (start_event,) = kinds(tr, "backward_start")
    assert start_event["mem"]["saved"] == 3 * 4 * 4


def test_memory_after_retained_backward() -> None:
    tr = record(lambda: S.chain(2, retain=True))
    (end,) = kinds(tr, "backward_end")
    assert end["mem"]["saved"] > 0 and end["mem"]["recomputed"] == 0  # Rule 4: dropped on unpack


# --- determinism and non-interference ----------------------------------------------------------------


def _without_time(tr: trace.Trace) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "t_ns"} for e in tr.events]


def test_same_scenario_same_events() -> None:
    a = record(full_run, expect=ValueError)
    b = record(full_run, expect=ValueError)
    assert _without_time(a) == _without_time(b)
    c = record(lambda: S.mlp(seed=3))
    d = record(lambda: S.mlp(seed=3))
    assert _without_time(c) == _without_time(d)


def test_recording_keeps_nothing_alive() -> None:
    gc.disable()
    try:
        with trace.record() as tr:
            x = engine.ones(3, requires_grad=True)
            y = checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False)
            node = weakref.ref(y.grad_fn)
            ref = weakref.ref(y)
            n = len(tr.events)
            del y
            assert ref() is None and node() is None  # died at once, as without recording
            frees = Counter(e["kind"] for e in tr.events[n:])
            assert frees == {"tensor_free": 3, "node_free": 5, "holder_gc": 2, "frame_gc": 1}
    finally:
        gc.enable()
    # After recording, the recorder holds no weak references that could fire.
    del x
    assert tr._recorder is None


def test_recording_off_after_an_error() -> None:
    with pytest.raises(ZeroDivisionError), trace.record() as tr:
        engine.ones(2) / 1
        1 / 0  # noqa: B018
    assert not emit.enabled
    assert tr.events[-1]["kind"] == "error" and tr.events[-1]["src"]["line"] > 0


def test_graph_exec_group_and_temporary_gids() -> None:
    from engine.utils.checkpoint import GraphExecGroup

    def run() -> None:
        x = engine.ones(2, requires_grad=True)

        def fn(t: Any) -> Any:
            y = t.sin().cos()
            return y, y.sin().cos()

        y, z = checkpoint(fn, x, use_reentrant=False)
        with GraphExecGroup():
            (gy,) = engine.autograd.grad(z.sum(), y, retain_graph=True)
            engine.autograd.grad(y, x, grad_outputs=gy, retain_graph=True)
        y.grad_fn._saved_self  # an unpack outside backward
        y.grad_fn._saved_self

    tr = record(run)
    unpacks = [(e["gid"], e["hook_gid"]) for e in kinds(tr, "unpack")]
    assert {h for _, h in unpacks} == {"group0", "tmp0", "tmp1"}
    assert {g for g, h in unpacks if h == "group0"} == {0, 1}  # two graph tasks, one group
    starts = [e["hook_gid"] for e in kinds(tr, "recompute_start")]
    assert starts == ["group0", "tmp0", "tmp1"]  # one recomputation for the group; one per read


def test_views_inplace_and_custom_functions() -> None:
    class Double(engine.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: Any) -> Any:
            t.mul_(2.0)
            ctx.mark_dirty(t)
            return t

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2.0

    def run() -> None:
        x = engine.ones(4, requires_grad=True)
        y = x * 1.0
        v = y[1:3]
        v.mul_(3.0)  # an in-place op on a view: y's grad_fn becomes CopySlices
        z = Double.apply(y.clone())
        (y.sum() + z.sum()).backward()

    tr = record(run, source=__file__)
    names = {e["name"] for e in kinds(tr, "node_new")}
    assert {"engine::autograd::CopySlices", "DoubleBackward", "MulBackward0"} <= names
    by_name = {e["tensor"]: e for e in kinds(tr, "tensor_new") if e["name"]}
    view = next(e for e in by_name.values() if e["name"] == "v")
    base = next(e for e in by_name.values() if e["name"] == "y")
    assert view["base"] == base["tensor"] and view["storage"] == base["storage"]
    bumps = list(kinds(tr, "version_bump"))
    assert [b["version"] for b in bumps if b["tensor"] == view["tensor"]] == [1]
    # Double.forward's mul_ (run in no_grad: still a bump) and then mark_dirty's own bump.
    assert [b["version"] for b in bumps][1:3] == [1, 2]


def test_objects_from_before_the_recording() -> None:
    x = engine.ones(3, requires_grad=True)
    y = x.sin()
    with trace.record() as tr:
        y.sum().backward()
    first = tr.events[0]
    assert first["kind"] in ("tensor_new", "node_new") and first["pre_existing"]
    pre = [e for e in tr.events if e.get("pre_existing")]
    assert {e["kind"] for e in pre} == {"tensor_new", "node_new"}
    check(tr)


def test_deaths_on_other_threads_are_reported_on_the_recording_thread() -> None:
    with trace.record() as tr:
        box = [engine.ones(2)]
        trace.mark("made")
        t = threading.Thread(target=box.clear)
        t.start()
        t.join()
        trace.mark("after")
    assert [e["kind"] for e in tr.events] == ["tensor_new", "mark", "tensor_free", "mark"]


def test_event_limit_cannot_be_swallowed() -> None:
    caught = 0
    with trace.record(max_events=5) as tr:
        for _ in range(3):
            try:
                S.chain()
            except trace.TraceLimitExceeded:
                caught += 1
    assert caught == 3 and len(tr.events) == 5 and tr.meta["truncated"]
