"""Predict mode: questions generated from a trace, asked before a decision of the run is shown.

Note [Predict questions]
~~~~~~~~~~~~~~~~~~~~~~~~
A question belongs to a story step (``story.py``) and is asked before that step is shown; its
answer is what the trace did, and the step's caption explains it. Questions are generated from the
events and the reducer's state, never written per scenario, so they work on any run, a torch
trace included. Four kinds:

- ``unpack_outcome`` (at an unpack step): recomputation, cache hit or error? The answer is what
  the unpack caused (Note [Cause links]): a ``recompute_start``, a ``recomputed_take`` from
  ``recomputed[gid]``, or a ``checkpoint_error``.
- ``which_frame`` (at a ``recompute_start`` step, when at least two frames hold holders): which
  frame is recomputed?
- ``early_stop`` (at the step of a recomputation's first ``rpack``): will early stop fire, and
  after how many re-saves? The answer is the recomputation's ``early_stop`` (``count`` of
  ``total``), or none.
- ``next_gc`` (at a ``holder_gc`` step, when at least two holders are alive): which holder is
  freed next?

Options are the answer and up to three others taken from the state in a fixed order (no
randomness: the same trace asks the same questions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from engine.trace.causes import Links, holder_name, node_label
from engine.trace.state import Event, State, gid_key, gid_label, initial_state, step

MAX_OPTIONS = 4


class Option(TypedDict):
    id: str
    label: str


class Question(TypedDict):
    id: int
    step: int  # the story step it is asked before
    seq: int  # the first event of that step
    kind: str
    prompt: str
    options: list[Option]
    answer: str  # the id of the right option
    explain: str  # the step's caption


@dataclass
class _Draft:
    """A question seen at its step, waiting for what the rest of the trace says: an unpack's
    outcome and an early stop come later than the step they are asked at."""

    question: dict[str, Any]
    event: Event
    total: int = 0  # for ``early_stop``: the holders of the frame being recomputed
    start: int = -1  # for ``early_stop``: the recomputation's ``recompute_start``


@dataclass
class QuestionBuilder:
    """Finds the questions during the story's pass over the trace (``visit`` with the state
    before the first event of each story step), then answers them once the whole trace is known
    (``finish``)."""

    drafts: list[_Draft] = field(default_factory=list)
    asked_for: set[int] = field(default_factory=set)  # recompute_starts with an early-stop question

    def visit(self, state: State, e: Event, index: int, links: dict[int, Links]) -> None:
        draft = _draft(state, e, index, links, self.asked_for)
        if draft is not None:
            self.drafts.append(draft)

    def finish(
        self, events: Sequence[Event], steps: Sequence[Any], links: dict[int, Links]
    ) -> list[Question]:
        kinds = {e["seq"]: e["kind"] for e in events}
        outcomes = _recomputation_outcomes(events, links)
        out: list[Question] = []
        for d in self.drafts:
            q = _resolve(d, links, kinds, outcomes)
            if q is not None:
                q.update(id=len(out), explain=steps[q["step"]]["caption"])
                out.append(cast(Question, q))
        return out

    @staticmethod
    def build(events: Sequence[Event], steps: Sequence[Any], links: dict[int, Links]) -> list[Question]:
        """The questions of a trace, given its story steps and cause links (its own pass)."""
        builder = QuestionBuilder()
        first_of = {s["first"]: s["index"] for s in steps}
        state = initial_state()
        for e in events:
            if (index := first_of.get(e["seq"])) is not None:
                builder.visit(state, e, index, links)
            step(state, e)
        return builder.finish(events, steps, links)


def _effects(links: dict[int, Links], seq: int) -> list[int]:
    return [x["seq"] for x in links.get(seq, {}).get("effects", [])]


def _recomputation_outcomes(events: Sequence[Event], links: dict[int, Links]) -> dict[int, Event | None]:
    """recompute_start seq -> its early_stop event, or None if it ran without one."""
    by_seq = {e["seq"]: e for e in events}
    out: dict[int, Event | None] = {}
    for e in events:
        if e["kind"] == "recompute_start":
            out[e["seq"]] = None
        elif e["kind"] == "early_stop":
            rpack = links.get(e["seq"], {}).get("cause", {}).get("seq", -1)
            start = links.get(rpack, {}).get("cause", {}).get("seq", -1)
            if by_seq.get(start, {}).get("kind") == "recompute_start":
                out[start] = e
    return out


def _unpack_answer(links: dict[int, Links], kinds: dict[int, str], seq: int) -> str | None:
    effects = [kinds.get(x) for x in _effects(links, seq)]
    if "recompute_start" in effects:
        return "recompute"
    if "checkpoint_error" in effects:
        return "error"
    if "recomputed_take" in effects:
        return "cache"
    return None


def _draft(state: State, e: Event, index: int, links: dict[int, Links], asked_for: set[int]) -> _Draft | None:
    """The question asked before the story step that ``e`` starts, from the state before it."""
    kind, gid = e["kind"], gid_label(gid_key(e))
    base = {"id": 0, "step": index, "seq": e["seq"], "explain": ""}
    if kind == "unpack":
        holder = holder_name(state, e.get("frame"), e.get("index"))
        what = (
            f" (`{e.get('slot')}` of `{node_label(state, e.get('node'))}`)"
            if e.get("node") is not None
            else ""
        )
        question = {
            **base,
            "kind": "unpack_outcome",
            "prompt": f"The backward {gid} needs the tensor behind holder {holder}{what}. What happens now?",
            "options": [
                {"id": "recompute", "label": "A recomputation: the checkpointed function runs again"},
                {"id": "cache", "label": f"A cache hit: the tensor is already in `recomputed[{gid}]`"},
                {"id": "error", "label": "A CheckpointError"},
            ],
            "answer": None,  # what the unpack caused: known at the end
        }
        return _Draft(question, e)
    if kind == "recompute_start":
        frames = [
            f
            for f in state["frames"].values()
            if f["alive"] and any(h["alive"] for h in f["holders"].values())
        ]
        answer_id = str(e.get("frame"))
        others = [f for f in frames if str(f["frame"]) != answer_id]
        if not others:
            return None
        # The nearest frames by id first: siblings and parents are the plausible confusions.
        others.sort(key=lambda f: (abs(f["frame"] - int(e.get("frame") or 0)), f["frame"]))
        chosen = sorted([answer_id, *(str(f["frame"]) for f in others[: MAX_OPTIONS - 1])], key=int)
        question = {
            **base,
            "kind": "which_frame",
            "prompt": f"A recomputation starts for {gid}. Which checkpoint frame is recomputed?",
            "options": [{"id": c, "label": f"`{state['frames'][c]['name']}`"} for c in chosen],
            "answer": answer_id,
        }
        return _Draft(question, e)
    if kind == "rpack":
        start = links.get(e["seq"], {}).get("cause", {}).get("seq", -1)
        if start < 0 or start in asked_for:
            return None
        asked_for.add(start)
        info = state["frames"].get(str(e.get("frame")))
        total = len(info["holders"]) if info else 0
        name = info["name"] if info else f"frame {e.get('frame')}"
        question = {
            **base,
            "kind": "early_stop",
            "prompt": (
                f"The recomputation of `{name}` re-saves what its forward saved ({total} holders). "
                "Will early stop fire, and after how many re-saves?"
            ),
            "options": [],  # they include the answer's count: made at the end
            "answer": None,
        }
        return _Draft(question, e, total=total, start=start)
    if kind == "holder_gc":
        alive = [
            (frame["frame"], h["index"], frame["name"])
            for frame in state["frames"].values()
            for h in frame["holders"].values()
            if h["alive"]
        ]
        answer_id = f"{e.get('frame')}:{e.get('index')}"
        rivals = [a for a in alive if f"{a[0]}:{a[1]}" != answer_id]
        if not rivals:
            return None
        # Same frame first, nearest index first: the order a learner would hesitate between.
        rivals.sort(key=lambda a: (a[0] != e.get("frame"), abs(a[1] - int(e.get("index") or 0)), a[0], a[1]))
        picked = [(e.get("frame"), e.get("index")), *((f, i) for f, i, _ in rivals[: MAX_OPTIONS - 1])]
        picked.sort(key=lambda a: (int(a[0] or 0), int(a[1] or 0)))
        question = {
            **base,
            "kind": "next_gc",
            "prompt": "A holder is about to be garbage-collected. Which one?",
            "options": [{"id": f"{f}:{i}", "label": holder_name(state, f, i)} for f, i in picked],
            "answer": answer_id,
        }
        return _Draft(question, e)
    return None


def _resolve(
    d: _Draft, links: dict[int, Links], kinds: dict[int, str], outcomes: dict[int, Event | None]
) -> dict[str, Any] | None:
    """The question with its answer (and, for early stop, its options); None if the trace does not
    say (an unpack whose outcome is not in the trace, a run cut short)."""
    q = dict(d.question)
    if q["kind"] == "unpack_outcome":
        q["answer"] = _unpack_answer(links, kinds, d.event["seq"])
        return q if q["answer"] is not None else None
    if q["kind"] == "early_stop":
        total, stop = d.total, outcomes.get(d.start)
        answer = f"after:{stop.get('count')}" if stop is not None else "no"
        counts = sorted({total, 1, total + 1} | ({int(stop.get("count") or 0)} if stop else set()))
        options = [
            {"id": f"after:{k}", "label": f"Yes, after {k} of the {total} re-saves"} for k in counts if k >= 1
        ][: MAX_OPTIONS - 1]
        if answer != "no" and not any(o["id"] == answer for o in options):
            options[-1] = {"id": answer, "label": f"Yes, after {answer.split(':')[1]} re-saves"}
        options.append({"id": "no", "label": "No: the function runs to its end"})
        q.update(options=options, answer=answer)
    return q
