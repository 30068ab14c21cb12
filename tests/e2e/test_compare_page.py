"""The compare page (/compare) in a real browser: the table of every checkpointing strategy, the
trade-off plot and the sweep of N, each figure the one ``POST /api/compare`` (or ``/sweep``)
answers, each point a link to its run at its peak step; changing N, refused requests, and a layout
that holds at 1440x900 and 1024x768."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from types import ModuleType
from typing import Any

import pytest

from tests.e2e.conftest import ROOT, SCREENSHOTS, api, expect_refusal

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page (optional package)
SHOT = ROOT / "test-output" / "compare.png"  # docs/images/compare.png is a copy of it, looked at


def compare_done(page: Page, n: int) -> None:
    """Wait until the page shows every row of N = ``n`` (the page polls the server itself)."""
    page.wait_for_function(
        f"document.body.dataset.compareDone === '1' && document.body.dataset.compareN === '{n}'",
        timeout=180_000,
    )


def sweep_done(page: Page) -> None:
    page.wait_for_function("document.body.dataset.sweepDone === '1'", timeout=300_000)


def peak_url(row: dict[str, Any]) -> str:
    return f"/runs/{row['id']}?step={row['peak_held_step']}&level=events"


def fmt_bytes(n: int) -> str:
    """static/js/format.js ``bytes``."""
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.{1 if n < 10240 else 0}f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def refusal_of(base: str, path: str, body: dict[str, Any]) -> tuple[int, str]:
    """The status and ``detail`` of a request the server refuses."""
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    return refused.value.code, json.loads(refused.value.read())["detail"]


def boxes_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"] - 0.5
        and b["x"] < a["x"] + a["width"] - 0.5
        and a["y"] < b["y"] + b["height"] - 0.5
        and b["y"] < a["y"] + a["height"] - 0.5
    )


def check_layout(page: Page) -> None:
    """No horizontal scroll; the page's blocks, and the trade-off plot's labels and markers, never
    overlap; nothing is cut off inside the table."""
    # The plots redraw at their panel's width after a resize.
    page.wait_for_function(
        """['#cmp-tradeoff', '#cmp-sweep'].every((sel) => {
             const root = document.querySelector(sel);
             const svg = root.querySelector('svg.cmp-svg');
             return svg && Number(svg.getAttribute('width')) === Math.max(320, root.clientWidth);
           })"""
    )
    sizes = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert sizes[0] <= sizes[1], f"the page scrolls sideways: {sizes}"
    table = page.evaluate(
        "(() => { const w = document.querySelector('.cmp-table-wrap'); return [w.scrollWidth, w.clientWidth]; })()"
    )
    assert table[0] <= table[1], f"the table does not fit its panel: {table}"
    blocks = [
        page.locator(sel).bounding_box()
        for sel in (
            ".compare-intro",
            ".compare-controls",
            ".cmp-table-panel",
            "#cmp-tradeoff-title",
            "#cmp-sweep-title",
            "#cmp-tradeoff svg.cmp-svg",
            "#cmp-sweep svg.cmp-svg",
            ".cmp-why",
        )
    ]
    for i, a in enumerate(blocks):
        for b in blocks[i + 1 :]:
            assert a and b and not boxes_overlap(a, b), (a, b)
    # The sweep plot sits beside or under the trade-off plot, inside the viewport's width.
    width = page.viewport_size["width"]
    for sel in ("#cmp-tradeoff svg.cmp-svg", "#cmp-sweep svg.cmp-svg", ".cmp-table"):
        box = page.locator(sel).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width, (sel, box)
    labels = page.locator("#cmp-tradeoff .cmp-point-label")
    markers = page.locator("#cmp-tradeoff .cmp-marker")
    label_boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
    marker_boxes = [markers.nth(i).bounding_box() for i in range(markers.count())]
    for i, a in enumerate(label_boxes):
        for b in label_boxes[i + 1 :] + marker_boxes:
            assert a and b and not boxes_overlap(a, b), f"a label of the trade-off plot covers {b}: {a}"
    for i, a in enumerate(marker_boxes):
        for b in marker_boxes[i + 1 :]:
            assert a and b and not boxes_overlap(a, b), "two markers of the trade-off plot cover each other"


def test_the_compare_page_shows_the_apis_figures(page: Page, live_server: str) -> None:
    page.goto(live_server + "/")
    page.get_by_role("link", name="Compare strategies").click()
    page.wait_for_url(re.compile(r"/compare$"))
    compare_done(page, 4)
    sweep_done(page)
    doc = api(live_server, "/api/compare", {"n": 4})  # the runs the page made: all done
    assert doc["done"] and page.evaluate("window.lens.compare.rows.map((r) => r.id)") == [
        r["id"] for r in doc["rows"]
    ]
    rows = {r["strategy"]: r for r in doc["rows"] if r["backend"] == "engine"}
    strategies = [s["id"] for s in doc["strategies"]]
    assert list(rows) == strategies
    n_rows = len(doc["rows"])
    assert page.locator("#cmp-progress").text_content() == f"{n_rows} of {n_rows} runs done"

    # The table: a row per strategy, each figure the API's, each row linking to its peak step.
    assert page.locator(".cmp-row").count() == len(strategies)
    base = rows["none"]["peak_held"]
    for strategy in doc["strategies"]:
        row = rows[strategy["id"]]
        tr = page.locator(f".cmp-row[data-strategy='{strategy['id']}'][data-backend='engine']")
        assert tr.get_attribute("data-status") == "done"
        name = tr.locator(".cmp-strategy")
        assert strategy["title"] in name.text_content() and strategy["description"] in name.text_content()
        for key in (
            "peak_held",
            "peak_live",
            "extra_block_runs",
            "recomputed_ops",
            "recomputations",
            "early_stops",
        ):
            assert tr.locator(f"td[data-key='{key}']").get_attribute("data-value") == str(row[key]), key
        assert tr.locator("td[data-key='hook_bytes']").get_attribute("data-value") == str(
            row["measured"]["saved_bytes"]
        )
        held = tr.locator("td[data-key='peak_held']").text_content()
        assert fmt_bytes(row["peak_held"]) in held
        assert fmt_bytes(row["peak_live"]) == tr.locator("td[data-key='peak_live']").text_content()
        if strategy["id"] == "none":
            assert "baseline" in held
        else:
            pct = round(100 * row["peak_held"] / base - 100)
            assert (f"\N{MINUS SIGN}{-pct}%" if pct < 0 else f"+{pct}%" if pct > 0 else "±0%") in held
        assert tr.locator("a.cmp-open").get_attribute("href") == peak_url(row)

    # The trade-off plot: one point per strategy, each a link to its run at its peak.
    points = page.locator("#cmp-tradeoff a.cmp-point")
    assert points.count() == len(strategies)
    for i in range(points.count()):
        point = points.nth(i)
        row = rows[point.get_attribute("data-strategy")]
        assert point.get_attribute("href") == peak_url(row)
        assert fmt_bytes(row["peak_held"]) in point.locator("title").text_content()

    # The sweep: a point per (strategy, N), Chen et al.'s curve dashed, the fitted exponents.
    sweep = api(live_server, "/api/compare/sweep", {})
    assert sweep["done"]
    expected = {(r["strategy"], r["n"]): r for r in sweep["rows"]}
    points = page.locator("#cmp-sweep a.cmp-point")
    assert points.count() == len(sweep["ns"]) * len(sweep["strategies"]) == len(expected) == 18
    for i in range(points.count()):
        point = points.nth(i)
        row = expected[(point.get_attribute("data-strategy"), int(point.get_attribute("data-n")))]
        assert point.get_attribute("href") == peak_url(row)
    law = page.locator("#cmp-sweep svg.cmp-svg path.cmp-law")
    assert law.count() == 1 and law.get_attribute("stroke-dasharray")
    assert len(re.findall(r"[ML]", law.get_attribute("d"))) == len(sweep["sqrt_law"]) == len(sweep["ns"])
    legend = page.locator("#cmp-sweep .cmp-legend")
    for strategy, exponent in sweep["exponents"].items():
        item = legend.locator(f"li[data-strategy='{strategy}']")
        assert f"N{exponent:.2f}" in item.text_content(), strategy
    assert "Chen et al. 2016" in legend.text_content()

    # Why nested runs a block three times, with a link to that run.
    why = page.locator("#cmp-why")
    calls = rows["nested"]["measured"]["block_calls"]
    assert ", ".join(map(str, calls)) in why.text_content()
    assert why.locator("a").get_attribute("href") == peak_url(rows["nested"])

    # Nothing overlaps at a laptop's size, nor at 1024x768.
    check_layout(page)
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT), full_page=True)
    page.set_viewport_size({"width": 1024, "height": 768})
    check_layout(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "compare-1024.png"), full_page=True)

    # A point opens its run in the viewer, at its peak step.
    page.set_viewport_size({"width": 1440, "height": 900})
    nested = page.locator("#cmp-tradeoff a.cmp-point[data-strategy='nested']")
    nested.click()
    page.wait_for_url(re.compile(r"/runs/[^/?]+\?step=\d+"))
    page.wait_for_function("document.body.dataset.ready === '1'")
    assert page.evaluate("window.lens.player.step") == rows["nested"]["peak_held_step"]
    assert page.evaluate("window.lens.run.id") == rows["nested"]["id"]


def test_changing_n_reloads_the_rows(page: Page, live_server: str) -> None:
    page.goto(live_server + "/compare")
    compare_done(page, 4)
    page.locator("#cmp-n").fill("6")
    page.locator("#cmp-n").press("Enter")
    compare_done(page, 6)
    assert re.search(r"[?&]n=6(&|$)", page.url)
    doc = api(live_server, "/api/compare", {"n": 6})
    assert doc["done"] and doc["n"] == 6
    assert page.locator("#cmp-table-title").text_content() == "The strategies at N = 6"
    for row in doc["rows"]:
        assert row["n"] == 6
        tr = page.locator(f".cmp-row[data-strategy='{row['strategy']}'][data-backend='engine']")
        assert tr.locator("td[data-key='peak_held']").get_attribute("data-value") == str(row["peak_held"])
        assert tr.locator("a.cmp-open").get_attribute("href") == peak_url(row)
    assert page.locator("#cmp-tradeoff a.cmp-point").count() == len(doc["strategies"])
    # The permalink opens the same N.
    page.reload()
    compare_done(page, 6)
    assert page.locator("#cmp-n").input_value() == "6"


def test_a_refused_request_shows_what_the_server_said(page: Page, live_server: str) -> None:
    status, detail = refusal_of(live_server, "/api/compare", {"n": 100, "backends": ["engine"]})
    assert status == 422
    expect_refusal(page, 422)
    page.goto(live_server + "/compare")
    compare_done(page, 4)
    page.locator("#cmp-n").fill("100")
    page.locator("#cmp-n").press("Enter")
    alert = page.locator("#cmp-alert")
    alert.wait_for(state="visible")
    assert detail in alert.text_content()

    # The server's words are text, never markup.
    expect_refusal(page, 503)
    markup = "<img src=x onerror=\"document.body.dataset.injected='1'\"> the server is busy"
    page.route("**/api/compare", lambda route: route.fulfill(status=503, json={"detail": markup}))
    page.locator("#cmp-n").fill("5")
    page.locator("#cmp-n").press("Enter")
    page.wait_for_function("document.querySelector('#cmp-alert-text').textContent.includes('busy')")
    assert markup in alert.text_content()
    assert alert.locator("img").count() == 0
    assert page.evaluate("document.body.dataset.injected") is None

    # "Try again" asks again, and the page recovers.
    page.unroute("**/api/compare")
    page.locator("#cmp-retry").click()
    compare_done(page, 5)
    assert alert.is_hidden()


def test_a_failed_run_shows_its_error_in_its_row(page: Page, live_server: str) -> None:
    page.goto(live_server + "/compare")
    compare_done(page, 4)  # the real runs, all done; then one of them as if it had failed
    doc = api(live_server, "/api/compare", {"n": 4})
    failed = doc["rows"][1]
    error = {"type": "RuntimeError", "message": "<b>boom</b> in block 2"}
    doc["rows"][1] = {k: failed[k] for k in ("strategy", "title", "n", "backend", "id", "url")} | {
        "status": "error",
        "error": error,
    }
    doc["done"] = True
    page.route("**/api/compare", lambda route: route.fulfill(status=200, json=doc))
    page.reload()
    compare_done(page, 4)
    tr = page.locator(f".cmp-row[data-strategy='{failed['strategy']}']")
    assert tr.get_attribute("data-status") == "error"
    assert f"{error['type']}: {error['message']}" in tr.text_content()
    assert tr.locator("b").count() == 0
    assert tr.locator("a.cmp-open").get_attribute("href") == f"/runs/{failed['id']}"
    n = len(doc["rows"])
    assert page.locator("#cmp-progress").text_content() == f"{n} of {n} runs done (1 failed)"
    assert page.locator("#cmp-tradeoff a.cmp-point").count() == n - 1


@pytest.mark.oracle
def test_torch_rows_measure_the_same(page: Page, live_server: str, torch_oracle: ModuleType) -> None:
    page.goto(live_server + "/compare")
    compare_done(page, 4)
    box = page.locator("#cmp-torch")
    assert box.is_visible()
    box.check()
    page.wait_for_url(re.compile(r"[?&]torch=1"))
    compare_done(page, 4)
    doc = api(live_server, "/api/compare", {"n": 4, "backends": ["engine", "torch"]})
    assert doc["done"]
    torch_rows = {r["strategy"]: r for r in doc["rows"] if r["backend"] == "torch"}
    engine_rows = {r["strategy"]: r for r in doc["rows"] if r["backend"] == "engine"}
    assert page.locator(".cmp-row[data-backend='torch']").count() == len(torch_rows) == len(doc["strategies"])
    for strategy, row in torch_rows.items():
        tr = page.locator(f".cmp-row[data-strategy='{strategy}'][data-backend='torch']")
        assert tr.locator("a.cmp-open").get_attribute("href") == peak_url(row)
        held = tr.locator("td[data-key='peak_held']")
        assert held.get_attribute("data-value") == str(row["peak_held"])
        assert "cmp-approx" in (held.get_attribute("class") or "")  # dimmed: torch's trace sees part
        assert "cmp-approx" not in (tr.locator("td[data-key='hook_bytes']").get_attribute("class") or "")
        engine = page.locator(f".cmp-row[data-strategy='{strategy}'][data-backend='engine']")
        same = row["measured"] == engine_rows[strategy]["measured"]
        assert engine.locator(".cmp-same").count() == (1 if same else 0), strategy
    assert "torch's trace does not see" in page.locator(".cmp-footnote").text_content()
    # The trade-off plot keeps to the engine's runs.
    assert page.locator("#cmp-tradeoff a.cmp-point").count() == len(engine_rows)
