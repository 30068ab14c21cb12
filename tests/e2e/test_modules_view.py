"""The memory panel's "Modules" tab in a real browser (static/js/views/modules.js): the modules of
a run as a tree by path, each node the sums over its subtree of the memory report's ``modules``
rows, an ARIA tree driven by the keys, "Go" to a module's first save, the "checkpointed" chip,
the empty state, the layout, and a 12-layer GPT traced on torch (15,768 events) drilled into.

Expected values are not written down here: they come from the run's memory report
(``GET /api/runs/{id}/memory``, ``module_breakdown`` in engine/trace/memory.py). Event ``seq`` is
shown at step ``seq + 1``.
"""

from __future__ import annotations

import itertools
import json
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, api, screenshot, wait_finished
from tests.e2e.test_memory_view import open_memory, wait_step

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page: the package is optional, so it is not imported at module level

FIGURES = {"saved": "saved", "held": "held_at_peak", "holders": "holders", "recomputed": "recomputed"}
GPT_TRACE = Path("/tmp/gpt-trace.json")  # recorded on torch by docs/examples/gpt.py, when present
GPT = ROOT / "docs" / "examples" / "gpt.py"


def scenario_run(base: str, scenario: str) -> dict[str, Any]:
    created = api(base, "/api/runs", {"scenario": scenario})
    run = wait_finished(base, created["id"])
    assert run["status"] == "done", run["error"]
    return {"id": created["id"], "memory": api(base, f"/api/runs/{created['id']}/memory")}


@pytest.fixture(scope="module")
def per_block(live_server: str) -> dict[str, Any]:
    """mlp_memory_per_block: four blocks ``blocks.0`` ... ``blocks.3``, each under a checkpoint."""
    return scenario_run(live_server, "mlp_memory_per_block")


@pytest.fixture(scope="module")
def nested_modules(live_server: str, nested: dict[str, Any]) -> dict[str, Any]:
    return {"id": nested["id"], "memory": api(live_server, f"/api/runs/{nested['id']}/memory")}


@pytest.fixture(params=["per_block", "nested_modules"])
def any_run(request: pytest.FixtureRequest) -> dict[str, Any]:
    run: dict[str, Any] = request.getfixturevalue(request.param)
    return run


# --- helpers -------------------------------------------------------------------------------------


def open_modules(page: Page, base: str, run_id: str, step: int | None = None) -> None:
    open_memory(page, base, run_id, step=step)
    page.click("#mem-tab-modules")
    assert page.get_attribute("#mem-tab-modules", "aria-selected") == "true"


def item(page: Page, path: str) -> Any:
    """The tree's item of the module at ``path`` (not a module's "(its own ops)" child)."""
    return page.locator(f'#view-memory [role=treeitem][data-path="{path}"]:not([data-own])')


def figures(loc: Any) -> dict[str, int]:
    data: dict[str, int] = loc.evaluate(
        "(el) => ({saved: +el.dataset.saved, held: +el.dataset.held, holders: +el.dataset.holders, "
        "recomputed: +el.dataset.recomputed, first: +el.dataset.first})"
    )
    return data


