"""Share and edit again (issue 14): the editor's "Share link" makes a permalink (/s/<id>) that opens
the text in the editor of another browser, keeping the draft it replaces; a run's "edit and run
again" opens its text there, and running the edit makes a new run."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import api, screenshot, wait_finished
from tests.e2e.test_editor import editor_text, open_home

pytestmark = pytest.mark.e2e

Page = Any

SHARED = '"""Shared one"""\nimport engine as torch\nx = torch.ones(3, requires_grad=True)\n(x * x).sum().backward()\nprint(x.grad)\n'


def set_text(page: Page, text: str) -> None:
    page.evaluate(
        "(t) => { const v = window.scenarioEditor; v.dispatch({changes: {from: 0, to: v.state.doc.length, insert: t}}); }",
        text,
    )


def test_a_shared_link_opens_the_text_in_the_editor_and_keeps_the_draft(
    browser: Any, live_server: str
) -> None:
    author = browser.new_page(viewport={"width": 1440, "height": 900}, bypass_csp=True)  # see conftest.page
    try:
        open_home(author, live_server)
        set_text(author, SHARED)
        author.fill("#editor-name", "shared_one.py")
        author.click("#editor-share")
        author.locator("#share-result").wait_for()
        url = author.input_value("#share-url")
        assert re.fullmatch(re.escape(live_server) + r"/s/[a-z2-7]{12}", url), url
        screenshot(author, "share-01-link")
    finally:
        author.close()

    reader = browser.new_page(viewport={"width": 1440, "height": 900}, bypass_csp=True)
    try:
        open_home(reader, live_server)
        set_text(reader, "# my own work in progress\n")
        reader.goto(url)
        reader.wait_for_function("document.body.dataset.editorReady === '1'")
        assert editor_text(reader) == SHARED
        assert reader.input_value("#editor-name") == "shared_one.py"
        notice = reader.locator("#editor-notice")
        assert notice.is_visible() and "shared scenario" in notice.text_content()
        screenshot(reader, "share-02-opened")
        reader.click("#editor-restore")
        assert editor_text(reader) == "# my own work in progress\n", "the replaced draft comes back"
    finally:
        reader.close()


def test_edit_and_run_again_from_a_run(page: Page, live_server: str) -> None:
    created = api(live_server, "/api/runs", {"scenario": "single_checkpoint"})
    assert wait_finished(live_server, created["id"])["status"] == "done"
    page.goto(f"{live_server}/runs/{created['id']}")
    page.wait_for_function("document.body.dataset.ready === '1'")
    # The header's exports: the Perfetto trace downloads from the server, with its tracks.
    page.click("#run-downloads > summary")
    chrome = page.locator("#run-chrome")
    assert chrome.is_visible()
    page.keyboard.press("Escape")
    assert not chrome.is_visible(), "Escape closes the menu"
    perfetto = api(live_server, chrome.get_attribute("href"))
    names = {e.get("name") for e in perfetto["traceEvents"]}
    assert "memory (bytes)" in names and {"s", "f"} <= {e["ph"] for e in perfetto["traceEvents"]}
    edit = page.locator("#run-edit")
    assert edit.is_visible()
    edit.click()
    page.wait_for_function("document.body.dataset.editorReady === '1'")
    assert "checkpoint(f, x, use_reentrant=False)" in editor_text(page)
    assert "Editing the scenario of the run" in page.locator("#editor-notice").text_content()
    text = editor_text(page).replace(
        "torch.randn(3, requires_grad=True)", "torch.randn(5, requires_grad=True)"
    )
    set_text(page, text)
    page.click("#editor-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/(?!" + created["id"] + r")[^/?]+"))
    page.wait_for_function("document.body.dataset.ready === '1'")
    run_id = re.search(r"/runs/([^/?]+)", page.url).group(1)  # type: ignore[union-attr]
    run = api(live_server, f"/api/runs/{run_id}")
    assert "randn(5" in run["source"] and run["id"] != created["id"]
    screenshot(page, "share-03-edited-run")
