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


# A chain of 2,800 ops: a graph of about 14,000 nodes and edges, too big to lay out unasked.
CHAIN = '''"""A long chain"""
import engine as torch
x = torch.linspace(-1.0, 1.0, 16).requires_grad_()
h = x
for _ in range(700):
    h = (h.sin() * 1.01 + 0.1).tanh()
h.sum().backward()
'''


def test_a_graph_too_big_to_lay_out_at_once_waits_to_be_asked_for(page: Page, live_server: str) -> None:
    # Note [Graphs too big to lay out at once] (static/js/views/graph.js): laying it out would
    # freeze the page, so the panel says how big it is and draws it on request.
    created = api(live_server, "/api/runs", {"source": CHAIN, "filename": "chain.py"})
    assert wait_finished(live_server, created["id"])["status"] == "done"
    page.goto(f"{live_server}{created['url']}")
    page.wait_for_function("document.body.dataset.graph === 'deferred'", timeout=60_000)
    offer = page.locator("#view-graph .graph-offer")
    assert offer.is_visible()
    assert "nodes and edges" in offer.inner_text()
    assert page.locator("#view-graph svg").count() == 0
    # The other views work meanwhile: stepping to the end.
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("End")
    n = int(page.evaluate("window.lens.player.length"))
    page.wait_for_function(f"window.lens.player.step === {n}")
    screenshot(page, "long-run-graph-offered")
    page.locator("#view-graph [data-act=draw]").click()
    page.wait_for_function("document.body.dataset.graph === '1'", timeout=120_000)
    assert page.locator("#view-graph svg g.node").count() > 5_000
    assert page.locator("#view-graph .graph-offer").count() == 0
