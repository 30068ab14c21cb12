"""What the viewer restyles or rewrites only in part at each step (issue 15: a fluid viewer on long
runs) must look exactly as if drawn from scratch at that step:

- Note [Folded boxes counted] (static/js/views/graph.js): a folded group's box is restyled from
  counts its blocks keep, recounted only for the blocks a move may have changed; after every step
  and jump, every element's classes equal a restyle from scratch (``lens.graphAudit()``);
- Note [Gid rows kept] (static/js/views/frames.js) and Note [Log rows kept] (views/log.js): the
  frames panel and the event log reached by stepping, or by jumping, equal those of a page opened
  at that step;
- Note [Ledger rows marked while shown] (views/ledger.js): the ledger's rows, marked only while
  it is shown, are marked as the step says once its tab is chosen or its window opened.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import api, checked_page, wait_finished
from tests.e2e.test_viewer import open_run

pytestmark = pytest.mark.e2e

Page = Any

# Three checkpointed blocks backpropagated four times: one gid row per backward in every frame,
# recomputations that fold into one box, and an event log of a few hundred events.
SOURCE = '''"""Blocks backpropagated again and again"""
import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)
ws = [torch.randn(4, 4, requires_grad=True) for _ in range(3)]


def block(h, w):
    return (h @ w).tanh() * 0.5 + h


h = torch.randn(2, 4, requires_grad=True)
for w in ws:
    h = checkpoint(block, h, w, use_reentrant=False)
loss = h.sum()
for r in range(4):
    loss.backward(retain_graph=r < 3)
'''

# Steps forward over the whole run, then back, then seeded random jumps; after each move, the
# elements whose classes differ from a restyle from scratch (at most a few reported).
WALK_AND_AUDIT = """
async ({jumps}) => {
  const lens = window.lens, n = lens.player.length;
  const bad = [];
  const check = (what) => { const d = lens.graphAudit(); if (d.length && bad.length < 5) bad.push([what, lens.player.step, d.slice(0, 3)]); };
  lens.act("goto", 0);
  for (let i = 0; i < n; i++) { lens.act("forward"); check("forward"); }
  for (let i = 0; i < n; i++) { lens.act("back"); check("back"); }
  let s = 5;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let i = 0; i < jumps; i++) { lens.act("goto", Math.floor(rand() * (n + 1))); check("jump"); }
  return {n, bad};
}
"""


@pytest.fixture(scope="module")
def blocks(live_server: str) -> dict[str, Any]:
    created = api(live_server, "/api/runs", {"source": SOURCE, "filename": "blocks.py"})
    run = wait_finished(live_server, created["id"])
    assert run["status"] == "done", run.get("error")
    return {"id": created["id"], "n": run["n_events"]}


@pytest.mark.parametrize("fold", [False, True], ids=["drawn", "folded"])
def test_after_every_step_and_jump_the_graph_equals_a_restyle_from_scratch(
    page: Page, live_server: str, blocks: dict[str, Any], fold: bool
) -> None:
    open_run(page, live_server, blocks["id"], step=0)
    if fold:
        page.locator("#view-graph [data-act=fold]").click()
        page.wait_for_function("document.querySelector('#view-graph svg g.node.fold') !== null")
        assert page.locator("#view-graph svg g.node.fold").count() >= 2, (
            "the blocks and their recomputations fold"
        )
    result = page.evaluate(WALK_AND_AUDIT, {"jumps": 300})
    assert result["n"] == blocks["n"] > 300
    assert result["bad"] == [], result["bad"]


def step_forward_to(page: Page, step: int) -> None:
    """Step forward one event at a time, as the arrow key does, until ``step``."""
    page.evaluate("(to) => { while (window.lens.player.step < to) window.lens.act('forward'); }", step)


def panels(page: Page) -> dict[str, Any]:
    """The frames panel's cards as HTML (an element whose classes were all removed again is the
    same as one that never had any), and each log row drawn as HTML by its step (the rows in view
    depend on how the log was scrolled)."""
    return dict(
        page.evaluate(
            """() => ({frames: document.querySelector('#view-frames .frame-list').innerHTML.replaceAll(' class=""', ''),
                       log: Object.fromEntries([...document.querySelectorAll('#view-log .log-row')]
                                               .map((r) => [r.dataset.step, r.outerHTML]))})"""
        )
    )


def test_frames_and_log_reached_by_steps_equal_those_drawn_at_the_step(
    page: Page, browser: Any, live_server: str, blocks: dict[str, Any]
) -> None:
    n = blocks["n"]
    # Steps in the last backward pass, where every frame has a gid row per backward.
    targets = [n - 40, n - 25, n - 3]
    open_run(page, live_server, blocks["id"], step=targets[0] - 30)
    with checked_page(browser) as fresh:
        for target in targets:
            step_forward_to(page, target)
            open_run(fresh, live_server, blocks["id"], step=target)
            stepped, drawn = panels(page), panels(fresh)
            assert drawn["frames"].count('<td class="gid">') >= 4 * 3, "a gid row per backward and frame"
            assert stepped["frames"] == drawn["frames"], target
            both = stepped["log"].keys() & drawn["log"].keys()
            assert str(target) in both
            assert {k: stepped["log"][k] for k in both} == {k: drawn["log"][k] for k in both}, target


def test_frames_and_log_reached_by_jumps_equal_those_drawn_at_the_step(
    page: Page, browser: Any, live_server: str, blocks: dict[str, Any]
) -> None:
    n = blocks["n"]
    # Far jumps back and forth (a snapshot restored, the log's rows all moved), to before the first
    # frame, and a short one.
    targets = [n - 3, 40, 1, n // 2, n - 60, n // 2 + 7]
    open_run(page, live_server, blocks["id"], step=n // 3)
    with checked_page(browser) as fresh:
        for target in targets:
            if target == 40:
                # The last frame's card, dropped by the jump back and put back by the next one
                # (Note [Cards kept to put back] in static/js/views/frames.js).
                page.evaluate(
                    "document.querySelector('#view-frames .frame-node:last-child').dataset.mark = 'kept'"
                )
            page.evaluate("(to) => window.lens.act('goto', to)", target)
            assert page.evaluate("window.lens.player.step") == target
            open_run(fresh, live_server, blocks["id"], step=target)
            jumped, drawn = panels(page), panels(fresh)
            if target == 40:
                assert 'data-mark="kept"' not in jumped["frames"], "the frames made after step 40 are dropped"
            if target == 1:
                assert "No checkpoint frame yet" in jumped["frames"]
            if target == n // 2:
                assert 'data-mark="kept"' in jumped["frames"], "a dropped card is put back, not made again"
                jumped["frames"] = jumped["frames"].replace(' data-mark="kept"', "")
                page.evaluate("delete document.querySelector('[data-mark=kept]').dataset.mark")
            assert jumped["frames"] == drawn["frames"], target
            both = jumped["log"].keys() & drawn["log"].keys()
            assert str(target) in both
            assert {k: jumped["log"][k] for k in both} == {k: drawn["log"][k] for k in both}, target


def ledger_marks(page: Page, ledger: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The ledger's rows marked "past" (their data-id, in order), and the entries the memory report
    says were saved by the current step (an entry saved by event seq is saved from step seq + 1)."""
    marked = page.evaluate(
        "() => [...document.querySelectorAll('#view-memory .lg-entry.past, .ledger-box .lg-entry.past')]"
        ".map((r) => r.dataset.id)"
    )
    step = page.evaluate("window.lens.player.step")
    return list(marked), [e["id"] for e in ledger if e["seq"] + 1 <= step]


