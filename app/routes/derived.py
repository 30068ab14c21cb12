"""Documents derived from a finished run's events: ``GET /api/runs/{id}/story``, its story level
(steps, chapters, cause links, predict-mode questions; ``engine.trace.story.story_document``),
and ``GET /api/runs/{id}/memory``, its memory report (peak and what was alive, the saved-tensor
ledger, why checkpointing saved little; ``engine.trace.memory.memory_report``); and
``GET /api/glossary``: the terms the viewer explains (``engine.trace.glossary``). docs/viewer.md
and docs/memory.md say how the viewer uses them.

A run stores its story and memory report when it finishes (Note [Documents ready at done] in
app/runs.py). Any other document, or one a run could not store (a run stored before, a
document that failed to build then), is derived from the stored events when first asked for and
kept for the newest ``CACHE_SIZE`` runs asked about: a run's events never change once it has
finished, so ``(run id, number of events)`` identifies it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from fastapi import APIRouter, HTTPException, Response
from starlette.concurrency import run_in_threadpool

from app._gc import paused as gc_paused
from app.deps import ManagerDep, RunDep
from app.documents import derive_json
from app.models import ErrorResponse
from app.store import STORED_DOCUMENTS, Store
from engine.trace.glossary import glossary

router = APIRouter(prefix="/api", tags=["api"])

CACHE_SIZE = 32
_cache: OrderedDict[tuple[str, str, int], str] = OrderedDict()
_lock = threading.Lock()


def derived_json(store: Store, run_id: str, n_events: int, name: str) -> str:
    """Document ``name`` (a key of ``app.documents.DOCUMENTS``) of a finished run, as JSON text."""
    key = (name, run_id, n_events)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    # Note [Documents ready at done] in app/runs.py
    stored = store.document_json(run_id, name) if name in STORED_DOCUMENTS else None
    if stored is not None:
        return stored
    with gc_paused():  # Note [Pausing the collector] (app/_gc.py)
        events = store.events(run_id)
        meta = (store.trace_parts(run_id) or ({}, {}))[0]
        text = derive_json(name, events, meta)
    with _lock:
        _cache[key] = text
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return text


@router.get(
    "/runs/{run_id}/story",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {}}, "description": "steps, chapters, links, questions"},
        404: {"model": ErrorResponse, "description": "no such run"},
        409: {"model": ErrorResponse, "description": "the run has not finished yet"},
    },
)
async def run_story(run: RunDep, manager: ManagerDep) -> Response:
    """The run's story: its steps (Note [Story steps]), chapters (Note [Chapters]), cause links
    (Note [Cause links]) and predict-mode questions (Note [Predict questions])."""
    if not run.finished:
        raise HTTPException(409, f"run {run.id} is {run.status}: its story exists once it has finished")
    text = await run_in_threadpool(derived_json, manager.store, run.id, run.n_events, "story")
    return Response(text, media_type="application/json")


@router.get(
    "/runs/{run_id}/memory",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {}}, "description": "metrics, peak, ledger, marks, diagnosis"},
        404: {"model": ErrorResponse, "description": "no such run"},
        409: {"model": ErrorResponse, "description": "the run has not finished yet"},
    },
)
async def run_memory(run: RunDep, manager: ManagerDep) -> Response:
    """The run's memory report (Note [Memory report]): its peaks, what was alive at the live peak
    and why, the saved-tensor ledger, and why checkpointing saved little (Note [Why
    checkpointing saved little])."""
    if not run.finished:
        raise HTTPException(
            409, f"run {run.id} is {run.status}: its memory report exists once it has finished"
        )
    text = await run_in_threadpool(derived_json, manager.store, run.id, run.n_events, "memory")
    return Response(text, media_type="application/json")


@router.get("/glossary")
def get_glossary() -> list[dict[str, Any]]:
    """Every term the viewer explains: title, two or three sentences, the PyTorch source it mirrors,
    and the patterns that find it in captions (Note [Glossary terms])."""
    return [dict(t) for t in glossary()]
