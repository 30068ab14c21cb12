"""The story layer (engine/trace/story.py, causes.py, predict.py, changed.py, glossary.py), held to
its Notes on every golden trace: the bundled scenarios as the engine records them."""

from __future__ import annotations

import itertools
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from engine.trace.captions import captions
from engine.trace.causes import CauseIndexError, cause_index, check_causes
from engine.trace.changed import MAX_LINES, describe_changes
from engine.trace.glossary import glossary
from engine.trace.predict import QuestionBuilder
from engine.trace.state import KINDS, initial_state, step
from engine.trace.story import (
    GROUPABLE_KINDS,
    STORY_KINDS,
    chapter_at,
    is_story_event,
    story_document,
    story_text,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))
# Kinds that are always in the story, whatever the run around them (Note [Story events]).
ALWAYS = {"pack", "unpack", "recompute_start", "rpack", "early_stop", "recompute_end", "recomputed_take",
          "holder_gc", "frame_gc", "backward_start", "backward_end", "frame_new", "checkpoint_error"}  # fmt: skip


@cache
def events_of(name: str) -> list[dict[str, Any]]:
    return list(json.loads((GOLDEN / f"{name}.json").read_text())["trace"]["events"])


@cache
def doc_of(name: str) -> Any:
    return story_document(events_of(name))


def test_there_are_golden_traces() -> None:
    assert len(NAMES) >= 20


def test_story_kinds_are_kinds_the_reducer_knows() -> None:
    assert STORY_KINDS <= KINDS
    assert GROUPABLE_KINDS <= STORY_KINDS


def test_a_recomputation_run_is_said_by_its_recompute_events_not_by_fn_start() -> None:
    assert is_story_event({"kind": "fn_start", "mode": "forward"})
    assert not is_story_event({"kind": "fn_start", "mode": "recompute"})
    assert not is_story_event({"kind": "fn_end", "outcome": "returned"}, run_mode="recompute")
    assert is_story_event({"kind": "fn_end", "outcome": "returned"}, run_mode="forward")
    assert is_story_event({"kind": "fn_end", "outcome": "raised"}, run_mode="recompute")
    assert not is_story_event({"kind": "fn_end", "outcome": "early_stop"}, run_mode="recompute")
    assert not is_story_event({"kind": "tensor_new"})
    assert is_story_event({"kind": "node_exec"}, node_name="CheckpointFunctionBackward")
    assert not is_story_event({"kind": "node_exec"}, node_name="MulBackward0")


@pytest.mark.parametrize("name", NAMES)
def test_steps_cover_every_story_event_once_in_order(name: str) -> None:
    events, steps = events_of(name), doc_of(name)["steps"]
    seqs = [s for st in steps for s in st["seqs"]]
    assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    by_seq = {e["seq"]: e for e in events}
    in_story = set(seqs)
    for e in events:
        if e["kind"] in ALWAYS:
            assert e["seq"] in in_story, f"{e['kind']} #{e['seq']} is missing from the story"
        if e["kind"] not in STORY_KINDS:
            assert e["seq"] not in in_story
    for i, st in enumerate(steps):
        assert st["index"] == i
        assert st["step"] == st["last"] + 1 and st["first"] == st["seqs"][0] and st["last"] == st["seqs"][-1]
        assert st["caption"] and st["title"]
        kinds = {by_seq[s]["kind"] for s in st["seqs"]}
        if len(st["seqs"]) > 1:  # a group: one groupable kind in one frame, or an unpack and its take
            assert kinds <= GROUPABLE_KINDS or kinds == {"unpack", "recomputed_take"}, kinds
            assert len({by_seq[s].get("frame") for s in st["seqs"]}) == 1


@pytest.mark.parametrize("name", NAMES)
def test_chapters_nest_and_hold_their_steps(name: str) -> None:
    doc = doc_of(name)
    chapters, n = doc["chapters"], len(events_of(name))
    assert chapters, "every trace has at least one chapter"
    tops = [c for c in chapters if c["parent"] is None]
    # The top-level chapters tile the trace from its first event to its last, in order.
    assert tops[0]["start"] == 0 and tops[-1]["end"] == n - 1
    for a, b in itertools.pairwise(tops):
        assert b["start"] == a["end"] + 1
    for c in chapters:
        assert c["start"] <= c["end"]
        if c["parent"] is not None:
            p = chapters[c["parent"]]
            assert p["start"] <= c["start"] and c["end"] <= p["end"], (c, p)
            assert c["depth"] == p["depth"] + 1
    for st in doc["steps"]:
        c = chapters[st["chapter"]]
        assert c["start"] <= st["last"] <= c["end"]