def under(rows: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """The report's rows of the module at ``path`` and of its submodules."""
    return [
        r
        for r in rows
        if r["module"] is not None and (r["path"] == path or r["path"].startswith((path + ".", path + "[")))
    ]


def sums(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {k: sum(r[f] for r in rows) for k, f in FIGURES.items()}
    out["first"] = min(r["first"] for r in rows)
    return out


def focused_path(page: Page) -> str | None:
    path: str | None = page.evaluate("document.activeElement.dataset.path ?? null")
    return path


def expand_to(page: Page, path: str) -> None:
    """Open the ancestors of ``path`` with clicks on their rows."""
    parts = path.split(".")
    for i in range(1, len(parts)):
        ancestor = item(page, ".".join(parts[:i]))
        if ancestor.get_attribute("aria-expanded") == "false":
            ancestor.locator(":scope > .mod-row .mod-name").click()
        assert ancestor.get_attribute("aria-expanded") == "true"


# --- the tree ------------------------------------------------------------------------------------


def test_the_tree_adds_up_the_reports_rows(page: Page, live_server: str, any_run: dict[str, Any]) -> None:
    rows = any_run["memory"]["modules"]
    open_modules(page, live_server, any_run["id"])
    assert page.locator("#view-memory [role=tree]").count() == 1
    assert "kept as they are" in page.locator("#view-memory .mod-intro").inner_text()
    top = page.locator("#view-memory [role=tree] > [role=treeitem]")
    assert top.count() >= 1
    # The top level adds up to the report's totals, figure by figure.
    shown = [figures(top.nth(i)) for i in range(top.count())]
    for key, field in FIGURES.items():
        assert sum(s[key] for s in shown) == sum(r[field] for r in rows), key
    # Every module, inner nodes included, is the sum of the rows of its subtree.
    paths = {r["path"] for r in rows if r["module"] is not None}
    prefixes = {".".join(p.split(".")[: i + 1]) for p in paths for i in range(len(p.split(".")))}
    for path in sorted(prefixes):
        loc = item(page, path)
        assert loc.count() == 1, path
        assert figures(loc) == sums(under(rows, path)), path
        assert loc.get_attribute("aria-level") == str(path.count(".") + 1)
    outside = [r for r in rows if r["module"] is None]
    if outside:
        loc = page.locator('#view-memory [role=treeitem][data-path="(outside any module)"]')
        assert figures(loc)["saved"] == outside[0]["saved"]
    screenshot(page, f"modules-tree-{any_run['id']}")


def test_the_keys_move_expand_collapse_and_go(
    page: Page, live_server: str, per_block: dict[str, Any]
) -> None:
    rows = per_block["memory"]["modules"]
    blocks = sorted({r["path"].rsplit(".", 1)[0] for r in rows if r["module"] is not None})
    assert blocks == [f"blocks.{i}" for i in range(len(blocks))] and len(blocks) >= 2
    open_modules(page, live_server, per_block["id"], step=0)
    # By default: the one top-level module open, its blocks listed and closed.
    top = item(page, "blocks")
    assert top.get_attribute("aria-expanded") == "true"
    for block in blocks:
        assert item(page, block).get_attribute("aria-expanded") == "false"
        assert not item(page, block + ".0").is_visible()
    # One item takes the focus (roving tabindex): Tab from the tabs reaches it.
    assert page.locator("#view-memory [role=treeitem][tabindex='0']").count() == 1
    top.focus()
    page.keyboard.press("ArrowDown")
    assert focused_path(page) == blocks[0]
    page.keyboard.press("ArrowDown")
    assert focused_path(page) == blocks[1]
    page.keyboard.press("ArrowUp")
    assert focused_path(page) == blocks[0]
    # → opens, → again goes to the first child, ← goes back to the parent, ← closes.
    page.keyboard.press("ArrowRight")
    assert item(page, blocks[0]).get_attribute("aria-expanded") == "true"
    assert item(page, blocks[0] + ".0").is_visible()
    page.keyboard.press("ArrowRight")
    first_child = min(under(rows, blocks[0]), key=lambda r: r["first"])["path"]
    assert focused_path(page) == first_child
    page.keyboard.press("ArrowLeft")
    assert focused_path(page) == blocks[0]
    page.keyboard.press("ArrowLeft")
    assert item(page, blocks[0]).get_attribute("aria-expanded") == "false"
    assert not item(page, blocks[0] + ".0").is_visible()
    page.keyboard.press("ArrowLeft")
    assert focused_path(page) == "blocks"
    page.keyboard.press("End")
    assert focused_path(page) == "(outside any module)"
    page.keyboard.press("Home")
    assert focused_path(page) == "blocks"
    # The arrows moved in the tree, not the step.
    assert page.evaluate("window.lens.player.step") == 0
    # Enter goes to the block's first save: inside its forward.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert focused_path(page) == blocks[1]
    first = sums(under(rows, blocks[1]))["first"]
    page.keyboard.press("Enter")
    wait_step(page, first + 1)
    assert page.evaluate("window.lens.player.event.seq") == first
    # The block the step saved for is marked, and so is the tree above it.
    assert "now-in" in (item(page, blocks[1]).get_attribute("class") or "").split()
    assert focused_path(page) == blocks[1]


def test_go_lands_at_the_modules_first_save(
    page: Page, live_server: str, nested_modules: dict[str, Any]
) -> None:
    rows = nested_modules["memory"]["modules"]
    open_modules(page, live_server, nested_modules["id"], step=0)
    # A leaf (the latest first save, so the step moves whatever the default) and an inner module.
    leaf = max((r for r in rows if r["module"] is not None), key=lambda r: r["first"])
    expand_to(page, leaf["path"])
    item(page, leaf["path"]).locator(":scope > .mod-row .mod-go").click()
    wait_step(page, leaf["first"] + 1)
    assert "now" in (item(page, leaf["path"]).get_attribute("class") or "").split()
    inner = next(r["path"] for r in rows if r["module"] is not None and len(under(rows, r["path"])) > 1)
    item(page, inner).locator(":scope > .mod-row .mod-go").click()
    wait_step(page, sums(under(rows, inner))["first"] + 1)


def test_a_module_all_of_whose_saves_are_holders_is_marked_checkpointed(
    page: Page, live_server: str, nested_modules: dict[str, Any]
) -> None:
    rows = nested_modules["memory"]["modules"]
    open_modules(page, live_server, nested_modules["id"])
    checkpointed = [r for r in rows if r["module"] is not None and r["saved"] == 0 and r["holders"] > 0]
    kept = [r for r in rows if r["module"] is not None and r["saved"] > 0]
    assert checkpointed and kept
    for r in checkpointed:
        expand_to(page, r["path"])
        chip = item(page, r["path"]).locator(":scope > .mod-row .mod-chip")
        assert chip.is_visible() and chip.inner_text() == "checkpointed", r["path"]
    # Every item: the chip exactly when its subtree kept nothing and holders stood in for something.
    marks = page.locator("#view-memory [role=treeitem]").evaluate_all(
        """(items) => items.map((el) => ({path: el.dataset.path, saved: +el.dataset.saved, holders: +el.dataset.holders,
              chip: Boolean(el.querySelector(':scope > .mod-row .mod-chip'))}))"""
    )
    for m in marks:
        assert m["chip"] == (m["saved"] == 0 and m["holders"] > 0), m
    # ... and it is said to a screen reader too.
    assert "checkpointed" in (item(page, checkpointed[0]["path"]).get_attribute("aria-label") or "")


def test_a_run_without_modules_says_so(page: Page, live_server: str) -> None:
    run = scenario_run(live_server, "single_checkpoint")
    assert all(r["module"] is None for r in run["memory"]["modules"])
    open_modules(page, live_server, run["id"])
    empty = page.locator("#view-memory .mod-none")
    assert empty.is_visible()
    assert "No nn.Module ran in this run" in empty.inner_text()
    assert page.locator("#view-memory [role=tree]").count() == 0


def test_the_modules_open_larger_and_close_with_escape(
    page: Page, live_server: str, per_block: dict[str, Any]
) -> None:
    rows = per_block["memory"]["modules"]
    open_modules(page, live_server, per_block["id"])
    opener = page.locator("#view-memory .mem-open-ledger")
    assert "memory by module" in (opener.get_attribute("aria-label") or "")
    opener.click()
    dialog = page.locator(".modules-dialog")
    assert dialog.is_visible()
    assert page.evaluate("document.activeElement.closest('.modules-dialog') !== null")
    assert dialog.locator("[role=treeitem]").count() > 0
    assert page.locator("#view-memory [role=tree]").count() == 0  # moved into the dialog
    # The tree works in there: Go moves the step, and the dialog says where it is.
    block = next(r for r in rows if r["module"] is not None)["path"].rsplit(".", 1)[0]
    dialog.locator(f'[role=treeitem][data-path="{block}"] > .mod-row .mod-go').click()
    first = sums(under(rows, block))["first"]
    wait_step(page, first + 1)
    assert f"Now at step {first + 1}" in dialog.locator(".ledger-now").inner_text()
    page.keyboard.press("Escape")
    assert not dialog.is_visible()
    assert page.locator("#view-memory [role=tree]").is_visible()
    assert page.evaluate("document.activeElement === document.querySelector('#view-memory .mem-open-ledger')")


@pytest.mark.parametrize("size", [(1440, 900), (1024, 768)], ids=["1440x900", "1024x768"])
def test_no_panel_overlaps_with_the_modules_tab_open(
    page: Page, live_server: str, per_block: dict[str, Any], size: tuple[int, int]
) -> None:
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    open_modules(page, live_server, per_block["id"])
    page.evaluate("window.scrollTo(0, 0)")
    panels = page.evaluate(
        """() => [...document.querySelectorAll('.panel')].filter((e) => e.offsetParent).map((e) => {
          const r = e.getBoundingClientRect();
          return {id: e.id, left: r.left, top: r.top, right: r.right, bottom: r.bottom};
        })"""
    )
    assert "view-memory" in {p["id"] for p in panels}
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
    inside = page.evaluate(
        """() => {
          const panel = document.querySelector('#view-memory').getBoundingClientRect();
          const parts = ['.view-head', '.mem-tabs', '.mem-open-ledger', '.mem-modules-pane', '.mod-intro', '.mod-tree']
            .map((s) => [s, document.querySelector('#view-memory ' + s)])
            .filter(([, el]) => el && el.offsetParent)
            .map(([s, el]) => { const r = el.getBoundingClientRect(); return {s, left: r.left, right: r.right, top: r.top}; });
          const pane = document.querySelector('#view-memory .mem-modules-pane');
          const rows = [...pane.querySelectorAll('.mod-row')].filter((r) => r.offsetParent);
          return {panel: {left: panel.left, right: panel.right, top: panel.top, bottom: panel.bottom}, parts,
                  sideways: pane.scrollWidth - pane.clientWidth,
                  overflowing: rows.filter((r) => r.scrollWidth > r.clientWidth + 1).length,
                  cells: rows.flatMap((r) => [...r.children].map((c) => c.getBoundingClientRect()))
                    .filter((c) => c.width > 0).map((c) => ({left: c.left, right: c.right}))};
        }"""
    )
    box = inside["panel"]
    for part in inside["parts"]:
        assert part["left"] >= box["left"] - 0.5 and part["right"] <= box["right"] + 0.5, (
            f"{part['s']} at {width}x{height}"
        )
        assert part["top"] >= box["top"] - 0.5, f"{part['s']} at {width}x{height}"
    assert {p["s"] for p in inside["parts"]} >= {".mem-tabs", ".mem-open-ledger", ".mod-tree"}
    assert inside["sideways"] <= 0, f"the modules scroll sideways at {width}x{height}"
    assert inside["overflowing"] == 0
    for cell in inside["cells"]:
        assert box["left"] - 0.5 <= cell["left"] and cell["right"] <= box["right"] + 0.5
    # Every figure column fits its numbers (the narrow ones too).
    cut = page.locator("#view-memory .mod-tree .mod-num").evaluate_all(
        "(cs) => cs.filter((c) => c.offsetParent && c.scrollWidth > c.clientWidth + 1).map((c) => c.textContent)"
    )
    assert not cut, f"figures cut off at {width}x{height}: {cut}"
    screenshot(page, f"modules-layout-{width}x{height}")


# --- a long trace: a 12-layer GPT recorded on torch --------------------------------------------


def gpt_trace() -> bytes:
    """The GPT trace: /tmp/gpt-trace.json when it is there, else recorded here on torch."""
    if GPT_TRACE.is_file():
        return GPT_TRACE.read_bytes()
    from app.runner import run_scenario
    from engine.trace.export import to_json

    result = run_scenario(GPT, trusted=True, backend="torch")
    assert result.ok and result.trace is not None, result.error
    return to_json(result.trace).encode()


@pytest.mark.oracle
def test_a_long_gpt_trace_drills_into_one_block(
    page: Page, live_server: str, torch_oracle: ModuleType
) -> None:
    body = gpt_trace()
    doc = json.loads(body)
    request = urllib.request.Request(
        live_server + "/api/traces", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        created = json.loads(response.read())
    run = wait_finished(live_server, created["id"])
    assert run["status"] == "done", run["error"]
    rows = api(live_server, f"/api/runs/{created['id']}/memory")["modules"]
    h = "model.transformer.h"
    blocks = sorted({r["path"][len(h) + 1 :].split(".")[0] for r in under(rows, h)}, key=int)
    assert blocks == [str(i) for i in range(12)]

    page.set_viewport_size({"width": 1440, "height": 900})
    open_modules(page, live_server, created["id"], step=0)
    # By default the chain down to h is open, and h lists its 12 blocks, closed.
    for path in ("model", "model.transformer", h):
        assert item(page, path).get_attribute("aria-expanded") == "true", path
    children = item(page, h).locator(":scope > [role=group] > [role=treeitem]")
    assert children.count() == 12
    assert children.evaluate_all("(cs) => cs.map((c) => c.dataset.path)") == [f"{h}.{b}" for b in blocks]
    assert children.evaluate_all("(cs) => cs.map((c) => c.getAttribute('aria-expanded'))") == ["false"] * 12
    assert figures(item(page, h)) == sums(under(rows, h))
    screenshot(page, "modules-gpt")

    # Go on block 5 lands at its first save, inside its forward: the node that save is for is made
    # (by torch, after packing its saves) in a module of block 5, as the trace's own node_new says.
    block = f"{h}.5"
    first = sums(under(rows, block))["first"]
    item(page, block).locator(":scope > .mod-row .mod-go").click()
    wait_step(page, first + 1)
    assert page.evaluate("window.lens.player.event.seq") == first
    paths = {int(k): v["path"] for k, v in doc["meta"]["modules"].items()}
    made = next(e for e in doc["events"][first:] if e["kind"] == "node_new" and e.get("module") is not None)
    assert paths[made["module"]].startswith(block + "."), paths[made["module"]]
    assert "now-in" in (item(page, block).get_attribute("class") or "").split()
    # The keys open it: its attention and MLP inside.
    item(page, block).focus()
    page.keyboard.press("ArrowRight")
    inside = item(page, block).locator(":scope > [role=group] > [role=treeitem]")
    assert inside.count() >= 2 and inside.first.is_visible()
    assert figures(item(page, block)) == sums(under(rows, block))
    screenshot(page, "modules-gpt-block5")
