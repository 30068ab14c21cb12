"""The API's request and response bodies (pydantic), which are also its OpenAPI schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RunStatus = Literal["queued", "running", "done", "error"]


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


class RunCreate(BaseModel):
    """Exactly one of ``scenario`` (a bundled scenario, run as trusted code) and ``source``
    (Python text, run in the sandbox; ``filename`` names it in errors and in the trace)."""

    model_config = ConfigDict(extra="forbid")

    scenario: str | None = Field(default=None, examples=["nested_checkpoint"])
    source: str | None = Field(default=None, examples=['"""My scenario"""\nimport engine as torch\n'])
    filename: str | None = Field(default=None, max_length=1000, examples=["my_scenario.py"])

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
        return self


class RunCreated(BaseModel):
    id: str
    status: RunStatus
    url: str = Field(description="the viewer page of the run", examples=["/runs/Xy3_aB9-kQ0"])


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
    filename: str = Field(description="the file name events' src.file and errors use")
    source: str = Field(description="the scenario's text")
    error: RunErrorInfo | None
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


class StreamDone(BaseModel):
    """The data of the stream's last message, ``event: done``."""

    status: RunStatus
    error: RunErrorInfo | None
    n_events: int