def test_nested_checkpoint_reads_in_fewer_than_80_story_steps() -> None:
    """The issue's bar: a newcomer reaches the end of the backward in fewer than 80 steps."""
    doc = doc_of("nested_checkpoint")
    end = next(s for s in doc["steps"] if s["kind"] == "backward_end")
    assert end["index"] + 1 < 80
    # from hundreds of raw events: each story step stands for several
    assert end["last"] + 1 > 8 * (end["index"] + 1)
    titles = [c["title"] for c in doc["chapters"]]
    assert titles[:2] == ["forward", "checkpoint big#0 forward"]
    assert "backward g0" in titles
    assert "recomputation of big#0 for holder 2 (g0)" in titles
    assert "checkpoint inner#3 forward (in the recomputation)" in titles
    assert titles.count("early stop after 6/6") == 2
    recomputation = next(c for c in doc["chapters"] if c["title"].startswith("recomputation of big#0"))
    nested = [c for c in doc["chapters"] if c["parent"] == recomputation["id"]]
    assert [c["title"] for c in nested][:1] == ["checkpoint inner#3 forward (in the recomputation)"]
    packs = [s for s in doc["steps"] if s["title"] == "6 holders packed into inner#1"]
    assert len(packs) == 1 and len(packs[0]["seqs"]) == 6


@pytest.mark.parametrize("name", NAMES)
def test_cause_links_follow_the_rules_on_every_golden_trace(name: str) -> None:
    events = events_of(name)
    check_causes(events, cause_index(events))


def test_check_causes_catches_a_broken_index() -> None:
    events = events_of("nested_checkpoint")
    links = cause_index(events)
    start = next(e["seq"] for e in events if e["kind"] == "recompute_start")
    rpack = next(e["seq"] for e in events if e["kind"] == "rpack")
    broken = {**links, rpack: {**links[rpack], "cause": {"seq": start - 1, "why": "wrong"}}}
    with pytest.raises(CauseIndexError, match=r"does not link back|rpack must belong"):
        check_causes(events, broken)
    # The unpack that triggered it no longer lists it: no unpack claims the recomputation.
    unpack = links[start]["cause"]["seq"]
    effects = [x for x in links[unpack]["effects"] if x["seq"] != start]
    orphan = {**links, unpack: {**links[unpack], "effects": effects}}
    with pytest.raises(CauseIndexError, match="exactly one triggering unpack, not 0"):
        check_causes(events, orphan)


def _follow(links: dict[str, Any], seq: int) -> list[int]:
    chain = [seq]
    while (cause := links.get(str(chain[-1]), {}).get("cause")) and cause["seq"] >= 0:
        chain.append(cause["seq"])
    return chain


def test_why_from_a_rule3_holder_gc_reaches_the_unpack_that_started_it() -> None:
    events, doc = events_of("nested_checkpoint"), doc_of("nested_checkpoint")
    by_seq = {e["seq"]: e for e in events}
    inner3 = next(
        e["frame"] for e in events if e["kind"] == "frame_new" and isinstance(e["created_in"], dict)
    )
    gc = next(e for e in events if e["kind"] == "holder_gc" and e["frame"] == inner3)
    kinds = [by_seq[s]["kind"] for s in _follow(doc["links"], gc["seq"])]
    assert kinds == ["holder_gc", "recompute_end", "early_stop", "rpack", "recompute_start", "unpack", "unpack",
                     "node_exec"]  # fmt: skip
    # ... and the unpack it reaches is the one the recomputation's trigger names.
    start = next(s for s in _follow(doc["links"], gc["seq"]) if by_seq[s]["kind"] == "recompute_start")
    unpack = by_seq[doc["links"][str(start)]["cause"]["seq"]]
    assert (unpack["frame"], unpack["index"]) == (
        by_seq[start]["trigger"]["frame"],
        by_seq[start]["trigger"]["index"],
    )


def test_a_holder_released_by_its_node_says_so() -> None:
    events, doc = events_of("nested_checkpoint"), doc_of("nested_checkpoint")
    by_seq = {e["seq"]: e for e in events}
    gc = next(e for e in events if e["kind"] == "holder_gc" and e["frame"] == 2)
    cause = by_seq[doc["links"][str(gc["seq"])]["cause"]["seq"]]
    assert cause["kind"] == "saved_release"
    assert "released its saved tensors" in doc["links"][str(gc["seq"])]["cause"]["why"]


