"""Dependencies of the routes: the run manager, and a run looked up by the id in the path."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from app.config import Settings
from app.runs import RUN_ID_RE, RunManager
from app.store import RunRecord


def get_manager(request: Request) -> RunManager:
    manager: RunManager = request.app.state.runs
    return manager


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_templates(request: Request) -> Jinja2Templates:
    templates: Jinja2Templates = request.app.state.templates
    return templates


ManagerDep = Annotated[RunManager, Depends(get_manager)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
TemplatesDep = Annotated[Jinja2Templates, Depends(get_templates)]


def not_found(run_id: str) -> HTTPException:
    return HTTPException(404, f"no run with id {run_id!r}")


def find_run(manager: RunManager, run_id: str) -> RunRecord:
    """The run with this id, or 404. A malformed id is a 404 too (it names no run), checked
    before it reaches the database. Blocking: call it from a worker thread."""
    if not RUN_ID_RE.fullmatch(run_id):
        raise not_found(run_id)
    manager.start()  # no-op once started (see RunManager.start)
    record = manager.store.get_run(run_id)
    if record is None:
        raise not_found(run_id)
    return record


async def get_run(run_id: str, manager: ManagerDep) -> RunRecord:
    """The run named in the path, or 404."""
    return await run_in_threadpool(find_run, manager, run_id)


RunDep = Annotated[RunRecord, Depends(get_run)]
