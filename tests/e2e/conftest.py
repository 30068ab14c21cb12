"""Fixtures of the browser tests: the web app served by a live uvicorn on a free loopback port
(with a temporary data directory), and headless Debian Chromium driven by Playwright's sync API.

Playwright's own browser download never works here: the tests use Debian's ``chromium``
(``scripts/setup.sh --browser``) through ``executable_path``; ``CHROMIUM_PATH`` overrides it.
Without Chromium the tests are skipped, except in CI (``CI`` set), where that is a failure.

Every page a test opens fails the test on a JavaScript error (``pageerror``) or a console error.
Screenshots go to ``test-output/screenshots/`` (ignored by git), to look at.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unavailable

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-output" / "screenshots"

# The flags of shared/reference/environment.md: no sandbox (root in a container), no GPU, and no
# traffic to anything but our server.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def chromium_path() -> str | None:
    """Debian's Chromium: the binary itself (its /usr/bin wrapper prints shell noise), else the
    wrapper, else whatever ``chromium`` is on the PATH."""
    if os.environ.get("CHROMIUM_PATH"):
        return os.environ["CHROMIUM_PATH"]
    for candidate in ("/usr/lib/chromium/chromium", "/usr/bin/chromium"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the server did not listen on port {port} within {timeout} s")


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app under ``uvicorn --factory app.main:create_app``; yields its base URL."""
    data = tmp_path_factory.mktemp("e2e-data")
    port = free_port()
    env = {
        **os.environ,
        "AUTOGRAD_LENS_DATA_DIR": str(data),
        # Tests share the machine's cores with other tests: generous limits for the sandbox.
        "AUTOGRAD_LENS_LIMIT_WALL_SECONDS": "60",
        "AUTOGRAD_LENS_LIMIT_CPU_SECONDS": "30",
    }
    log = (data / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "app.main:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the playwright package is missing: install the dev extra (scripts/setup.sh)")
    path = chromium_path()
    if path is None:
        unavailable("Chromium is not installed: run scripts/setup.sh --browser")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@contextlib.contextmanager
def checked_page(browser: Any, *, bypass_csp: bool = True, timeout_ms: int = 30_000) -> Iterator[Any]:
    """A fresh page at a laptop's size; any JavaScript error on it fails the test, but for a
    request the test makes fail on purpose (``expect_refusal``)."""
    context = browser.new_context(
        viewport={"width": 1440, "height": 900}, device_scale_factor=1, bypass_csp=bypass_csp
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on(
        "console",
        lambda msg: errors.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None,
    )
    page.set_default_timeout(timeout_ms)
    try:
        yield page
    finally:
        context.close()
    # A request a test makes fail on purpose logs a console error that is not a page error;
    # anything else is.
    allowed = getattr(page, "refused_statuses", set())
    unexpected = [e for e in errors if not any(_refusal(e, status) for status in allowed)]
    assert not unexpected, "errors in the page:\n" + "\n".join(unexpected)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A checked page. bypass_csp: Playwright runs string predicates (wait_for_function) through
    eval in the page, which the app's Content-Security-Policy forbids; tests/e2e/test_xss.py opens
    the pages with the policy enforced."""
    with checked_page(browser) as page:
        yield page


def _refusal(message: str, status: int) -> bool:
    return (
        message
        == f"console.error: Failed to load resource: the server responded with a status of {status} ()"
        or (message.startswith("console.error: Failed to load resource") and f" {status} " in message)
    )


def expect_refusal(page: Any, status: int) -> None:
    """The test makes the server refuse a request with ``status`` on purpose (Chromium logs it)."""
    page.refused_statuses = {*getattr(page, "refused_statuses", set()), status}


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


# --- runs of the app under test ------------------------------------------------------------------


def api(base: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if body is not None else {}
    request = urllib.request.Request(base + path, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait_finished(base: str, run_id: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run: dict[str, Any] = api(base, f"/api/runs/{run_id}")
        if run["status"] in ("done", "error"):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not finish within {timeout} s")


@pytest.fixture(scope="session")
def nested(live_server: str) -> dict[str, Any]:
    """One run of the bundled nested-checkpoint scenario, with its trace."""
    created = api(live_server, "/api/runs", {"scenario": "nested_checkpoint"})
    run = wait_finished(live_server, created["id"])
    assert run["status"] == "done", run["error"]
    trace = api(live_server, f"/api/runs/{created['id']}/trace.json")
    return {"id": created["id"], "url": created["url"], "events": trace["events"]}
