"""The story level of a trace: the events that change the checkpoint story, grouped into steps a
learner reads one at a time, and the run's chapters (its phases).

- ``is_story_event(event, run_mode)``: whether one event belongs to the story (Note [Story events]).
- ``StoryBuilder`` / ``story_steps(events)``: the story's steps (Note [Story steps]).
- ``ChapterBuilder`` / ``chapters(events)``: the run's phases as a tree (Note [Chapters]).
- ``story_document(events)``: everything the viewer's story level needs in one JSON document:
  steps, chapters, cause links (``causes.py``), predict-mode questions (``predict.py``) and the
  glossary (``glossary.py``), computed in one pass of the reducer.
- ``story_text(events)``: the story as plain text, one line per step (``autograd-lens trace
  --story``).

Note [Story events]
~~~~~~~~~~~~~~~~~~~
A nested checkpoint of two tiny blocks is 700 events, most of them tensors and nodes being made
and freed. The story keeps the events that change what checkpointing does:

- a checkpoint's forward: ``frame_new``, ``fn_start`` / ``fn_end`` of a forward run, each ``pack``
  into a holder;
- the backward: ``backward_start``, ``backward_end``, each ``unpack``;
- recomputation: ``recompute_start``, each ``rpack`` refilling ``recomputed[gid]``,
  ``early_stop``, ``recompute_end``, then each ``recomputed_take``;
- deaths that matter: ``holder_gc``, ``frame_gc``;
- errors (``checkpoint_error``, ``error``) and the scenario's own ``mark`` events (its prints);
- a reentrant checkpoint (no frames) shows as the ``node_exec`` of its
  ``CheckpointFunctionBackward``, whose backward re-runs the function.

A recomputation's ``fn_start`` / ``fn_end`` are left out: its ``recompute_start`` and
``recompute_end`` say the same, and a run cut short is the ``early_stop`` step. A run that raises
stays in (``fn_end`` with outcome ``raised``). Whether a ``fn_end`` ended a recomputation is a fact
of the run in progress, so ``is_story_event`` takes the mode of the run it ends.

Note [Story steps]
~~~~~~~~~~~~~~~~~~
A step is one story event, or several that read as one sentence:

- consecutive story events of one groupable kind (``pack``, ``rpack``, ``holder_gc``,
  ``frame_gc``) in one frame: "6 holders packed";
- an ``unpack`` immediately followed (in the story) by the ``recomputed_take`` that answers it: a
  cache hit is one step.

A step's position is the player's step after its last event (``step = last seq + 1``), so the
state shown is the state once the whole step has happened; the events in between that are not in
the story are applied on the way. Each step has a caption: the event's own for a single event, a
sentence of its own for a group.

Note [Chapters]
~~~~~~~~~~~~~~~
Chapters are intervals of events ``[start, end]`` (seqs), nested:

- top level: ``forward`` (or ``setup`` before any op, ``after the backward`` when no op runs),
  and one ``backward g0`` per top-level graph task, from its ``backward_start`` to its
  ``backward_end``;
- ``checkpoint big#0 forward``: from a frame's ``frame_new`` to the ``fn_end`` of its forward run
  (a frame made during a recomputation says so);
- ``recomputation of big#0 for holder 2 (g0)``: from ``recompute_start`` to ``recompute_end``,
  named after the holder whose unpack triggered it; nested recomputations nest;
- ``backward g1`` inside another chapter for a nested graph task (a backward inside a checkpoint,
  a reentrant checkpoint's inner backward);
- point chapters (``start == end``): ``early stop after 4/4``, ``error: CheckpointError``.

A chapter still open at the end of the trace (a run that failed) ends at its last event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from engine.trace.captions import caption
from engine.trace.causes import CauseBuilder, Links, frame_name, holder_name, node_label
from engine.trace.changed import describe_changes
from engine.trace.state import Change, Event, State, gid_key, gid_label, initial_state, step

STORY_KINDS: frozenset[str] = frozenset(
    {
        "frame_new",
        "fn_start",
        "fn_end",
        "pack",
        "backward_start",
        "backward_end",
        "unpack",
        "recompute_start",
        "rpack",
        "early_stop",
        "recompute_end",
        "recomputed_take",
        "holder_gc",
        "frame_gc",
        "checkpoint_error",
        "error",
        "mark",
        "node_exec",
    }
)
GROUPABLE_KINDS: frozenset[str] = frozenset({"pack", "rpack", "holder_gc", "frame_gc"})


def is_story_event(event: Event, run_mode: str | None = None, node_name: str | None = None) -> bool:
    """Whether ``event`` is in the story (Note [Story events]). ``run_mode`` is the mode of the run
    a ``fn_end`` ends (``"forward"`` or ``"recompute"``); ``node_name`` the class of the node a
    ``node_exec`` runs."""
    kind = event.get("kind")
    if kind not in STORY_KINDS:
        return False
    if kind == "fn_start":
        return event.get("mode") != "recompute"
    if kind == "fn_end":
        outcome = event.get("outcome")
        return outcome == "raised" or (outcome == "returned" and run_mode != "recompute")
    if kind == "node_exec":
        return bool(node_name) and "CheckpointFunction" in str(node_name)
    return True


# --- steps ---------------------------------------------------------------------------------------


class StoryStep(TypedDict):
    index: int  # position in the story, from 0
    step: int  # the player's step at which the story step is shown: last seq + 1
    first: int  # seq of its first story event
    last: int  # seq of its last story event
    seqs: list[int]  # its story events
    kind: str  # the kind of its first event
    frame: int | None
    title: str  # a few words: "6 holders packed into inner#1"
    caption: str
    changed: list[str]  # what changed since the previous story step (changed.py)
    chapter: int  # the innermost chapter holding its last event


@dataclass
class _Pending:
    events: list[Event]
    captions: list[str]
    state: State  # the live state: names of frames and nodes never change once made
    counter_before: int  # ``recomp_counter[gid]`` of the first event's frame before it


@dataclass
class StoryBuilder:
    """Groups story events into steps. ``visit(state, event)`` before each event is applied,
    ``after(event, changes)`` once it is."""

    steps: list[StoryStep] = field(default_factory=list)
    run_modes: list[str] = field(default_factory=list)  # modes of the runs in progress
    pending: _Pending | None = None
    log: list[tuple[int, list[Change]]] = field(default_factory=list)  # (seq, changes) since the last step

    def visit(self, state: State, e: Event, text: str | None = None) -> None:
        """``text``: the event's caption, when the caller has it already."""
        kind = e.get("kind")
        mode = None
        if kind == "fn_start":
            self.run_modes.append(str(e.get("mode")))
        elif kind == "fn_end":
            mode = self.run_modes.pop() if self.run_modes else None
        node = state["nodes"].get(str(e.get("node"))) if kind == "node_exec" else None
        if not is_story_event(e, mode, node["name"] if node else None):
            return
        if text is None:
            text = caption(state, e)
        if self.pending is not None and self._joins(self.pending, e):
            self.pending.events.append(e)
            self.pending.captions.append(text)
            return
        self.flush(state)
        frame = state["frames"].get(str(e.get("frame")))
        counter = frame["recomp_counter"].get(gid_key(e), 0) if frame else 0
        self.pending = _Pending([e], [text], state, counter)

    def after(self, e: Event, changes: list[Change]) -> None:
        self.log.append((e["seq"], changes))

    @staticmethod
    def _joins(p: _Pending, e: Event) -> bool:
        last = p.events[-1]
        if e["kind"] == "recomputed_take":
            return last["kind"] == "unpack" and len(p.events) == 1 and last.get("holder") == e.get("holder")
        return (
            e["kind"] in GROUPABLE_KINDS
            and e["kind"] == p.events[0]["kind"]
            and e.get("frame") == p.events[0].get("frame")
            and gid_key(e) == gid_key(p.events[0])
        )

    def flush(self, state: State) -> None:
        """Closes the pending step. What changed is what the events up to its last one changed
        since the previous step; the events after it belong to the next step."""
        p = self.pending
        if p is None:
            return
        self.pending = None
        last = p.events[-1]["seq"]
        changes = [c for seq, cs in self.log if seq <= last for c in cs]
        self.log = [(seq, cs) for seq, cs in self.log if seq > last]
        self.steps.append(
            {
                "index": len(self.steps),
                "step": last + 1,
                "first": p.events[0]["seq"],
                "last": last,
                "seqs": [e["seq"] for e in p.events],
                "kind": p.events[0]["kind"],
                "frame": p.events[0].get("frame"),
                "title": step_title(p.state, p.events),
                "caption": step_caption(p.state, p.events, p.captions, p.counter_before),
                "changed": describe_changes(state, changes),
                "chapter": -1,
            }
        )


