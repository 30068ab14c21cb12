"""Cause links: which event caused which, derived from a trace.

``cause_index(events)`` gives, for each event that has one, its cause (the event it happened
because of, and why, in a few words) and its effects (the events it caused). The viewer's "why?"
button follows ``cause``; the effects are listed under the caption. Nothing here is guessed from
timing alone: each link follows a fact the trace states (the unpack in progress, the recomputation
whose hooks are on the stack, the node whose saved variables were released, ...).

Note [Cause links]
~~~~~~~~~~~~~~~~~~
The links, in the order a checkpointed backward meets them (seqs are the events' ``seq``):

- ``unpack`` ← the unpack in progress, when there is one (an inner frame's unpack hook reads its
  ``_NoopSaveInputs`` node's saved inputs, which its parent holds: Rule 2), else the ``node_exec``
  of the node running (its backward formula reads what it saved).
- ``recompute_start`` ← the unpack in progress: the one whose holder found
  ``is_recomputed[gid]`` False. Its ``trigger`` names that unpack's frame and index.
- ``fn_start`` of a recomputation, and ``frame_new`` inside one ← that ``recompute_start``.
- ``rpack`` ← the ``recompute_start`` of the innermost recomputation of its frame and gid (its
  recomputation hooks packed it).
- ``early_stop`` ← the ``rpack`` that made ``recomp_counter[gid]`` reach the number of holders.
- ``recompute_end`` ← the ``early_stop`` that cut it short, else its ``recompute_start``.
- ``recomputed_take`` ← the unpack it answers; ``source`` is the ``rpack`` that put the tensor in
  ``recomputed[gid]``.
- ``checkpoint_error`` ← the unpack in progress.
- ``pack`` ← the ``fn_start`` of its frame's forward run; a pack of a nested frame's inputs
  (Rule 2) ← the ``frame_new`` of that nested frame.
- ``saved_release`` ← the ``node_exec`` of the node (it ran without ``retain_graph``).
- ``holder_gc`` ← the ``saved_release`` of the node that saved it, if it came before; else, for a
  holder made during a recomputation (Rule 3), that recomputation's ``recompute_end``; else the
  ``node_free`` of its node; else no event: nothing referenced it any more (its graph was
  dropped by the scenario's own code), which ``why`` says.
- ``frame_gc`` ← the ``recompute_end`` of the recomputation it was made in (Rule 3), else the
  ``saved_release`` or ``node_free`` of the last node that had saved through its hooks (their
  unpack hooks are what reference a frame), else none.
- ``fn_end`` ← its ``early_stop`` when cut short, else its ``fn_start``; ``backward_end`` ← its
  ``backward_start``.

``check_causes`` holds the index to these rules on any trace (the tests run it on every golden
trace): each recomputation has exactly one triggering unpack, matching its ``trigger``; each rpack
belongs to exactly one recomputation, of its frame; each early stop follows an rpack of the same
recomputation; each take answers an unpack of the same holder and takes what an rpack kept; every
effect lists its cause back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from engine.trace.state import Event, State, gid_key, gid_label, initial_state, step


class Link(TypedDict):
    seq: int
    why: str


class Effect(TypedDict):
    seq: int
    what: str


class Links(TypedDict, total=False):
    cause: Link  # the event this one happened because of
    source: Link  # where the tensor a take hands over came from (its rpack)
    effects: list[Effect]  # the events this one caused, in order


# --- naming --------------------------------------------------------------------------------------


def frame_name(state: State, frame: Any) -> str:
    info = state["frames"].get(str(frame))
    return info["name"] if info else f"frame {frame}"


def holder_name(state: State, frame: Any, index: Any) -> str:
    """``inner#2[5]``: holder 5 of frame ``inner#2`` (docs/checkpoint.md's notation)."""
    return f"{frame_name(state, frame)}[{index}]"


def node_label(state: State, node: Any) -> str:
    info = state["nodes"].get(str(node))
    return info["name"] if info else f"node {node}"


# --- the index -----------------------------------------------------------------------------------


