"""A trace file opened from the home page (Note [Opening a trace file] in app/imported.py): the
README's story of a user's own PyTorch script, traced locally on real torch, stepped through in
the viewer. The screenshot is the README's (docs/images/torch_trace.png is a copy)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app.cli import main
from tests.e2e.conftest import ROOT, expect_refusal, screenshot
from tests.e2e.test_viewer import current_step

pytestmark = pytest.mark.e2e

Page = Any  # playwright.sync_api.Page (optional package)
EXAMPLE = ROOT / "docs" / "examples" / "torch_train_step.py"
SHOT = ROOT / "test-output" / "torch_trace.png"


@pytest.mark.oracle
def test_a_pytorch_scripts_trace_opens_in_the_viewer(
    page: Page, live_server: str, tmp_path: Path, torch_oracle: ModuleType
) -> None:
    trace = tmp_path / "step.json"
    assert main(["trace", str(EXAMPLE), "--backend", "torch", "-o", str(trace), "-q"]) == 0
    events = json.loads(trace.read_text())["events"]

    page.goto(live_server + "/")
    page.set_input_files("#trace-file", str(trace))
    page.wait_for_url(re.compile(r"/runs/[^/?]+"))
    page.wait_for_function("document.body.dataset.ready === '1'")
    page.wait_for_function("document.body.dataset.graph !== undefined")
    assert page.locator("#run-title").text_content().startswith("A real PyTorch training step")
    assert page.locator("#run-backend").text_content().startswith("torch 2.8")
    assert page.locator("#run-file").text_content() == "docs/examples/torch_train_step.py"
    assert page.locator("#run-status").text_content() == f"done · {len(events)} events"
    assert page.locator("#run-origin").is_visible()  # recorded elsewhere: nothing ran here
    assert page.evaluate("window.lens.player.events.length") == len(events)

    # The first recomputation: its line is the script's own `loss.backward()`.
    step = next(i for i, e in enumerate(events) if e["kind"] == "recompute_start") + 1
    page.evaluate("(s) => window.lens.act('goto', s)", step)
    page.wait_for_function("(s) => window.lens.player.step === s", arg=step)
    assert current_step(page) == step
    assert page.locator(".caption-meta .kind").text_content() == "recompute_start"
    line = page.locator(".src-line.cur")
    assert line.count() == 1 and "loss.backward()" in line.text_content()
    assert page.locator(".frame-card").count() >= 1  # the checkpoint frame is on the stack
    screenshot(page, "torch-trace")
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOT))


def test_a_file_that_is_no_trace_is_refused_on_the_home_page(
    page: Page, live_server: str, tmp_path: Path
) -> None:
    chrome = tmp_path / "chrome.json"
    chrome.write_text(json.dumps({"traceEvents": []}))
    expect_refusal(page, 422)
    page.goto(live_server + "/")
    page.set_input_files("#trace-file", str(chrome))
    error = page.locator("#trace-error")
    error.wait_for()
    assert "Chrome trace" in error.text_content()
    assert not page.locator("#trace-progress").is_visible()  # the "checking…" line is gone
    assert page.url.rstrip("/") == live_server  # still on the home page
    screenshot(page, "trace-file-refused")