def test_ledger_rows_hidden_during_jumps_are_marked_when_shown(
    page: Page, live_server: str, blocks: dict[str, Any]
) -> None:
    n = blocks["n"]
    ledger = api(live_server, f"/api/runs/{blocks['id']}/memory")["ledger"]
    open_run(page, live_server, blocks["id"], step=n // 2)
    page.wait_for_function(f"document.querySelectorAll('.lg-entry').length === {len(ledger)}")
    assert page.locator("#mem-pane-ledger").is_hidden()
    # Jumps while the ledger's tab is hidden, then the tab is chosen: marked as the step says.
    for target in (n - 5, 30, n * 3 // 4):
        page.evaluate("(to) => window.lens.act('goto', to)", target)
    page.click("#mem-tab-ledger")
    saved = ledger_marks(page, ledger)[1]
    # The rows catch up when the tab is laid out (a ResizeObserver), by the next frame at most.
    page.wait_for_function(
        f"document.querySelectorAll('#view-memory .lg-entry.past').length === {len(saved)}"
    )
    marked, saved = ledger_marks(page, ledger)
    assert 0 < len(saved) < len(ledger)
    assert marked == saved
    # While shown, a jump marks them at once.
    page.evaluate("(to) => window.lens.act('goto', to)", n // 5)
    marked, saved = ledger_marks(page, ledger)
    assert 0 < len(saved) and marked == saved
    # Hidden again, jumped, then opened in the larger window: marked before it shows.
    page.click("#mem-tab-timeline")
    page.evaluate("(to) => window.lens.act('goto', to)", n - 2)
    page.click("#view-memory .mem-open-ledger")
    marked, saved = ledger_marks(page, ledger)
    assert len(saved) > len(ledger) // 2
    assert marked == saved
