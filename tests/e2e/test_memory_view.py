"""The memory panel in a real browser: the timeline (click and drag to move the step, the marks,
the peak and its card) and the saved-tensor ledger (its rows, its markers, its dialog), on runs of
``mlp_memory_per_block`` and ``nested_checkpoint``.

Expected values are not written down here: they come from the run's memory report
(``GET /api/runs/{id}/memory``), which is what the browser must draw without computing anything.
Event ``seq`` is shown at step ``seq + 1``.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.e2e.conftest import api, screenshot, wait_finished
from tests.e2e.test_viewer import current_step, open_run

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page: the package is optional, so it is not imported at module level

MARK_KINDS = ("pack", "unpack", "holder_gc", "recompute_start", "early_stop")


@pytest.fixture(scope="module")
def per_block(live_server: str) -> dict[str, Any]:
    """A run of mlp_memory_per_block (one checkpoint per block), with its memory report."""
    created = api(live_server, "/api/runs", {"scenario": "mlp_memory_per_block"})
    run = wait_finished(live_server, created["id"])
    assert run["status"] == "done", run["error"]
    return {"id": created["id"], "memory": api(live_server, f"/api/runs/{created['id']}/memory")}


@pytest.fixture(scope="module")
def nested_memory(live_server: str, nested: dict[str, Any]) -> dict[str, Any]:
    return {"id": nested["id"], "memory": api(live_server, f"/api/runs/{nested['id']}/memory")}


@pytest.fixture(params=["per_block", "nested_memory"])
def any_run(request: pytest.FixtureRequest) -> dict[str, Any]:
    run: dict[str, Any] = request.getfixturevalue(request.param)
    return run


# --- helpers -------------------------------------------------------------------------------------


def open_memory(page: Page, base: str, run_id: str, step: int | None = None) -> None:
    """The viewer at the event level, once the memory report has been drawn."""
    open_run(page, base, run_id, step=step)
    page.wait_for_function("document.body.dataset.memory === '1'")
    page.wait_for_function("document.querySelector('#view-memory .mem-plot').dataset.plotWidth > 0")


def plot_geometry(page: Page) -> dict[str, float]:
    """Where the plot is in the window, and its time axis: the plot's own left margin and width
    (data attributes of the chart) and the number of events."""
    geometry: dict[str, float] = page.evaluate(
        """() => {
          const p = document.querySelector('#view-memory .mem-plot');
          const r = p.getBoundingClientRect();
          return {x: r.left, y: r.top, h: r.height, left: Number(p.dataset.plotLeft),
                  width: Number(p.dataset.plotWidth), n: Number(p.dataset.n)};
        }"""
    )
    return geometry


def x_of_event(geometry: dict[str, float], seq: int) -> float:
    """The middle of event ``seq``'s slice of the time axis, in window coordinates."""
    return geometry["x"] + geometry["left"] + (seq + 0.5) / geometry["n"] * geometry["width"]


def wait_step(page: Page, step: int) -> None:
    page.wait_for_function("(s) => window.lens.player.step === s", arg=step)


# --- the timeline ----------------------------------------------------------------------------------


def test_a_click_on_the_chart_goes_to_the_event_under_it(
    page: Page, live_server: str, per_block: dict[str, Any]
) -> None:
    memory = per_block["memory"]
    open_memory(page, live_server, per_block["id"], step=1)
    g = plot_geometry(page)
    assert g["n"] == memory["metrics"]["events"]
    y = g["y"] + g["h"] / 3
    targets = [memory["peak"]["seq"], memory["marks"]["unpack"][0], memory["marks"]["recompute_start"][-1]]
    for seq in targets:
        page.mouse.click(x_of_event(g, seq), y)
        wait_step(page, seq + 1)
        # The cursor is drawn where the click was.
        cursor = page.evaluate(
            "(() => { const r = document.querySelector('#view-memory .mem-cursor').getBoundingClientRect(); return r.left + r.width / 2; })()"
        )
        assert abs(cursor - x_of_event(g, seq)) <= 1.5
    # The chart takes the focus and the page's keys still step from there.
    page.focus("#view-memory .mem-plot")
    page.keyboard.press("ArrowRight")
    wait_step(page, targets[-1] + 2)
    assert page.get_attribute("#view-memory .mem-plot", "aria-valuenow") == str(targets[-1] + 2)


