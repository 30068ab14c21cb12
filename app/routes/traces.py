"""``POST /api/traces``: open a trace file in the viewer (Note [Opening a trace file] in
app/imported.py). The body is the trace document itself, as ``autograd-lens trace ... -o
trace.json`` writes it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from starlette.concurrency import run_in_threadpool

from app.deps import ManagerDep
from app.imported import BadTrace, read_trace
from app.models import ErrorResponse, RunCreated
from app.routes.api import busy, created
from app.runs import ServerBusy

router = APIRouter(prefix="/api", tags=["api"])

_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "a trace document (docs/trace.md), e.g. the file `autograd-lens trace` writes",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


@router.post(
    "/traces",
    status_code=201,
    response_model=RunCreated,
    openapi_extra=_BODY,
    responses={
        413: {"model": ErrorResponse, "description": "the document is larger than the server takes"},
        422: {"model": ErrorResponse, "description": "not JSON, or not a valid trace: says where"},
        503: {"model": ErrorResponse, "description": "too many runs queued (try again later)"},
    },
)
async def import_trace(request: Request, manager: ManagerDep, response: Response) -> RunCreated:
    """Store a trace recorded elsewhere (typically a user's own PyTorch script, traced locally
    with ``--backend torch``) as a run, so the viewer steps through it like any other. Nothing is
    executed. The document is checked in full first: a problem answers 422, naming the event."""
    body = await request.body()
    try:
        doc = await run_in_threadpool(read_trace, body)
    except BadTrace as e:
        raise HTTPException(422, str(e)) from None
    except RecursionError:
        raise HTTPException(422, "the file is not a trace: its JSON is nested too deeply to read") from None
    except ValueError as e:  # what json.loads refuses past its syntax: an integer of 5,000 digits
        raise HTTPException(422, f"the file is not a trace: {e}") from None
    try:
        record = await run_in_threadpool(manager.create_imported, doc)
    except ServerBusy as e:
        raise busy(e) from None
    return created(record, response)
