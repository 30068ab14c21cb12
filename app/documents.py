"""The documents derived from a finished run's events, each in one place: how it is built from
the events and the trace's ``meta``. Those of ``app.store.STORED_DOCUMENTS`` are stored with
the run when it finishes (Note [Documents ready at done] in app/runs.py). ``GET
/api/runs/{id}/story`` and ``/memory`` (app/routes/derived.py) serve them; the compare page
(app/routes/compare.py) reads ``compare``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from app.compare import figures_of
from engine.trace.memory import memory_report
from engine.trace.story import story_document

# Each document from the run's events and its trace's ``meta``.
Builder = Callable[[Sequence[dict[str, Any]], dict[str, Any]], Any]
DOCUMENTS: dict[str, Builder] = {
    "story": lambda events, meta: story_document(events),
    "memory": lambda events, meta: memory_report(events, modules=meta.get("modules")),
    "compare": lambda events, meta: figures_of(events),
}


def document_json(document: Any) -> str:
    """A document as the API sends it."""
    return json.dumps(document, separators=(",", ":"))


def derive_json(name: str, events: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Document ``name`` of ``events``, as JSON text."""
    return document_json(DOCUMENTS[name](events, meta))
