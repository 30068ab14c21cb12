"""The embed page in a real browser (issue 14): a page of another origin frames
``/embed/runs/{id}``; the frame gets ready, steps forward with its Forward button and the
keyboard, its caption changes, and it has no site header. The run page's Embed dialog gives an
``<iframe>`` snippet at the current step and level, and at 800x500 the embed page's panels do
not overlap. Every page fails its test on a console error (tests/e2e/conftest.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import screenshot

pytestmark = pytest.mark.e2e

Page = Any

READY = "document.body.dataset.ready === '1' && document.body.dataset.story === '1'"


def framed(
    page: Page, base: str, run_id: str, query: str = "?step=0&level=story", size: tuple[int, int] = (800, 500)
) -> Any:
    """A host page of another origin holding the embed page in an iframe; its frame.

    The host is the live server under the name ``localhost`` (the embed is framed from
    ``127.0.0.1``): another origin, so ``frame-ancestors *`` is what lets the frame load, and a
    loopback one, so Chromium's private-network rules do not block the frame."""
    url = f"{base}/embed/runs/{run_id}{query}"
    page.goto(base.replace("127.0.0.1", "localhost") + "/")
    page.set_content(
        f'<!doctype html><link rel="icon" href="data:,"><h1>My course</h1><iframe src="{url}" width="{size[0]}" height="{size[1]}"></iframe>'
    )
    frame = page.frame_locator("iframe")
    frame.locator("body[data-ready='1']").wait_for(state="attached")
    handle = next(f for f in page.frames if f.url.startswith(f"{base}/embed/"))
    handle.wait_for_function(READY)
    return handle


def test_the_framed_embed_steps_forward_with_its_button_and_keys(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    frame = framed(page, live_server, nested["id"])
    assert frame.locator(".site-head").count() == 0
    assert frame.locator("#view-source, #view-log, #view-memory, #view-chapters").count() == 0
    assert frame.evaluate("window.lens.level") == "story"
    assert frame.evaluate("window.lens.player.step") == 0
    before = frame.locator(".caption-text").text_content()
    frame.locator(".ctl-forward").click()
    one = frame.evaluate("window.lens.player.step")
    assert one > 0
    after = frame.locator(".caption-text").text_content()
    assert after and after != before
    assert (
        frame.locator(".ctl-step").text_content()
        == f"Story step 1 of {frame.evaluate('window.lens.story.length')}"
    )
    # The keyboard works in the frame once it has the focus (the click gave it).
    frame.locator(".caption-text").click()
    page.keyboard.press("ArrowRight")
    frame.wait_for_function(f"window.lens.player.step > {one}")
    assert frame.locator(".caption-text").text_content() != after
    # "view full run" opens the full viewer, in a new tab, at the frame's step.
    frame.wait_for_function(
        "document.querySelector('#embed-full').href.includes('step=' + window.lens.player.step)"
    )
    link = frame.locator("#embed-full")
    assert link.get_attribute("target") == "_blank"
    assert f"/runs/{nested['id']}?step=" in (link.get_attribute("href") or "")
    screenshot(page, "embed-framed")


def test_the_embed_opens_at_the_step_and_level_of_its_url(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    frame = framed(page, live_server, nested["id"], "?step=40&level=events")
    assert frame.evaluate("window.lens.player.step") == 40
    assert frame.evaluate("window.lens.level") == "events"
    assert frame.locator(".ctl-step").text_content() == f"Step 40 of {len(nested['events'])}"


def test_the_run_page_embed_dialog_gives_a_snippet_at_the_current_step(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    page.goto(f"{live_server}/runs/{nested['id']}?step=0")
    page.wait_for_function(READY)
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    step = page.evaluate("window.lens.player.step")
    page.locator("#run-embed").click()
    dialog = page.locator(".embed-dialog")
    assert dialog.is_visible()
    code = dialog.locator(".embed-code").input_value()
    assert code.startswith(f'<iframe src="{live_server}/embed/runs/{nested["id"]}?step={step}&level=story"')
    assert code.endswith("</iframe>")
    dialog.locator(".embed-copy").click()
    page.wait_for_function("document.querySelector('.embed-status').textContent !== ''")
    # Keys typed in the dialog do not step the run behind it; Escape closes it.
    page.keyboard.press("ArrowRight")
    assert page.evaluate("window.lens.player.step") == step
    page.keyboard.press("Escape")
    assert not dialog.is_visible()
    # At the other level, the snippet says so.
    page.keyboard.press("l")
    page.locator("#run-embed").click()
    assert "&level=events" in dialog.locator(".embed-code").input_value()


def boxes(page: Page) -> dict[str, dict[str, float]]:
    return dict(
        page.evaluate(
            """() => Object.fromEntries(
                 ['.embed-head', '#view-controls', '#view-caption', '#view-graph', '#view-frames'].map((s) => {
                   const r = document.querySelector(s).getBoundingClientRect();
                   return [s, {x: r.left, y: r.top, w: r.width, h: r.height}];
                 }))"""
        )
    )


@pytest.mark.parametrize("size", [(800, 500), (600, 400)])
def test_the_embed_panels_fit_without_overlap(
    page: Page, live_server: str, nested: dict[str, Any], size: tuple[int, int]
) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(f"{live_server}/embed/runs/{nested['id']}?step=120")
    page.wait_for_function(READY)
    found = boxes(page)
    names = list(found)
    for name, b in found.items():
        assert b["w"] > 0 and b["h"] > 0, name
        assert b["x"] >= 0 and b["y"] >= 0, name
        assert b["x"] + b["w"] <= size[0] + 0.5 and b["y"] + b["h"] <= size[1] + 0.5, (
            f"{name} leaves the frame"
        )
    for i, a in enumerate(names):
        for other in names[i + 1 :]:
            p, q = found[a], found[other]
            apart = (
                p["x"] + p["w"] <= q["x"] + 0.5
                or q["x"] + q["w"] <= p["x"] + 0.5
                or p["y"] + p["h"] <= q["y"] + 0.5
                or q["y"] + q["h"] <= p["y"] + 0.5
            )
            assert apart, f"{a} overlaps {other}"
    assert found["#view-graph"]["h"] >= size[1] * 0.35, "the graph gets a fair share of the frame"
    assert page.evaluate("document.documentElement.scrollHeight") <= size[1]
    screenshot(page, f"embed-{size[0]}x{size[1]}")