def _range(indices: list[Any]) -> str:
    ints = [i for i in indices if isinstance(i, int)]
    if len(ints) == len(indices) and ints == list(range(ints[0], ints[0] + len(ints))):
        return f"{ints[0]} to {ints[-1]}" if len(ints) > 1 else str(ints[0])
    return ", ".join(str(i) for i in indices)


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {words or word + 's'}"


def step_title(state: State, events: list[Event]) -> str:
    """A few words naming a step, for the story list and the chapters' tooltips."""
    e, n = events[0], len(events)
    kind, frame = e["kind"], frame_name(state, e.get("frame"))
    holder = holder_name(state, e.get("frame"), e.get("index"))
    if kind == "pack":
        return f"{_plural(n, 'holder')} packed into {frame}"
    if kind == "rpack":
        return f"{_plural(n, 'tensor')} re-saved for {frame}"
    if kind == "holder_gc":
        return f"{_plural(n, 'holder')} of {frame} freed"
    if kind == "frame_gc":
        return f"frame {frame} freed" if n == 1 else f"{n} frames freed"
    if kind == "unpack":
        return f"unpack {holder}" + (" (cache hit)" if n > 1 else "")
    titles = {
        "frame_new": f"checkpoint {e.get('label')}#{e.get('frame')} created",
        "fn_start": f"{frame} forward runs",
        "fn_end": f"{frame} run ends" + (" (raised)" if e.get("outcome") == "raised" else ""),
        "backward_start": f"backward g{e.get('gid')} starts",
        "backward_end": f"backward g{e.get('gid')} ends",
        "recompute_start": f"recomputation of {frame} starts",
        "early_stop": f"early stop after {e.get('count')}/{e.get('total')}",
        "recompute_end": f"recomputation of {frame} ends",
        "recomputed_take": f"{holder} takes its tensor",
        "checkpoint_error": f"{e.get('type')} in {frame}",
        "error": f"{e.get('type')}",
        "mark": "output",
        "node_exec": f"{node_label(state, e.get('node'))} runs",
    }
    return titles.get(kind) or str(kind)