def test_a_drag_on_the_chart_moves_the_step_with_the_pointer(
    page: Page, live_server: str, per_block: dict[str, Any]
) -> None:
    open_memory(page, live_server, per_block["id"], step=1)
    g = plot_geometry(page)
    n = int(g["n"])
    y = g["y"] + g["h"] / 3
    seqs = [n // 20 + i * (n - n // 10) // 12 for i in range(13)]
    page.mouse.move(x_of_event(g, seqs[0]), y)
    page.mouse.down()
    steps = []
    for seq in seqs:
        page.mouse.move(x_of_event(g, seq), y, steps=3)
        wait_step(page, seq + 1)
        steps.append(current_step(page))
    page.mouse.up()
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    # Back the other way, and the step follows.
    page.mouse.move(x_of_event(g, seqs[-1]), y)
    page.mouse.down()
    page.mouse.move(x_of_event(g, seqs[3]), y, steps=8)
    wait_step(page, seqs[3] + 1)
    page.mouse.up()


def test_the_marks_are_the_reports(page: Page, live_server: str, any_run: dict[str, Any]) -> None:
    marks = any_run["memory"]["marks"]
    open_memory(page, live_server, any_run["id"])
    drawn = page.evaluate(
        """(kinds) => Object.fromEntries(kinds.map((k) => [k, {
            n: [...document.querySelectorAll(`#view-memory .mem-mark[data-kind="${k}"]`)]
                 .reduce((s, el) => s + Number(el.dataset.n), 0),
            seqs: [...document.querySelectorAll(`#view-memory .mem-mark[data-kind="${k}"]`)]
                 .map((el) => Number(el.dataset.seq)),
            legend: document.querySelector(`#view-memory .mem-legend [data-kind="${k}"] .mem-key-n`).textContent,
          }]))""",
        list(MARK_KINDS),
    )
    for kind in MARK_KINDS:
        assert drawn[kind]["n"] == len(marks[kind]), kind
        assert drawn[kind]["seqs"] == marks[kind], kind
        assert drawn[kind]["legend"] == str(len(marks[kind])), kind
    # Each kind has its own shape, not only its own colour.
    shapes = page.evaluate(
        """(kinds) => kinds.map((k) => {
            const el = document.querySelector(`#view-memory .mem-legend [data-kind="${k}"] .glyph`);
            const s = getComputedStyle(el);
            return [s.clipPath, s.borderRadius, s.width, s.height].join(' ');
          })""",
        list(MARK_KINDS),
    )
    assert len(set(shapes)) == len(MARK_KINDS)


def test_the_peak_card_lists_what_was_alive(page: Page, live_server: str, per_block: dict[str, Any]) -> None:
    peak = per_block["memory"]["peak"]
    open_memory(page, live_server, per_block["id"], step=1)
    marker = page.locator("#view-memory .mem-peak")
    assert marker.get_attribute("data-seq") == str(peak["seq"])
    assert marker.inner_text().startswith("peak ")
    card = page.locator("#mem-peak-card")
    assert card.is_hidden()
    marker.hover()
    card.wait_for(state="visible")
    first = peak["alive"][0]
    row = card.locator("tbody tr").first
    assert row.get_attribute("data-storage") == str(first["storage"])
    text = row.inner_text()
    assert first["what"] in text
    assert all(name in text for name in first["names"])
    assert str(first["line"]) in text
    assert card.locator("tbody tr").count() == len(peak["alive"])
    assert f"event #{peak['seq']}" in card.locator("h3").inner_text()
    # The split: one line per part that holds anything.
    assert card.locator(".mem-parts li").count() == sum(1 for size in peak["parts"].values() if size)
    screenshot(page, "memory-peak-card")
    # Esc closes it; the keyboard opens it too (focus), and a click pins it.
    page.keyboard.press("Escape")
    card.wait_for(state="hidden")
    marker.focus()
    card.wait_for(state="visible")
    marker.press("Escape")
    card.wait_for(state="hidden")
    marker.click()
    card.wait_for(state="visible")
    page.mouse.move(0, 0)
    assert card.is_visible()
    card.get_by_role("button", name="Go to the peak").click()
    wait_step(page, peak["seq"] + 1)
    card.wait_for(state="hidden")


# --- the ledger ----------------------------------------------------------------------------------


def test_the_ledger_has_a_row_per_entry_and_its_markers_jump(
    page: Page, live_server: str, any_run: dict[str, Any]
) -> None:
    memory = any_run["memory"]
    ledger = memory["ledger"]
    open_memory(page, live_server, any_run["id"], step=1)
    page.click("#mem-tab-ledger")
    assert page.get_attribute("#mem-tab-ledger", "aria-selected") == "true"
    rows = page.locator("#view-memory .lg-entry")
    assert rows.count() == len(ledger)
    assert rows.evaluate_all("(rs) => rs.map((r) => r.dataset.id)") == [x["id"] for x in ledger]
    # Each row says what the server says: bytes and place aside, its fate and how it was kept.
    for i in (0, len(ledger) // 2, len(ledger) - 1):
        text = rows.nth(i).inner_text()
        assert ledger[i]["fate"] in text and ledger[i]["node_name"] in text and ledger[i]["kept"] in text
        if ledger[i]["frame"]:
            assert ledger[i]["frame"] in text
    # Its markers: one per unpack, recomputation, refill, take, plus the save and the end.
    for i, entry in enumerate(ledger):
        row = rows.nth(i)
        for field, kind in (
            ("unpacks", "unpack"),
            ("recomputed_by", "recompute_start"),
            ("refilled", "rpack"),
            ("taken", "recomputed_take"),
        ):
            seqs = row.locator(f'.lg-mark[data-kind="{kind}"]').evaluate_all(
                "(ms) => ms.map((m) => Number(m.dataset.seq))"
            )
            assert seqs == entry[field], (entry["id"], field)
    # At step 1 only the rows saved by then are highlighted.
    past = rows.evaluate_all("(rs) => rs.filter((r) => r.classList.contains('past')).length")
    assert past == sum(x["seq"] + 1 <= 1 for x in ledger)
    # A click on an unpack marker goes to that unpack.
    entry = next(x for x in ledger if x["unpacks"])
    seq = entry["unpacks"][0]
    row = page.locator(f'#view-memory .lg-entry[data-id="{entry["id"]}"]')
    row.locator(f'.lg-mark[data-kind="unpack"][data-seq="{seq}"]').click()
    wait_step(page, seq + 1)
    assert page.evaluate("window.lens.player.event.kind") == "unpack"
    classes = (row.get_attribute("class") or "").split()
    assert "now" in classes and "past" in classes
    past = rows.evaluate_all("(rs) => rs.filter((r) => r.classList.contains('past')).length")
    assert past == sum(x["seq"] + 1 <= seq + 1 for x in ledger)
    # The findings, as the server wrote them, each with a link to where the trace shows it.
    findings = page.locator("#view-memory .lg-findings li")
    assert findings.count() == len(memory["diagnosis"])
    for i, finding in enumerate(memory["diagnosis"]):
        assert findings.nth(i).get_attribute("data-kind") == finding["kind"]
        if finding["seq"] is not None:
            findings.nth(i).get_by_role("button", name=f"show event #{finding['seq']}").click()
            wait_step(page, finding["seq"] + 1)
    screenshot(page, f"memory-ledger-{any_run['id']}")


def test_the_ledger_dialog_opens_and_closes_with_escape(
    page: Page, live_server: str, nested_memory: dict[str, Any]
) -> None:
    ledger = nested_memory["memory"]["ledger"]
    open_memory(page, live_server, nested_memory["id"], step=1)
    opener = page.locator("#view-memory .mem-open-ledger")
    opener.focus()
    page.keyboard.press("Enter")
    dialog = page.locator(".ledger-dialog")
    dialog.wait_for(state="visible")
    assert dialog.get_attribute("aria-modal") == "true"
    assert page.evaluate("document.querySelector('.ledger-dialog').contains(document.activeElement)")
    assert dialog.locator(".lg-entry").count() == len(ledger)
    # Tab stays inside the dialog.
    for _ in range(5):
        page.keyboard.press("Shift+Tab")
        assert page.evaluate("document.querySelector('.ledger-dialog').contains(document.activeElement)")
    # The page's keys are the dialog's while it is open.
    page.keyboard.press("ArrowRight")
    assert current_step(page) == 1
    # A marker in the dialog jumps, and the dialog says where the viewer now is.
    entry = next(x for x in ledger if x["unpacks"])
    seq = entry["unpacks"][0]
    dialog.locator(
        f'.lg-entry[data-id="{entry["id"]}"] .lg-mark[data-kind="unpack"][data-seq="{seq}"]'
    ).click()
    wait_step(page, seq + 1)
    assert f"step {seq + 1}" in dialog.locator(".ledger-now").inner_text()
    screenshot(page, "memory-ledger-dialog")
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    assert page.evaluate("document.activeElement === document.querySelector('#view-memory .mem-open-ledger')")
    # The ledger is back in its tab.
    page.click("#mem-tab-ledger")
    assert page.locator("#view-memory .lg-entry").count() == len(ledger)


@pytest.mark.parametrize("size", [(1440, 900), (1024, 768)], ids=["1440x900", "1024x768"])
@pytest.mark.parametrize("tab", ["timeline", "ledger"])
def test_no_panel_overlaps_with_the_memory_panel_open(
    page: Page, live_server: str, per_block: dict[str, Any], size: tuple[int, int], tab: str
) -> None:
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    open_memory(page, live_server, per_block["id"], step=per_block["memory"]["peak"]["seq"] + 1)
    page.click(f"#mem-tab-{tab}")
    # The click scrolled a narrow page; the sticky controls overlap what scrolls under them.
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
    # Inside the memory panel: the header, the chart and its legend fit, nothing sticks out.
    inside = page.evaluate(
        """() => {
          const panel = document.querySelector('#view-memory').getBoundingClientRect();
          const parts = ['.view-head', '.mem-tabs', '.mem-open-ledger', '.mem-readout', '.mem-plot', '.mem-legend', '.mem-ledger-pane']
            .map((s) => [s, document.querySelector('#view-memory ' + s)])
            .filter(([, el]) => el && el.offsetParent)
            .map(([s, el]) => { const r = el.getBoundingClientRect(); return {s, top: r.top, bottom: r.bottom, left: r.left, right: r.right, h: r.height}; });
          return {panel: {top: panel.top, bottom: panel.bottom, left: panel.left, right: panel.right}, parts};
        }"""
    )
    box = inside["panel"]
    for part in inside["parts"]:
        assert part["top"] >= box["top"] - 0.5 and part["bottom"] <= box["bottom"] + 0.5, (
            f"{part['s']} at {width}x{height}"
        )
        assert part["left"] >= box["left"] - 0.5 and part["right"] <= box["right"] + 0.5, (
            f"{part['s']} at {width}x{height}"
        )
    if tab == "timeline":
        plot = next(p for p in inside["parts"] if p["s"] == ".mem-plot")
        assert plot["h"] >= 90, f"the chart is {plot['h']} px high at {width}x{height}"
    page.locator("#view-memory").scroll_into_view_if_needed()
    screenshot(page, f"memory-{tab}-{width}x{height}")
