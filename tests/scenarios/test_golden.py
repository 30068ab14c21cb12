"""Each bundled scenario's trace equals its golden file (``tests/golden/<scenario>.json``).

On a failure, the message shows the first events that differ. If the change is intended, rerun
``.venv/bin/python scripts/regen_golden.py`` and review ``git diff tests/golden``.
"""

from __future__ import annotations

import jsonschema
import pytest

from app.runner import ScenarioInfo, list_scenarios, run_scenario
from engine import trace
from tests.scenarios._golden import GOLDEN_DIR, REGEN_COMMAND, describe_difference, dumps, load, run_golden

SCENARIOS = list_scenarios()


@pytest.mark.parametrize("info", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_trace_matches_golden(info: ScenarioInfo) -> None:
    expected = load(info.id)
    assert expected is not None, f"no golden file for {info.id}: run `{REGEN_COMMAND} {info.id}`"
    actual = run_golden(info)
    if actual != expected:
        pytest.fail(
            f"{info.id}: the trace differs from {GOLDEN_DIR.name}/{info.id}.json "
            f"(if intended: `{REGEN_COMMAND} {info.id}`, then review the diff)\n"
            + describe_difference(expected, actual)
        )
    # The stored text is exactly what the script writes: no hand edits, no stale formatting.
    assert (GOLDEN_DIR / f"{info.id}.json").read_text(encoding="utf-8") == dumps(actual)


def test_every_golden_file_has_a_scenario() -> None:
    orphans = sorted({p.stem for p in GOLDEN_DIR.glob("*.json")} - {s.id for s in SCENARIOS})
    assert not orphans, f"golden files without a scenario: {orphans} (`{REGEN_COMMAND}` removes them)"


@pytest.mark.parametrize("info", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario_trace_validates_against_the_schema(info: ScenarioInfo) -> None:
    result = run_scenario(info.path, trusted=True)
    assert result.trace is not None
    jsonschema.validate(result.trace, trace.schema())


def test_a_difference_is_described_at_the_first_differing_event() -> None:
    golden = load("single_checkpoint")
    assert golden is not None
    changed = {"run": dict(golden["run"]), "trace": dict(golden["trace"])}
    events = [dict(e) for e in golden["trace"]["events"]]
    events[5]["kind"] = "something_else"
    changed["trace"]["events"] = events
    text = describe_difference(golden, changed)
    assert "first difference at event 5" in text
    assert "something_else" in text
