"""The Pitfalls pack (docs/pitfalls.md): its broken/fixed pairs, the search that finds a scenario
by its error text, and links that start a pair's runs.

- ``GET /api/pitfalls``: the pairs, each with the error texts it answers and its public reports.
- ``GET /api/scenarios/search?q=TEXT``: the bundled scenarios a pasted error text points to.
- ``GET /pitfalls/{pair}/broken`` (``/fixed``): runs that side on the engine and redirects (303)
  to its viewer; ``GET /pitfalls/{pair}/diff`` runs both sides and redirects to the diff page
  (``/diff?a=BROKEN&b=FIXED``), which aligns the two traces and shows where they part. Plain
  links, so a card, a doc or an issue comment can point at them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import RedirectResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from app.deps import ManagerDep
from app.models import ErrorResponse, Scenario
from app.pitfalls import PitfallPair, find_pair, pitfall_pairs, search_scenarios
from app.routes.api import busy, scenario_model
from app.runs import RunManager, ServerBusy

# One router for the API and the links, so app/main.py includes it in one line.
router = APIRouter()

MAX_QUERY = 20_000  # a pasted traceback, not a log file


class Pitfall(BaseModel):
    pair: str = Field(examples=["no_grad_inputs"])
    title: str = Field(description="the broken scenario's title")
    symptoms: list[str] = Field(description="the error texts or symptoms it answers")
    reports: list[str] = Field(description="URLs of public reports it reproduces")
    broken: Scenario
    fixed: Scenario
    links: dict[str, str] = Field(description="broken, fixed, diff: pages that start the runs")


class SearchHit(BaseModel):
    scenario: Scenario
    score: float = Field(description="higher is better (Note [Finding a scenario by its error text])")
    symptom: str | None = Field(description="the scenario's symptom the text matched best, if any")


def _pitfall(p: PitfallPair) -> Pitfall:
    base = f"/pitfalls/{p.pair}"
    return Pitfall(
        pair=p.pair,
        title=p.broken.title,
        symptoms=list(p.symptoms),
        reports=list(p.reports),
        broken=scenario_model(p.broken),
        fixed=scenario_model(p.fixed),
        links={"broken": f"{base}/broken", "fixed": f"{base}/fixed", "diff": f"{base}/diff"},
    )


@router.get("/api/pitfalls", tags=["api"], response_model=list[Pitfall])
def pitfalls() -> list[Pitfall]:
    """The broken/fixed pairs of the Pitfalls group, in file order."""
    return [_pitfall(p) for p in pitfall_pairs()]


@router.get("/api/scenarios/search", tags=["api"], response_model=list[SearchHit])
def search(
    q: Annotated[str, Query(max_length=MAX_QUERY, description="an error text, a traceback or a few words")],
) -> list[SearchHit]:
    """The bundled scenarios an error text points to, best first; empty when none fits."""
    return [
        SearchHit(scenario=scenario_model(h.scenario), score=h.score, symptom=h.symptom)
        for h in search_scenarios(q)
    ]


def _start(manager: RunManager, pair: str, side: Literal["broken", "fixed", "diff"]) -> str:
    """Start the runs a link asks for; the URL to go to."""
    found = find_pair(pair)
    if found is None:
        raise HTTPException(404, f"no pitfall named {pair!r}")
    try:
        if side == "diff":
            a = manager.create_bundled(found.broken.id)
            b = manager.create_bundled(found.fixed.id)
            return f"/diff?a={a.id}&b={b.id}"
        run = manager.create_bundled((found.broken if side == "broken" else found.fixed).id)
    except ServerBusy as e:
        raise busy(e) from None
    return f"/runs/{run.id}"


@router.get(
    "/pitfalls/{pair}/{side}",
    tags=["pages"],
    response_class=RedirectResponse,
    status_code=303,
    responses={
        404: {"model": ErrorResponse, "description": "no pitfall with that name"},
        503: {"model": ErrorResponse, "description": "too many runs queued"},
    },
)
async def start_pitfall(
    pair: str, side: Literal["broken", "fixed", "diff"], manager: ManagerDep
) -> RedirectResponse:
    """Run a pitfall's broken or fixed scenario (or both, for ``diff``) on the engine, and go to
    its viewer (or to the diff of the two)."""
    url = await run_in_threadpool(_start, manager, pair, side)
    return RedirectResponse(url, status_code=303)
