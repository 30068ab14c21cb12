"""Shared scenarios (issue 14): POST /api/shared keeps a text behind a permalink, /s/<id> opens it
in the home page's editor, and /runs/<id>/edit opens a run's own text there."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.testclient import TestClient

from app.store import SHARED_ID_LENGTH

TEXT = '"""Mine"""\nimport engine as torch\nx = torch.ones(2, requires_grad=True)\nx.sum().backward()\n'


def page_config(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="config">(.*?)</script>', html, re.S)
    assert found, "the page has its config"
    config: dict[str, Any] = json.loads(found.group(1))
    return config


def test_sharing_gives_a_stable_permalink_that_opens_the_text_in_the_editor(client: TestClient) -> None:
    r = client.post("/api/shared", json={"source": TEXT, "filename": "mine.py"})
    assert r.status_code == 201, r.text
    shared = r.json()
    assert re.fullmatch(rf"[a-z2-7]{{{SHARED_ID_LENGTH}}}", shared["id"])
    assert shared["url"] == f"/s/{shared['id']}"
    assert (shared["filename"], shared["source"]) == ("mine.py", TEXT)
    again = client.post("/api/shared", json={"source": TEXT, "filename": "mine.py"}).json()
    assert again["id"] == shared["id"], "the same text shared twice is one link"
    other = client.post("/api/shared", json={"source": TEXT + "\n", "filename": "mine.py"}).json()
    assert other["id"] != shared["id"]
    assert client.get(f"/api/shared/{shared['id']}").json() == shared

    page = client.get(shared["url"])
    assert page.status_code == 200
    opened = page_config(page.text)["open"]
    assert opened == {
        "origin": "shared",
        "id": shared["id"],
        "url": shared["url"],
        "filename": "mine.py",
        "source": TEXT,
    }


def test_a_shared_text_is_never_html_in_the_page(client: TestClient) -> None:
    hostile = "</script><script>window.pwned = 1</script>\n# <img src=x onerror=alert(1)>\n"
    shared = client.post("/api/shared", json={"source": hostile, "filename": "<b>x</b>.py"}).json()
    html = client.get(shared["url"]).text
    assert "<script>window.pwned" not in html and "<img src=x" not in html and "<b>x</b>" not in html
    assert page_config(html)["open"]["source"] == hostile, "the text arrives intact, as data"


def test_bad_shares_are_refused_with_a_reason(client: TestClient) -> None:
    r = client.post("/api/shared", json={"source": "   \n", "filename": "a.py"})
    assert r.status_code == 422 and "empty" in r.json()["detail"]
    limit = client.app.state.settings.max_upload_bytes  # type: ignore[attr-defined]
    r = client.post("/api/shared", json={"source": "é" * (limit // 2 + 1)})  # 2 bytes each in UTF-8
    assert r.status_code == 413 and f"the limit is {limit} bytes" in r.json()["detail"]
    r = client.post("/api/shared", json={"source": "x = 1\n", "extra": 1})
    assert r.status_code == 422
    for missing in ("aaaaaaaaaaaa", "abc", "A" * 200):
        r = client.get(f"/api/shared/{missing}")
        assert r.status_code == 404 and "no shared scenario" in r.json()["detail"]
    assert client.get("/s/aaaaaaaaaaaa").status_code == 404


def test_edit_and_run_again_opens_the_runs_text(client: TestClient) -> None:
    run = client.post("/api/runs", json={"source": TEXT, "filename": "mine.py"}).json()
    page = client.get(f"/runs/{run['id']}/edit")
    assert page.status_code == 200
    opened = page_config(page.text)["open"]
    assert opened["origin"] == "run" and opened["run_id"] == run["id"]
    assert (opened["source"], opened["filename"]) == (TEXT, "mine.py")
    bundled = client.post("/api/runs", json={"scenario": "single_checkpoint"}).json()
    opened = page_config(client.get(f"/runs/{bundled['id']}/edit").text)["open"]
    assert "checkpoint(f, x, use_reentrant=False)" in opened["source"]
    assert opened["filename"].endswith("single_checkpoint.py")
    assert client.get("/runs/nosuchrun/edit").status_code == 404
