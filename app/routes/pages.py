"""The HTML pages (Jinja2): the home page with the scenario picker, the viewer of one run, and the
diff of two runs.

Each page gets ``config`` (a dict) and ``config_json`` (the same, as HTML-safe JSON) to embed as
``<script type="application/json" id="config">{{ config_json }}</script>``; the page's script
reads everything it needs from there (docs/api.md, "Pages").
"""

from __future__ import annotations

from typing import Any

import jinja2
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from jinja2.utils import htmlsafe_json_dumps

from app import runs
from app.deps import ManagerDep, RunDep, TemplatesDep, find_run
from app.models import ErrorResponse
from app.routes.shared import find_shared
from app.runner import list_scenarios
from app.runs import backend_version
from engine.trace.glossary import glossary

router = APIRouter(tags=["pages"])


def _render(
    templates: Any, request: Request, name: str, config: dict[str, Any], **context: Any
) -> HTMLResponse:
    context |= {"config": config, "config_json": htmlsafe_json_dumps(config)}
    try:
        response: HTMLResponse = templates.TemplateResponse(request, name, context)
    except jinja2.TemplateNotFound:
        raise HTTPException(500, f"the page template templates/{name} is missing") from None
    return response


@router.get("/", response_class=HTMLResponse)
def index(request: Request, templates: TemplatesDep) -> HTMLResponse:
    """The home page: pick a bundled scenario, or open a scenario file."""
    return _index(request, templates)


def _index(request: Request, templates: Any, opened: dict[str, Any] | None = None) -> HTMLResponse:
    """The home page; ``opened`` is a scenario text for its editor ({source, filename, origin,
    ...}), which the page puts there in place of the draft (keeping the draft to restore)."""
    scenarios = [{"id": s.id, "title": s.title, "description": s.description} for s in list_scenarios()]
    torch = runs.torch_available()  # looked up on the module: a test can pretend torch is missing
    config = {
        "page": "index",
        "api": "/api",
        "static": "/static",
        "scenarios": scenarios,
        # The torch and diff actions need torch on the server (the page disables them otherwise).
        "backends": {"engine": "engine", **({"torch": backend_version("torch")} if torch else {})},
        "open": opened,
    }
    return _render(templates, request, "index.html", config, scenarios=scenarios)


@router.get(
    "/s/{shared_id}",
    response_class=HTMLResponse,
    responses={404: {"model": ErrorResponse, "description": "no shared scenario with this id"}},
)
def shared_page(
    request: Request, shared_id: str, manager: ManagerDep, templates: TemplatesDep
) -> HTMLResponse:
    """A shared scenario's permalink (``POST /api/shared``): the home page with its text in the
    editor, ready to run."""
    found = find_shared(manager, shared_id)
    opened = {
        "origin": "shared",
        "id": found.id,
        "url": found.url,
        "filename": found.filename,
        "source": found.source,
    }
    return _index(request, templates, opened)


@router.get(
    "/runs/{run_id}/edit",
    response_class=HTMLResponse,
    responses={
        404: {"model": ErrorResponse, "description": "no run with this id"},
        409: {"model": ErrorResponse, "description": "the run was opened from a trace file: no text to edit"},
    },
)
def edit_page(request: Request, run: RunDep, templates: TemplatesDep) -> HTMLResponse:
    """ "Edit and run again": the home page with the run's scenario text in the editor."""
    if run.imported:
        raise HTTPException(
            409,
            f"run {run.id} was opened from a trace file: it was recorded elsewhere and has no scenario "
            "text here to edit",
        )
    opened = {
        "origin": "run",
        "run_id": run.id,
        "title": run.title,
        "filename": run.filename,
        "source": run.source,
    }
    return _index(request, templates, opened)


@router.get(
    "/runs/{run_id}",
    response_class=HTMLResponse,
    responses={404: {"model": ErrorResponse, "description": "no such run"}},
)
def run_page(request: Request, run: RunDep, templates: TemplatesDep, step: str | None = None) -> HTMLResponse:
    """The viewer of one run; ``?step=N`` opens it at event N (the page keeps it in the URL)."""
    base = f"/api/runs/{run.id}"
    config = {
        "page": "run",
        "run_id": run.id,
        "title": run.title,
        "step": _step(step),
        "static": "/static",
        "urls": {
            "run": base,
            "events": f"{base}/events",
            "trace": f"{base}/trace.json",
            "chrome": f"{base}/trace.chrome.json",
            "dot": f"{base}/graph.dot",
            "story": f"{base}/story",
            "memory": f"{base}/memory",
        },
        "glossary": glossary(),
    }
    return _render(templates, request, "run.html", config, run_id=run.id, title=run.title)


@router.get(
    "/embed/runs/{run_id}",
    response_class=HTMLResponse,
    responses={404: {"model": ErrorResponse, "description": "no such run"}},
)
def embed_page(
    request: Request,
    run: RunDep,
    templates: TemplatesDep,
    step: str | None = None,
    level: str | None = None,
) -> HTMLResponse:
    """The compact, read-only viewer of one run for an ``<iframe>`` (``?step=N&level=story``).

    The only page another site may frame: it answers ``Content-Security-Policy: frame-ancestors *``
    (the other pages send no framing header).
    """
    base = f"/api/runs/{run.id}"
    config = {
        "page": "embed",
        "embed": True,
        "run_id": run.id,
        "title": run.title,
        "step": _step(step),
        "level": "events" if level == "events" else "story",
        "static": "/static",
        "urls": {
            "run": base,
            "events": f"{base}/events",
            "story": f"{base}/story",
            "dot": f"{base}/graph.dot",
        },
        "view": f"/runs/{run.id}",
        "glossary": glossary(),
    }
    response = _render(templates, request, "embed.html", config, run_id=run.id, title=run.title)
    response.headers["Content-Security-Policy"] = "frame-ancestors *"
    return response


@router.get(
    "/diff",
    response_class=HTMLResponse,
    responses={404: {"model": ErrorResponse, "description": "no run with one of the ids"}},
)
def diff_page(request: Request, manager: ManagerDep, templates: TemplatesDep, a: str, b: str) -> HTMLResponse:
    """Two runs side by side (``GET /api/diff``), once both have finished: the page waits for them."""
    titles = [find_run(manager, run_id).title for run_id in (a, b)]
    config = {
        "page": "diff",
        "a": a,
        "b": b,
        "title": titles[0],
        "static": "/static",
        "urls": {
            "diff": f"/api/diff?a={a}&b={b}",
            "run_a": f"/api/runs/{a}",
            "run_b": f"/api/runs/{b}",
            "view_a": f"/runs/{a}",
            "view_b": f"/runs/{b}",
        },
    }
    return _render(templates, request, "diff.html", config, title=titles[0])


def _step(raw: str | None) -> int | None:
    # A permalink is typed and edited by people: a step that is not a number opens the run at its
    # start instead of failing the page.
    try:
        step = int(raw) if raw is not None else None
    except ValueError:
        return None
    return step if step is not None and step >= -1 else None
