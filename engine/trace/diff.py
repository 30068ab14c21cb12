"""Two traces of one scenario side by side: the engine's and real PyTorch's (or any two).

    from engine.trace.diff import compare_grads, diff_traces
    d = diff_traces(engine_doc, torch_doc)     # trace documents, recorders or lists of events
    d.checkpoint_equal                         # the contract: see below
    d.first_divergence                         # index into d.rows, or None
    d.rows                                     # [{"a": seq, "b": seq, "status", "checkpoint", ...}]
    print(d.summary())                         # a verdict, and the rows around the divergence
    d.to_json()                                # what GET /api/diff sends the browser
    compare_grads(grads_a, grads_b)            # ["w: max abs difference 0.01 ..."], [] if equal
    grads_verdict(grads_a, grads_b)            # the same as {"equal", "problems", "verdict", ...}

The contract (the issue's words): for every bundled scenario the checkpoint events must be
identical, only the order of holder GC events within a run may differ, and the gradients equal.
docs/diff.md explains what is compared and why. What an event is compared on (``CHECKPOINT_KINDS``,
``CHECKPOINT_FIELDS``, the id-free names of ``_Names``) lives in ``_diff_names.py``; the alignment
and the result (``TraceDiff``) here.

Note [Aligning two traces]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Two backends see different things: real torch creates tensors the engine never makes (and the
other way round), may not report every ``op`` or ``saved``, and numbers tensors and nodes by what
it saw. Comparing event N with event N would turn one extra ``tensor_new`` into a cascade of
mismatches. So:

- Each event has a *signature*: its kind and the fields that identify it, with no tensor, node,
  holder or storage id in it. Checkpoint events (``CHECKPOINT_KINDS``) are compared on
  ``CHECKPOINT_FIELDS`` (frame, index, shape, outcome, ...): frames are numbered 0, 1, 2, ... in
  creation order by both recorders and gids by appearance, so those ids mean the same on both
  sides. Other events are compared on id-free descriptions (a tensor by its variable name or
  shape, a node by its class name without the ``engine::``/``torch::`` namespace).
- A field is compared only when both traces have it on some event of that kind, and an optional
  kind (``OPTIONAL_KINDS``) only when both traces have it: a backend that does not record a field
  is not a divergence, and ``TraceDiff.ignored`` says what was left out.
- The checkpoint events are aligned first, on their own, with ``difflib.SequenceMatcher``: they are
  the contract, and no difference elsewhere can move them. A maximal run of consecutive deaths
  (``holder_gc`` and ``frame_gc``, among checkpoint events) is one token, its members' signatures
  sorted: the two traces' runs match when they hold the same holders and frames, in any order
  (the only reordering the contract allows: "the order of holder GC events within a run").
  Within a matched run, members are paired by signature; a pair whose positions differ is
  ``reordered``, and still ``same``.
- Where the matcher finds a replaced block, its events are paired again by kind alone (a second
  ``SequenceMatcher``): a pack whose shape changed is one ``differ`` row, not a gap and an
  extra. What pairs with nothing is ``only_a`` / ``only_b``: a missing event is a gap, found at
  its row.
- Every other event goes after the checkpoint row holding the last checkpoint event before it in
  its own trace, and the events of the two sides that land after the same row are aligned the
  same way. Side a's events are therefore in seq order down the rows; side b's are too, except
  inside a reordered holder_gc run.
- ``checkpoint_equal`` is true when every checkpoint row is ``same``; ``first_divergence`` is the
  first checkpoint row that is not. Non-checkpoint rows carry a status too, for a reader, but
  never make two traces differ.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from engine.trace._diff_names import CHECKPOINT_FIELDS, CHECKPOINT_KINDS, _Names
from engine.trace.export import events_of
from engine.trace.grads import compare_grads, grads_verdict
from engine.trace.state import Event

# compare_grads and grads_verdict live in grads.py; the diff's callers find them here too.
__all__ = ["TraceDiff", "compare_grads", "diff_traces", "grads_verdict"]

Status = Literal["same", "differ", "only_a", "only_b"]

# Compared only when both traces have at least one: a backend may not see the inputs' save.
OPTIONAL_KINDS = frozenset({"inputs_saved"})
# Gap alignments longer than this (events per side) let SequenceMatcher skip popular signatures
# (its "autojunk"): slightly worse pairing of the non-checkpoint events of a huge trace, instead of
# a quadratic wait. Checkpoint events are always aligned exactly.
_EXACT_GAP = 4000
_RUN = "holder_gc*"  # the kind of a GC run token
# Deaths, reported by the garbage collector: when a graph is torn down, the order in which its
# holders (and their frames) die depends on the order references are dropped, which differs
# between the engine's Python graph and torch's C++ one.
GC_KINDS = frozenset({"holder_gc", "frame_gc"})


class DiffRow(TypedDict):
    """One aligned row: the seq of each side's event (``None``: a gap on that side)."""

    a: int | None
    b: int | None
    status: Status
    checkpoint: bool
    kind: str
    fields: list[str]  # the compared fields that differ (status "differ")
    reordered: bool  # a holder_gc paired within its run at another position


