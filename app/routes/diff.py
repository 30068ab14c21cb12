"""``GET /api/diff?a=RUN&b=RUN``: two finished runs' traces aligned row by row, and their final
gradients compared (docs/diff.md). Typically the engine run and the torch run of one scenario, or
the broken and the fixed scenario of a pitfall (Note [Naming the sides of a diff])."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from app.deps import ManagerDep, find_run
from app.models import ErrorResponse, TraceDiffResponse
from app.routes.api import stored_trace
from app.runner import ScenarioInfo
from app.runs import RunManager, UnknownScenario, backend_label, find_scenario
from app.store import RunRecord, dumps
from engine.trace.diff import diff_traces, grads_verdict

router = APIRouter(prefix="/api", tags=["api"])

RTOL = 1e-5
ATOL = 1e-6


# Note [Naming the sides of a diff]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A side is named by what tells the two runs apart. Two runs of different bundled scenarios are
# named by scenario: the two sides of one pitfall pair (Note [Scenario metadata]) by their
# ``Variant``, "broken" and "fixed", any other two by their scenario ids; the backend is added
# when it differs too. Otherwise (one scenario, or text that is not a bundled scenario) a side is
# named by its backend, and two runs of one backend by their ids too. The names head the diff's
# columns and its messages ("pack only in fixed").


def _bundled(run: RunRecord) -> ScenarioInfo | None:
    if run.scenario is None or run.imported:
        return None
    try:
        return find_scenario(run.scenario)
    except UnknownScenario:
        return None  # a scenario removed since the run


def labels(a: RunRecord, b: RunRecord) -> tuple[str, str]:
    """Each side's name (Note [Naming the sides of a diff])."""
    sa, sb = _bundled(a), _bundled(b)
    if sa is not None and sb is not None and sa.id != sb.id:
        pair = sa.pair is not None and sa.pair == sb.pair and {sa.variant, sb.variant} == {"broken", "fixed"}
        la, lb = (str(sa.variant), str(sb.variant)) if pair else (sa.id, sb.id)
        if a.backend != b.backend:
            return f"{la} ({a.backend})", f"{lb} ({b.backend})"
        return la, lb
    if a.backend != b.backend:
        return a.backend, b.backend
    return f"{a.backend} {a.id}", f"{b.backend} {b.id}"


def build_diff(manager: RunManager, a_id: str, b_id: str) -> dict[str, Any]:
    """The response of ``GET /api/diff`` (``TraceDiffResponse``), or 404/409."""
    runs = {"a": find_run(manager, a_id), "b": find_run(manager, b_id)}
    for run in runs.values():
        if not run.finished:
            raise HTTPException(409, f"run {run.id} is {run.status}: a diff needs both runs finished")
    docs = {side: stored_trace(manager.store, run.id) for side, run in runs.items()}
    la, lb = labels(runs["a"], runs["b"])
    diff = diff_traces(docs["a"], docs["b"], a_label=la, b_label=lb)
    grads = grads_verdict(
        manager.store.grads(a_id), manager.store.grads(b_id), RTOL, ATOL, a_label=la, b_label=lb
    )
    return {
        **diff.to_json(),
        "grads": grads,
        "equal": diff.checkpoint_equal and grads["equal"],
        "runs": {
            side: {
                "id": run.id,
                "backend": run.backend,
                "backend_label": backend_label(run.backend, docs[side].get("meta")),
                "title": run.title,
                "status": run.status,
                "n_events": run.n_events,
                "url": f"/runs/{run.id}",
            }
            for side, run in runs.items()
        },
    }


@router.get(
    "/diff",
    response_model=TraceDiffResponse,
    responses={
        404: {"model": ErrorResponse, "description": "no run with one of the ids"},
        409: {"model": ErrorResponse, "description": "one of the runs has not finished yet"},
    },
)
async def trace_diff(
    manager: ManagerDep,
    a: Annotated[str, Query(description="a run id (the left side, usually the engine's run)")],
    b: Annotated[str, Query(description="a run id (the right side, usually the torch run)")],
) -> Response:
    """Align two finished runs' events side by side: are the checkpoint events identical (only
    holder GC order may differ), where do they first diverge, and are the final gradients equal?"""
    body = await run_in_threadpool(build_diff, manager, a, b)
    # Serialised once here: a long trace has as many rows as events, and validating each through
    # the response model would cost more than the diff itself.
    return Response(dumps(body), media_type="application/json")