def _saved_what(state: State, e: Event) -> str:
    slot, node = e.get("slot"), e.get("node")
    return f"`{slot}` of `{node_label(state, node)}`" if slot is not None and node is not None else "a tensor"


def step_caption(state: State, events: list[Event], captions: list[str], counter_before: int = 0) -> str:
    """The caption of a step: the event's own, or one sentence for a group (Note [Story steps])."""
    if len(events) == 1:
        return captions[0]
    e, n = events[0], len(events)
    kind, frame = e["kind"], f"`{frame_name(state, e.get('frame'))}`"
    indices = _range([x.get("index") for x in events])
    if kind == "unpack":  # unpack + take: a cache hit
        return (
            captions[0].rstrip(".")
            + "; its handle is cleared, so the recomputed copy is freed after use (Rule 4)."
        )
    if kind == "pack":
        names = [
            state["nodes"][str(x.get("node"))]["name"] for x in events if str(x.get("node")) in state["nodes"]
        ]
        if len(names) == n and all("NoopSaveInputs" in name for name in names):
            return (
                f"A nested checkpoint saves its inputs through the hook of its parent {frame}, which "
                f"stores holders {indices} instead of the tensors (Rule 2)."
            )
        total = sum(int(x.get("nbytes") or 0) for x in events)
        whats = [_saved_what(state, x) for x in events]
        listed = ", ".join(whats[:4]) + (f" and {n - 4} more" if n > 4 else "")
        return (
            f"The ops inside {frame} save {n} tensors ({total} bytes) through its checkpoint hook: "
            f"holders {indices} are kept instead ({listed})."
        )
    if kind == "rpack":
        gid, before = gid_label(gid_key(e)), counter_before
        kept = [x for x in events if x.get("outcome") == "keep"]
        skipped = n - len(kept)
        text = (
            f"The recomputation of {frame} re-saves {n} tensors (`recomp_counter[{gid}]` {before} → "
            f"{before + n}): holders {_range([x.get('index') for x in kept]) if kept else 'none'} get a "
            f"handle and their tensors go into `recomputed[{gid}]`"
        )
        if skipped:
            text += f"; {_plural(skipped, 'save')} of dead holders or beyond the forward's count are skipped"
        return text + "."
    if kind == "holder_gc":
        why = captions[0].split(": ", 1)[1].rstrip(".") if ": " in captions[0] else ""
        return f"Holders {indices} of {frame} are garbage-collected" + (
            f" ({why} for the first)." if why else "."
        )
    if kind == "frame_gc":
        gone = ", ".join(f"`{frame_name(state, x.get('frame'))}`" for x in events)
        return f"Frames {gone} are garbage-collected: no graph references them any more."
    return " ".join(captions)