@dataclass
class CauseBuilder:
    """Builds the index event by event: ``visit(state, event)`` with the state *before* the event
    (the story document walks the trace once and feeds every builder)."""

    links: dict[int, Links] = field(default_factory=dict)
    # Where to look causes up, all keyed by what the trace names.
    unpacks: list[int] = field(default_factory=list)  # seqs of the unpacks in progress (a stack)
    recomputations: list[tuple[int, Any, str]] = field(default_factory=list)  # (seq, frame, gid)
    last_rpack: dict[tuple[Any, str], int] = field(default_factory=dict)  # (frame, gid) -> seq
    early_stops: dict[tuple[Any, str], int] = field(default_factory=dict)  # in the open recomputation
    kept: dict[tuple[Any, Any, str], int] = field(default_factory=dict)  # (frame, index, gid) -> rpack
    node_exec: dict[Any, int] = field(default_factory=dict)  # node -> seq of its last node_exec
    released: dict[Any, int] = field(default_factory=dict)  # node -> seq of its saved_release
    node_freed: dict[Any, int] = field(default_factory=dict)
    fn_starts: list[int] = field(default_factory=list)  # seqs of fn_start of runs in progress
    forward_run: dict[Any, int] = field(default_factory=dict)  # frame -> fn_start of its forward
    frame_new: dict[Any, int] = field(default_factory=dict)
    made_in: dict[Any, int] = field(default_factory=dict)  # frame -> recompute_end of its maker
    recomp_of_frame: dict[Any, int] = field(default_factory=dict)  # frame -> recompute_start (made in)
    ended: dict[int, int] = field(default_factory=dict)  # recompute_start seq -> recompute_end seq
    last_holder_gc: dict[Any, int] = field(default_factory=dict)  # frame -> seq
    savers: dict[Any, set[Any]] = field(default_factory=dict)  # frame -> nodes that packed through it
    backwards: list[int] = field(default_factory=list)

    def link(self, seq: int, cause: int | None, why: str, what: str) -> None:
        """``seq`` happened because of ``cause``: ``why`` is said at ``seq``, ``what`` at ``cause``."""
        if cause is None:
            self.links.setdefault(seq, {})["cause"] = {"seq": -1, "why": why}
            return
        self.links.setdefault(seq, {})["cause"] = {"seq": cause, "why": why}
        self.links.setdefault(cause, {}).setdefault("effects", []).append({"seq": seq, "what": what})

    def visit(self, state: State, e: Event) -> None:
        handler = getattr(self, "_" + str(e.get("kind")), None)
        if handler is not None:
            handler(state, e)

    # --- checkpoint kinds

    def _unpack(self, s: State, e: Event) -> None:
        seq, holder = e["seq"], holder_name(s, e.get("frame"), e.get("index"))
        slot = f"its saved `{e.get('slot')}`" if e.get("slot") is not None else "what it saved"
        if self.unpacks:
            outer = s["unpacking"][-1] if s["unpacking"] else {}
            child = frame_name(s, outer.get("frame"))
            self.link(
                seq,
                self.unpacks[-1],
                f"unpacking {child}[{outer.get('index')}] needs the inputs of {child}, "
                f"which {frame_name(s, e.get('frame'))} holds (Rule 2)",
                f"needs holder {holder} first (Rule 2)",
            )
        elif s["executing"]:
            node = s["executing"][-1]
            self.link(
                seq,
                self.node_exec.get(node),
                f"{node_label(s, node)} runs and reads {slot}",
                f"reads holder {holder}",
            )
        self.unpacks.append(seq)

    def _finish_unpack(self, holder: Any, s: State) -> int | None:
        """Pops the unpack of ``holder`` (the top one, as the reducer does); returns its seq."""
        if self.unpacks and s["unpacking"] and s["unpacking"][-1].get("holder") == holder:
            return self.unpacks.pop()
        return None

    def _recompute_start(self, s: State, e: Event) -> None:
        seq, frame, gid = e["seq"], e.get("frame"), gid_key(e)
        trigger = self.unpacks[-1] if self.unpacks else None
        where = s["unpacking"][-1] if s["unpacking"] else {}
        holder = holder_name(s, where.get("frame"), where.get("index"))
        self.link(
            seq,
            trigger,
            f"unpacking holder {holder} found `is_recomputed[{gid_label(gid)}]` False",
            f"starts the recomputation of {frame_name(s, frame)}",
        )
        self.recomputations.append((seq, frame, gid))
        self.last_rpack.pop((frame, gid), None)

    def _innermost(self, frame: Any, gid: str) -> int | None:
        for seq, f, g in reversed(self.recomputations):
            if f == frame and g == gid:
                return seq
        return None

    def _fn_start(self, s: State, e: Event) -> None:
        seq, frame = e["seq"], e.get("frame")
        if e.get("mode") == "recompute" and self.recomputations:
            self.link(
                seq,
                self.recomputations[-1][0],
                f"the recomputation of {frame_name(s, frame)} re-runs its function",
                "runs the function again",
            )
        elif e.get("mode") == "forward":
            self.forward_run[frame] = seq
        self.fn_starts.append(seq)

    def _fn_end(self, s: State, e: Event) -> None:
        start = self.fn_starts.pop() if self.fn_starts else None
        frame = e.get("frame")
        stop = [v for (f, _), v in self.early_stops.items() if f == frame]
        if e.get("outcome") == "early_stop" and stop:
            self.link(e["seq"], stop[-1], "`_StopRecomputationError` ends the run", "cuts the function short")
        elif start is not None:
            self.link(e["seq"], start, f"the run of {frame_name(s, frame)} that began here ends", "ends")

    def _frame_new(self, s: State, e: Event) -> None:
        seq, frame = e["seq"], e.get("frame")
        self.frame_new[frame] = seq
        if isinstance(e.get("created_in"), dict) and self.recomputations:
            rseq, rframe, _ = self.recomputations[-1]
            self.recomp_of_frame[frame] = rseq
            self.link(
                seq,
                rseq,
                f"re-running {frame_name(s, rframe)} meets this `checkpoint` call again (Rule 3)",
                f"creates the fresh frame {e.get('label')}#{frame} (Rule 3)",
            )

    def _pack(self, s: State, e: Event) -> None:
        seq, frame = e["seq"], e.get("frame")
        self.savers.setdefault(frame, set()).add(e.get("node"))
        node = s["nodes"].get(str(e.get("node")))
        if node is not None and "NoopSaveInputs" in node["name"]:
            # The nested frame is the newest one: its inputs are saved right after its frame_new.
            child = max(
                (f for f in self.frame_new if f != frame), default=None, key=lambda f: self.frame_new[f]
            )
            if child is not None:
                self.link(
                    seq,
                    self.frame_new[child],
                    f"the nested checkpoint {frame_name(s, child)} saves its inputs to its parent "
                    f"{frame_name(s, frame)} (Rule 2)",
                    f"has its inputs packed by {frame_name(s, frame)} (Rule 2)",
                )
                return
        if frame in self.forward_run:
            self.link(
                seq,
                self.forward_run[frame],
                f"saved while the function of {frame_name(s, frame)} runs under its checkpoint hook",
                f"packs holder {holder_name(s, frame, e.get('index'))}",
            )

    def _last_saver_gone(self, frame: Any) -> tuple[Any, int] | None:
        """The node that saved through ``frame``'s hooks and let go last, with that event's seq."""
        gone = [
            (max(self.released.get(n, -1), self.node_freed.get(n, -1)), n) for n in self.savers.get(frame, ())
        ]
        when, node = max(gone, default=(-1, None))
        return (node, when) if when >= 0 else None

    def _rpack(self, s: State, e: Event) -> None:
        seq, frame, gid = e["seq"], e.get("frame"), gid_key(e)
        owner = self._innermost(frame, gid)
        self.link(
            seq,
            owner,
            f"the recomputation of {frame_name(s, frame)} re-saves what its forward saved",
            f"re-saves holder {holder_name(s, frame, e.get('index'))}",
        )
        self.last_rpack[(frame, gid)] = seq
        if e.get("outcome") == "keep":
            self.kept[(frame, e.get("index"), gid)] = seq

    def _early_stop(self, s: State, e: Event) -> None:
        seq, frame, gid = e["seq"], e.get("frame"), gid_key(e)
        self.link(
            seq,
            self.last_rpack.get((frame, gid)),
            f"this re-save made `recomp_counter[{gid_label(gid)}]` reach {e.get('count')} of "
            f"{e.get('total')} (Rule 5)",
            "completes the count: early stop (Rule 5)",
        )
        self.early_stops[(frame, gid)] = seq

    def _recompute_end(self, s: State, e: Event) -> None:
        seq, frame, gid = e["seq"], e.get("frame"), gid_key(e)
        start = self._innermost(frame, gid)
        stop = self.early_stops.pop((frame, gid), None)
        if stop is not None:
            self.link(seq, stop, "early stop ended the recomputation", "ends the recomputation")
        else:
            how = "failed" if e.get("reason") == "error" else "ran the whole function"
            self.link(seq, start, f"the recomputation begun here {how}", "ends")
        if start is not None:
            self.ended[start] = seq
            self.recomputations = [r for r in self.recomputations if r[0] != start]
            for f, rseq in self.recomp_of_frame.items():
                if rseq == start:
                    self.made_in[f] = seq

    def _recomputed_take(self, s: State, e: Event) -> None:
        seq, frame, index, gid = e["seq"], e.get("frame"), e.get("index"), gid_key(e)
        unpack = self._finish_unpack(e.get("holder"), s)
        self.link(
            seq,
            unpack,
            f"it answers the unpack of holder {holder_name(s, frame, index)}",
            f"gets its tensor from `recomputed[{gid_label(gid)}]`",
        )
        rpack = self.kept.pop((frame, index, gid), None)
        if rpack is not None:
            self.links[seq]["source"] = {
                "seq": rpack,
                "why": f"the recomputation stored this tensor in `recomputed[{gid_label(gid)}]` here",
            }
            self.links.setdefault(rpack, {}).setdefault("effects", []).append(
                {"seq": seq, "what": "its tensor is handed over"}
            )

    def _checkpoint_error(self, s: State, e: Event) -> None:
        unpack = self.unpacks[-1] if self.unpacks else None
        if s["unpacking"] and s["unpacking"][-1].get("frame") == e.get("frame") and self.unpacks:
            self.unpacks.pop()
        self.link(e["seq"], unpack, "raised inside this unpack", "raises an error")

    def _holder_gc(self, s: State, e: Event) -> None:
        seq, frame, index = e["seq"], e.get("frame"), e.get("index")
        info = s["frames"].get(str(frame))
        held = info["holders"].get(str(index)) if info else None
        node = held["node"] if held else None
        if node in self.released:
            self.link(
                seq,
                self.released[node],
                f"{node_label(s, node)} released its saved tensors, the only reference to the holder",
                f"frees holder {holder_name(s, frame, index)}",
            )
        elif frame in self.made_in:
            self.link(
                seq,
                self.made_in[frame],
                f"{frame_name(s, frame)} was a fresh forward inside a recomputation that has ended: "
                "its graph is dropped (Rule 3)",
                f"drops holder {holder_name(s, frame, index)} (Rule 3)",
            )
        elif node in self.node_freed:
            self.link(
                seq,
                self.node_freed[node],
                f"{node_label(s, node)}, which saved it, was freed",
                f"frees holder {holder_name(s, frame, index)}",
            )
        else:
            self.link(seq, None, "nothing references it any more: the graph that saved it was dropped", "")
        self.last_holder_gc[frame] = seq

    def _frame_gc(self, s: State, e: Event) -> None:
        seq, frame = e["seq"], e.get("frame")
        if frame in self.made_in:
            self.link(
                seq,
                self.made_in[frame],
                "it was made inside a recomputation that has ended (Rule 3)",
                f"drops frame {frame_name(s, frame)} (Rule 3)",
            )
        elif (last := self._last_saver_gone(frame)) is not None:
            node, when = last
            self.link(
                seq,
                when,
                f"the unpack hooks of the tensors saved through it held it; the last node with one, "
                f"{node_label(s, node)}, let go of its saved tensors",
                f"was the last reference to frame {frame_name(s, frame)}",
            )
        else:
            self.link(seq, None, "no graph references it any more", "")

    # --- autograd kinds

    def _node_exec(self, s: State, e: Event) -> None:
        self.node_exec[e.get("node")] = e["seq"]

    def _saved_release(self, s: State, e: Event) -> None:
        node = e.get("node")
        self.released[node] = e["seq"]
        self.link(
            e["seq"],
            self.node_exec.get(node),
            f"{node_label(s, node)} ran without retain_graph, so it frees its saved tensors",
            "then frees its saved tensors",
        )

    def _node_free(self, s: State, e: Event) -> None:
        self.node_freed[e.get("node")] = e["seq"]

    def _backward_start(self, s: State, e: Event) -> None:
        self.backwards.append(e["seq"])

    def _backward_end(self, s: State, e: Event) -> None:
        if self.backwards:
            self.link(e["seq"], self.backwards.pop(), "the graph task begun here has finished", "ends")


