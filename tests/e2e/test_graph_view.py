"""The whole graph and the page's layout in a real browser (issue 11, parts 8 and 9): the graph
opens fitted with every node in view, a minimap appears when zoomed in and moves the view, a
checkpoint collapses to one box and back from the keyboard, nothing moves between steps, a story
step of several events highlights all of them, the legend explains every colour inside its
panel, and at 1440x900 and 1024x768 no panel overlaps another, none is cut off and the source
shows whole lines.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.e2e.conftest import api, screenshot
from tests.e2e.test_viewer import graph_classes, open_run

pytestmark = pytest.mark.e2e

Page = Any

BOXES_OF_NODES = """() => [...document.querySelectorAll('#view-graph svg g.node')].map((g) => {
  const r = g.getBoundingClientRect();
  return {id: g.id, left: r.left, top: r.top, right: r.right, bottom: r.bottom};
})"""


def rect(page: Page, selector: str) -> dict[str, float]:
    return dict(
        page.evaluate(
            "(s) => { const r = document.querySelector(s).getBoundingClientRect();"
            " return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }",
            selector,
        )
    )


def show_future(page: Page) -> None:
    """Draw what does not exist yet (faintly), so every node of the run has a box."""
    page.locator("#view-graph [data-act=ghosts]").check()


def test_the_graph_opens_fitted_with_every_node_in_view(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_run(page, live_server, nested["id"], step=len(nested["events"]))
    view = page.evaluate("window.lens.graphView()")
    assert view["fitted"] and view["zoom"] == pytest.approx(view["fit"]) and not view["minimap"]
    show_future(page)
    canvas = rect(page, "#view-graph .graph-canvas")
    nodes = page.evaluate(BOXES_OF_NODES)
    assert len(nodes) > 40
    outside = [
        n["id"]
        for n in nodes
        if n["left"] < canvas["left"] - 1
        or n["right"] > canvas["right"] + 1
        or n["top"] < canvas["top"] - 1
        or n["bottom"] > canvas["bottom"] + 1
    ]
    assert not outside, f"nodes out of view at first load: {outside}"
    screenshot(page, "graph-01-fitted")


def test_zoomed_in_the_minimap_shows_where_the_view_is_and_moves_it(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_run(page, live_server, nested["id"], step=300)
    minimap = page.locator("#view-graph .graph-minimap")
    assert minimap.is_hidden()
    for _ in range(4):
        page.click("#view-graph [data-act=in]")
    assert page.evaluate("window.lens.graphView()")["minimap"]
    assert minimap.is_visible()
    frame = rect(page, "#view-graph .mm-view")
    box = rect(page, "#view-graph .graph-minimap canvas")
    assert box["left"] - 1 <= frame["left"] and frame["right"] <= box["right"] + 1
    assert frame["right"] - frame["left"] < box["right"] - box["left"], (
        "zoomed in, the frame is part of the map"
    )
    screenshot(page, "graph-02-minimap")
    # A click in the map's bottom-right corner brings that corner of the graph into view.
    before = page.evaluate(
        "[document.querySelector('#view-graph .graph-canvas').scrollLeft, document.querySelector('#view-graph .graph-canvas').scrollTop]"
    )
    page.mouse.click(box["right"] - 3, box["bottom"] - 3)
    after = page.evaluate(
        "[document.querySelector('#view-graph .graph-canvas').scrollLeft, document.querySelector('#view-graph .graph-canvas').scrollTop]"
    )
    assert after[0] > before[0] and after[1] >= before[1]
    # The frame follows the scroll on the next animation frame.
    page.wait_for_function(
        "(left) => document.querySelector('#view-graph .mm-view').getBoundingClientRect().left > left",
        arg=frame["left"],
    )
    page.click("#view-graph [data-act=fit]")
    assert minimap.is_hidden()
    assert page.evaluate("window.lens.graphView()")["fitted"]


def test_a_checkpoint_collapses_and_expands_from_the_keyboard(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_run(page, live_server, nested["id"], step=300)
    frame = page.locator("#view-graph svg g.cluster#f0")
    assert frame.get_attribute("role") == "button"
    assert frame.get_attribute("tabindex") == "0"
    assert frame.get_attribute("aria-expanded") == "true"
    label = frame.get_attribute("aria-label") or ""
    assert label.startswith("checkpoint big#0: collapse into one box (")
    nodes = page.locator("#view-graph svg g.node").count()
    frame.focus()
    page.keyboard.press("Enter")
    box = page.locator("#view-graph svg g.node.collapsed#f0")
    box.wait_for()
    assert page.locator("#view-graph svg g.node").count() < nodes
    count = int(label.split("(")[1].split(" ")[0])
    text = " ".join((box.text_content() or "").split())
    assert f"checkpoint big#0 · {count} nodes" in text and "click to expand" in text
    assert box.get_attribute("aria-expanded") == "false"
    # The focus stays on the box it became, so Space expands it again.
    assert page.evaluate("document.activeElement.id") == "f0"
    assert page.evaluate("window.lens.player.step") == 300, "Enter on the graph is not a step"
    screenshot(page, "graph-03-collapsed")
    page.keyboard.press(" ")
    page.locator("#view-graph svg g.cluster#f0").wait_for()
    assert page.locator("#view-graph svg g.node").count() == nodes
    assert page.evaluate("window.lens.player.step") == 300


def test_nothing_in_the_graph_moves_between_steps(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_run(page, live_server, nested["id"], step=100)
    show_future(page)
    before = {n["id"]: n for n in page.evaluate(BOXES_OF_NODES)}
    for _ in range(60):
        page.keyboard.press("ArrowRight")
    assert page.evaluate("window.lens.player.step") == 160
    after = {n["id"]: n for n in page.evaluate(BOXES_OF_NODES)}
    assert after.keys() == before.keys()
    moved = [k for k in before if any(abs(before[k][s] - after[k][s]) > 0.5 for s in ("left", "top"))]
    assert not moved, f"nodes moved between steps: {moved[:5]}"


def test_a_story_step_of_several_events_highlights_all_of_them(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    story = api(live_server, f"/api/runs/{nested['id']}/story")
    group = next(s for s in story["steps"] if s["kind"] == "pack" and len(s["seqs"]) > 1)
    holders = [f"h{nested['events'][seq]['holder']}" for seq in group["seqs"]]
    page.goto(f"{live_server}/runs/{nested['id']}?step={group['step']}")
    page.wait_for_function("document.body.dataset.ready === '1' && document.body.dataset.story === '1'")
    page.wait_for_function("document.body.dataset.graph !== undefined")
    classes = graph_classes(page, holders)
    assert all("focus" in classes[h] for h in holders), classes


def test_the_legend_explains_each_colour_and_line_inside_its_panel(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_run(page, live_server, nested["id"], step=300)
    legend = page.locator("#view-graph .graph-legend")
    assert legend.locator("dl").is_hidden(), "the legend starts folded, leaving the graph in view"
    legend.locator("summary").click()
    terms = [" ".join(t.split()) for t in legend.locator("dt").all_text_contents()]
    for term in (
        "executed",
        "saved tensor",
        "holder",
        "checkpoint frame",
        "recomputation",
        "this step",
        "dashed line",
    ):
        assert term in terms
    assert all((d or "").strip() for d in legend.locator("dd").all_text_contents())
    panel = rect(page, "#view-graph")
    card = rect(page, "#view-graph .graph-legend dl")
    assert panel["left"] <= card["left"] and card["right"] <= panel["right"]
    assert panel["top"] <= card["top"] and card["bottom"] <= panel["bottom"]
    screenshot(page, "graph-04-legend")


@pytest.mark.parametrize("size", [(1440, 900), (1024, 768)])
def test_no_panel_overlaps_another_or_is_cut_off(
    page: Page, live_server: str, nested: dict[str, Any], size: tuple[int, int]
) -> None:
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    open_run(page, live_server, nested["id"], step=300)
    panels = page.evaluate(
        """() => [...document.querySelectorAll('.panel')].filter((e) => e.offsetParent).map((e) => {
          const r = e.getBoundingClientRect();
          return {id: e.id, left: r.left, top: r.top, right: r.right, bottom: r.bottom};
        })"""
    )
    assert {p["id"] for p in panels} >= {
        "view-chapters",
        "view-controls",
        "view-caption",
        "view-source",
        "view-graph",
        "view-frames",
        "view-log",
        "view-memory",
    }
    for a, b in itertools.combinations(panels, 2):
        apart = (
            a["right"] <= b["left"]
            or b["right"] <= a["left"]
            or a["bottom"] <= b["top"]
            or b["bottom"] <= a["top"]
        )
        assert apart, f"{a['id']} overlaps {b['id']} at {width}x{height}"
    for p in panels:
        assert p["left"] >= 0 and p["right"] <= width, f"{p['id']} is cut off at {width}x{height}"
    assert page.evaluate("document.documentElement.scrollWidth") <= width, "the page scrolls sideways"
    # Whole lines: no line of the source is wider than its pane (long ones wrap).
    cut = page.evaluate(
        """() => [...document.querySelectorAll('#view-source .src-line code')]
          .filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.parentElement.dataset.line)"""
    )
    assert not cut, f"source lines cut off at {width}x{height}: {cut}"
    assert page.evaluate(
        "(() => { const b = document.querySelector('#view-source .source-body'); return b.scrollWidth <= b.clientWidth + 1; })()"
    )
    screenshot(page, f"layout-{width}x{height}")


def test_repeated_blocks_fold_into_one_box_that_unfolds(page: Page, live_server: str) -> None:
    """Note [Folded blocks]: chain_of_blocks checkpoints three identical blocks, so its three frames
    (and the three recomputations) fold into one box each with the count, and unfold on a click."""
    created = api(live_server, "/api/runs", {"scenario": "chain_of_blocks"})
    from tests.e2e.conftest import wait_finished

    assert wait_finished(live_server, created["id"])["status"] == "done"
    events = api(live_server, f"/api/runs/{created['id']}/trace.json")["events"]
    recompute = next(e["seq"] for e in events if e["kind"] == "recompute_start")
    open_run(page, live_server, created["id"], step=recompute + 1)
    frames = ["f0", "f1", "f2"]
    assert all(page.locator(f"#view-graph svg g[id='{f}']").count() == 1 for f in frames)
    fold = page.locator("#view-graph [data-act=fold]")
    assert fold.is_visible(), "the toolbar offers to fold the repeated blocks"
    fold.click()
    page.wait_for_function("document.querySelector('#view-graph svg g#g0') !== null")
    box = page.locator("#view-graph svg g#g0")
    assert "checkpoint Block \N{MULTIPLICATION SIGN} 3" in box.text_content()
    assert "3 identical blocks" in box.text_content()
    assert box.get_attribute("aria-expanded") == "false"
    for f in frames:
        assert page.locator(f"#view-graph svg g[id='{f}']").count() == 0, "the blocks are inside the box"
    # The recomputations fold too; the one running at this step shows on its group's box.
    recomputations = page.locator("#view-graph svg g.node.fold").count()
    assert recomputations == 2
    boxes = {g: graph_classes(page, [g])[g] for g in ("g0", "g1")}
    assert any({"active", "focus"} & classes for classes in boxes.values()), boxes
    screenshot(page, "graph-05-folded-blocks")
    # Unfolding from the keyboard: the first block takes the focus where the box was.
    box.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('#view-graph svg g#g0') === null")
    assert all(page.locator(f"#view-graph svg g[id='{f}']").count() == 1 for f in frames)
    assert page.evaluate("document.activeElement.id") == "f0"
    # Stepping while folded keeps the box's state current: at the end every block is dead.
    fold.click()
    page.wait_for_function("document.querySelector('#view-graph svg g#g1') !== null")
    page.keyboard.press("End")
    page.wait_for_function(f"window.lens.player.step === {len(events)}")
    assert "absent" not in graph_classes(page, ["g0"])["g0"]
