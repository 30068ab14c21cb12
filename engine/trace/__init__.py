"""``engine.trace``: record what the engine does as a list of events (the trace).

    from engine import trace
    with trace.record(source_files=[__file__]) as tr:
        ...                       # any engine code
    tr.events                     # JSON-ready dicts, in emission order
    tr.to_json()                  # {"schema", "version", "meta", "sources", "events"}
    trace.mark("label", **fields) # a user annotation

``docs/trace.md`` documents every event kind; ``schema.json`` (``schema()``) is the format's JSON
Schema. ``emit.py`` is the only piece the engine imports: the flag and the call its code uses to
report events. The reducer (``state.py``), captions and exports build on the events.

This module must stay importable while ``engine`` itself is being imported (``engine/_tensor.py``
imports ``emit``), so nothing here imports the engine at module level.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from engine.trace import emit
from engine.trace.record import SCHEMA, VERSION, Trace, TraceLimitExceeded, mark, record

__all__ = ["SCHEMA", "VERSION", "Trace", "TraceLimitExceeded", "emit", "mark", "record", "schema"]


@cache
def _schema_text() -> str:
    return resources.files("engine.trace").joinpath("schema.json").read_text(encoding="utf-8")


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a trace document, shipped as package data."""
    return dict(json.loads(_schema_text()))
