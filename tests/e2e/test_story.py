"""The story level in a real browser (issue 11): story / every-event levels keep the position,
chapters jump, "why?" follows cause links back to the unpack that started a recomputation,
breakpoints run forward and backward and survive a permalink, predict mode scores a scripted
set of answers, and nested_checkpoint reads in fewer than 80 story steps.

Expected values come from the run's own story (``GET /api/runs/{id}/story``, which
engine/trace/story.py computes and tests/trace/test_story.py checks on the golden traces), never
written down here.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import api, screenshot
from tests.e2e.test_viewer import current_step

pytestmark = pytest.mark.e2e

Page = Any


@pytest.fixture(scope="session")
def story(live_server: str, nested: dict[str, Any]) -> dict[str, Any]:
    return dict(api(live_server, f"/api/runs/{nested['id']}/story"))


def open_story(page: Page, base: str, run_id: str, query: str = "") -> None:
    page.goto(f"{base}/runs/{run_id}{query}")
    page.wait_for_function("document.body.dataset.ready === '1' && document.body.dataset.story === '1'")


def step_text(page: Page) -> str:
    return str(page.locator(".ctl-step").text_content())


def test_story_is_the_default_level_and_reaches_the_end_of_the_backward_in_under_80_steps(
    page: Page,
    live_server: str,
    nested: dict[str, Any],
    story: dict[str, Any],
) -> None:
    open_story(page, live_server, nested["id"])
    k = len(story["steps"])
    assert page.evaluate("window.lens.level") == "story"
    assert step_text(page) == f"Story step 0 of {k}"
    assert page.locator(".ctl-level-story").get_attribute("aria-checked") == "true"
    end = next(s for s in story["steps"] if s["kind"] == "backward_end")
    captions = set()
    for i in range(end["index"] + 1):
        page.keyboard.press("ArrowRight")
        assert current_step(page) == story["steps"][i]["step"]
        text = page.locator(".caption-text").text_content() or ""
        assert text.strip(), f"story step {i + 1} has no caption"
        captions.add(text)
    assert end["index"] + 1 < 80
    assert step_text(page) == f"Story step {end['index'] + 1} of {k}"
    assert "The backward pass g0 is over." in captions
    assert any(c.startswith("Early stop") for c in captions)


def test_switching_levels_keeps_the_position(
    page: Page,
    live_server: str,
    nested: dict[str, Any],
    story: dict[str, Any],
) -> None:
    open_story(page, live_server, nested["id"])
    for _ in range(17):
        page.keyboard.press("ArrowRight")
    at = story["steps"][16]["step"]
    assert current_step(page) == at
    page.keyboard.press("l")  # every event: the same step, counted in events
    assert page.evaluate("window.lens.level") == "events"
    assert current_step(page) == at
    assert step_text(page) == f"Step {at} of {len(nested['events'])}"
    page.wait_for_url(re.compile(r"[?&]level=events"))
    page.keyboard.press("ArrowRight")  # one event further: between two story steps
    assert current_step(page) == at + 1
    page.click(".ctl-level-story")
    assert current_step(page) == at + 1  # the position is kept, not snapped
    assert "between steps" in step_text(page)
    page.keyboard.press("ArrowRight")  # the next story step
    assert current_step(page) == story["steps"][17]["step"]
    page.keyboard.press("ArrowLeft")
    assert current_step(page) == at
    # The slider and the jump box count story steps at this level.
    page.locator(".ctl-slider").fill("40")
    assert current_step(page) == story["steps"][39]["step"]
    page.fill(".ctl-jump", "5")
    page.press(".ctl-jump", "Enter")
    assert current_step(page) == story["steps"][4]["step"]


def test_chapters_jump_and_follow_the_position(
    page: Page,
    live_server: str,
    nested: dict[str, Any],
    story: dict[str, Any],
) -> None:
    open_story(page, live_server, nested["id"])
    titles = page.locator("#view-chapters a[data-chapter]").all_text_contents()
    assert titles == [c["title"] for c in story["chapters"]]
    chapter = next(c for c in story["chapters"] if c["title"] == "recomputation of inner#2 for holder 5 (g0)")
    page.locator("#view-chapters a", has_text=chapter["title"]).click()
    first = next(s for s in story["steps"] if s["last"] >= chapter["start"])
    assert current_step(page) == first["step"]
    current = page.locator("#view-chapters a.current")
    assert current.text_content() == chapter["title"]
    assert current.get_attribute("aria-current") == "step"
    # Its parent chapter (the backward) is highlighted too.
    assert "backward g0" in page.locator("#view-chapters a.in").all_text_contents()
    # Nested recomputations nest: inner#3's forward is inside big#0's recomputation.
    big = page.locator("#view-chapters a", has_text="recomputation of big#0")
    nested_item = big.locator("xpath=following-sibling::ol//a").first
    assert nested_item.text_content() == "checkpoint inner#3 forward (in the recomputation)"
    screenshot(page, "story-chapters")


def test_why_from_a_holder_gc_reaches_the_unpack_that_started_it(
    page: Page,
    live_server: str,
    nested: dict[str, Any],
    story: dict[str, Any],
) -> None:
    events = nested["events"]
    # A holder of a frame made during the recomputation (Rule 3): it dies when that ends.
    rule3 = next(e["frame"] for e in events if e["kind"] == "frame_new" and isinstance(e["created_in"], dict))
    gc = next(s for s in story["steps"] if s["kind"] == "holder_gc" and s["frame"] == rule3)
    open_story(page, live_server, nested["id"], f"?step={gc['step']}")
    assert current_step(page) == gc["step"]
    start = gc["step"]
    kinds = []
    while page.locator(".why[data-why]").count():
        page.click(".why[data-why]")
        kinds.append(page.evaluate("window.lens.player.event.kind"))
        if kinds[-1] == "unpack":
            break
    assert kinds[-1] == "unpack", kinds
    assert "recompute_start" in kinds and "early_stop" in kinds
    unpack = events[current_step(page) - 1]
    start_event = next(e for e in events if e["kind"] == "recompute_start" and e["seq"] > unpack["seq"])
    assert (unpack["frame"], unpack["index"]) == (
        start_event["trigger"]["frame"],
        start_event["trigger"]["index"],
    )
    screenshot(page, "story-why-reaches-unpack")
    # "← back" retraces the chain to where it started.
    for _ in kinds:
        page.click(".why-back")
    assert current_step(page) == start
    assert page.locator(".why-back").count() == 0
    # The links are listed both ways: the unpack's effects include the recomputation.
    open_story(page, live_server, nested["id"], f"?step={start_event['seq']}&level=events")
    effects = page.locator(".effect-link").all_text_contents()
    assert f"#{start_event['seq']} recompute_start" in effects


def test_breakpoints_forward_backward_and_from_a_permalink(
    page: Page,
    live_server: str,
    nested: dict[str, Any],
) -> None:
    events = nested["events"]
    stops = [e["seq"] + 1 for e in events if e["kind"] == "early_stop"]
    open_story(page, live_server, nested["id"])
    page.click(".ctl-bp-menu summary")
    page.check('[data-bp-kind="early_stop"]')
    page.wait_for_url(re.compile(r"[?&]bp=kind%3Aearly_stop"))
    page.keyboard.press("Escape")
    page.click(".ctl-next-bp")
    assert current_step(page) == stops[0]
    page.keyboard.press("p")
    assert current_step(page) == stops[1]
    page.keyboard.press("Shift+P")
    assert current_step(page) == stops[0]
    # A breakpoint on a source line: a click on its number.
    line = events[stops[0] - 1]["src"]["line"]
    page.locator(f'.src-line[data-line="{line}"] .lineno').click()
    assert page.locator(f'.src-line.bp[data-line="{line}"]').count() == 1
    page.wait_for_url(re.compile(rf"line%3A{line}"))
    url = page.url
    # The permalink brings the same breakpoints back, and "run to next" honours them.
    open_story(page, live_server, nested["id"], url[url.index("?") :].replace(f"step={stops[0]}", "step=0"))
    assert page.locator(f'.src-line.bp[data-line="{line}"]').count() == 1
    assert page.locator(".ctl-bp-count").text_content() == "(2)"
    page.keyboard.press("p")
    first = current_step(page)
    hit = events[first - 1]
    assert hit["kind"] == "early_stop" or hit["src"]["line"] == line
    assert first <= stops[0]
    screenshot(page, "story-breakpoints")


def test_predict_mode_scores_a_scripted_set_of_answers(
    page: Page,
    live_server: str,
    nested: dict[str, Any],
    story: dict[str, Any],
) -> None:
    questions = {q["step"]: q for q in story["questions"]}
    assert {q["kind"] for q in questions.values()} == {
        "unpack_outcome",
        "which_frame",
        "early_stop",
        "next_gc",
    }
    open_story(page, live_server, nested["id"])
    page.check(".ctl-predict-box")
    page.wait_for_url(re.compile(r"[?&]predict=1"))
    right = tried = 0
    asked = 0
    shot = False
    for _ in range(2 * len(story["steps"])):  # each press shows a step or asks about the next one
        if current_step(page) >= len(nested["events"]):
            break
        before = current_step(page)
        page.keyboard.press("ArrowRight")
        if page.locator(".predict-q").count():
            index = page.evaluate(
                "window.lens.story.indexAt(window.lens.story.next(window.lens.player.step))"
            )
            q = questions[index]
            assert current_step(page) == before, "the step is not shown before the answer"
            assert page.locator(".predict-prompt").text_content() == q["prompt"].replace("`", "")
            if not shot:
                screenshot(page, "story-predict-question")
                shot = True
            # The script: right on even questions, wrong on odd ones, skip every fifth.
            ids = [o["id"] for o in q["options"]]
            if asked % 5 == 4:
                page.keyboard.press("0")
            else:
                choice = q["answer"] if asked % 2 == 0 else next(i for i in ids if i != q["answer"])
                page.keyboard.press(str(ids.index(choice) + 1))
                tried += 1
                right += choice == q["answer"]
                verdict = page.locator(".predict-verdict")
                assert ("right" in (verdict.get_attribute("class") or "")) == (choice == q["answer"])
            asked += 1
            assert current_step(page) == story["steps"][index]["step"], "the answer reveals the step"
    assert asked == len(questions)
    final = page.locator(".predict-final").text_content() or ""
    assert f"you predicted {right} of {tried}" in final
    screenshot(page, "story-predict-score")


def test_the_whole_story_at_1024x768(
    page: Page,
    live_server: str,
    nested: dict[str, Any],
    story: dict[str, Any],
) -> None:
    page.set_viewport_size({"width": 1024, "height": 768})
    unpack = next(s for s in story["steps"] if s["kind"] == "unpack" and len(s["seqs"]) == 1)
    open_story(page, live_server, nested["id"], f"?step={unpack['step']}")
    assert page.locator(".why[data-why]").is_visible()
    assert page.locator(".caption-changed, .caption-links").first.is_visible()
    screenshot(page, "story-1024")
