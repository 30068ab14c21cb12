"""XSS: every string a user controls is rendered as text (issue 16).

An uploaded scenario whose output, error and file name hold markup, and a trace document whose
every name and label (tensor and module names, saved-tensor slots, module paths and types, marks,
the file name, the docstring title) holds ``<img onerror>``, ``<script>`` and ``<svg onload>``
payloads, opened on the run page (story and every-event levels, the memory view and its ledger)
and the embed page. Nothing may run: the flag a payload would set stays unset and no dialog
opens; no element the payloads describe appears in the page; their text does.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import api, checked_page, wait_finished

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page

PAYLOADS = [
    "<img src=x onerror=\"self['xss']=1;alert(1)\">",
    "<script>self['xss']=1;alert(1)</script>",
    '"><svg onload="self[\'xss\']=1">',
]
MARKUP = " ".join(PAYLOADS)
# Elements a payload would create if it were parsed as markup.
INJECTED = "img[src='x'], svg[onload], script:not([src]):not([type='application/json'])"
NAME_KEYS = ("name", "slot", "path", "type", "label")


def poisoned(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the payloads in front of every name and label, in its file name and title."""
    old_file = next(iter(doc["sources"]))
    new_file = f"{PAYLOADS[0]}.py"

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if key in NAME_KEYS and isinstance(item, str):
                    out[key] = f"{MARKUP} {item}"
                elif key == "file" and item == old_file:
                    out[key] = new_file
                else:
                    out[key] = walk(item)
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    events = walk(doc["events"])
    text = f'"""{MARKUP}"""\n' + doc["sources"][old_file]
    meta = {**doc["meta"], "source_files": [new_file]}
    return {**doc, "meta": meta, "sources": {new_file: text}, "events": events}


def post_trace(base: str, doc: dict[str, Any]) -> str:
    request = urllib.request.Request(
        base + "/api/traces", data=json.dumps(doc).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        run_id: str = json.loads(response.read())["id"]
    return run_id


SCENARIO = f'''"""{MARKUP}"""
import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint
m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
x = torch.ones(1, 2, requires_grad=True)
y = checkpoint(m, x, use_reentrant=False).sum()
torch.trace.mark({MARKUP!r})
print({MARKUP!r})
y.backward()
raise ValueError({MARKUP!r})
'''


@pytest.fixture(scope="module")
def runs(live_server: str) -> dict[str, str]:
    uploaded = api(live_server, "/api/runs", {"source": SCENARIO, "filename": f"{PAYLOADS[0]}.py"})["id"]
    run = wait_finished(live_server, uploaded)
    assert run["status"] == "error" and "<script>" in run["error"]["message"], run
    with urllib.request.urlopen(f"{live_server}/api/runs/{uploaded}/trace.json", timeout=60) as r:
        doc = json.loads(r.read())
    imported = post_trace(live_server, poisoned(doc))
    assert wait_finished(live_server, imported)["status"] in ("done", "error")  # it ends at the error
    return {"uploaded": uploaded, "imported": imported}


@pytest.fixture
def strict_page(browser: Any) -> Iterator[Any]:
    """A page with the Content-Security-Policy enforced (the ``page`` fixture bypasses it):
    waits go through locators, since Playwright's string predicates need eval. Any error on it,
    a violation of the policy included, fails the test."""
    with checked_page(browser, bypass_csp=False, timeout_ms=60_000) as page:
        yield page


def ready(page: Page, *flags: str) -> None:
    for flag in flags:
        page.locator(f"body[data-{flag}]").wait_for(state="attached")


def watch(page: Page) -> list[str]:
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return dialogs


def assert_inert(page: Page, dialogs: list[str]) -> None:
    assert page.evaluate("self['xss']") is None, "a payload ran"
    assert dialogs == []
    assert page.locator(INJECTED).count() == 0, page.locator(INJECTED).first.evaluate("e => e.outerHTML")


@pytest.mark.parametrize("which", ["uploaded", "imported"])
def test_payloads_in_a_run_are_shown_as_text(
    strict_page: Page, live_server: str, runs: dict[str, str], which: str
) -> None:
    page = strict_page
    dialogs = watch(page)
    page.goto(f"{live_server}/runs/{runs[which]}")
    ready(page, "ready", "story", "graph")
    assert "<script>self['xss']=1;alert(1)</script>" in page.locator("body").inner_text()
    for _ in range(40):  # the story, step by step: captions, chapters, cause links, the graph
        page.keyboard.press("ArrowRight")
    assert_inert(page, dialogs)
    page.keyboard.press("l")  # every event
    assert page.evaluate("window.lens.level") == "events"
    for _ in range(60):
        page.keyboard.press("ArrowRight")
    page.keyboard.press("End")
    ready(page, "memory")
    page.click("#mem-tab-ledger")
    assert_inert(page, dialogs)


def test_payloads_on_the_embed_page_are_shown_as_text(
    strict_page: Page, live_server: str, runs: dict[str, str]
) -> None:
    page = strict_page
    dialogs = watch(page)
    page.goto(f"{live_server}/embed/runs/{runs['imported']}?level=events")
    ready(page, "ready")
    for _ in range(30):
        page.keyboard.press("ArrowRight")
    assert_inert(page, dialogs)


def test_every_page_has_a_strict_policy(live_server: str, runs: dict[str, str]) -> None:
    for path in (
        "/",
        f"/runs/{runs['imported']}",
        "/compare",
        f"/diff?a={runs['imported']}&b={runs['uploaded']}",
    ):
        with urllib.request.urlopen(live_server + path, timeout=60) as response:
            policy = response.headers["Content-Security-Policy"]
        assert (
            "script-src 'self' 'wasm-unsafe-eval'" in policy
            and "'unsafe-inline'" not in policy.split("style-src")[0]
        )
        assert "frame-ancestors 'self'" in policy and "object-src 'none'" in policy
    with urllib.request.urlopen(f"{live_server}/embed/runs/{runs['imported']}", timeout=60) as response:
        assert "frame-ancestors *" in response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]
    with urllib.request.urlopen(
        f"{live_server}/api/runs/{runs['imported']}/export.html", timeout=120
    ) as response:
        assert response.headers["Content-Disposition"].startswith("attachment")
        assert response.headers.get("Content-Security-Policy") is None


def test_every_page_works_under_the_policy(strict_page: Page, live_server: str, runs: dict[str, str]) -> None:
    """The pages' own scripts, the editor (CodeMirror) and the graph (Graphviz's WebAssembly)
    run with the policy enforced: no violation is reported (``strict_page`` fails on any)."""
    page = strict_page
    page.goto(f"{live_server}/")
    page.locator("#editor .cm-content").wait_for(state="attached")
    page.goto(f"{live_server}/runs/{runs['imported']}")
    ready(page, "ready", "story", "graph")
    page.locator("svg").first.wait_for(state="attached")
    page.goto(f"{live_server}/compare")
    page.wait_for_load_state("networkidle")
    page.goto(f"{live_server}/diff?a={runs['imported']}&b={runs['uploaded']}")
    page.wait_for_load_state("networkidle")
