"""``autograd-lens open`` and ``trace --open``: a trace file reaches a running web app's viewer
(Note [Opening a trace file] in app/imported.py). Against a real uvicorn on a loopback port."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from types import ModuleType

import httpx
import pytest

import app.cli
from app.cli import default_server, main
from app.runner import PROJECT_ROOT
from tests.app.conftest import LiveServer

EXAMPLE = PROJECT_ROOT / "docs" / "examples" / "torch_train_step.py"


def _run_of(server: LiveServer, url: str) -> dict[str, object]:
    assert url.startswith(f"{server.url}/runs/"), url
    run_id = url.rsplit("/", 1)[-1]
    manager_ = server.app.state.runs
    manager_.wait(run_id, timeout=120)
    run: dict[str, object] = httpx.get(f"{server.url}/api/runs/{run_id}").json()
    return run


def test_open_prints_the_viewer_address(
    live_server: LiveServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    assert main(["trace", "nested_checkpoint", "-o", str(trace), "-q"]) == 0
    capsys.readouterr()
    assert main(["open", str(trace), "--server", live_server.url, "--no-browser"]) == 0
    url = capsys.readouterr().out.strip()
    run = _run_of(live_server, url)
    assert run["status"] == "done"
    assert run["n_events"] == len(json.loads(trace.read_text())["events"])
    page = httpx.get(url)
    assert page.status_code == 200 and "Nested checkpoints" in page.text


@pytest.mark.oracle
def test_trace_a_pytorch_script_and_open_it_at_once(
    live_server: LiveServer, capsys: pytest.CaptureFixture[str], torch_oracle: ModuleType
) -> None:
    # The README's command: a user's own PyTorch script, traced on real torch, into the viewer.
    argv = ["trace", str(EXAMPLE), "--backend", "torch", "--open", "--server", live_server.url]
    assert main([*argv, "--no-browser", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1, "with --open and no -o, stdout is the address, not the trace"
    run = _run_of(live_server, out.strip())
    assert run["backend_label"] == "torch 2.8.0"
    assert run["filename"] == "docs/examples/torch_train_step.py"


def test_a_refused_trace_exits_1_with_the_servers_reason(
    live_server: LiveServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "autograd-lens/trace", "version": 1}')
    assert main(["open", str(bad), "--server", live_server.url, "--no-browser"]) == 1
    assert capsys.readouterr().err.strip() == (
        "autograd-lens: the server refused the trace (422): the document: 'meta' is missing"
    )
    assert live_server.app.state.runs.store.run_ids() == []  # nothing of it was stored


def test_no_server_is_a_usage_error_saying_how_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.json"
    trace.write_text("{}")
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        assert main(["open", str(trace), "--server", url, "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert f"no Autograd Lens server answers at {url}" in err and "make run" in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["open", str(tmp_path / "missing.json"), "--no-browser"]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "t.json").write_text("{}")
    assert main(["open", str(tmp_path / "t.json"), "--server", "ftp://x", "--no-browser"]) == 2
    assert "--server must be an http:// or https:// address" in capsys.readouterr().err
    assert main(["trace", "single_checkpoint", "--open", "--format", "chrome"]) == 2
    assert "--open sends the json format" in capsys.readouterr().err


def test_the_default_server_is_where_make_run_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AUTOGRAD_LENS_URL", "AUTOGRAD_LENS_HOST", "AUTOGRAD_LENS_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert default_server() == "http://127.0.0.1:8000"
    monkeypatch.setenv("AUTOGRAD_LENS_HOST", "0.0.0.0")
    monkeypatch.setenv("AUTOGRAD_LENS_PORT", "9001")
    assert default_server() == "http://127.0.0.1:9001"
    monkeypatch.setenv("AUTOGRAD_LENS_URL", "http://lens.example:80")
    assert default_server() == "http://lens.example:80"


def test_a_browser_opens_only_where_there_is_a_display(
    live_server: LiveServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(app.cli.webbrowser, "open", opened.append)
    trace = tmp_path / "t.json"
    assert main(["trace", "single_checkpoint", "-o", str(trace), "-q"]) == 0
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(app.cli.sys, "platform", "linux")
    assert main(["open", str(trace), "--server", live_server.url]) == 0
    assert opened == []  # a text browser would take over the terminal
    monkeypatch.setenv("DISPLAY", ":0")
    assert main(["open", str(trace), "--server", live_server.url]) == 0
    assert opened == [capsys.readouterr().out.strip().splitlines()[-1]]