def cause_index(events: Sequence[Event]) -> dict[int, Links]:
    """The links of every event that has a cause or effects (Note [Cause links])."""
    builder = CauseBuilder()
    state = initial_state()
    for event in events:
        builder.visit(state, event)
        step(state, event)
    return builder.links


# --- checks --------------------------------------------------------------------------------------


class CauseIndexError(AssertionError):
    """The cause index breaks one of Note [Cause links]'s rules (a bug in this module)."""


def check_causes(events: Sequence[Event], links: dict[int, Links]) -> None:
    """Raises ``CauseIndexError`` naming the first event whose links break Note [Cause links]."""
    by_seq = {e["seq"]: e for e in events}
    unpacks = [e["seq"] for e in events if e["kind"] == "unpack"]

    def cause_of(seq: int) -> Event | None:
        link = links.get(seq, {}).get("cause")
        return by_seq.get(link["seq"]) if link and link["seq"] >= 0 else None

    def fail(e: Event, what: str) -> None:
        raise CauseIndexError(f"event {e['seq']} ({e['kind']}): {what}")

    for e in events:
        kind, seq = e["kind"], e["seq"]
        cause = cause_of(seq)
        if kind == "recompute_start":
            triggers = [
                u for u in unpacks if any(x["seq"] == seq for x in links.get(u, {}).get("effects", []))
            ]
            if len(triggers) != 1 or cause is None or cause["kind"] != "unpack":
                fail(e, f"a recomputation must have exactly one triggering unpack, not {len(triggers)}")
            trigger = e.get("trigger")
            assert cause is not None
            if trigger and (trigger.get("frame"), trigger.get("index")) != (cause["frame"], cause["index"]):
                fail(e, f"its trigger {trigger} is not the unpack {cause['seq']} it links to")
        elif kind == "rpack":
            if cause is None or cause["kind"] != "recompute_start" or cause["frame"] != e["frame"]:
                fail(e, "an rpack must belong to one recomputation of its frame")
        elif kind == "early_stop":
            if cause is None or cause["kind"] != "rpack" or cause["frame"] != e["frame"]:
                fail(e, "an early stop must follow an rpack of its recomputation")
            assert cause is not None
            owner = cause_of(cause["seq"])
            if owner is None or owner["kind"] != "recompute_start" or owner["frame"] != e["frame"]:
                fail(e, "its rpack belongs to no recomputation of its frame")
        elif kind == "recomputed_take":
            if cause is None or cause["kind"] != "unpack" or cause["holder"] != e["holder"]:
                fail(e, "a take must answer an unpack of the same holder")
            source = links.get(seq, {}).get("source")
            rpack = by_seq.get(source["seq"]) if source else None
            if rpack is None or rpack["kind"] != "rpack" or rpack.get("outcome") != "keep":
                fail(e, "a take must hand over what an rpack kept")
            assert rpack is not None
            if rpack["holder"] != e["holder"] or gid_key(rpack) != gid_key(e):
                fail(e, f"rpack {rpack['seq']} kept another holder's tensor")
        elif kind == "recompute_end":
            if cause is None or cause["kind"] not in ("early_stop", "recompute_start"):
                fail(e, "a recomputation's end must link to its start or its early stop")
            assert cause is not None
            if cause["frame"] != e["frame"]:
                fail(e, "a recomputation's end links to another frame")
        elif kind == "holder_gc":
            if "cause" not in links.get(seq, {}):
                fail(e, "a holder GC must say why it died")
        for effect in links.get(seq, {}).get("effects", []):
            back = links.get(effect["seq"], {})
            if back.get("cause", {}).get("seq") != seq and back.get("source", {}).get("seq") != seq:
                fail(e, f"effect {effect['seq']} does not link back to it")
            if effect["seq"] <= seq:
                fail(e, f"effect {effect['seq']} comes before its cause")