# --- alignment -----------------------------------------------------------------------------------


Pair = tuple[int | None, int | None]


def _align(sa: Sequence[str], sb: Sequence[str], ka: Sequence[str], kb: Sequence[str]) -> list[Pair]:
    """Pairs of positions of ``sa`` and ``sb`` (signatures), gaps as ``None``, in order on both
    sides: equal signatures first, then, inside each replaced block, equal kinds (``ka``, ``kb``)."""
    if not sa or not sb:
        return [(i, None) for i in range(len(sa))] + [(None, j) for j in range(len(sb))]
    big = max(len(sa), len(sb)) > _EXACT_GAP
    pairs: list[Pair] = []
    matcher = difflib.SequenceMatcher(None, sa, sb, autojunk=big)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pairs.extend(zip(range(i1, i2), range(j1, j2), strict=True))
        elif op == "replace":
            inner = difflib.SequenceMatcher(None, ka[i1:i2], kb[j1:j2], autojunk=False)
            for op2, x1, x2, y1, y2 in inner.get_opcodes():
                if op2 == "equal":
                    pairs.extend(zip(range(i1 + x1, i1 + x2), range(j1 + y1, j1 + y2), strict=True))
                else:
                    pairs.extend((i, None) for i in range(i1 + x1, i1 + x2))
                    pairs.extend((None, j) for j in range(j1 + y1, j1 + y2))
        else:
            pairs.extend((i, None) for i in range(i1, i2))
            pairs.extend((None, j) for j in range(j1, j2))
    return pairs


@dataclass
class _Side:
    events: list[Event]
    names: _Names
    comp: list[dict[str, Any]]  # compared fields per event
    sigs: list[str] = field(default_factory=list)


def _signature(kind: str, comp: Mapping[str, Any], fields: Iterable[str]) -> str:
    return kind + _canon([comp.get(f) for f in fields])


def _tokens(side: _Side, ckpt: list[int]) -> tuple[list[list[int]], list[str], list[str]]:
    """Checkpoint events as tokens: one event each, or a whole holder_gc run (its members' sorted
    signatures). Returns the members, signatures and kinds of the tokens."""
    members: list[list[int]] = []
    previous = None
    for i in ckpt:
        kind = side.events[i].get("kind")
        if kind in GC_KINDS and previous in GC_KINDS:
            members[-1].append(i)
        else:
            members.append([i])
        previous = kind
    sigs = []
    kinds = []
    for m in members:
        if side.events[m[0]].get("kind") in GC_KINDS:
            sigs.append(_RUN + "|".join(sorted(side.sigs[i] for i in m)))
            kinds.append(_RUN)
        else:
            sigs.append(side.sigs[m[0]])
            kinds.append(side.events[m[0]].get("kind", ""))
    return members, sigs, kinds


def _pair_runs(a: _Side, b: _Side, ra: list[int], rb: list[int]) -> list[tuple[int | None, int | None, bool]]:
    """Two holder_gc runs: members with equal signatures paired (in a's order), the rest paired in
    order, then b's leftovers. The flag marks a pair found at another position of b's run."""
    free = list(range(len(rb)))  # positions in rb not paired yet
    matched: dict[int, int] = {}  # position in ra -> position in rb
    for x, i in enumerate(ra):
        y = next((y for y in free if b.sigs[rb[y]] == a.sigs[i]), None)
        if y is not None:
            free.remove(y)
            matched[x] = y
    leftovers = iter(free)
    out: list[tuple[int | None, int | None, bool]] = []
    for x, i in enumerate(ra):
        if x in matched:
            out.append((i, rb[matched[x]], matched[x] != x))
        else:
            y = next(leftovers, None)
            out.append((i, rb[y] if y is not None else None, False))
    out.extend((None, rb[y], False) for y in leftovers)
    return out


# --- the result ----------------------------------------------------------------------------------