@pytest.mark.parametrize("name", NAMES)
def test_questions_are_answered_by_what_the_trace_did(name: str) -> None:
    events, doc = events_of(name), doc_of(name)
    by_seq = {e["seq"]: e for e in events}
    steps = doc["steps"]
    for q in doc["questions"]:
        assert q["answer"] in {o["id"] for o in q["options"]}, q
        assert len({o["id"] for o in q["options"]}) == len(q["options"]) >= 2
        assert steps[q["step"]]["first"] == q["seq"] and q["explain"] == steps[q["step"]]["caption"]
        e = by_seq[q["seq"]]
        if q["kind"] == "unpack_outcome":
            # What followed the unpack in its frame: a recomputation of it, or its take, or an error.
            after = [x for x in events[e["seq"] + 1 :] if x.get("frame") == e["frame"]]
            first = next(
                x for x in after if x["kind"] in ("recompute_start", "recomputed_take", "checkpoint_error")
            )
            expected = {
                "recompute_start": "recompute",
                "recomputed_take": "cache",
                "checkpoint_error": "error",
            }
            assert q["answer"] == expected[first["kind"]], q
        elif q["kind"] == "which_frame":
            assert q["answer"] == str(e["frame"])
        elif q["kind"] == "next_gc":
            assert q["answer"] == f"{e['frame']}:{e['index']}"
        elif q["kind"] == "early_stop":
            stop = next((x for x in events[e["seq"] :] if x["kind"] in ("early_stop", "recompute_end")
                         and x["frame"] == e["frame"]), None)  # fmt: skip
            assert stop is not None
            assert q["answer"] == (f"after:{stop['count']}" if stop["kind"] == "early_stop" else "no")


def test_questions_found_in_the_story_pass_equal_those_of_a_pass_of_their_own() -> None:
    events, doc = events_of("nested_checkpoint"), doc_of("nested_checkpoint")
    links = {int(k): v for k, v in doc["links"].items()}
    assert QuestionBuilder.build(events, doc["steps"], links) == doc["questions"]


def test_nested_checkpoint_asks_each_kind_of_question() -> None:
    kinds = {q["kind"] for q in doc_of("nested_checkpoint")["questions"]}
    assert kinds == {"unpack_outcome", "which_frame", "early_stop", "next_gc"}


def test_what_changed_names_holders_and_recomputed_entries() -> None:
    lines = [line for s in doc_of("nested_checkpoint")["steps"] for line in s["changed"]]
    assert any(re.fullmatch(r"holder inner#2\[1\]: recomputed\[g0\] ← tensor \d+", x) for x in lines), lines
    assert "big#0: recomp_counter[g0] 3 → 4" in lines
    assert "inner#2: recomp_counter[g0] = 0" in lines, "a new counter is not a change from 0 to 0"
    assert not any(re.search(r"recomp_counter\[g0\] (\d+) → \1$", x) for x in lines)
    assert "big#0: early stop after 4/4" in lines
    assert any(x.startswith("holder inner#3[0] garbage-collected") for x in lines)


def test_what_changed_is_short_and_counts_the_rest() -> None:
    state = initial_state()
    all_changes = []
    for e in events_of("nested_checkpoint")[:120]:
        all_changes += step(state, e)
    lines = describe_changes(state, all_changes)
    assert len(lines) <= MAX_LINES + 2
    assert lines[-1].startswith("… and ") and lines[-1].endswith("more changes")
    assert any(x.startswith("memory: live") for x in lines)


def test_story_text_lists_chapters_and_numbered_steps() -> None:
    text = story_text(events_of("nested_checkpoint"))
    assert text.startswith("== forward ==\n")
    assert "  == recomputation of big#0 for holder 2 (g0) ==" in text
    numbered = re.findall(r"^\s+(\d+)\. \[#\d+", text, re.M)
    assert [int(n) for n in numbered] == list(range(1, len(doc_of("nested_checkpoint")["steps"]) + 1))


def test_glossary_patterns_are_valid_and_cover_the_terms_captions_use() -> None:
    terms = glossary()
    assert len({t["id"] for t in terms}) == len(terms)
    for t in terms:
        assert t["title"] and t["source"] and 40 < len(t["text"]) < 600, t["id"]
        for p in t["code"] + t["words"]:
            re.compile(p)
            assert "(?<" not in p and "(?P" not in p, "JavaScript-compatible patterns only"

    def card(code: str) -> str | None:
        return next((t["id"] for t in terms if any(re.search(p, code) for p in t["code"])), None)

    for code, term in [("recomputed[g0]", "recomputed"), ("is_recomputed[g1]", "is_recomputed"),
                       ("recomp_counter[g0]", "recomp_counter"), ("_NoopSaveInputsBackward", "noop_save_inputs"),
                       ("big#0", "frame"), ("inner#2[5]", "holder"), ("_StopRecomputationError", "early_stop"),
                       ("engine::autograd::AccumulateGrad", "accumulate_grad"), ("CheckpointError", "checkpoint_error")]:  # fmt: skip
        assert card(code) == term, code
    words = " ".join(captions(events_of("nested_checkpoint")))
    for n in range(1, 6):
        assert f"Rule {n}" in words or n == 1
        assert any(re.search(p, f"(Rule {n})") for t in terms for p in t["words"])


@pytest.mark.parametrize("name", NAMES)
def test_each_steps_chapter_is_the_innermost_one_holding_it(name: str) -> None:
    """story_document assigns chapters in one walk; chapter_at is the definition, by search."""
    doc = doc_of(name)
    assert [s["chapter"] for s in doc["steps"]] == [
        chapter_at(doc["chapters"], s["last"]) for s in doc["steps"]
    ]
