"""The home page's scenario editor (CodeMirror 6, ``static/js/editor.js``): typing, Ctrl+Enter, the
failed run's line marked with its message, the draft kept across reloads, Python highlighting,
and the vendored bundle (``scripts/vendor_codemirror.sh`` and its ``NOTICE.md`` agree).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.e2e.conftest import ROOT, screenshot

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page: the package is optional, so it is not imported at module level

VENDOR = ROOT / "static" / "vendor" / "codemirror"
SCRIPT = ROOT / "scripts" / "vendor_codemirror.sh"

# Typed key by key: no quotes and no indentation, so that the editor's bracket closing and
# auto-indent type exactly this. The error is on line 5.
BROKEN_LINES = [
    "import engine as torch",
    "x = torch.randn(3, requires_grad=True)",
    "y = (x * 2).sum()",
    "y.backward()",
    "z = x.grad + undefined_name",
]


def open_home(page: Page, base: str) -> None:
    page.goto(base + "/")
    page.wait_for_function("document.body.dataset.editorReady === '1'")


def editor_text(page: Page) -> str:
    text: str = page.evaluate("window.scenarioEditor.state.doc.toString()")
    return text


def test_typing_a_broken_scenario_and_ctrl_enter_marks_its_error_line(page: Page, live_server: str) -> None:
    open_home(page, live_server)
    page.fill("#editor-name", "typed.py")
    page.click("#editor .cm-content")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    for i, line in enumerate(BROKEN_LINES):
        page.keyboard.type(line)
        page.keyboard.press("Escape")  # close a completion list, which Enter would accept
        if i < len(BROKEN_LINES) - 1:
            page.keyboard.press("Enter")
    assert editor_text(page) == "\n".join(BROKEN_LINES)
    page.keyboard.press("Control+Enter")

    message = page.locator("#editor .cm-run-error-message")
    message.wait_for()
    assert "NameError" in message.text_content()
    assert "undefined_name" in message.text_content()
    marked = page.locator("#editor .cm-run-error-line")
    assert marked.count() == 1
    assert "undefined_name" in marked.text_content()
    # The marked line is the fifth: count the editor's lines before it.
    index = page.evaluate(
        "[...document.querySelectorAll('#editor .cm-line')].findIndex(l => l.classList.contains('cm-run-error-line'))"
    )
    assert index == 4
    error = page.locator("#run-error").text_content()
    assert "NameError" in error and "line 5" in error
    assert re.search(r"/runs/[^/?]+$", page.locator("#run-error-open a").get_attribute("href"))
    assert urlparse(page.url).path == "/"  # still on the home page, the text at hand
    screenshot(page, "editor-error-line")

    # Fixing the text clears the mark.
    page.keyboard.press("Control+End")
    page.keyboard.type("_fixed")
    assert page.locator("#editor .cm-run-error-line").count() == 0


def test_the_draft_survives_a_reload(page: Page, live_server: str) -> None:
    open_home(page, live_server)
    assert "import engine as torch" in editor_text(page)  # the starter, with no draft yet
    page.fill("#editor .cm-content", "import engine as torch\nprint('my draft')\n")
    page.reload()
    page.wait_for_function("document.body.dataset.editorReady === '1'")
    assert editor_text(page) == "import engine as torch\nprint('my draft')\n"
    assert page.locator("#editor-source").input_value() == editor_text(page)  # what the form holds


def test_python_is_highlighted_with_line_numbers(page: Page, live_server: str) -> None:
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    open_home(page, live_server)
    keywords = page.locator("#editor .cm-content .tok-keyword")
    # CodeMirror parses in the background, a slice at a time: wait for the highlighting to land.
    keywords.filter(has_text=re.compile(r"^def$")).first.wait_for()
    assert "def" in keywords.all_text_contents()
    assert page.locator("#editor .cm-lineNumbers .cm-gutterElement", has_text=re.compile(r"^1$")).count() == 1
    assert page.locator("#editor-source").is_hidden()  # the fallback textarea
    # Nothing is loaded from anywhere but our server (no CDN).
    assert all(urlparse(url).netloc == urlparse(live_server).netloc for url in requests), requests
    assert any(url.endswith("/static/vendor/codemirror/codemirror.js") for url in requests)
    # Console errors fail the test in the page fixture.


def _pinned(text: str) -> dict[str, str]:
    return dict(re.findall(r'^\s*"((?:@[\w.-]+/)?[\w.-]+)@(\d[\w.-]*)"$', text, re.MULTILINE))


def test_vendor_script_and_notice_name_the_same_versions() -> None:
    pinned = _pinned(SCRIPT.read_text())
    assert pinned["codemirror"] and pinned["@codemirror/lang-python"]
    notice = (VENDOR / "NOTICE.md").read_text()
    listed = dict(re.findall(r"^\| `([^`]+)` \| ([^ |]+) \|", notice, re.MULTILINE))
    assert listed == pinned
    for name in pinned:
        assert (VENDOR / f"LICENSE-{name.replace('/', '-')}").is_file(), name
    assert (VENDOR / "codemirror.js").stat().st_size > 100_000
    assert Path(SCRIPT).stat().st_mode & 0o111, "the script is executable"
