"""Events delivered while a recording goes on: ``Trace.n_final`` (Note [Final events]).

A consumer that copies ``events[:n_final]`` as it grows must end up with exactly the trace the
recording returns, and the prefix must move with each top-level statement, not only at the end.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import engine
from app.runner import list_scenarios, run_scenario
from engine import trace
from engine.trace import _core


class _Consumer:
    """Copies the newly final events after every event, as a streaming reader would."""

    def __init__(self) -> None:
        self.copied: list[dict[str, Any]] = []
        self.final_at: list[tuple[int, int]] = []  # (events emitted, events final) per event

    def see(self, recorder: _core.RecorderCore) -> None:
        final = recorder.final
        assert final >= len(self.copied), "the final prefix went back"
        self.copied.extend(copy.deepcopy(recorder.events[len(self.copied) : final]))
        self.final_at.append((len(recorder.events), final))


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> _Consumer:
    seen = _Consumer()
    append = _core.RecorderCore.append

    def watched(self: _core.RecorderCore, *args: Any, **kwargs: Any) -> Any:
        event = append(self, *args, **kwargs)
        seen.see(self)
        return event

    monkeypatch.setattr(_core.RecorderCore, "append", watched)
    return seen


@pytest.mark.parametrize("scenario", [s.id for s in list_scenarios()])
def test_events_final_while_running_are_the_events_of_the_finished_trace(
    consumer: _Consumer, scenario: str
) -> None:
    result = run_scenario(scenario, trusted=True)
    assert result.trace is not None
    events = result.trace["events"]
    copied = json.loads(json.dumps(consumer.copied))
    assert copied == events[: len(copied)]
    # The prefix moves during the run: most events are final before the last one is emitted.
    assert consumer.final_at[-1][1] > 0
    assert len(copied) > len(events) // 4, (len(copied), len(events))


def test_a_tensor_is_named_within_its_statement_and_final_after_it(consumer: _Consumer) -> None:
    with trace.record() as tr:
        a = engine.ones(2, requires_grad=True)
        b = a.sin()
        n_after_b = tr.n_final
        c = (b * 2).sum()  # b * 2 is never bound: it stays unnamed once this statement is over
        c.backward()
    names = [e["name"] for e in tr.events if e["kind"] == "tensor_new"]
    assert names[:4] == ["a", "b", None, "c"]
    # While ``b = a.sin()`` ran, ``b`` was not bound yet: final stops at its tensor_new.
    b_new = next(e["seq"] for e in tr.events if e["kind"] == "tensor_new" and e["name"] == "b")
    assert n_after_b == b_new
    assert tr.n_final == len(tr.events)


def test_parameters_in_a_list_of_modules_are_named_by_their_place_in_it() -> None:
    with trace.record() as tr:
        layers = [engine.nn.Linear(2, 2) for _ in range(2)]
        model = engine.nn.Sequential(*layers)
        model(engine.ones(1, 2)).sum().backward()
    leaves = [e["name"] for e in tr.events if e["kind"] == "tensor_new" and e["requires_grad"]][:4]
    assert leaves == ["layers[0].weight", "layers[0].bias", "layers[1].weight", "layers[1].bias"]
