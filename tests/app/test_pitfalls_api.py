"""The Pitfalls routes (app/routes/pitfalls.py): the pairs, the search by error text, the links
that start a pair's runs, and the scenario metadata in ``GET /api/scenarios``."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from fastapi.testclient import TestClient

from app.routes.diff import labels
from app.store import RunRecord
from tests.app.conftest import finished_run, start_run


def test_scenarios_carry_their_metadata_and_the_others_read_as_before(client: TestClient) -> None:
    scenarios = {s["id"]: s for s in client.get("/api/scenarios").json()}
    assert set(scenarios["single_checkpoint"]) == {"id", "title", "description"}
    broken = scenarios["pitfall_no_grad_inputs_broken"]
    assert broken["group"] == "Pitfalls"
    assert (broken["pair"], broken["variant"]) == ("no_grad_inputs", "broken")
    assert broken["symptoms"][0] == (
        "UserWarning: None of the inputs have requires_grad=True. Gradients will be None"
    )
    assert "https://github.com/huggingface/transformers/issues/26221" in broken["reports"]
    assert "Group:" not in broken["description"]


def test_the_pitfalls_are_pairs_with_links(client: TestClient) -> None:
    pairs = client.get("/api/pitfalls").json()
    assert [p["pair"] for p in pairs] == [
        "no_grad_inputs",
        "recompute_mismatch",
        "memory_kept",
        "memory_small_region",
        "memory_one_region",
        "memory_wrong_figure",
        "nested_reruns",
        "ambient_hooks",
        "side_effects",
    ]
    first = pairs[0]
    assert first["broken"]["id"] == "pitfall_no_grad_inputs_broken"
    assert first["fixed"]["id"] == "pitfall_no_grad_inputs_fixed"
    assert first["links"] == {
        "broken": "/pitfalls/no_grad_inputs/broken",
        "fixed": "/pitfalls/no_grad_inputs/fixed",
        "diff": "/pitfalls/no_grad_inputs/diff",
    }


def test_the_search_finds_a_pasted_error(client: TestClient) -> None:
    text = (
        "torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed values for the "
        "following tensors have different metadata than during the forward pass.\ntensor at position 5:"
    )
    hits = client.get("/api/scenarios/search", params={"q": text}).json()
    assert hits[0]["scenario"]["id"] == "pitfall_recompute_mismatch_broken"
    assert hits[0]["symptom"].startswith("torch.utils.checkpoint.CheckpointError")
    assert client.get("/api/scenarios/search", params={"q": "zzz qqq"}).json() == []
    assert client.get("/api/scenarios/search", params={"q": "x" * 20_001}).status_code == 422


def test_a_side_link_runs_that_side_and_opens_its_viewer(client: TestClient) -> None:
    response = client.get("/pitfalls/side_effects/fixed", follow_redirects=False)
    assert response.status_code == 303
    run_id = response.headers["location"].removeprefix("/runs/")
    run = finished_run(client, run_id)
    assert (run["scenario"], run["status"]) == ("pitfall_side_effects_fixed", "done")


def test_the_diff_link_runs_both_and_the_diff_parts_where_the_fix_changes_the_trace(
    client: TestClient,
) -> None:
    response = client.get("/pitfalls/nested_reruns/diff", follow_redirects=False)
    assert response.status_code == 303
    url = urlparse(response.headers["location"])
    assert url.path == "/diff"
    ids = {k: v[0] for k, v in parse_qs(url.query).items()}
    runs = {side: finished_run(client, ids[side]) for side in ("a", "b")}
    assert runs["a"]["scenario"] == "pitfall_nested_reruns_broken"
    assert runs["b"]["scenario"] == "pitfall_nested_reruns_fixed"
    diff = client.get("/api/diff", params=ids).json()
    # The sides are named by the pair's variants (Note [Naming the sides of a diff]), with titles.
    assert (diff["a_label"], diff["b_label"]) == ("broken", "fixed")
    assert diff["runs"]["a"]["title"].startswith("Pitfall 4, broken: ")
    assert diff["runs"]["b"]["title"].startswith("Pitfall 4, fixed: ")
    assert "only in broken, " in diff["verdict"] and diff["verdict"].endswith(" only in fixed)")
    assert diff["checkpoint_equal"] is False
    assert diff["first_divergence"] is not None
    assert client.get(response.headers["location"]).status_code == 200  # the diff page


def test_unknown_pitfalls_and_sides_are_refused(client: TestClient) -> None:
    assert client.get("/pitfalls/no_such_pair/diff", follow_redirects=False).status_code == 404
    assert client.get("/pitfalls/no_grad_inputs/sideways", follow_redirects=False).status_code == 422


def test_two_different_scenarios_are_named_by_their_ids(client: TestClient) -> None:
    a = start_run(client, scenario="single_checkpoint")
    b = start_run(client, scenario="pitfall_nested_reruns_fixed")
    finished_run(client, a)
    finished_run(client, b)
    diff = client.get("/api/diff", params={"a": a, "b": b}).json()
    assert (diff["a_label"], diff["b_label"]) == ("single_checkpoint", "pitfall_nested_reruns_fixed")
    # One scenario twice: by backend and run id, as before.
    diff = client.get("/api/diff", params={"a": a, "b": a}).json()
    assert (diff["a_label"], diff["b_label"]) == (f"engine {a}", f"engine {a}")


def _record(run_id: str, scenario: str | None, backend: str = "engine", imported: bool = False) -> RunRecord:
    return RunRecord(
        id=run_id,
        status="done",
        scenario=scenario,
        title="",
        filename="scenario.py",
        source="",
        trusted=True,
        backend=backend,
        imported=imported,
        error=None,
        n_events=0,
        progress=0,
        stdout="",
        created_at="",
        started_at=None,
        finished_at=None,
    )


def test_naming_the_sides_of_a_diff() -> None:
    broken, fixed = _record("r1", "pitfall_side_effects_broken"), _record("r2", "pitfall_side_effects_fixed")
    assert labels(broken, fixed) == ("broken", "fixed")
    assert labels(fixed, broken) == ("fixed", "broken")
    # Two broken sides of different pairs are not a pair: named by their scenario ids.
    other = _record("r3", "pitfall_nested_reruns_broken")
    assert labels(broken, other) == ("pitfall_side_effects_broken", "pitfall_nested_reruns_broken")
    # Different backends as well: both said.
    on_torch = _record("r4", "pitfall_side_effects_fixed", backend="torch")
    assert labels(broken, on_torch) == ("broken (engine)", "fixed (torch)")
    # One scenario on two backends, text that is not bundled, an imported trace: as before.
    assert labels(fixed, on_torch) == ("engine", "torch")
    assert labels(_record("r5", None), fixed) == ("engine r5", "engine r2")
    imported = _record("r6", "pitfall_side_effects_broken", imported=True)
    assert labels(imported, fixed) == ("engine r6", "engine r2")
    assert labels(_record("r7", "no_such_scenario"), fixed) == ("engine r7", "engine r2")
