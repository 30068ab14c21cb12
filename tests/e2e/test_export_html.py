"""The self-contained HTML export in a real browser (app/export_html.py, docs/viewer.md
"Exports"): the file ``GET /api/runs/{id}/export.html`` downloads, opened from disk (file://)
with every other request refused, works as the run page does: ready, keyboard steps both ways,
the story level with its captions, the frames panel; and the graph's "SVG" button downloads the
graph at the current step, its styles inlined."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import screenshot
from tests.e2e.test_viewer import current_step

pytestmark = pytest.mark.e2e

Page = Any


@pytest.fixture(scope="module")
def exported(live_server: str, nested: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    with urllib.request.urlopen(f"{live_server}/api/runs/{nested['id']}/export.html", timeout=60) as r:
        html = r.read()
    path = tmp_path_factory.mktemp("export") / f"run-{nested['id']}.html"
    path.write_bytes(html)
    return path


def open_offline(page: Page, path: Path) -> list[str]:
    """Open ``path`` from disk; any request that is not for a file is refused and listed."""
    attempted: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith("file:"):
            r.continue_()
        else:
            attempted.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_function(
        "['ready', 'story', 'memory', 'graph'].every((k) => document.body.dataset[k] === '1')"
    )
    return attempted


def test_the_export_opens_from_disk_with_no_network(
    page: Page, exported: Path, nested: dict[str, Any]
) -> None:
    attempted = open_offline(page, exported)
    assert page.evaluate("window.lens.player.length") == len(nested["events"])
    assert page.evaluate("window.lens.level") == "story"
    assert page.locator("#run-title").text_content() == "Nested checkpoints"
    assert page.locator("#run-export").is_hidden()  # the file is its own export
    start = current_step(page)
    for _ in range(4):
        page.keyboard.press("ArrowRight")
    forward = current_step(page)
    assert forward > start
    assert (page.locator(".caption-text").text_content() or "").strip()
    page.keyboard.press("ArrowLeft")
    assert start < current_step(page) < forward
    page.keyboard.press("l")  # every event
    assert page.evaluate("window.lens.level") == "events"
    page.keyboard.press("ArrowRight")
    page.keyboard.press("l")
    assert page.evaluate("window.lens.level") == "story"
    page.keyboard.press("End")
    page.keyboard.press("Home")
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    assert page.locator("#view-frames .frame-card").count() > 0
    assert page.locator("#view-graph svg .node").count() > 0
    assert page.locator("#view-memory").text_content()
    screenshot(page, "export-html-file")
    assert attempted == []


def test_the_trace_link_of_the_export_downloads_the_inlined_trace(
    page: Page, exported: Path, nested: dict[str, Any]
) -> None:
    open_offline(page, exported)
    page.click("#run-downloads > summary")  # the header's "download" menu
    with page.expect_download() as info:
        page.locator("#run-trace").click()
    assert info.value.suggested_filename == f"{nested['id']}.trace.json"
    text = Path(info.value.path()).read_text(encoding="utf-8")
    assert '"events"' in text and '"derived"' not in text


def test_the_graph_downloads_as_svg_at_the_current_step(
    page: Page, exported: Path, nested: dict[str, Any]
) -> None:
    open_offline(page, exported)
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    step = current_step(page)
    with page.expect_download() as info:
        page.locator("#view-graph button[data-act='svg']").click()
    assert info.value.suggested_filename == f"run-{nested['id']}-step-{step}.svg"
    svg = Path(info.value.path()).read_text(encoding="utf-8")
    assert svg.startswith("<svg") and 'xmlns="http://www.w3.org/2000/svg"' in svg
    assert "<style>" in svg and "svg .absent { visibility: hidden; }" in svg
    assert "--fill-created:" in svg and "var(--" in svg
    assert 'class="node fn' in svg or 'class="node' in svg
    assert "absent" in svg  # what does not exist yet is in the file, hidden by the inlined rule


def test_the_run_page_links_its_export(page: Page, live_server: str, nested: dict[str, Any]) -> None:
    page.goto(f"{live_server}/runs/{nested['id']}")
    page.wait_for_function("document.body.dataset.ready === '1'")
    page.click("#run-downloads > summary")
    link = page.locator("#run-export")
    assert link.is_visible() and link.text_content().startswith("one HTML file")
    assert link.get_attribute("href") == f"/api/runs/{nested['id']}/export.html"
