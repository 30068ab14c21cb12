"""The embed page (GET /embed/runs/{id}): 404 for an unknown run, and the only page another site
may frame (``frame-ancestors *`` in its Content-Security-Policy); the other pages may be framed by
this site only (``frame-ancestors 'self'``, docs/security.md)."""

from __future__ import annotations

import json
import re

from fastapi.testclient import TestClient


def test_embed_of_an_unknown_run_is_404(client: TestClient) -> None:
    assert client.get("/embed/runs/doesnotexist").status_code == 404
    assert client.get("/embed/runs/no_such_run_").status_code == 404


def test_only_the_embed_page_may_be_framed(client: TestClient, nested: str) -> None:
    embed = client.get(f"/embed/runs/{nested}?step=5&level=events")
    assert embed.status_code == 200
    policy = embed.headers["content-security-policy"]
    assert "frame-ancestors *" in policy and "frame-ancestors 'self'" not in policy
    assert "default-src 'self'" in policy  # the rest of the policy is merged in
    assert "x-frame-options" not in embed.headers
    for path in ("/", f"/runs/{nested}"):
        response = client.get(path)
        assert response.status_code == 200
        assert "frame-ancestors 'self'" in response.headers["content-security-policy"]
        assert "x-frame-options" not in response.headers


def test_embed_page_config(client: TestClient, nested: str) -> None:
    html = client.get(f"/embed/runs/{nested}?step=7&level=events").text
    match = re.search(r'<script type="application/json" id="config">(.*?)</script>', html, re.S)
    assert match
    config = json.loads(match.group(1))
    assert config["embed"] is True
    assert (config["page"], config["run_id"], config["step"], config["level"]) == (
        "embed",
        nested,
        7,
        "events",
    )
    assert config["view"] == f"/runs/{nested}"
    assert 'class="site-head"' not in html
    for absent in ("view-source", "view-log", "view-memory", "view-chapters"):
        assert f'id="{absent}"' not in html
