"""The API's request and response bodies (pydantic), which are also its OpenAPI schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RunStatus = Literal["queued", "running", "done", "error"]
Backend = Literal["engine", "torch"]
DiffStatus = Literal["same", "differ", "only_a", "only_b"]


class ErrorResponse(BaseModel):
    """Every error the API answers: a sentence for a person."""

    detail: str = Field(examples=["no run with id 'abc'"])


class ValidationErrorResponse(ErrorResponse):
    """A malformed request (422): ``detail`` sums it up, ``errors`` is pydantic's list."""

    errors: list[dict[str, Any]]


class Scenario(BaseModel):
    id: str = Field(description="the file stem in scenarios/, what POST /api/runs takes")
    title: str = Field(description="the first line of the scenario's docstring")
    description: str = Field(description="the rest of the docstring")
    group: str | None = Field(default=None, description='a section of the home page ("Pitfalls"), or null')
    pair: str | None = Field(
        default=None, description="the broken/fixed pair this scenario belongs to, if any"
    )
    variant: str | None = Field(default=None, description='"broken" or "fixed", within its pair')
    symptoms: list[str] = Field(
        default_factory=list, description="error texts or symptoms a user would search for, to find it"
    )
    reports: list[str] = Field(default_factory=list, description="URLs of public reports it reproduces")


class RunCreate(BaseModel):
    """Exactly one of ``scenario`` (a bundled scenario, run as trusted code) and ``source``
    (Python text, run in the sandbox; ``filename`` names it in errors and in the trace).
    ``backend``: what records the trace, the engine or real PyTorch (bundled scenarios only)."""

    model_config = ConfigDict(extra="forbid")

    scenario: str | None = Field(default=None, examples=["nested_checkpoint"])
    source: str | None = Field(default=None, examples=['"""My scenario"""\nimport engine as torch\n'])
    filename: str | None = Field(default=None, max_length=1000, examples=["my_scenario.py"])
    backend: Backend = Field(
        default="engine",
        description='"torch" runs a bundled scenario against real PyTorch (if the server has it)',
    )
    fresh: bool = Field(
        default=False,
        description="run the scenario again even if the server has a run of the same text to reuse",
    )

    @field_validator("source", "filename")
    @classmethod
    def _encodable(cls, value: str | None) -> str | None:
        # JSON may carry lone surrogates (\ud800): no valid file can contain them.
        if value is not None:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("the text is not valid Unicode (it contains a lone surrogate)") from None
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> RunCreate:
        if (self.scenario is None) == (self.source is None):
            raise ValueError('give exactly one of "scenario" (a bundled scenario id) and "source" (text)')
        if self.scenario is not None and self.filename is not None:
            raise ValueError('"filename" goes with "source", not with "scenario"')
        if self.source is not None and self.backend != "engine":
            raise ValueError(
                'backend "torch" runs bundled scenarios only: uploaded text runs in a sandbox '
                "that only knows the engine"
            )
        return self


class RunCreated(BaseModel):
    id: str
    status: RunStatus
    url: str = Field(description="the viewer page of the run", examples=["/runs/Xy3_aB9-kQ0"])
    reused: bool = Field(
        default=False,
        description="an existing run of the same text on the same engine answered the request (200)",
    )


class RunErrorInfo(BaseModel):
    """Why a run failed. ``file``/``line`` point into the scenario when the error comes from one
    of its lines; ``limit`` names the sandbox limit that stopped it, if one did."""

    type: str = Field(examples=["AttributeError", "SyntaxError", "LimitExceeded"])
    message: str
    file: str | None = None
    line: int | None = None
    limit: str | None = None


