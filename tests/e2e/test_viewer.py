"""The viewer in a real browser: stepping through the nested-checkpoint scenario, permalinks, the
state the browser builds from the server's changes, and a broken scenario's error.

Expected values are not written down here: they come from the run's own trace
(``/api/runs/{id}/trace.json``) through the Python reducer (``engine.trace.state``) and
``dot_classes``, which is what the browser must show without knowing what events mean.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from engine.trace.export_dot import dot_classes
from engine.trace.state import state_at
from tests.e2e.conftest import api, screenshot

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page: the package is optional, so it is not imported at module level


# --- helpers -------------------------------------------------------------------------------------


def open_run(page: Page, base: str, run_id: str, step: int | None = None, level: str = "events") -> None:
    """Open the viewer and wait until every event is in and the graph is laid out. These tests
    step event by event (``level=events``); tests/e2e/test_story.py covers the story level."""
    page.goto(f"{base}/runs/{run_id}?level={level}" + (f"&step={step}" if step is not None else ""))
    page.wait_for_function("document.body.dataset.ready === '1'")
    page.wait_for_function("document.body.dataset.graph !== undefined")


def current_step(page: Page) -> int:
    return int(page.evaluate("window.lens.player.step"))


def wait_url_step(page: Page, step: int) -> None:
    page.wait_for_url(re.compile(rf"[?&]step={step}(&|$)"))


def exact(value: Any) -> Any:
    """``value`` with integers beyond 2**53 as floats: JavaScript numbers cannot hold them
    (AccumulateGrad's ``seq_nr`` is UINT64_MAX), so a browser's copy of a state is compared so."""
    if isinstance(value, dict):
        return {k: exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        return float(value)
    return value


def browser_state(page: Page) -> Any:
    return exact(page.evaluate("JSON.parse(JSON.stringify(window.lens.player.state))"))


def reducer_state(events: list[dict[str, Any]], step: int) -> Any:
    """What the browser must show at ``step`` (the state after ``step`` events)."""
    return exact(state_at(events, step - 1))


def graph_classes(page: Page, ids: list[str]) -> dict[str, set[str]]:
    """The classes each DOT id has in the page now (Graphviz's, the DOT's and the step's)."""
    raw = page.evaluate(
        "(ids) => Object.fromEntries(ids.map((id) => [id, window.lens.graphClasses(id)]))", ids
    )
    return {k: set((v or "").split()) for k, v in raw.items()}


def first_step_of(events: list[dict[str, Any]], kind: str) -> int:
    """The viewer's step at which the first event of ``kind`` is the current one."""
    return next(i for i, e in enumerate(events) if e["kind"] == kind) + 1


# --- tests ---------------------------------------------------------------------------------------


def test_home_page_lists_scenarios_and_opens_one(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    page.wait_for_selector(".scenario-open")
    titles = page.locator(".scenario-title").all_text_contents()
    scenarios = api(live_server, "/api/scenarios")
    # Scenarios of a group (the Pitfalls pack) are listed in their own section only.
    assert sorted(titles) == sorted(s["title"] for s in scenarios if not s.get("group"))
    assert page.locator(".scenario.featured").count() == 2, "where to start is marked"
    nested = page.locator(".scenario", has=page.locator(".scenario-id", has_text="nested_checkpoint.py"))
    assert "Rule 1" in nested.locator(".scenario-desc").text_content()
    screenshot(page, "01-home")
    nested.locator(".scenario-open").click()
    page.wait_for_url(re.compile(r"/runs/[^/?]+"))
    page.wait_for_function("document.body.dataset.ready === '1'")
    assert page.locator("#run-title").text_content() == "Nested checkpoints"
    assert not page.locator("#run-origin").is_visible()  # it ran here: no "trace file" badge


def test_step_to_the_first_recomputation_and_back(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    events = nested["events"]
    open_run(page, live_server, nested["id"])
    assert page.locator(".ctl-step").text_content() == f"Step 0 of {len(events)}"
    screenshot(page, "02-nested-start")

    # One step with the keyboard: the first event, its caption and its line.
    page.keyboard.press("ArrowRight")
    wait_url_step(page, 1)
    assert page.locator(".ctl-step").text_content() == f"Step 1 of {len(events)}"
    line = events[0]["src"]["line"]
    assert page.locator(f'.src-line.cur[data-line="{line}"]').count() == 1

    # "Next event of kind: recompute" lands on the first recompute_start.
    page.select_option(".ctl-kind", "recompute_start")
    page.click(".ctl-next-kind")
    step = first_step_of(events, "recompute_start")
    wait_url_step(page, step)
    assert current_step(page) == step
    event = events[step - 1]
    state = state_at(events, step - 1)
    assert page.locator(".caption-meta .kind").text_content() == "recompute_start"
    assert "recomput" in page.locator(".caption-text").text_content().lower()

    # The frame panel: the recomputed frame's holders, as the reducer has them.
    frame = state["frames"][str(event["frame"])]
    card = page.locator(f'details.frame-card[data-frame="{event["frame"]}"]')
    assert card.get_attribute("open") is not None, "the frame being recomputed is open"
    assert frame["name"] in card.locator("summary").text_content()
    rows = card.locator("tr.holder-row")
    assert rows.count() == len(frame["holders"])
    for index, holder in frame["holders"].items():
        row = card.locator(f'tr.holder-row[data-index="{index}"]')
        assert row.get_attribute("data-holder") == str(holder["holder"])
        assert ("alive" if holder["alive"] else "dead") in row.get_attribute("class").split()
        assert holder["slot"] in row.text_content()
    gid = next(iter(frame["recomp_counter"]))
    gid_row = card.locator("table.gids tbody tr").first
    assert gid_row.locator("td.gid").text_content() == f"g{gid}"
    assert (
        gid_row.locator("td").nth(2).text_content()
        == f"{frame['recomp_counter'][gid]}/{len(frame['holders'])}"
    )
    trigger = event["trigger"]
    unpacked = card.locator(f'tr.holder-row[data-index="{trigger["index"]}"]')
    assert "unpacking" in unpacked.get_attribute("class").split(), "the holder being unpacked is marked"
    progress = page.locator(".frames-view .progress").text_content()
    assert f"recomputing {frame['name']} for g{gid} to unpack {frame['name']}[{trigger['index']}]" in progress
    hooks = page.locator(".frames-view ol.hooks li").all_text_contents()
    assert len(hooks) == len(state["hooks"])

    # The graph: the classes of every element the reducer styles, plus the highlights.
    expected = dot_classes(state)
    in_svg = page.evaluate("[...document.querySelectorAll('#view-graph svg g[id]')].map((g) => g.id)")
    ids = [i for i in in_svg if i in expected]
    assert len(ids) > 20
    shown = graph_classes(page, in_svg)
    for i in ids:
        assert set(expected[i]) <= shown[i], (i, expected[i], shown[i])
    # What does not exist yet is hidden (edges, and Graphviz's own wrapper, aside).
    for i in in_svg:
        if i not in expected and re.fullmatch(r"[nsht]\d.*|f\d+", i):
            assert "absent" in shown[i], (i, shown[i])
    running = state["executing"][-1]
    assert {"running", "executing"} <= shown[f"n{running}"], "the node whose backward unpacks is highlighted"
    trigger_holder = frame["holders"][str(trigger["index"])]["holder"]
    assert {"unpacking", "focus"} <= graph_classes(page, [f"h{trigger_holder}"])[f"h{trigger_holder}"]
    assert "recomputing" in graph_classes(page, [f"f{event['frame']}"])[f"f{event['frame']}"]
    screenshot(page, "03-nested-first-recompute")

    # One step back: the recomputation has not started yet.
    page.click(".ctl-back")
    wait_url_step(page, step - 1)
    assert page.locator(".caption-meta .kind").text_content() == events[step - 2]["kind"]
    assert "recomputing" not in graph_classes(page, [f"f{event['frame']}"])[f"f{event['frame']}"]
    assert browser_state(page) == reducer_state(events, step - 1)
    screenshot(page, "04-nested-step-back")


def test_permalink_restores_the_same_view(page: Page, live_server: str, nested: dict[str, Any]) -> None:
    events = nested["events"]
    step = first_step_of(events, "early_stop")
    open_run(page, live_server, nested["id"])
    page.fill(".ctl-jump", str(step))
    page.press(".ctl-jump", "Enter")
    wait_url_step(page, step)
    page.wait_for_timeout(300)  # let deferred scrolling settle before reading the view

    def view() -> dict[str, Any]:
        return {
            "step": page.locator(".ctl-step").text_content(),
            "caption": page.locator(".caption-text").text_content(),
            "line": page.locator(".src-line.cur").get_attribute("data-line"),
            "frames": page.locator(".frame-list").inner_text(),
            "stack": page.locator(".hooks-stack").inner_text(),
            "log": page.locator(".log-row.current").text_content(),
            "classes": page.evaluate(
                "[...document.querySelectorAll('#view-graph svg g[id]')].map((g) => g.id + '=' + g.getAttribute('class'))"
            ),
        }

    before = view()
    assert "Early stop" in before["caption"]
    url = page.url
    page.reload()
    page.wait_for_function("document.body.dataset.ready === '1' && document.body.dataset.graph === '1'")
    page.wait_for_timeout(300)
    assert page.url == url
    assert view() == before
    screenshot(page, "05-nested-permalink-early-stop")


def test_browser_state_is_the_reducers_at_every_kind_of_move(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    """The browser applies and undoes the server's changes without knowing what they mean: the
    state it reaches by stepping, stepping back, jumping and reloading is the reducer's."""
    events = nested["events"]
    n = len(events)
    open_run(page, live_server, nested["id"])
    for target in (1, 2, 57, n // 2, n - 1, n, 300, 299, 298, 0, 512, 513, 511, n - 10):
        page.evaluate("(s) => window.lens.act('goto', s)", target)
        assert current_step(page) == target
        assert browser_state(page) == reducer_state(events, target), f"step {target}"
    # Walk back over a stretch one step at a time.
    page.evaluate("window.lens.act('goto', 420)")
    for target in range(419, 380, -1):
        page.keyboard.press("ArrowLeft")
        assert current_step(page) == target
    assert browser_state(page) == reducer_state(events, 381)


def test_controls_keyboard_slider_and_play(page: Page, live_server: str, nested: dict[str, Any]) -> None:
    n = len(nested["events"])
    open_run(page, live_server, nested["id"], step=10)
    assert current_step(page) == 10
    page.keyboard.press("End")
    assert current_step(page) == n
    assert page.locator(".ctl-forward").is_disabled()
    page.keyboard.press("Home")
    assert current_step(page) == 0
    assert page.locator(".ctl-back").is_disabled()
    page.locator(".ctl-slider").fill("250")
    assert current_step(page) == 250
    page.click(".ctl-forward")
    assert current_step(page) == 251
    # Shift+→ jumps to the next event of the chosen kind.
    page.select_option(".ctl-kind", "holder_gc")
    page.keyboard.press("Shift+ArrowRight")
    step = current_step(page)
    assert nested["events"][step - 1]["kind"] == "holder_gc"
    assert step > 251
    # Play, then pause: it moved forward, and once paused it stays put. Checked without timing:
    # played from the start at 30 steps a second, the run needs 24 s to end (and the click to
    # restart it), so the pause comes first; "stays put" is counted in animation frames, the
    # play loop's own clock (a loop still playing moves at least once in 10 frames).
    page.keyboard.press("Home")
    page.select_option(".ctl-speed", "30")
    page.click(".ctl-play")
    page.wait_for_function("window.lens.player.step >= 2")
    page.click(".ctl-play")
    assert page.locator(".ctl-play").text_content() == "▶ Play"
    paused = current_step(page)
    assert 2 <= paused < n
    frames_later = page.evaluate(
        "async () => { for (let i = 0; i < 10; i++) await new Promise(requestAnimationFrame);"
        " return window.lens.player.step; }"
    )
    assert frames_later == paused
    # A click in the event log jumps to that event.
    page.locator(".log-row").first.click()
    assert current_step(page) == int(page.locator(".log-row.current .log-step").text_content())


def test_collapse_a_checkpoint_frame(page: Page, live_server: str, nested: dict[str, Any]) -> None:
    open_run(page, live_server, nested["id"], step=first_step_of(nested["events"], "recompute_start"))
    page.wait_for_selector("#view-graph g.cluster#f0")
    inside = page.locator("#view-graph g.node").count()
    page.locator("#view-graph g.cluster#f0 > text").click()
    page.wait_for_selector("#view-graph g.node.collapsed#f0")
    assert page.locator("#view-graph g.node").count() < inside
    assert "recomputing" in graph_classes(page, ["f0"])["f0"], "a collapsed frame keeps its state"
    screenshot(page, "06-nested-collapsed-frame")
    page.locator("#view-graph g.node#f0").click()
    page.wait_for_selector("#view-graph g.cluster#f0")
    assert page.locator("#view-graph g.node").count() == inside


BROKEN = '''"""A broken scenario"""
import engine as torch

x = torch.randn(3, requires_grad=True)
y = (x * 2).sum()
y.backward()
z = x.grad + undefined_name
'''


def test_broken_scenario_shows_its_error_and_line(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    page.wait_for_function("document.body.dataset.editorReady === '1'")
    page.fill("#editor .cm-content", BROKEN)  # the CodeMirror editor (tests/e2e/test_editor.py)
    page.fill("#editor-name", "broken.py")
    page.click("#editor-form button[type=submit]")
    # The home page shows the error on its line (test_editor.py); the run still opens.
    page.locator("#run-error-open a").click()
    page.wait_for_url(re.compile(r"/runs/[^/?]+"))
    page.wait_for_function("document.body.dataset.ready === '1'")
    error = page.locator("#run-error")
    error.wait_for()
    text = error.text_content()
    assert "NameError" in text
    assert "line 7" in text
    assert "undefined_name" in text
    assert page.locator("#run-status").text_content() == "error"
    line = page.locator(".src-line.error")
    assert line.get_attribute("data-line") == "7"
    assert "undefined_name" in line.text_content()
    # The events up to the error can still be stepped through, and the last is the error.
    page.keyboard.press("End")
    assert page.locator(".caption-meta .kind").text_content() == "error"
    screenshot(page, "07-broken-scenario-error")


def test_uploaded_file_with_a_syntax_error(page: Page, live_server: str, tmp_path: Path) -> None:
    path = tmp_path / "typo.py"
    path.write_text("import engine as torch\n\nx = torch.ones(2)\ny = (x * 2\nprint(y)\n")
    page.goto(live_server + "/")
    page.set_input_files("#scenario-file", str(path))
    page.wait_for_url(re.compile(r"/runs/[^/?]+"))
    page.wait_for_function("document.body.dataset.ready === '1'")
    text = page.locator("#run-error").text_content()
    assert "SyntaxError" in text
    assert re.search(r"line [45]\b", text), text
    assert page.locator(".src-line.error").count() == 1
    assert page.locator("#run-file").text_content() == "typo.py"
    screenshot(page, "08-uploaded-syntax-error")
