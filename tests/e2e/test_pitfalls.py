"""The home page's Pitfalls section (issue 17): a card per broken/fixed pair, and a search box that
finds a scenario from a pasted error text; a card's "diff" link runs both sides and opens the diff
of the two traces, which parts at the first checkpoint event that differs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import api, screenshot

pytestmark = pytest.mark.e2e

Page = Any

PASTED = """Traceback (most recent call last):
  File "/home/me/finetune.py", line 88, in <module>
    loss.backward()
[rank0]: torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed values for the \
following tensors have different metadata than during the forward pass.
[rank0]: tensor at position 16:
[rank0]: saved metadata: {'shape': torch.Size([1, 12, 171, 128]), 'dtype': torch.bfloat16}
"""


def open_pitfalls(page: Page, base: str) -> None:
    page.goto(base + "/")
    page.wait_for_function("document.getElementById('pitfalls').dataset.ready === '1'")


def test_the_section_has_a_card_per_pair_naming_its_error_text(page: Page, live_server: str) -> None:
    open_pitfalls(page, live_server)
    cards = page.locator("#pitfalls .pitfall")
    assert cards.count() == len(api(live_server, "/api/pitfalls")) == 9
    # "Did not reduce my memory" has four causes, a card each, numbered 3a to 3d.
    memory = page.locator('#pitfalls .pitfall[data-pair="memory_one_region"]')
    assert "whole model in one checkpoint" in memory.locator(".pitfall-symptom").text_content()
    assert memory.locator(".pitfall-number").text_content() == "3c"
    assert memory.locator(".pitfall-title").text_content() == (
        "3c one checkpoint around the whole model, the peak moves into its recomputation"
    )
    numbers = page.locator("#pitfalls .pitfall-number").all_text_contents()
    assert numbers == ["1", "2", "3a", "3b", "3c", "3d", "4", "5", "6"]
    # The pack's scenarios are listed here only, not in the main list of scenarios.
    page.wait_for_selector("#scenario-list .scenario")
    ids = page.locator("#scenario-list .scenario").evaluate_all("els => els.map((e) => e.dataset.id)")
    assert "single_checkpoint" in ids
    assert not [i for i in ids if i.startswith("pitfall_")], ids
    card = page.locator('#pitfalls .pitfall[data-pair="no_grad_inputs"]')
    assert (
        "None of the inputs have requires_grad=True" in card.locator(".pitfall-symptom").first.text_content()
    )
    assert card.locator("a.pitfall-broken").get_attribute("href") == "/pitfalls/no_grad_inputs/broken"
    assert card.locator("a.pitfall-fixed").get_attribute("href") == "/pitfalls/no_grad_inputs/fixed"
    assert card.locator("a.pitfall-diff").get_attribute("href") == "/pitfalls/no_grad_inputs/diff"
    report = card.locator(".pitfall-reports a").first
    assert report.text_content() == "transformers#26221"
    assert report.get_attribute("href") == "https://github.com/huggingface/transformers/issues/26221"
    screenshot(page, "pitfalls-01-home")


def test_pasting_an_error_text_finds_its_scenario(page: Page, live_server: str) -> None:
    open_pitfalls(page, live_server)
    page.fill("#pitfall-search", PASTED)
    first = page.locator("#pitfalls .pitfall-hit").first
    first.wait_for()
    assert first.get_attribute("data-id") == "pitfall_recompute_mismatch_broken"
    assert "Recomputed values for the following tensors" in first.locator(".pitfall-symptom").text_content()
    assert first.locator("a.pitfall-diff").get_attribute("href") == "/pitfalls/recompute_mismatch/diff"
    screenshot(page, "pitfalls-02-search")
    # Text that matches nothing says so.
    page.fill("#pitfall-search", "quantum chromodynamics on a lattice")
    page.wait_for_function("!document.querySelector('#pitfalls .pitfall-hit')")
    assert "No scenario matches" in page.locator("#pitfalls .pitfall-results").text_content()


def test_the_diff_link_compares_broken_with_fixed(page: Page, live_server: str) -> None:
    open_pitfalls(page, live_server)
    page.click('#pitfalls .pitfall[data-pair="nested_reruns"] a.pitfall-diff')
    page.wait_for_url("**/diff?a=*&b=*")
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=120_000)
    assert page.evaluate("document.body.dataset.equal") == "false"
    diff = page.evaluate("window.lens.diff")
    assert diff["first_divergence"] is not None
    assert diff["runs"]["a"]["title"].startswith("Pitfall 4, broken")
    assert diff["runs"]["b"]["title"].startswith("Pitfall 4, fixed")
    # The sides are named broken and fixed (by the server), with their scenarios' titles.
    assert (diff["a_label"], diff["b_label"]) == ("broken", "fixed")
    assert page.locator(".diff-run.side-a .side-name").text_content() == "broken"
    assert page.locator(".diff-run.side-b .side-name").text_content() == "fixed"
    assert page.locator(".diff-run.side-a .side-title").text_content() == diff["runs"]["a"]["title"]
    assert page.locator(".diff-run.side-b .side-title").text_content() == diff["runs"]["b"]["title"]
    assert page.locator("#diff-title").text_content() == "Diff: broken vs fixed"
    assert page.locator(".diff-colhead .head-a").text_content() == "broken"
    screenshot(page, "pitfalls-03-diff")