def story_steps(events: Sequence[Event]) -> list[StoryStep]:
    """The story's steps (Note [Story steps]), without chapters (``story_document`` adds them)."""
    return story_document(events, with_questions=False)["steps"]


# --- chapters ------------------------------------------------------------------------------------


class Chapter(TypedDict):
    id: int
    title: str
    kind: str  # forward, setup, after, backward, checkpoint, recompute, early_stop, error
    start: int  # seq of its first event
    end: int  # seq of its last event
    parent: int | None
    depth: int
    frame: int | None
    gid: Any


@dataclass
class ChapterBuilder:
    chapters: list[Chapter] = field(default_factory=list)
    open: list[int] = field(default_factory=list)  # ids of the chapters in progress, innermost last
    top_has_ops: bool = False
    backward_count: int = 0
    last_seq: int = -1
    forward_of: dict[Any, int] = field(default_factory=dict)  # frame -> its forward chapter
    recompute_of: list[tuple[Any, str, int]] = field(default_factory=list)  # (frame, gid, chapter)
    after: str | None = None  # the gid of the last top-level backward

    def _open(self, title: str, kind: str, seq: int, frame: Any = None, gid: Any = None) -> int:
        parent = self.open[-1] if self.open else None
        cid = len(self.chapters)
        self.chapters.append(
            {
                "id": cid,
                "title": title,
                "kind": kind,
                "start": seq,
                "end": seq,
                "parent": parent,
                "depth": len(self.open),
                "frame": frame,
                "gid": gid,
            }
        )
        self.open.append(cid)
        return cid

    def _close(self, cid: int, seq: int) -> None:
        """Closes chapter ``cid`` at ``seq``, and any chapter opened inside it (a failed run)."""
        if cid not in self.open:
            return
        while self.open:
            top = self.open.pop()
            self.chapters[top]["end"] = seq
            if top == cid:
                return

    def _point(self, title: str, kind: str, seq: int, frame: Any = None, gid: Any = None) -> None:
        self._close(self._open(title, kind, seq, frame, gid), seq)

    def _top_segment(self, seq: int) -> None:
        """Opens the top-level segment between backwards, titled once its content is known."""
        self.top_has_ops = False
        self._open("forward", "forward", seq)

    def _retitle_top(self) -> None:
        top = self.chapters[self.open[0]]
        if top["kind"] != "forward":
            return
        if not self.top_has_ops:
            if self.after is None:
                top["title"], top["kind"] = "setup", "setup"
            else:
                top["title"], top["kind"] = f"after backward g{self.after}", "after"

    def visit(self, state: State, e: Event) -> None:
        seq, kind = e["seq"], e.get("kind")
        self.last_seq = seq
        if not self.open:
            self._top_segment(seq)
        if kind == "op" and not state["backward"]:
            self.top_has_ops = True
        if kind == "backward_start":
            gid = e.get("gid")
            if not state["backward"] and self.open and self.chapters[self.open[0]]["kind"] in ("forward",):
                if seq > self.chapters[self.open[0]]["start"]:
                    self._retitle_top()
                    self._close(self.open[0], seq - 1)
                else:  # an empty segment: replace it by the backward
                    self.chapters.pop()
                    self.open.pop()
            inside = " (nested)" if state["backward"] or self._in_checkpoint() else ""
            self._open(f"backward g{gid}{inside}", "backward", seq, gid=gid)
        elif kind == "backward_end":
            for cid in reversed(self.open):
                if self.chapters[cid]["kind"] == "backward":
                    top = cid == self.open[0]
                    self._close(cid, seq)
                    if top:
                        self.after = str(self.chapters[cid]["gid"])
                    break
        elif kind == "frame_new":
            frame = e.get("frame")
            made = " (in the recomputation)" if isinstance(e.get("created_in"), dict) else ""
            name = f"{e.get('label')}#{frame}"
            self.forward_of[frame] = self._open(f"checkpoint {name} forward{made}", "checkpoint", seq, frame)
        elif kind == "fn_end":
            frame = e.get("frame")
            forward = self.forward_of.get(frame)
            info = state["frames"].get(str(frame))
            if forward is not None and info is not None and info["running"][-1:] == ["forward"]:
                self._close(forward, seq)
                del self.forward_of[frame]
        elif kind == "recompute_start":
            frame, gid = e.get("frame"), gid_key(e)
            trigger = e.get("trigger") or {}
            which = f" for holder {trigger.get('index')}" if trigger.get("frame") == frame else ""
            title = f"recomputation of {frame_name(state, frame)}{which} ({gid_label(gid)})"
            self.recompute_of.append((frame, gid, self._open(title, "recompute", seq, frame, gid)))
        elif kind == "recompute_end":
            frame, gid = e.get("frame"), gid_key(e)
            for i in range(len(self.recompute_of) - 1, -1, -1):
                if self.recompute_of[i][:2] == (frame, gid):
                    self._close(self.recompute_of.pop(i)[2], seq)
                    break
        elif kind == "early_stop":
            self._point(
                f"early stop after {e.get('count')}/{e.get('total')}",
                "early_stop",
                seq,
                e.get("frame"),
                gid_key(e),
            )
        elif kind in ("checkpoint_error", "error"):
            self._point(f"error: {e.get('type')}", "error", seq, e.get("frame"))

    def _in_checkpoint(self) -> bool:
        return any(self.chapters[c]["kind"] in ("checkpoint", "recompute") for c in self.open)

    def finish(self) -> list[Chapter]:
        if self.open:
            self._retitle_top()
            self._close(self.open[0], self.last_seq)
        return self.chapters


