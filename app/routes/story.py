"""``GET /api/runs/{id}/story``: the story level of a finished run (steps, chapters, cause links,
predict-mode questions; ``engine.trace.story.story_document``), and ``GET /api/glossary``: the
terms the viewer explains (``engine.trace.glossary``). docs/viewer.md says how the viewer uses
them.

The story is derived from the stored events when first asked for and kept for the newest
``CACHE_SIZE`` runs asked about: a run's events never change once it has finished, so
``(run id, number of events)`` identifies it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from fastapi import APIRouter, HTTPException, Response
from starlette.concurrency import run_in_threadpool

from app.deps import ManagerDep, RunDep
from app.models import ErrorResponse
from app.store import Store
from engine.trace.glossary import glossary
from engine.trace.story import story_document

router = APIRouter(prefix="/api", tags=["api"])

CACHE_SIZE = 32
_cache: OrderedDict[tuple[str, int], str] = OrderedDict()
_lock = threading.Lock()


def story_json(store: Store, run_id: str, n_events: int) -> str:
    """The story document of a finished run, as JSON text."""
    key = (run_id, n_events)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    events = [item["event"] for item in store.items(run_id)]
    text = json.dumps(story_document(events), separators=(",", ":"))
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
    text = await run_in_threadpool(story_json, manager.store, run.id, run.n_events)
    return Response(text, media_type="application/json")


@router.get("/glossary")
def get_glossary() -> list[dict[str, Any]]:
    """Every term the viewer explains: title, two or three sentences, the PyTorch source it mirrors,
    and the patterns that find it in captions (Note [Glossary terms])."""
    return [dict(t) for t in glossary()]
