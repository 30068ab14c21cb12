"""Captions: one plain sentence per event, for every kind of the trace contract."""

from __future__ import annotations

import re
from typing import Any

import pytest

from engine.trace.captions import caption, captions
from engine.trace.state import KINDS, initial_state, state_at, step
from tests.trace import _synthetic
from tests.trace._real import real_trace, with_real

# Every kind of ../shared/spec/trace_events.md.
SPEC_KINDS = {
    "frame_new", "fn_start", "fn_end", "inputs_saved", "hooks_push", "hooks_pop", "pack", "unpack",
    "recompute_start", "rpack", "early_stop", "recompute_end", "recomputed_take", "holder_gc", "frame_gc",
    "checkpoint_error", "tensor_new", "tensor_free", "node_new", "saved", "saved_release", "node_free",
    "backward_start", "node_exec", "node_exec_end", "grad_accumulate", "backward_end", "version_bump",
    "error", "mark",
}  # fmt: skip

TRACES = {name: build() for name, build in _synthetic.SCENARIOS.items()}


def every_event() -> list[tuple[str, dict[str, Any], str]]:
    out = []
    for name, events in with_real(TRACES).items():
        for event, text in zip(events, captions(events), strict=True):
            out.append((name, event, text))
    return out


def test_the_reducer_and_the_captions_know_every_kind() -> None:
    assert SPEC_KINDS <= KINDS
    seen = {event["kind"] for _, event, _ in every_event()}
    assert seen >= SPEC_KINDS, f"kinds without a test event: {SPEC_KINDS - seen}"


def test_every_caption_is_one_plain_sentence() -> None:
    for name, event, text in every_event():
        where = f"{name} #{event['seq']} {event['kind']}: {text!r}"
        assert (text and text[0].isupper()) or text.startswith("`"), where
        assert not text.startswith("Event `"), where  # the fallback for unknown kinds
        assert "None" not in text and "{" not in text and "}" not in text, where
        assert text.count("`") % 2 == 0, where
        # One sentence: no full stop followed by a new sentence inside it.
        assert not re.search(r"\.\s+[A-Z]", text.replace("e.g. ", "")), where


def test_unknown_kinds_get_a_generic_caption() -> None:
    assert caption(initial_state(), {"seq": 0, "kind": "new_kind"}) == "Event `new_kind`."


def test_captions_use_the_state_before_the_event() -> None:
    events = TRACES["nested"]
    texts = captions(events)
    for n in (0, 20, 51, 78, len(events) - 1):
        assert caption(state_at(events, n - 1), events[n]) == texts[n]


def test_unpack_that_needs_a_recomputation() -> None:
    events = TRACES["nested"]
    n = next(e["seq"] for e in events if e["kind"] == "unpack" and e["frame"] == 0)
    assert caption(state_at(events, n - 1), events[n]) == (
        "Unpacking holder 2 of frame `outer#0` (`saved_tensors[0]` of `_NoopSaveInputsBackward`) needs a "
        "recomputation: `is_recomputed[g1]` is False, so `outer` runs again under the recomputation hook."
    )
    n = next(e["seq"] for e in events if e["kind"] == "unpack" and e["frame"] == 0 and e["index"] == 3)
    assert caption(state_at(events, n - 1), events[n]) == (
        "Unpacking holder 3 of frame `outer#0` (`saved_tensors[1]` of `_NoopSaveInputsBackward`): `outer#0` is "
        "already recomputed for g1, so the tensor is taken from `recomputed[g1]`."
    )


def test_early_stop() -> None:
    events = TRACES["nested"]
    texts = {(e["kind"], e.get("frame")): t for e, t in zip(events, captions(events), strict=True)}
    assert texts["early_stop", 0] == (
        "Early stop: all 4 tensors saved in the forward of `outer#0` are back, so the recomputation stops "
        "inside the pack of the last one."
    )
    assert texts["recompute_end", 0] == (
        "The recomputation of `outer#0` for g1 stops early (4 of 4 tensors re-saved); `is_recomputed[g1]` is now True."
    )
    assert texts["frame_new", 3] == (
        "Re-running `outer#0` meets `checkpoint(sub1)` again, which creates a new frame `sub1#3` (Rule 3: a fresh "
        "forward whose holders are garbage once the recomputation ends)."
    )


