"""The compare page's API (app/compare.py, docs/memory.md): one model under several checkpointing
strategies, and the sweep of N that shows the O(sqrt N) law; and the page itself (``GET /compare``,
``page_router``).

Both are ``POST`` because they make runs: each call makes the runs that are missing (as the
server has room) and returns every row, finished or not; the page calls again until ``done``.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from app.compare import (
    BATCH,
    STRATEGIES,
    SWEEP_NS,
    SWEEP_STRATEGIES,
    WIDTH,
    CompareService,
    Spec,
    fit_exponent,
    row_from,
    sqrt_law,
)
from app.deps import ManagerDep, TemplatesDep
from app.routes.derived import derived_json
from app.routes.pages import _render
from app.runs import RunManager, torch_available

router = APIRouter(prefix="/api", tags=["compare"])
page_router = APIRouter(tags=["pages"])  # the HTML page, /compare


class CompareRequest(BaseModel):
    n: int = Field(4, ge=2, le=64, description="the number of blocks")
    backends: list[str] = Field(
        default_factory=lambda: ["engine"], description='"engine", and "torch" if installed'
    )


def service(request: Request, manager: RunManager) -> CompareService:
    svc: CompareService | None = getattr(request.app.state, "compare", None)
    if svc is None:
        svc = request.app.state.compare = CompareService(manager)
    return svc


def rows_of(manager: RunManager, pairs: list[tuple[Spec, Any]]) -> list[dict[str, Any]]:
    rows = []
    for spec, record in pairs:
        base = {
            "strategy": spec.strategy,
            "title": STRATEGIES[spec.strategy].title,
            "n": spec.n,
            "backend": spec.backend,
        }
        if record is None:
            rows.append({**base, "status": "waiting", "id": None, "url": None})
            continue
        fresh = manager.store.get_run(record.id) or record
        row: dict[str, Any] = {**base, "status": fresh.status, "id": fresh.id, "url": f"/runs/{fresh.id}"}
        if fresh.status == "done":
            figures = json.loads(derived_json(manager.store, fresh.id, fresh.n_events, "compare"))
            row.update(row_from(spec.strategy, spec.n, spec.backend, figures))
        elif fresh.status == "error":
            row["error"] = fresh.error
        rows.append(row)
    return rows


@router.post("/compare")
async def compare(body: CompareRequest, request: Request, manager: ManagerDep) -> dict[str, Any]:
    """Every strategy of Note [Strategies compared] on an MLP of ``n`` blocks, on each backend."""
    known = ["engine", *(["torch"] if torch_available() else [])]
    unknown = [b for b in body.backends if b not in known]
    if unknown:
        raise HTTPException(
            422, f"backend {unknown[0]!r} is not available here (available: {', '.join(known)})"
        )
    specs = [Spec(s, body.n, b) for s in STRATEGIES for b in body.backends]
    pairs = await run_in_threadpool(service(request, manager).ensure, specs)
    rows = await run_in_threadpool(rows_of, manager, pairs)
    return {
        "n": body.n,
        "backends": body.backends,
        "available_backends": known,
        "strategies": [
            {"id": s.id, "title": s.title, "description": s.description} for s in STRATEGIES.values()
        ],
        "rows": rows,
        "done": all(r["status"] in ("done", "error") for r in rows),
    }


@router.post("/compare/sweep")
async def sweep(request: Request, manager: ManagerDep) -> dict[str, Any]:
    """What is held for the backward against N, for no checkpointing, one checkpoint per block
    and sqrt(N) segments, with the fitted exponent of each and Chen et al.'s sqrt curve."""
    specs = [Spec(s, n, "engine") for s in SWEEP_STRATEGIES for n in SWEEP_NS]
    pairs = await run_in_threadpool(service(request, manager).ensure, specs)
    rows = await run_in_threadpool(rows_of, manager, pairs)
    done = all(r["status"] in ("done", "error") for r in rows)
    fits: dict[str, float] = {}
    law: list[float] = []
    if done and all(r["status"] == "done" for r in rows):
        for s in SWEEP_STRATEGIES:
            points = [(r["n"], r["peak_held"]) for r in rows if r["strategy"] == s and r["n"] >= 4]
            fits[s] = round(fit_exponent([p[0] for p in points], [p[1] for p in points]), 3)
        seq = [r for r in rows if r["strategy"] == "sequential"]
        law = [round(v) for v in sqrt_law([r["n"] for r in seq], [r["peak_held"] for r in seq])]
    return {
        "ns": list(SWEEP_NS),
        "strategies": list(SWEEP_STRATEGIES),
        "rows": rows,
        "done": done,
        "exponents": fits,
        "sqrt_law": law,
    }


# --- the page ------------------------------------------------------------------------------------


@page_router.get("/compare", response_class=HTMLResponse)
def compare_page(
    request: Request, templates: TemplatesDep, n: str | None = None, torch: str | None = None
) -> HTMLResponse:
    """The compare page (static/js/compare.js): the table of ``POST /api/compare`` and the plots of
    it and of the sweep. ``?n=8`` sets the number of blocks, ``?torch=1`` adds the torch rows (the
    page keeps both in its URL)."""
    config = {
        "page": "compare",
        "api": "/api",
        "static": "/static",
        "n": _blocks(n),
        "torch": torch == "1" and torch_available(),
        "model": {"width": WIDTH, "hidden": 4 * WIDTH, "batch": BATCH},
    }
    return _render(templates, request, "compare.html", config)


def _blocks(raw: str | None) -> int:
    # Typed by people, like a step in a permalink: anything but a number in range opens N = 4.
    try:
        n = int(raw) if raw is not None else 4
    except ValueError:
        return 4
    return n if 2 <= n <= 64 else 4
