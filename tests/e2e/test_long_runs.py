"""A long run in a real browser: an untrusted loop that runs into the event limit (100,000 events,
the sandbox's default) still opens, says where it was cut, and steps with a bounded event log."""

from __future__ import annotations

from typing import Any

import pytest

from app.sandbox import Limits
from tests.e2e.conftest import api, screenshot, wait_finished

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page

# Backward passes over one small graph, again and again: many events, few graph nodes.
LOOP = '''"""A loop that never ends"""
import engine as torch
w = torch.ones(3, requires_grad=True)
loss = (w * 2.0).sin().sum()
while True:
    loss.backward(retain_graph=True)
'''


@pytest.fixture(scope="module")
def cut_run(live_server: str) -> dict[str, Any]:
    created = api(live_server, "/api/runs", {"source": LOOP, "filename": "loop.py"})
    run = wait_finished(live_server, created["id"], timeout=180)
    assert run["error"] and run["error"]["limit"] == "max_events", run["error"]
    return {**run, "url": created["url"]}


def log_rows(page: Page) -> int:
    return int(page.evaluate("document.querySelectorAll('#view-log .log-row').length"))


def test_a_run_into_the_event_limit_opens_with_its_banner(
    page: Page, live_server: str, cut_run: dict[str, Any]
) -> None:
    limit = Limits().max_events
    assert limit >= 100_000
    assert (cut_run["n_events"], cut_run["truncated"], cut_run["event_limit"]) == (limit, True, limit)
    page.goto(f"{live_server}{cut_run['url']}?level=events")
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=120_000)
    page.wait_for_function("document.body.dataset.graph !== undefined", timeout=120_000)
    banner = page.locator("#run-truncated")
    assert banner.is_visible()
    n = f"{limit:,}"
    assert banner.inner_text().startswith(
        f"Stopped at event {n} of the limit {n} (max_events): the run was cut there; "
        "what happened before is all here."
    )
    assert int(page.evaluate("window.lens.player.length")) == limit
    # Stepping a 100,000-event run: the log keeps only the rows in view.
    page.locator("body").click(position={"x": 5, "y": 5})
    assert log_rows(page) < 200
    for key, expected in (("End", limit), ("Home", 0), ("ArrowRight", 1), ("ArrowRight", 2)):
        page.keyboard.press(key)
        page.wait_for_function(f"window.lens.player.step === {expected}")
        assert 0 < log_rows(page) < 200, key
    current = page.locator("#view-log .log-row.current")
    assert current.count() == 1 and current.get_attribute("data-step") == "2"
    banner.locator("button").click()
    page.wait_for_function(f"window.lens.player.step === {limit}")
    assert 0 < log_rows(page) < 200
    screenshot(page, "long-run-cut-at-the-limit")