def test_a_node_saving_a_holder() -> None:
    state = initial_state()
    events: list[dict[str, Any]] = [
        {"kind": "frame_new", "frame": 0, "label": "stem", "parent": None, "early_stop": True, "created_in": "forward"},
        {"kind": "frame_new", "frame": 1, "label": "block", "parent": None, "early_stop": True, "created_in": "forward"},
        {"kind": "node_new", "node": 0, "name": "MulBackward0", "seq_nr": 0, "next": [], "frame": 1},
        {"kind": "pack", "frame": 1, "index": 0, "holder": 5, "tensor": 3, "shape": [2], "dtype": "float64",
         "nbytes": 16, "node": 0, "slot": "other"},
    ]  # fmt: skip
    for seq, event in enumerate(events):
        step(state, event | {"seq": seq})
    saved = {
        "seq": 4,
        "kind": "saved",
        "node": 0,
        "slot": "other",
        "tensor": 3,
        "packed": "holder",
        "version": 0,
    }
    assert (
        caption(state, saved) == "`MulBackward0` saves `other` (a holder of frame `block#1`, not the tensor)."
    )
    assert caption(state, events[3]) == (
        "`MulBackward0` saves `other` ([2], 16 bytes) through the checkpoint hook of `block#1`: holder 0 is kept, "
        "not the tensor."
    )


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("rule6_skip", "rpack", "but holder 0 is dead (its node already ran without retain_graph), so it is skipped"),
        ("rule6_skip", "unpack", "a second time in g2: its handle was cleared by the first unpack (Rule 4)"),
        ("rule6_skip", "backward_start", "`autograd.grad` from `z` starts (graph task g1) with retain_graph=False, "
         "inside `fn#0` (Rule 6)."),
        ("rule6_skip", "recompute_end", "3 tensors re-saved, 1 more than the forward's 2"),
        ("nested", "recompute_start", "Recomputing `sub2#2` for g1; it stops as soon as the 1 saved tensor is back"),
        ("nested", "holder_gc", "Holder 0 of frame `sub2#2` is garbage-collected: `ExpBackward0` released its saved"),
        ("nested", "hooks_pop", "The checkpoint hooks of `sub1#1` leave the stack: the checkpoint hooks of `outer#0` "
         "apply again."),
        ("single", "grad_accumulate", "The gradient is accumulated into `x.grad`."),
        ("single", "tensor_new", "New leaf tensor `x` [2, 3] float64 (48 bytes) that requires grad"),
    ],
)  # fmt: skip
def test_selected_captions(name: str, kind: str, expected: str) -> None:
    events = TRACES[name]
    assert any(e["kind"] == kind and expected in t for e, t in zip(events, captions(events), strict=True))


def test_captions_of_a_real_nested_run() -> None:
    events = real_trace("nested_early_stop")
    texts = captions(events)
    unpacks = [t for e, t in zip(events, texts, strict=True) if e["kind"] == "unpack" and e["frame"] == 0]
    assert unpacks[0] == (
        "Unpacking holder 2 of frame `outer#0` (`saved_tensors[0]` of `_NoopSaveInputsBackward`) needs a "
        "recomputation: `is_recomputed[g0]` is False, so `outer` runs again under the recomputation hook."
    )
    stops = [t for e, t in zip(events, texts, strict=True) if e["kind"] == "early_stop"]
    assert stops[0] == (
        "Early stop: all 4 tensors saved in the forward of `outer#0` are back, so the recomputation stops "
        "inside the pack of the last one."
    )
    assert any(t == "`MmBackward0` saves `mat2` (a holder of frame `sub1#1`, not the tensor)." for t in texts)


def test_unpack_outside_backward_uses_a_temporary_gid() -> None:
    events = TRACES["single"]
    n = next(e["seq"] for e in events if e["kind"] == "backward_start")
    state = state_at(events, n - 1)
    unpack = {
        "seq": n,
        "kind": "unpack",
        "frame": 0,
        "index": 1,
        "holder": 1,
        "gid": None,
        "hook_gid": "tmp0",
    }
    assert caption(state, unpack) == (
        "Unpacking holder 1 of frame `f#0` (`result` of `ExpBackward0`) outside any backward: the hook uses a "
        "fresh id (tmp0), so `f` runs again under the recomputation hook."
    )
    state = step_all(state, [unpack | {"kind": "recompute_start", "trigger": {"frame": 0, "index": 1}}])
    assert state["recomputing"] == [{"frame": 0, "gid": "tmp0", "trigger": {"frame": 0, "index": 1}}]
    assert state["frames"]["0"]["recomp_counter"] == {"tmp0": 0}


def step_all(state: Any, events: list[dict[str, Any]]) -> Any:
    for event in events:
        step(state, event)
    return state
