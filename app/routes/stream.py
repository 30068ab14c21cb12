"""``GET /api/runs/{id}/events``: a run's events as Server-Sent Events (FastAPI's built-in SSE).

Note [The event stream]
~~~~~~~~~~~~~~~~~~~~~~~
- Each message is ``event: events``, ``id: <seq of its last event>``, and ``data:`` a JSON list of
  ``{"event", "changes", "caption"}`` (``models.StreamItem``), in seq order: one stored batch per
  message (Note [Event batches] in ``app/store.py``), so the server sends rows as stored instead
  of encoding every event again, and a browser parses one JSON text per few hundred events.
- The last message is ``event: done`` with ``data: {"status", "error", "n_events"}`` and no id,
  so a client's last event id stays the last event's seq. The stream then ends; an
  ``EventSource`` must ``close()`` on ``done``, or it reconnects and gets ``done`` again.
- Resuming: the stream continues after the seq in the ``Last-Event-ID`` header (what a browser
  sends when it reconnects), else after ``?last_event_id=``, else from seq 0. The first message
  after a resume point inside a stored batch carries only that batch's later events. Events are
  numbered 0, 1, 2, ... without gaps and stored in order, so "after N" loses and repeats nothing.
- While the run goes on, the stream waits for new batches (a wake-up from the run's thread, or a
  poll every ``POLL_SECONDS``) and sends them as they are stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from app.deps import ManagerDep, RunDep
from app.models import ErrorResponse, RunErrorInfo, StreamDone
from app.store import items_after

router = APIRouter(prefix="/api", tags=["api"])

POLL_SECONDS = 1.0
BATCHES_PER_READ = 8


@router.get(
    "/runs/{run_id}/events",
    response_class=EventSourceResponse,
    responses={404: {"model": ErrorResponse, "description": "no such run"}},
)
async def run_events(
    run: RunDep,
    manager: ManagerDep,
    last_event_id_header: Annotated[
        int | None, Header(alias="Last-Event-ID", ge=-1, description="resume after this seq")
    ] = None,
    last_event_id: Annotated[
        int | None, Query(ge=-1, description="resume after this seq (when no Last-Event-ID header)")
    ] = None,
) -> AsyncIterable[ServerSentEvent]:
    """The run's events with their reducer changes and captions, in batches, then ``done``
    (Note [The event stream] in app/routes/stream.py; docs/api.md)."""
    after = last_event_id_header if last_event_id_header is not None else last_event_id
    after = -1 if after is None else after
    store = manager.store
    reads = 0
    with manager.watch(run.id) as watcher:
        while True:
            # The first read takes one batch: a viewer shows the first step as soon as it has it
            # (a class opening runs at once waits on these reads), the rest follow 8 at a time.
            limit = 1 if reads == 0 else BATCHES_PER_READ
            reads += 1
            batches = await run_in_threadpool(store.batches_after, run.id, after, limit)
            for batch in batches:
                data, _ = items_after(batch, after)
                yield ServerSentEvent(event="events", id=str(batch.last_seq), raw_data=data)
                after = batch.last_seq
            if batches:
                continue
            record = await run_in_threadpool(store.get_run, run.id)
            if record is None:  # deleted under us
                return
            # The count is read after the batches: a batch stored in between shows as a count
            # beyond what was sent, and the loop goes round once more instead of ending early.
            if record.finished and record.n_events <= after + 1:
                done = StreamDone(
                    status=record.status,  # type: ignore[arg-type]
                    error=RunErrorInfo(**record.error) if record.error else None,
                    n_events=record.n_events,
                )
                yield ServerSentEvent(event="done", data=done)
                return
            await watcher.wait(POLL_SECONDS)
