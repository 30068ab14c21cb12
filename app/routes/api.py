"""The JSON API: scenarios, runs, and a finished run's exports (docs/api.md)."""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response
from starlette.concurrency import run_in_threadpool

from app.deps import ManagerDep, RunDep
from app.models import (
    ErrorResponse,
    Run,
    RunCreate,
    RunCreated,
    RunErrorInfo,
    Scenario,
    ValidationErrorResponse,
)
from app.runner import ScenarioInfo, list_scenarios
from app.runs import (
    BackendMissing,
    BackendRefused,
    ServerBusy,
    SourceTooLarge,
    UnknownScenario,
    backend_label,
)
from app.store import RunRecord, Store
from engine.trace.export import SCHEMA, VERSION, to_chrome, to_json
from engine.trace.state import initial_state

router = APIRouter(prefix="/api", tags=["api"])

_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorResponse, "description": "no such run"}}
_409: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorResponse, "description": "the run has not finished yet"}
}


# Fields left at their defaults are left out: a scenario without metadata reads as it always has.
@router.get("/scenarios", response_model=list[Scenario], response_model_exclude_defaults=True)
def scenarios() -> list[Scenario]:
    """The bundled scenarios (``scenarios/*.py``), in file-name order; those with metadata (Note
    [Scenario metadata] in app/runner.py) also carry ``group``, ``pair``, ``variant``,
    ``symptoms`` and ``reports``."""
    return [scenario_model(s) for s in list_scenarios()]


def scenario_model(s: ScenarioInfo) -> Scenario:
    """A bundled scenario as the API shows it (the docstring's metadata too, when it has some)."""
    return Scenario(
        id=s.id,
        title=s.title,
        description=s.description,
        group=s.group,
        pair=s.pair,
        variant=s.variant,
        symptoms=list(s.symptoms),
        reports=list(s.reports),
    )


@router.post(
    "/runs",
    status_code=201,
    response_model=RunCreated,
    responses={
        200: {"model": RunCreated, "description": "an existing run of the same text was reused"},
        404: {"model": ErrorResponse, "description": "no bundled scenario with that id"},
        413: {"model": ErrorResponse, "description": "the scenario text (or the request) is too large"},
        422: {
            "model": ValidationErrorResponse,
            "description": 'a malformed body, or backend "torch" with uploaded text',
        },
        503: {
            "model": ErrorResponse,
            "description": "too many runs queued (try again later), or torch is not installed",
        },
    },
)
def create_run(body: RunCreate, manager: ManagerDep, response: Response) -> RunCreated:
    """Start a run: a bundled scenario (trusted, in the server; on the engine or on real torch) or
    uploaded text (in the sandbox, on the engine). It runs in the background; follow it with
    ``GET /api/runs/{id}`` or ``/api/runs/{id}/events``. The run of an identical request is
    answered instead (200, ``reused``) unless ``fresh`` (Note [Reusing a run] in app/store.py)."""
    try:
        if body.scenario is not None:
            record = manager.create_bundled(body.scenario, body.backend, fresh=body.fresh)
        else:
            assert body.source is not None  # RunCreate checked that one of the two is given
            record = manager.create_uploaded(body.source, body.filename, body.backend, fresh=body.fresh)
    except UnknownScenario as e:
        raise HTTPException(404, str(e)) from None
    except BackendRefused as e:
        raise HTTPException(422, str(e)) from None
    except BackendMissing as e:
        raise HTTPException(503, str(e)) from None
    except SourceTooLarge as e:
        raise HTTPException(413, str(e)) from None
    except ServerBusy as e:
        raise busy(e) from None
    return created(record, response)


def busy(e: ServerBusy) -> HTTPException:
    """503: no more runs for now; a client may try again in a few seconds."""
    return HTTPException(503, str(e), headers={"Retry-After": "5"})


def created(record: RunRecord, response: Response) -> RunCreated:
    """The answer of a request that made a run (201) or reused one (200), its API address in
    ``Location``."""
    response.headers["Location"] = f"/api/runs/{record.id}"
    if record.reused:
        response.status_code = 200
    return RunCreated(id=record.id, status=record.status, url=f"/runs/{record.id}", reused=record.reused)  # type: ignore[arg-type]


def run_model(record: RunRecord, meta: dict[str, Any] | None = None) -> Run:
    """The API's view of a run; ``meta``: its trace's meta, once finished (names the backend)."""
    return Run(
        id=record.id,
        status=record.status,  # type: ignore[arg-type]
        scenario=record.scenario,
        title=record.title,
        backend=record.backend,  # type: ignore[arg-type]
        backend_label=backend_label(record.backend, meta),
        imported=record.imported,
        filename=record.filename,
        source=record.source,
        error=RunErrorInfo(**record.error) if record.error else None,
        truncated=bool((meta or {}).get("truncated")),
        event_limit=(meta or {}).get("event_limit"),
        n_events=record.n_events,
        progress=max(record.progress, record.n_events),
        stdout=record.stdout,
        created_at=record.created_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        initial_state=dict(initial_state()),
    )


