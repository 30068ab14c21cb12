"""The self-contained HTML export (app/export_html.py): ``autograd-lens export --html`` from a
trace file or a scenario, ``GET /api/runs/{id}/export.html``, and the bundler's refusals. The
browser side (the file opened from disk with no network) is tests/e2e/test_export_html.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.export_html import BundleError, bundle

LENS_DATA = re.compile(r'<script type="application/json" id="lens-data">(.*?)</script>', re.S)


def lens_data(html: str) -> dict[str, Any]:
    match = LENS_DATA.search(html)
    assert match, "no inlined data"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def assert_self_contained(html: str) -> None:
    assert 'src="http' not in html and "/static/" not in html
    assert re.search(r"<script[^>]*\ssrc=", html) is None  # every script is inline
    assert '<link rel="stylesheet"' not in html
    assert html.count('<script type="module">') == 1
    assert "\x00" not in html  # the HTML parser would replace it (viz-js's wasm is escaped)


def test_export_html_of_a_trace_file(tmp_path: Path) -> None:
    trace = tmp_path / "nested.json"
    assert main(["trace", "nested_checkpoint", "-q", "-o", str(trace)]) == 0
    out = tmp_path / "nested.html"
    assert main(["export", str(trace), "--html", str(out), "-q"]) == 0
    html = out.read_text(encoding="utf-8")
    assert_self_contained(html)
    data = lens_data(html)
    events = json.loads(trace.read_text())["events"]
    assert data["trace"]["events"] == events
    assert len(data["trace"]["derived"]) == len(events)
    assert data["trace"]["derived"][0]["caption"]
    assert data["story"]["steps"] and data["memory"]["ledger"] is not None
    assert data["dot"].startswith("digraph")
    assert data["run"]["status"] == "done" and data["run"]["title"] == "Nested checkpoints"
    assert "class Nested" in data["run"]["source"] or "checkpoint(" in data["run"]["source"]


def test_export_html_runs_a_scenario_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "single.html"
    assert main(["export", "single_checkpoint", "--html", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    html = out.read_text(encoding="utf-8")
    assert_self_contained(html)
    assert lens_data(html)["run"]["filename"].endswith("single_checkpoint.py")


def test_export_html_refuses_what_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"events": 3}')
    assert main(["export", str(bad), "--html", str(tmp_path / "out.html")]) == 2
    assert "is not a trace" in capsys.readouterr().err
    assert not (tmp_path / "out.html").exists()


def test_the_api_export_is_a_download_of_the_run(client: TestClient, nested: str) -> None:
    response = client.get(f"/api/runs/{nested}/export.html")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-disposition"] == f'attachment; filename="run-{nested}.html"'
    assert_self_contained(response.text)
    data = lens_data(response.text)
    assert data["run"]["id"] == nested
    assert data["trace"] == client.get(f"/api/runs/{nested}/trace.json?derived=true").json()
    assert data["story"] == client.get(f"/api/runs/{nested}/story").json()
    assert data["memory"] == client.get(f"/api/runs/{nested}/memory").json()
    assert data["dot"] == client.get(f"/api/runs/{nested}/graph.dot").text
    assert client.get("/api/runs/nope/export.html").status_code == 404


def test_the_run_page_links_the_export(client: TestClient, nested: str) -> None:
    assert 'id="run-export"' in client.get(f"/runs/{nested}").text


def test_the_bundler_refuses_what_it_cannot_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.export_html.STATIC", tmp_path)
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport function a() { return b; }\n')
    (tmp_path / "b.js").write_text('import { a } from "./a.js";\nexport const b = 1;\n')
    with pytest.raises(BundleError, match="cycle"):
        bundle(tmp_path / "a.js")
    (tmp_path / "c.js").write_text("export default 1;\n")
    with pytest.raises(BundleError, match="default"):
        bundle(tmp_path / "c.js")


def test_the_bundle_rewrites_imports_and_exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("app.export_html.STATIC", tmp_path)
    (tmp_path / "x.js").write_text('export const x = "</script>";\nconst y = 2;\nexport { y as z };\n')
    (tmp_path / "m.js").write_text('import { x, z as w } from "./x.js";\nimport * as ns from "./x.js";\n')
    text = bundle(tmp_path / "m.js")
    assert text.index('__lens["x.js"] =') < text.index('__lens["m.js"] =')
    assert 'const { x, z: w } = __lens["x.js"];' in text
    assert 'const ns = __lens["x.js"];' in text
    assert "return { x, z: y };" in text
    assert "</script" not in text and '"<\\/script>"' in text