class Run(BaseModel):
    id: str
    status: RunStatus
    scenario: str | None = Field(description="the bundled scenario's id; null for uploaded text")
    title: str
    backend: Backend = Field(description="what recorded the trace: the engine, or real PyTorch")
    backend_label: str = Field(
        description="the backend as shown: its trace's meta.backend once known", examples=["torch 2.8.0"]
    )
    imported: bool = Field(
        default=False,
        description="opened from a trace file (POST /api/traces): recorded elsewhere, nothing ran here",
    )
    filename: str = Field(description="the file name events' src.file and errors use")
    source: str = Field(description="the scenario's text")
    error: RunErrorInfo | None
    truncated: bool = Field(
        default=False,
        description="the trace was cut short (meta.truncated): a limit stopped the run, the events "
        "before it are all kept",
    )
    event_limit: int | None = Field(
        default=None, description="the event limit (max_events) that cut the trace, when that is what did"
    )
    n_events: int = Field(description="events stored so far: what /events can send now")
    progress: int = Field(description="events recorded so far by the run (ahead of n_events while running)")
    stdout: str = Field(description="what the scenario printed (also in the trace, as mark events)")
    created_at: str
    started_at: str | None
    finished_at: str | None
    initial_state: dict[str, Any] = Field(
        description="the reducer's State before event 0 (engine.trace.state.initial_state())"
    )


class StreamItem(BaseModel):
    """One event as the stream sends it (a message's data is a JSON list of these)."""

    event: dict[str, Any] = Field(description="the trace event (docs/trace.md)")
    changes: list[list[Any]] = Field(description="the reducer's changes, [op, path, old, new] each")
    caption: str
    changed: list[str] = Field(default=[], description="what the changes did, in a few short lines")


class StreamDone(BaseModel):
    """The data of the stream's last message, ``event: done``."""

    status: RunStatus
    error: RunErrorInfo | None
    n_events: int


class DiffRow(BaseModel):
    """One aligned row of two traces (engine/trace/diff.py, Note [Aligning two traces])."""

    a: int | None = Field(description="seq of run a's event; null: a gap on that side")
    b: int | None = Field(description="seq of run b's event; null: a gap on that side")
    status: DiffStatus
    checkpoint: bool = Field(description="a checkpoint event: part of the contract")
    kind: str
    fields: list[str] = Field(description="the compared fields that differ (status differ)")
    reordered: bool = Field(description="a holder_gc paired at another place of its run (allowed)")
    a_text: str = Field(description="a few words about a's event ('' for a gap)")
    b_text: str


class DiffCounts(BaseModel):
    events_a: int
    events_b: int
    checkpoint_a: int
    checkpoint_b: int
    same: int = Field(description="checkpoint rows equal on both sides")
    differ: int
    only_a: int
    only_b: int
    reordered: int


class DiffRun(BaseModel):
    id: str
    backend: Backend
    backend_label: str
    title: str
    status: RunStatus
    n_events: int
    url: str = Field(description="the run's viewer")


class GradsComparison(BaseModel):
    """The final gradients of the two runs, name by name."""

    equal: bool = Field(description="both runs reported gradients, and they match")
    problems: list[str] = Field(description="names on one side only, shapes, largest differences")
    verdict: str = Field(examples=["gradients equal", "gradients differ: w: max abs difference 0.01"])
    rtol: float
    atol: float


class TraceDiffResponse(BaseModel):
    """``GET /api/diff``: two finished runs' traces aligned row by row (docs/diff.md)."""

    a_label: str
    b_label: str
    checkpoint_equal: bool = Field(description="checkpoint events identical (holder_gc order aside)")
    first_divergence: int | None = Field(description="row of the first checkpoint difference")
    verdict: str
    counts: DiffCounts
    ignored: dict[str, list[str]] = Field(description='kind -> fields not compared ("*": the kind)')
    rows: list[DiffRow]
    grads: GradsComparison
    equal: bool = Field(description="checkpoint events identical and gradients equal")
    runs: dict[str, DiffRun] = Field(description='"a" and "b"')


class SharedCreate(BaseModel):
    """A scenario text to keep behind a permalink (``/s/<id>``), which opens it in the editor."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(examples=['"""My scenario"""\nimport engine as torch\n'])
    filename: str = Field(default="scenario.py", min_length=1, max_length=1000, examples=["my_scenario.py"])

    @field_validator("source", "filename")
    @classmethod
    def _encodable(cls, value: str) -> str:
        return RunCreate._encodable(value) or ""

    @field_validator("source")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the scenario text is empty: there is nothing to share")
        return value


class SharedScenario(BaseModel):
    id: str = Field(description="what the permalink /s/<id> names")
    url: str = Field(
        description="the permalink: the home page with this text in the editor", examples=["/s/abcdefghijkl"]
    )
    filename: str
    source: str
    created_at: str = Field(description="when it was first shared")
