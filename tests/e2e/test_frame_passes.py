"""A frame's gid table on a run with many backward passes (Note [Gid rows shown],
static/js/views/frames.js): past eight rows, a card shows the rows of the passes in progress, the
last four and any the current event changed, says how many it hides, and a button shows them all
(remembered per frame while the page lives). The rows' values come from the run's own trace
through the Python reducer (``engine.trace.state``).
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.trace.state import state_at
from tests.e2e.conftest import api, checked_page, screenshot, wait_finished
from tests.e2e.test_step_cost import panels, step_forward_to
from tests.e2e.test_viewer import current_step, open_run

pytestmark = pytest.mark.e2e

Page = Any

FEW_PASSES = 8  # frames.js: a table of at most this many rows is shown whole
LAST_PASSES = 4

# Two checkpointed blocks backpropagated twelve times: each frame is recomputed in every pass, so
# its gid table has a row per pass.
SOURCE = '''"""Twelve backward passes through two checkpoints"""
import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)
w1 = torch.randn(3, 3, requires_grad=True)
w2 = torch.randn(3, 3, requires_grad=True)


def block(h, w):
    return (h @ w).tanh()


x = torch.randn(2, 3, requires_grad=True)
loss = checkpoint(block, checkpoint(block, x, w1, use_reentrant=False), w2, use_reentrant=False).sum()
for r in range(12):
    loss.backward(retain_graph=r < 11)
'''


@pytest.fixture(scope="module")
def passes(live_server: str) -> dict[str, Any]:
    created = api(live_server, "/api/runs", {"source": SOURCE, "filename": "passes.py"})
    run = wait_finished(live_server, created["id"])
    assert run["status"] == "done", run.get("error")
    trace = api(live_server, f"/api/runs/{created['id']}/trace.json")
    return {"id": created["id"], "events": trace["events"]}


def gid_keys(frame: dict[str, Any]) -> list[str]:
    """The table's rows in its order: the keys of the frame's dictionaries keyed by gid (numeric
    keys ascending, as a JavaScript object lists them, then the others)."""
    keys: list[str] = []
    for d in ("recomputed", "recomp_counter", "is_recomputed", "early_stopped"):
        keys += [k for k in frame.get(d, {}) if k not in keys]
    return sorted((k for k in keys if k.isdigit()), key=int) + [k for k in keys if not k.isdigit()]


def table(page: Page, frame: int | str) -> dict[str, Any]:
    """What the frame's card shows of its gid table: each row's gid (None for a row standing for
    hidden ones) and text, the line under the table and its button."""
    return dict(
        page.evaluate(
            """(f) => {
              const card = document.querySelector(`details.frame-card[data-frame="${f}"]`);
              const more = card.querySelector('.gid-more'), button = more.querySelector('button');
              return {
                rows: [...card.querySelectorAll('table.gids tbody tr')].map((tr) => ({
                  gid: tr.classList.contains('gid-gap') ? null : tr.querySelector('td.gid').textContent,
                  cells: [...tr.cells].map((td) => td.textContent)})),
                more: more.hidden ? null : more.querySelector('.gid-more-text').textContent,
                button: more.hidden ? null : button.textContent,
                expanded: button.getAttribute('aria-expanded'),
                focused: document.activeElement === button,
              };
            }""",
            str(frame),
        )
    )


def last_recompute(events: list[dict[str, Any]], frame: int) -> int:
    """The viewer's step at which the last recomputation of ``frame`` starts."""
    return max(i for i, e in enumerate(events) if e["kind"] == "recompute_start" and e["frame"] == frame) + 1


