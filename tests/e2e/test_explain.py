"""Explanations in a real browser (issue 11, parts 7 and 9): term cards on hover and on keyboard
focus, the keyboard-shortcuts dialog, the guided tour, decorating never turns text into markup,
and every control has an accessible name."""

from __future__ import annotations

from typing import Any

import pytest

from engine.trace.glossary import glossary
from tests.e2e.conftest import screenshot
from tests.e2e.test_story import open_story

pytestmark = pytest.mark.e2e

Page = Any


def unpack_step(page: Page, base: str, run_id: str) -> None:
    open_story(page, base, run_id)
    page.evaluate(
        "const s = window.lens.story.steps.find((x) => x.kind === 'unpack'); window.lens.act('goto', s.step)"
    )


def test_a_term_card_appears_on_focus_and_on_hover(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    unpack_step(page, live_server, nested["id"])
    term = page.locator("#view-caption .term[data-term='is_recomputed']").first
    expected = next(t for t in glossary() if t["id"] == "is_recomputed")
    term.focus()
    card = page.locator("#term-card")
    assert card.is_visible()
    assert expected["text"] in (card.text_content() or "")
    assert "PyTorch: torch/utils/checkpoint.py" in (card.text_content() or "")
    assert term.get_attribute("aria-describedby") == "term-card"
    screenshot(page, "explain-term-card")
    page.keyboard.press("Escape")
    assert not card.is_visible()
    # Hover shows another term's card; a Rule gets its own card too.
    holder = page.locator("#view-caption .term[data-term='holder']").first
    holder.hover()
    assert "What checkpoint keeps instead of a saved tensor" in (card.text_content() or "")
    page.mouse.move(5, 5)
    assert not card.is_visible()


def test_cards_stay_inside_the_viewport_at_1024x768(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    page.set_viewport_size({"width": 1024, "height": 768})
    unpack_step(page, live_server, nested["id"])
    for term in page.locator("#view-caption .term").all():
        term.focus()
        box = page.locator("#term-card").bounding_box()
        assert box is not None
        assert box["x"] >= 0 and box["y"] >= 0
        assert box["x"] + box["width"] <= 1024 and box["y"] + box["height"] <= 768


def test_decorating_never_turns_text_into_markup(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_story(page, live_server, nested["id"])
    made = page.evaluate(
        """async () => {
            const { decorate } = await import('/static/js/glossary.js');
            const p = document.createElement('p');
            p.textContent = 'A holder <img src=x onerror="window.__xss=1"> and `<script>window.__xss=2</script>` Rule 3';
            document.body.append(p);
            decorate(p);
            const out = {imgs: p.querySelectorAll('img, script').length, terms: [...p.querySelectorAll('.term')].map((t) => t.dataset.term),
                         text: p.textContent};
            p.remove();
            return out;
        }"""
    )
    assert made["imgs"] == 0
    assert made["terms"] == ["holder", "rule3"]
    assert "<img src=x" in made["text"]
    assert page.evaluate("window.__xss") is None


def test_the_shortcuts_dialog_opens_and_gives_focus_back(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_story(page, live_server, nested["id"])
    page.locator(".ctl-forward").focus()
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    assert dialog.is_visible()
    rows = dialog.locator("tr").all_text_contents()
    assert any("why?" in r for r in rows) and any("story" in r for r in rows)
    screenshot(page, "explain-shortcuts")
    page.keyboard.press("ArrowRight")  # keys go to the dialog, not to the run
    assert page.evaluate("window.lens.player.step") == 0
    page.keyboard.press("Escape")
    assert not dialog.is_visible()
    assert page.evaluate("document.activeElement.classList.contains('ctl-forward')")


def test_the_tour_goes_through_its_stops(page: Page, live_server: str, nested: dict[str, Any]) -> None:
    open_story(page, live_server, nested["id"], "?tour=1")
    tour = page.locator(".tour-box")
    tour.wait_for(state="visible")
    titles = []
    for _ in range(12):
        if not tour.is_visible():
            break
        titles.append(page.locator("#tour-title").text_content())
        target = page.locator(".tour-target")
        assert target.count() == 1, "each stop outlines what it talks about"
        if len(titles) == 2:
            screenshot(page, "explain-tour")
        page.keyboard.press("ArrowRight")
    assert titles[0] == "Story or every event" and titles[-1] == "Predict mode"
    assert len(titles) == 8 and not tour.is_visible()
    assert page.locator(".tour-target").count() == 0
    assert page.evaluate("window.lens.player.step") == 0, "the tour's keys did not step the run"
    # Escape closes it at any stop; the header button starts it again.
    page.click("#tour-start")
    assert tour.is_visible()
    page.keyboard.press("Escape")
    assert not tour.is_visible()


def test_every_control_has_an_accessible_name(page: Page, live_server: str, nested: dict[str, Any]) -> None:
    open_story(page, live_server, nested["id"])
    page.click(".ctl-bp-menu summary")
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll('main.viewer button, main.viewer input, main.viewer select, main.viewer a, main.viewer summary')]
            .filter((el) => el.getClientRects().length)
            .filter((el) => !(el.getAttribute('aria-label') || el.getAttribute('aria-labelledby') || el.title
                             || (el.labels && el.labels.length) || el.closest('label') || el.textContent.trim()))
            .map((el) => el.outerHTML.slice(0, 120))"""
    )
    assert unnamed == []
    # Panels are labelled regions.
    for panel in (
        "#view-chapters",
        "#view-caption",
        "#view-source",
        "#view-graph",
        "#view-frames",
        "#view-memory",
    ):
        assert page.locator(panel).get_attribute("aria-label")
