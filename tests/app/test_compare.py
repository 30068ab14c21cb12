"""The compare page's model and figures (app/compare.py, Note [Strategies compared]) and its API.

The model scripts measure themselves the way one would on torch (saved-tensor hook bytes, block
forward calls); on the engine those measurements must match what the trace shows, and the
strategies must order as checkpointing promises. ``test_engine_and_torch_measure_the_same`` runs
every strategy on torch 2.8.0 too (an oracle test: it fails, never skips, in CI).
"""

from __future__ import annotations

import math
import time
from types import ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.compare import (
    STRATEGIES,
    CompareError,
    fit_exponent,
    model_source,
    row_of,
    sqrt_law,
    table_text,
)
from app.runner import run_scenario


def run_row(strategy: str, n: int, backend: str = "engine") -> dict[str, Any]:
    result = run_scenario(model_source(strategy, n), trusted=True, backend=backend)
    assert result.ok and result.trace is not None, result.error
    return row_of(strategy, n, backend, result.trace["events"])


@pytest.fixture(scope="module")
def rows4() -> dict[str, dict[str, Any]]:
    return {s: run_row(s, 4) for s in STRATEGIES}


def test_every_strategy_runs_and_measures_itself(rows4: dict[str, dict[str, Any]]) -> None:
    for s, row in rows4.items():
        assert row["measured"] is not None, s
        assert len(row["measured"]["block_calls"]) == 4
        assert row["extra_block_runs"] == sum(row["measured"]["block_calls"]) - 4


def test_checkpointing_trades_memory_for_recomputation(rows4: dict[str, dict[str, Any]]) -> None:
    none, per_block, nested, seq = (rows4[s] for s in ("none", "per_block", "nested", "sequential"))
    assert none["recomputations"] == 0 and none["extra_block_runs"] == 0 and none["holders"] == 0
    # Each checkpointed block runs once more; nested ones up to three times (Rule 2).
    assert per_block["measured"]["block_calls"] == [2, 2, 2, 2]
    assert nested["measured"]["block_calls"] == [3, 2, 3, 2]
    assert per_block["peak_held"] < none["peak_held"]
    assert seq["peak_held"] < none["peak_held"]
    # Through the outermost hooks go only what no checkpoint holds: far less than without one.
    assert per_block["measured"]["saved_bytes"] < none["measured"]["saved_bytes"] / 4


def test_a_selective_policy_keeps_the_matmuls_and_recomputes_less(rows4: dict[str, dict[str, Any]]) -> None:
    selective, per_block = rows4["selective"], rows4["per_block"]
    assert selective["recomputed_ops"] < per_block["recomputed_ops"]
    assert selective["holders"] == per_block["holders"]


def test_the_sqrt_segments_grow_as_sqrt_n() -> None:
    ns = (4, 16, 64)
    held = {s: [run_row(s, n)["peak_held"] for n in ns] for s in ("none", "sequential")}
    assert 0.9 < fit_exponent(ns, held["none"]) < 1.1
    assert 0.35 < fit_exponent(ns, held["sequential"]) < 0.7


def test_fit_and_law_on_exact_curves() -> None:
    ns = [4, 9, 16, 25]
    assert fit_exponent(ns, [3 * math.sqrt(n) for n in ns]) == pytest.approx(0.5)
    assert fit_exponent(ns, [2.0 * n for n in ns]) == pytest.approx(1.0)
    assert sqrt_law(ns, [5 * math.sqrt(n) for n in ns]) == pytest.approx([5 * math.sqrt(n) for n in ns])


def test_bad_requests_are_refused_with_what_is_wrong() -> None:
    with pytest.raises(CompareError, match="unknown strategy 'everything'"):
        model_source("everything", 4)
    with pytest.raises(CompareError, match="between 1 and 64"):
        model_source("none", 65)


def test_the_table_has_a_row_per_run(rows4: dict[str, dict[str, Any]]) -> None:
    text = table_text(list(rows4.values()))
    lines = text.splitlines()
    assert len(lines) == 2 + len(rows4)
    assert lines[0].startswith("strategy") and "held for backward" in lines[0]
    assert any(line.startswith("one checkpoint per block") for line in lines)


@pytest.mark.oracle
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_engine_and_torch_measure_the_same(strategy: str, torch_oracle: ModuleType) -> None:
    mine, theirs = run_row(strategy, 4), run_row(strategy, 4, "torch")
    assert theirs["measured"] == mine["measured"]
    for key in ("recomputations", "early_stops", "holders", "extra_block_runs"):
        assert theirs[key] == mine[key], key


# --- the API ---------------------------------------------------------------------------------------


def poll(client: TestClient, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        r = client.post(path, json=body or {})
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        if doc["done"] or time.monotonic() > deadline:
            return doc
        time.sleep(0.2)


def test_the_api_runs_every_strategy_once_and_links_each_row(client: TestClient) -> None:
    doc = poll(client, "/api/compare", {"n": 4})
    assert doc["done"]
    assert [r["strategy"] for r in doc["rows"]] == list(STRATEGIES)
    for row in doc["rows"]:
        assert row["status"] == "done", row
        assert row["url"] == f"/runs/{row['id']}"
        run = client.get(f"/api/runs/{row['id']}").json()
        assert run["scenario"] == f"compare/{row['strategy']}/4"
        assert 1 <= row["peak_held_step"] <= run["n_events"]
    # A second call reuses the runs.
    again = client.post("/api/compare", json={"n": 4}).json()
    assert [r["id"] for r in again["rows"]] == [r["id"] for r in doc["rows"]]


def test_the_api_refuses_what_it_cannot_do(client: TestClient) -> None:
    assert client.post("/api/compare", json={"n": 100}).status_code == 422
    r = client.post("/api/compare", json={"n": 4, "backends": ["jax"]})
    assert r.status_code == 422 and "'jax' is not available" in r.json()["detail"]


# --- the CLI ---------------------------------------------------------------------------------------


def test_the_cli_prints_the_table_and_refuses_a_bad_n(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["compare", "--n", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("An MLP of 2 blocks")
    assert out[1].split()[0] == "strategy"
    assert [line.split("  ")[0] for line in out[3:]] == [s.title for s in STRATEGIES.values()]
    assert main(["compare", "--n", "99"]) == 2
    assert "--n must be between 1 and 64 blocks, not 99" in capsys.readouterr().err


def test_the_cli_sweep_reports_each_exponent(capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    assert main(["compare", "--sweep"]) == 0
    out = capsys.readouterr().out
    exponents = {
        line.split(": grows as N^")[0]: float(line.split("N^")[1].split()[0])
        for line in out.splitlines()
        if "grows as" in line
    }
    assert 0.9 < exponents["no checkpointing"] < 1.1
    assert 0.35 < exponents["checkpoint_sequential, sqrt(N) segments"] < 0.7
