"""Shared scenarios: a scenario text kept behind a permalink, ``/s/<id>``, which opens the home
page with that text in the editor (the page itself is in app/routes/pages.py).

The id is a hash of the file name and the text (``Store.share``): sharing the same scenario twice
gives one link, and a link never changes what it shows.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, HTTPException
from starlette.concurrency import run_in_threadpool

from app.deps import ManagerDep
from app.models import ErrorResponse, SharedCreate, SharedScenario
from app.runs import RunManager, clean_filename
from app.store import SHARED_ID_LENGTH

router = APIRouter(prefix="/api", tags=["shared"])

SHARED_ID_RE = re.compile(rf"[a-z2-7]{{{SHARED_ID_LENGTH}}}")


def find_shared(manager: RunManager, shared_id: str) -> SharedScenario:
    """The shared scenario with this id, or 404 (a malformed id names none). Blocking."""
    manager.start()  # no-op once started (see RunManager.start)
    found = manager.store.shared(shared_id) if SHARED_ID_RE.fullmatch(shared_id) else None
    if found is None:
        raise HTTPException(404, f"no shared scenario with id {shared_id!r}")
    filename, source, created = found
    return SharedScenario(
        id=shared_id, url=f"/s/{shared_id}", filename=filename, source=source, created_at=created
    )


@router.post(
    "/shared",
    status_code=201,
    response_model=SharedScenario,
    responses={413: {"model": ErrorResponse, "description": "the text is longer than a scenario may be"}},
)
async def share(body: SharedCreate, manager: ManagerDep) -> SharedScenario:
    """Keep a scenario text behind a permalink. The same file name and text give the same id."""
    limit, size = manager.settings.max_upload_bytes, len(body.source.encode("utf-8"))
    if size > limit:  # what POST /api/runs would refuse: a link to a text that cannot run is no use
        raise HTTPException(413, f"the scenario is {size} bytes long; the limit is {limit} bytes")

    def store() -> SharedScenario:
        manager.start()
        return find_shared(manager, manager.store.share(clean_filename(body.filename), body.source))

    return await run_in_threadpool(store)


@router.get(
    "/shared/{shared_id}",
    response_model=SharedScenario,
    responses={404: {"model": ErrorResponse, "description": "no shared scenario with this id"}},
)
async def shared(shared_id: str, manager: ManagerDep) -> SharedScenario:
    """A shared scenario's text and file name."""

    return await run_in_threadpool(find_shared, manager, shared_id)
