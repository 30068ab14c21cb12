"""Note [Absent elements hidden, not undisplayed] (static/css/app.css): a graph element that does
not exist yet at the step is hidden but stays laid out, so a far jump does not rebuild it; and, as
when it was not displayed at all, it is neither drawn, hit by the mouse nor reached by the keyboard.
"Future" draws it faintly.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_viewer import open_run

pytestmark = pytest.mark.e2e

Page = Any

# For each element hidden at this step: how it is styled, whether it has a box, what the mouse hits
# at the centre of its first shape, and whether focusing it works (clusters are buttons).
ABSENT = """() => [...document.querySelectorAll('#view-graph svg g.absent')].map((g) => {
  const style = getComputedStyle(g);
  const box = g.getBoundingClientRect();
  const shape = g.querySelector('polygon, path, ellipse');
  const r = shape ? shape.getBoundingClientRect() : box;
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  let focused = null;
  if (g.hasAttribute('tabindex')) { g.focus(); focused = document.activeElement === g; }
  return {id: g.id, visibility: style.visibility, opacity: style.opacity, shape: Boolean(shape), width: box.width,
          height: box.height, hit: hit ? (hit.closest('g[id]') || {}).id || hit.tagName : null,
          hitAbsent: Boolean(hit && hit.closest('.absent')), focused};
})"""


def test_absent_elements_are_laid_out_but_not_drawn_hit_or_focusable(
    page: Page, live_server: str, nested: dict[str, Any]
) -> None:
    open_run(page, live_server, nested["id"], step=3)
    absent = page.evaluate(ABSENT)
    assert len([a for a in absent if a["shape"]]) > 20, "at step 3 most of the graph does not exist yet"
    clusters = [a for a in absent if a["focused"] is not None]
    assert clusters, "the checkpoint clusters (keyboard buttons) do not exist yet either"
    for a in absent:
        assert a["visibility"] == "hidden", a
        if a["shape"]:
            # A straight edge's box is a line: one of its sides may be 0.
            assert a["width"] + a["height"] > 0, ("laid out, not undisplayed", a)
        assert not a["hitAbsent"], ("the mouse goes through what is hidden", a)
    for a in clusters:
        assert a["focused"] is False, ("a hidden cluster is not focusable", a)
    assert page.evaluate("window.lens.graphAudit()") == []

    # "Future" draws them faintly.
    page.locator("#view-graph [data-act=ghosts]").check()
    ghosts = page.evaluate(ABSENT)
    assert {g["id"] for g in ghosts} == {a["id"] for a in absent}
    for g in ghosts:
        assert g["visibility"] == "visible" and float(g["opacity"]) == pytest.approx(0.12), g