def chapters(events: Sequence[Event]) -> list[Chapter]:
    """The run's chapters (Note [Chapters])."""
    return story_document(events, with_questions=False)["chapters"]


def chapter_at(chapter_list: Sequence[Chapter], seq: int) -> int:
    """The innermost chapter holding event ``seq`` (the last one opened wins), or -1."""
    return _innermost(c for c in chapter_list if c["start"] <= seq <= c["end"])


def _innermost(holding: Iterable[Chapter]) -> int:
    """Of the chapters holding an event, the deepest, and of those the last opened; -1 if none."""
    best = max(holding, key=lambda c: (c["depth"], c["id"]), default=None)
    return best["id"] if best is not None else -1


# --- the document --------------------------------------------------------------------------------


class StoryDocument(TypedDict):
    steps: list[StoryStep]
    chapters: list[Chapter]
    links: dict[str, Links]  # str(seq) -> links (JSON keys are strings)
    questions: list[Any]
    n_events: int


def story_document(events: Sequence[Event], with_questions: bool = True) -> StoryDocument:
    """Steps, chapters, cause links and questions of a trace, from one pass of the reducer."""
    state = initial_state()
    builder = StoryDocumentBuilder(with_questions)
    for event in events:
        builder.see(state, event)
        builder.after(event, step(state, event))
    return builder.finish(state, events)