def test_a_long_gid_table_shows_the_current_and_last_passes_and_a_toggle_shows_all(
    page: Page, live_server: str, passes: dict[str, Any]
) -> None:
    events = passes["events"]
    step = last_recompute(events, 0)
    event = events[step - 1]
    frame = state_at(events, step - 1)["frames"]["0"]
    keys = gid_keys(frame)
    assert len(keys) == 12, "a row per backward pass"
    current = str(event.get("hook_gid", event.get("gid")))
    assert current == keys[-1], "the last pass is the one running"

    page.set_viewport_size({"width": 1440, "height": 900})
    open_run(page, live_server, passes["id"], step=step)
    shown = table(page, 0)
    # The last four rows, each with the reducer's values, after one row standing for the others.
    hidden = len(keys) - LAST_PASSES
    assert shown["rows"][0] == {
        "gid": None,
        "cells": [f"\u22ef g{keys[0]}\u2013g{keys[hidden - 1]}: {hidden} passes hidden"],
    }
    assert [r["gid"] for r in shown["rows"][1:]] == [f"g{k}" for k in keys[-LAST_PASSES:]]
    n_holders = len(frame["holders"])
    for row, key in zip(shown["rows"][1:], keys[-LAST_PASSES:], strict=True):
        assert row["cells"][2] == f"{frame['recomp_counter'][key]}/{n_holders}"
    assert shown["more"] == f"{hidden} of 12 passes hidden"
    assert shown["button"] == "Show all 12 passes"
    assert shown["expanded"] == "false"
    card = page.locator('details.frame-card[data-frame="0"]')
    card.scroll_into_view_if_needed()
    screenshot(page, "frame-passes-collapsed")

    # The button is a real one: focused and pressed with the keyboard, it shows every row, keeps
    # the focus, and the keys it takes do not move the player.
    page.locator('details.frame-card[data-frame="0"] .gid-toggle').focus()
    page.keyboard.press("Enter")
    shown = table(page, 0)
    assert [r["gid"] for r in shown["rows"]] == [f"g{k}" for k in keys]
    for row, key in zip(shown["rows"], keys, strict=True):
        assert row["cells"][2] == f"{frame['recomp_counter'][key]}/{n_holders}"
    assert shown["more"] == "all 12 passes shown"
    assert shown["button"] == "Show only the current and last 4 passes"
    assert shown["expanded"] == "true"
    assert shown["focused"]
    assert current_step(page) == step
    screenshot(page, "frame-passes-expanded")

    # Remembered for this frame, across steps and a far jump that drops its card; not for the other.
    page.evaluate("() => { window.lens.act('back'); window.lens.act('forward'); }")
    assert [r["gid"] for r in table(page, 0)["rows"]] == [f"g{k}" for k in keys]
    page.evaluate("(to) => { window.lens.act('goto', 1); window.lens.act('goto', to); }", step)
    assert [r["gid"] for r in table(page, 0)["rows"]] == [f"g{k}" for k in keys]
    other = last_recompute(events, 1)
    page.evaluate("(to) => window.lens.act('goto', to)", other)
    assert table(page, 1)["button"] == "Show all 12 passes"
    page.evaluate("(to) => window.lens.act('goto', to)", step)

    # Space presses it too, and hides the rows again.
    page.locator('details.frame-card[data-frame="0"] .gid-toggle').focus()
    page.keyboard.press(" ")
    shown = table(page, 0)
    assert len(shown["rows"]) == 1 + LAST_PASSES and shown["expanded"] == "false"
    assert current_step(page) == step, "Space on the button does not play"


def test_a_table_of_eight_passes_or_fewer_is_shown_whole(
    page: Page, live_server: str, passes: dict[str, Any]
) -> None:
    events = passes["events"]
    # The step at which frame 0 has eight rows: the eighth pass's recomputation of it.
    starts = [i for i, e in enumerate(events) if e["kind"] == "recompute_start" and e["frame"] == 0]
    step = starts[FEW_PASSES - 1] + 1
    keys = gid_keys(state_at(events, step - 1)["frames"]["0"])
    assert len(keys) == FEW_PASSES
    open_run(page, live_server, passes["id"], step=step)
    shown = table(page, 0)
    assert [r["gid"] for r in shown["rows"]] == [f"g{k}" for k in keys]
    assert shown["more"] is None and shown["button"] is None
    # The next recomputation of the frame adds a ninth row: now the last four are shown.
    page.evaluate("(to) => window.lens.act('goto', to)", starts[FEW_PASSES] + 1)
    shown = table(page, 0)
    assert [r["gid"] for r in shown["rows"][1:]][-LAST_PASSES:] == [
        f"g{k}" for k in gid_keys(state_at(events, starts[FEW_PASSES])["frames"]["0"])[-LAST_PASSES:]
    ]
    assert shown["more"] == f"{9 - LAST_PASSES} of 9 passes hidden"


def test_long_tables_reached_by_steps_and_jumps_equal_those_drawn_at_the_step(
    page: Page, browser: Any, live_server: str, passes: dict[str, Any]
) -> None:
    n = len(passes["events"])
    targets = [n - 40, n - 25, n - 3]
    open_run(page, live_server, passes["id"], step=targets[0] - 30)
    with checked_page(browser) as fresh:
        for target in targets:
            step_forward_to(page, target)
            open_run(fresh, live_server, passes["id"], step=target)
            stepped, drawn = panels(page), panels(fresh)
            assert drawn["frames"].count('class="gid-gap"') >= 1, "a long table hides rows"
            assert stepped["frames"] == drawn["frames"], target
        for target in [n - 3, 40, n // 2, n - 60]:
            page.evaluate("(to) => window.lens.act('goto', to)", target)
            open_run(fresh, live_server, passes["id"], step=target)
            assert panels(page)["frames"] == panels(fresh)["frames"], target