@dataclass
class TraceDiff:
    """Two traces aligned row by row (Note [Aligning two traces])."""

    a_label: str
    b_label: str
    rows: list[DiffRow]
    first_divergence: int | None
    checkpoint_equal: bool
    ignored: dict[str, list[str]]  # kind -> fields (or ["*"]: the whole kind) not compared
    events_a: list[Event] = field(repr=False)
    events_b: list[Event] = field(repr=False)
    _names_a: _Names = field(repr=False)
    _names_b: _Names = field(repr=False)

    def counts(self) -> dict[str, int]:
        """Events on each side, checkpoint events, and checkpoint rows by status."""
        c = {
            "events_a": len(self.events_a),
            "events_b": len(self.events_b),
            "checkpoint_a": sum(1 for r in self.rows if r["checkpoint"] and r["a"] is not None),
            "checkpoint_b": sum(1 for r in self.rows if r["checkpoint"] and r["b"] is not None),
        }
        for status in ("same", "differ", "only_a", "only_b"):
            c[status] = sum(1 for r in self.rows if r["checkpoint"] and r["status"] == status)
        c["reordered"] = sum(1 for r in self.rows if r["reordered"])
        return c

    def describe(self, row: DiffRow, side: Literal["a", "b"]) -> str:
        """What one side's event of a row is about, in a few words ('' for a gap)."""
        seq = row[side]
        if seq is None:
            return ""
        events, names = (self.events_a, self._names_a) if side == "a" else (self.events_b, self._names_b)
        e = events[seq] if seq < len(events) and events[seq].get("seq", seq) == seq else _by_seq(events, seq)
        return names.describe(e)

    def text(self, row: DiffRow, side: Literal["a", "b"]) -> str:
        """``#seq kind description`` of one side of a row ('' for a gap)."""
        seq = row[side]
        return "" if seq is None else f"#{seq} {row['kind']} {self.describe(row, side)}".rstrip()

    def verdict(self) -> str:
        c = self.counts()
        if self.checkpoint_equal:
            extra = f" ({c['reordered']} holder GC events in another order)" if c["reordered"] else ""
            return f"checkpoint events identical: {c['checkpoint_a']} events{extra}"
        assert self.first_divergence is not None
        r = self.rows[self.first_divergence]
        what = {
            "differ": f"{r['kind']} differs in {', '.join(r['fields']) or 'its fields'}",
            "only_a": f"{r['kind']} only in {self.a_label}",
            "only_b": f"{r['kind']} only in {self.b_label}",
            "same": "",
        }[r["status"]]
        return (
            f"checkpoint events diverge at row {self.first_divergence}: {what} ({c['differ']} differ, "
            f"{c['only_a']} only in {self.a_label}, {c['only_b']} only in {self.b_label})"
        )

    def summary(self, context: int = 4, width: int = 52) -> str:
        """The verdict, then the checkpoint rows around the first divergence side by side (if
        there is one), then what was not compared."""
        lines = [self.verdict()]
        ck = [i for i, r in enumerate(self.rows) if r["checkpoint"]]
        if ck and self.first_divergence is not None:
            at = ck.index(self.first_divergence)
            shown = ck[max(0, at - context) : at + context + 1]
            lines.append("")
            lines.append(f"{'':2}{'row':>5}  {self.a_label:<{width}}  {self.b_label}")
            for i in shown:
                r = self.rows[i]
                mark = ">" if i == self.first_divergence else ("~" if r["reordered"] else " ")
                if r["status"] != "same" and i != self.first_divergence:
                    mark = "!"
                a, b = self.text(r, "a"), self.text(r, "b")
                a = a if len(a) <= width else a[: width - 1] + "…"
                note = f"   ({', '.join(r['fields'])})" if r["fields"] else ""
                lines.append(f"{mark:2}{i:>5}  {a or '·':<{width}}  {b or '·'}{note}")
        if self.ignored:
            parts = [f"{k}: {', '.join(v)}" for k, v in sorted(self.ignored.items())]
            lines.append("")
            lines.append("not compared (missing from one trace): " + "; ".join(parts))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: the verdict, counts, and every row with a few words about each side's event
        (``a_text``, ``b_text``: the description after ``#seq kind`` in ``summary()``)."""
        return {
            "a_label": self.a_label,
            "b_label": self.b_label,
            "checkpoint_equal": self.checkpoint_equal,
            "first_divergence": self.first_divergence,
            "verdict": self.verdict(),
            "counts": self.counts(),
            "ignored": self.ignored,
            "rows": [
                {**r, "a_text": self.describe(r, "a"), "b_text": self.describe(r, "b")} for r in self.rows
            ],
        }


def _by_seq(events: Sequence[Event], seq: int) -> Event:
    return next(e for e in events if e.get("seq") == seq)


def diff_traces(a: Any, b: Any, *, a_label: str = "engine", b_label: str = "torch") -> TraceDiff:
    """Align two traces (documents, recorders or event lists) event by event
    (Note [Aligning two traces])."""
    sides = []
    for trace in (a, b):
        events = events_of(trace)
        names = _Names(events)
        sides.append(_Side(events, names, [names.compared(e) for e in events]))
    sa, sb = sides

    # What both traces can be compared on.
    def present(side: _Side) -> dict[str, set[str]]:
        seen: dict[str, set[str]] = {}
        for e, comp in zip(side.events, side.comp, strict=True):
            seen.setdefault(e.get("kind", ""), set()).update(comp)
        return seen

    pa, pb = present(sa), present(sb)
    fields: dict[str, list[str]] = {}
    ignored: dict[str, list[str]] = {}
    for kind in pa.keys() | pb.keys():
        both = pa.get(kind, set()) & pb.get(kind, set())
        order = (
            CHECKPOINT_FIELDS
            if kind in CHECKPOINT_KINDS
            else sorted(pa.get(kind, set()) | pb.get(kind, set()))
        )
        fields[kind] = [f for f in order if f in both]
        if kind in pa and kind in pb:
            left_out = sorted((pa[kind] | pb[kind]) - both)
            if left_out:
                ignored[kind] = left_out
    skipped_kinds = {k for k in OPTIONAL_KINDS if (k in pa) != (k in pb)}
    for kind in sorted(skipped_kinds):
        ignored[kind] = ["*"]
    checkpoint_kinds = CHECKPOINT_KINDS - skipped_kinds
    for side in sides:
        side.sigs = [
            _signature(e.get("kind", ""), comp, fields.get(e.get("kind", ""), []))
            for e, comp in zip(side.events, side.comp, strict=True)
        ]

    # 1. The checkpoint events, holder_gc runs as single tokens.
    ck_a = [i for i, e in enumerate(sa.events) if e.get("kind") in checkpoint_kinds]
    ck_b = [i for i, e in enumerate(sb.events) if e.get("kind") in checkpoint_kinds]
    ma, ta, ka = _tokens(sa, ck_a)
    mb, tb, kb = _tokens(sb, ck_b)
    ck_rows: list[tuple[int | None, int | None, bool]] = []
    for x, y in _align(ta, tb, ka, kb):
        # Paired tokens are of one kind: equal signatures, or paired by kind in a replaced block.
        if x is not None and y is not None:
            if ka[x] == _RUN:
                ck_rows.extend(_pair_runs(sa, sb, ma[x], mb[y]))
            else:
                ck_rows.append((ma[x][0], mb[y][0], False))
        elif x is not None:
            ck_rows.extend((i, None, False) for i in ma[x])
        elif y is not None:
            ck_rows.extend((None, j, False) for j in mb[y])

    # 2. Every other event after the checkpoint row of the last checkpoint event before it.
    def groups(side: _Side, col: int) -> dict[int, list[int]]:
        row_of = {r[col]: n for n, r in enumerate(ck_rows) if r[col] is not None}
        out: dict[int, list[int]] = {}
        anchor = -1
        for i, e in enumerate(side.events):
            if e.get("kind") in checkpoint_kinds:
                anchor = row_of[i]
            else:
                out.setdefault(anchor, []).append(i)
        return out

    ga, gb = groups(sa, 0), groups(sb, 1)
    rows: list[DiffRow] = []

    def add(i: int | None, j: int | None, checkpoint: bool, reordered: bool = False) -> None:
        ea = sa.events[i] if i is not None else None
        eb = sb.events[j] if j is not None else None
        kind = str((ea or eb or {}).get("kind", ""))
        differing: list[str] = []
        if i is not None and j is not None:
            status: Status = "same" if sa.sigs[i] == sb.sigs[j] else "differ"
            if status == "differ":
                differing = [
                    f for f in fields.get(kind, []) if _canon(sa.comp[i].get(f)) != _canon(sb.comp[j].get(f))
                ]
        else:
            status = "only_a" if i is not None else "only_b"
        rows.append(
            DiffRow(
                a=_seq(ea, i),
                b=_seq(eb, j),
                status=status,
                checkpoint=checkpoint,
                kind=kind,
                fields=differing,
                reordered=reordered,
            )
        )

    def add_gap(anchor: int) -> None:
        xa, xb = ga.get(anchor, []), gb.get(anchor, [])
        pairs = _align(
            [sa.sigs[i] for i in xa],
            [sb.sigs[j] for j in xb],
            [sa.events[i].get("kind", "") for i in xa],
            [sb.events[j].get("kind", "") for j in xb],
        )
        for x, y in pairs:
            add(xa[x] if x is not None else None, xb[y] if y is not None else None, False)

    add_gap(-1)
    for n, (i, j, reordered) in enumerate(ck_rows):
        add(i, j, True, reordered)
        add_gap(n)

    first = next((n for n, r in enumerate(rows) if r["checkpoint"] and r["status"] != "same"), None)
    return TraceDiff(
        a_label=a_label,
        b_label=b_label,
        rows=rows,
        first_divergence=first,
        checkpoint_equal=first is None,
        ignored=ignored,
        events_a=sa.events,
        events_b=sb.events,
        _names_a=sa.names,
        _names_b=sb.names,
    )


def _seq(event: Event | None, index: int | None) -> int | None:
    if event is None:
        return None
    seq = event.get("seq", index)
    return int(seq) if seq is not None else index


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
