"""The "Pitfalls" pack and the scenario search of the home page (docs/pitfalls.md).

- ``pitfall_pairs()``: the bundled scenarios of the group "Pitfalls", paired broken/fixed by
  their ``Pair`` (Note [Scenario metadata] in app/runner.py), in file order.
- ``search_scenarios(query)``: the bundled scenarios an error text or a symptom points to, best
  first (Note [Finding a scenario by its error text]).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.runner import ScenarioInfo, list_scenarios

GROUP = "Pitfalls"


@dataclass(frozen=True)
class PitfallPair:
    """A pitfall: the scenario that shows the failure and the one that shows the fix."""

    pair: str
    broken: ScenarioInfo
    fixed: ScenarioInfo

    @property
    def symptoms(self) -> tuple[str, ...]:
        return self.broken.symptoms

    @property
    def reports(self) -> tuple[str, ...]:
        # The broken side's reports, then any only the fixed side names.
        return (*self.broken.reports, *(r for r in self.fixed.reports if r not in self.broken.reports))


def pitfall_pairs(scenarios: list[ScenarioInfo] | None = None) -> list[PitfallPair]:
    """Every complete broken/fixed pair of the Pitfalls group, in the order of the broken sides'
    titles ("Pitfall 1, broken: ...", "Pitfall 2, ...": the order of docs/pitfalls.md)."""
    infos = [s for s in (scenarios if scenarios is not None else list_scenarios()) if s.group == GROUP]
    sides: dict[str, dict[str, ScenarioInfo]] = {}
    for s in infos:
        if s.pair and s.variant in ("broken", "fixed"):
            sides.setdefault(s.pair, {})[s.variant] = s
    pairs = [
        PitfallPair(pair, both["broken"], both["fixed"])
        for pair, both in sides.items()
        if "broken" in both and "fixed" in both
    ]
    return sorted(pairs, key=lambda p: p.broken.title)


def find_pair(pair: str) -> PitfallPair | None:
    return next((p for p in pitfall_pairs() if p.pair == pair), None)


# Note [Finding a scenario by its error text]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# People paste what their terminal shows: one line of an error, or a whole traceback with their
# own paths, ranks ("[rank0]:") and shapes ("torch.Size([1, 12, 342, 128])"). So a text is
# compared as a set of words: lower case, numbers dropped (positions, shapes, line numbers vary
# from run to run; a word must start with a letter or "_"), a few filler words dropped, and
# ``engine.`` read as ``torch.`` (the engine's names for torch's). Two figures decide:
#
# - ``symptom``: the largest share of one of the scenario's symptoms (its ``Symptom`` lines)
#   found in the query: a traceback containing the error text covers it whole, whatever else it
#   holds.
# - ``query``: the share of the query's words found anywhere in the scenario (title,
#   description, symptoms): a few words typed ("metadata mismatch") all found.
#
# The score is ``2 * symptom + query``: a scenario whose error text was pasted comes first. Those
# under ``MIN_SCORE``, or under half the best score (weak matches next to a strong one), are left
# out; ties keep file order.

MIN_SCORE = 0.5
_WORD = re.compile(r"[a-z_][a-z0-9_]*")
_FILLER = frozenset(
    "a an and are as at be by for from has have in is it its of on or than that the this to was "
    "were will with".split()
)


def words(text: str) -> set[str]:
    """The words of a text as the search compares them (Note [Finding a scenario by its error text])."""
    text = text.lower().replace("engine.", "torch.")
    return {w for w in _WORD.findall(text) if len(w) > 1 and w not in _FILLER}


@dataclass(frozen=True)
class SearchHit:
    scenario: ScenarioInfo
    score: float
    symptom: str | None  # the symptom the query matched best, if any did


def _share(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def search_scenarios(
    query: str, scenarios: list[ScenarioInfo] | None = None, limit: int = 8
) -> list[SearchHit]:
    """The scenarios ``query`` (an error text, a traceback, a few words) points to, best first."""
    q = words(query)
    if not q:
        return []
    hits: list[SearchHit] = []
    for s in scenarios if scenarios is not None else list_scenarios():
        best, symptom = 0.0, None
        for text in s.symptoms:
            share = _share(words(text), q)
            if share > best:
                best, symptom = share, text
        everything = words(" ".join((s.title, s.description, *s.symptoms)))
        score = 2 * best + _share(q, everything)
        if score >= MIN_SCORE:
            hits.append(SearchHit(s, round(score, 3), symptom))
    hits.sort(key=lambda h: -h.score)  # stable: ties keep file order
    return [h for h in hits if h.score >= hits[0].score / 2][:limit]
