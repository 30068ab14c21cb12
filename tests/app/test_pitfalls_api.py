"""The Pitfalls routes (app/routes/pitfalls.py): the pairs, the search by error text, the links
that start a pair's runs, and the scenario metadata in ``GET /api/scenarios``."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from fastapi.testclient import TestClient

from tests.app.conftest import finished_run


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


def test_the_pitfalls_are_six_pairs_with_links(client: TestClient) -> None:
    pairs = client.get("/api/pitfalls").json()
    assert [p["pair"] for p in pairs] == [
        "no_grad_inputs",
        "recompute_mismatch",
        "memory_kept",
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
    assert diff["checkpoint_equal"] is False
    assert diff["first_divergence"] is not None
    assert client.get(response.headers["location"]).status_code == 200  # the diff page


def test_unknown_pitfalls_and_sides_are_refused(client: TestClient) -> None:
    assert client.get("/pitfalls/no_such_pair/diff", follow_redirects=False).status_code == 404
    assert client.get("/pitfalls/no_grad_inputs/sideways", follow_redirects=False).status_code == 422