class StoryDocumentBuilder:
    """``story_document`` fed one event at a time, by its own pass of the reducer or by whoever
    steps a state through the events already (the server, annotating a run's events as they
    arrive: app/runs.py): ``see(state, event)`` with the state before the event, ``after(event,
    changes)`` with what stepping it changed, ``finish(state, events)`` with the final state."""

    def __init__(self, with_questions: bool = True) -> None:
        from engine.trace.predict import QuestionBuilder

        self.with_questions = with_questions
        self.story = StoryBuilder()
        self.chapters = ChapterBuilder()
        self.causes = CauseBuilder()
        self.questions = QuestionBuilder()

    def see(self, state: State, event: Event, text: str | None = None) -> None:
        """``text``: the event's caption (``captions.caption(state, event)``), if already made."""
        self.story.visit(state, event, text)
        self.chapters.visit(state, event)
        self.causes.visit(state, event)
        pending = self.story.pending
        if self.with_questions and pending is not None and pending.events[0] is event:
            # ``event`` starts a story step, whose index is the number of steps closed so far.
            self.questions.visit(state, event, len(self.story.steps), self.causes.links)

    def after(self, event: Event, changes: list[Change]) -> None:
        self.story.after(event, changes)

    def finish(self, state: State, events: Sequence[Event]) -> StoryDocument:
        story, causes = self.story, self.causes
        story.flush(state)
        chapter_list = self.chapters.finish()
        steps = story.steps
        _assign_chapters(steps, chapter_list)
        questions = self.questions.finish(events, steps, causes.links) if self.with_questions else []
        return {
            "steps": steps,
            "chapters": chapter_list,
            "links": {str(k): v for k, v in sorted(causes.links.items())},
            "questions": questions,
            "n_events": len(events),
        }


def _assign_chapters(steps: list[StoryStep], chapter_list: list[Chapter]) -> None:
    """Each step's chapter, as ``chapter_at`` gives it, in one walk: steps come in seq order and
    chapters in the order they opened (by start), so the chapters holding a step are those
    started at or before it and not ended before it, a handful (as many as chapters nest). A
    search per step was quadratic: 1,004 s for the story of a 1M-event run."""
    by_start = sorted(chapter_list, key=lambda c: (c["start"], c["id"]))
    active: list[Chapter] = []
    i = 0
    for s in steps:
        seq = s["last"]
        while i < len(by_start) and by_start[i]["start"] <= seq:
            active.append(by_start[i])
            i += 1
        active = [c for c in active if c["end"] >= seq]
        s["chapter"] = _innermost(active)


def story_text(events: Sequence[Event]) -> str:
    """The story as text: chapters as headings (indented by depth), one numbered line per step."""
    doc = story_document(events, with_questions=False)
    lines: list[str] = []
    opened: set[int] = set()
    by_id = {c["id"]: c for c in doc["chapters"]}
    for s in doc["steps"]:
        chain: list[int] = []
        cid: int | None = s["chapter"]
        while cid is not None and cid >= 0 and cid not in opened:
            chain.append(cid)
            cid = by_id[cid]["parent"]
        for c in reversed(chain):
            opened.add(c)
            chapter = by_id[c]
            lines.append(f"{'  ' * chapter['depth']}== {chapter['title']} ==")
        depth = by_id[s["chapter"]]["depth"] + 1 if s["chapter"] >= 0 else 0
        events_of = f"#{s['first']}" if s["first"] == s["last"] else f"#{s['first']}-#{s['last']}"
        lines.append(f"{'  ' * depth}{s['index'] + 1:>3}. [{events_of}] {s['caption']}")
    return "\n".join(lines) + "\n"
