"""The diff page in a real browser: the home page's "diff" action runs single_checkpoint on the
engine and on real torch, and the page shows the two traces aligned, identical."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, api

pytestmark = [pytest.mark.e2e, pytest.mark.oracle]

Page = Any  # playwright.sync_api.Page (optional package)
SHOT = ROOT / "test-output" / "diff.png"


def test_the_diff_of_engine_and_torch(page: Page, live_server: str, torch_oracle: ModuleType) -> None:
    page.goto(live_server + "/")
    card = page.locator(".scenario", has=page.locator(".scenario-id", has_text="single_checkpoint.py"))
    card.locator(".run-diff").click()
    page.wait_for_url(re.compile(r"/diff\?a=[^&]+&b=[^&]+$"))
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=120_000)

    diff = page.evaluate("window.lens.diff")
    assert diff["equal"], diff["verdict"]
    assert (diff["runs"]["a"]["backend"], diff["runs"]["b"]["backend"]) == ("engine", "torch")
    verdict = page.locator(".verdict").first
    assert verdict.get_attribute("data-equal") == "true"
    assert (
        verdict.text_content()
        .strip()
        .endswith(f"Checkpoint events identical: {diff['counts']['same']} events")
    )
    assert "Gradients equal" in page.locator(".verdict.grads").text_content()
    assert "torch 2.8" in page.locator(".diff-run.side-b .backend-badge").text_content()

    # Checkpoint events only, by default: one row each, every one the same on both sides.
    checkpoint_rows = sum(1 for r in diff["rows"] if r["checkpoint"])
    rows = page.locator(".diff-row")
    assert rows.count() == checkpoint_rows > 0  # all in view: 24 rows
    assert page.locator(".diff-row.st-same.ck").count() == checkpoint_rows
    first = rows.first
    assert first.locator(".side-a .kind").text_content() == "frame_new"
    a_seq, b_seq = (
        diff["rows"][int(first.get_attribute("data-row"))]["a"],
        diff["rows"][int(first.get_attribute("data-row"))]["b"],
    )
    assert (
        first.locator(".side-a a.seq").get_attribute("href")
        == f"/runs/{diff['runs']['a']['id']}?step={a_seq + 1}"
    )
    assert (
        first.locator(".side-b a.seq").get_attribute("href")
        == f"/runs/{diff['runs']['b']['id']}?step={b_seq + 1}"
    )
    assert page.locator(".diff-count").text_content() == f"{checkpoint_rows} of {len(diff['rows'])} rows"
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT))

    # Every event, once the filter is off.
    page.locator(".diff-filter input").uncheck()
    assert page.locator(".diff-count").text_content() == f"{len(diff['rows'])} of {len(diff['rows'])} rows"
    assert page.locator(".diff-row.plain").count() > 0
    page.screenshot(path=str(Path(SHOT.parent, "diff-all-events.png")))

    # A seq opens that event in its run's viewer.
    page.locator(".diff-filter input").check()
    page.locator(".diff-row").nth(3).locator(".side-b a.seq").click()
    page.wait_for_url(re.compile(r"/runs/[^/?]+\?step=\d+"))
    page.wait_for_function("document.body.dataset.ready === '1'")
    assert page.locator("#run-backend").text_content().startswith("torch 2.8")
    run = api(live_server, f"/api/runs/{diff['runs']['b']['id']}")
    assert run["backend"] == "torch"