@router.get("/runs/{run_id}", response_model=Run, responses=_404)
def get_run(run: RunDep, manager: ManagerDep) -> Run:
    """A run's status, its backend, its source, and its error (type, message, file and line) if it
    failed."""
    parts = manager.store.trace_parts(run.id) if run.finished else None
    return run_model(run, parts[0] if parts else None)


def _finished(run: RunRecord) -> None:
    if not run.finished:
        raise HTTPException(409, f"run {run.id} is {run.status}: its exports exist once it has finished")


def trace_document(store: Store, run_id: str, *, derived: bool = False) -> dict[str, Any]:
    """The trace document of a finished run, rebuilt from the store (docs/trace.md)."""
    parts = store.trace_parts(run_id)
    meta, sources = parts if parts is not None else ({}, {})
    items = list(store.items(run_id))
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "version": VERSION,
        "meta": meta,
        "sources": sources,
        "events": [item["event"] for item in items],
    }
    if derived:
        doc["derived"] = [
            {"changes": i["changes"], "caption": i["caption"], "changed": i.get("changed", [])} for i in items
        ]
    return doc


def stored_trace(store: Store, run_id: str) -> dict[str, Any]:
    """The trace document of a finished run: as stored when it finished, else (a run a restart
    interrupted) rebuilt from its batches."""
    text = store.trace_json(run_id)
    return json.loads(text) if text is not None else trace_document(store, run_id)


_JSON_FILE: dict[int | str, dict[str, Any]] = {200: {"content": {"application/json": {}}}, **_404, **_409}


@router.get("/runs/{run_id}/trace.json", response_class=Response, responses=_JSON_FILE)
async def trace_json(
    run: RunDep,
    manager: ManagerDep,
    derived: bool = Query(False, description='add "derived": the changes and caption of each event'),
) -> Response:
    """The whole trace (``engine.trace.export.to_json``)."""
    _finished(run)

    def build() -> str:
        text = None if derived else manager.store.trace_json(run.id)
        # Rebuilt from the batches with derived=true, or for a run a restart interrupted.
        return text if text is not None else to_json(trace_document(manager.store, run.id, derived=derived))

    return _download(await run_in_threadpool(build), "application/json", f"{run.id}.trace.json")


@router.get("/runs/{run_id}/trace.chrome.json", response_class=Response, responses=_JSON_FILE)
async def trace_chrome(
    run: RunDep,
    manager: ManagerDep,
    clock: Literal["t_ns", "seq"] = Query("t_ns", description="seq: event N at N microseconds"),
) -> Response:
    """The trace in Chrome Trace Event format, for Perfetto or chrome://tracing."""
    _finished(run)

    def build() -> str:
        return to_chrome(stored_trace(manager.store, run.id)["events"], clock=clock)

    return _download(await run_in_threadpool(build), "application/json", f"{run.id}.chrome.json")


@router.get(
    "/runs/{run_id}/graph.dot",
    response_class=Response,
    responses={200: {"content": {"text/vnd.graphviz": {}}}, **_404, **_409},
)
async def graph_dot(run: RunDep, manager: ManagerDep) -> Response:
    """Every node the run created, as Graphviz DOT (``engine.trace.export.to_dot``), with stable
    element ids for restyling per step. Computed once, when the run finishes."""
    _finished(run)
    dot = await run_in_threadpool(manager.store.dot, run.id)
    if dot is None:
        raise HTTPException(500, f"the graph of run {run.id} could not be drawn")
    return Response(dot, media_type="text/vnd.graphviz; charset=utf-8")


@router.get(
    "/runs/{run_id}/export.html",
    response_class=Response,
    responses={200: {"content": {"text/html": {}}}, **_404, **_409},
)
async def export_html(run: RunDep, manager: ManagerDep) -> Response:
    """The run page as one HTML file that opens from disk with no server and no network: the
    viewer's scripts and stylesheet inlined, and the run's trace (with changes and captions),
    story, memory report and graph (``app.export_html``; docs/viewer.md, "Exports")."""
    _finished(run)
    from app.export_html import lens_data, page_html
    from app.routes.derived import derived_json

    def build() -> str:
        store = manager.store
        parts = store.trace_parts(run.id)
        doc = run_model(run, parts[0] if parts else None).model_dump(mode="json")
        data = lens_data(
            doc,
            trace_document(store, run.id, derived=True),
            story=json.loads(derived_json(store, run.id, run.n_events, "story")),
            memory=json.loads(derived_json(store, run.id, run.n_events, "memory")),
            dot=store.dot(run.id),
        )
        return page_html(data)

    html = await run_in_threadpool(build)
    headers = {"Content-Disposition": f'attachment; filename="run-{run.id}.html"'}
    return Response(html, media_type="text/html; charset=utf-8", headers=headers)


def _download(text: str, media_type: str, filename: str) -> Response:
    # inline: a browser shows it, and "Save as" proposes a useful name.
    headers = {"Content-Disposition": f'inline; filename="{filename}"'}
    return Response(text, media_type=media_type, headers=headers)
