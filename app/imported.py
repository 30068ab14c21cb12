"""Trace documents opened in the viewer without running anything: a trace file written by
``autograd-lens trace my_script.py --backend torch -o trace.json`` (a user's own PyTorch program,
traced on their machine), uploaded to ``POST /api/traces``.

Note [Opening a trace file]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
The server never runs the user's PyTorch script (it may need their model, data, GPU, and it is
not sandboxable); the CLI traces it locally and hands the server the document. An imported
document is untrusted input like uploaded text, so it is checked in full before it is stored
(``read_trace``): JSON, then the schema and the id invariants (Note [Checking a trace document]
in engine/trace/validate.py), then a replay through the reducer and the captions, which the
viewer's stream is made of. A problem is reported with the event that has it. What passes becomes
a run like any other (``RunManager.create_imported``): stored batch by batch with its changes and
captions, streamed, exported, diffed. Its title, file and source come from the document
(``sources`` holds the script's text), its status from ``meta.error``; it has no gradients (a
trace does not carry them), so a diff against it compares events only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.runner import RunError, RunResult
from engine.trace.captions import caption
from engine.trace.state import initial_state, step
from engine.trace.validate import TraceDocumentError, check_document

IMPORTED_FILENAME = "trace.py"


class BadTrace(ValueError):
    """An uploaded document that is not a trace the viewer can show; the message says why and
    where (the event's index, the field)."""


def read_trace(body: bytes) -> dict[str, Any]:
    """The trace document in ``body`` (UTF-8 JSON), checked as Note [Opening a trace file] says."""
    try:
        doc = json.loads(body.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise BadTrace(f"the file is not UTF-8 text (byte {e.start} is not)") from None
    except json.JSONDecodeError as e:
        raise BadTrace(f"the file is not JSON: line {e.lineno}, column {e.colno}: {e.msg}") from None
    try:
        check_document(doc)
    except TraceDocumentError as e:
        raise BadTrace(str(e)) from None
    state = initial_state()
    for i, event in enumerate(doc["events"]):
        try:
            caption(state, event)
            step(state, event)
        except Exception as e:  # noqa: BLE001 - any failure means the events contradict each other
            raise BadTrace(
                f"event {i} ({event['kind']}) contradicts the events before it: {type(e).__name__}: {e}"
            ) from None
    return doc  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ImportedRun:
    """What the runs table needs of an imported document."""

    name: str  # the file's base name: the title when its source has no docstring
    filename: str
    source: str
    backend: str  # "engine" or "torch"


def describe(doc: dict[str, Any]) -> ImportedRun:
    """File, source text and backend of a checked document."""
    meta, sources = doc["meta"], doc.get("sources") or {}
    files = [f for f in meta.get("source_files") or [] if isinstance(f, str)]
    filename = files[0] if files else next(iter(sources), IMPORTED_FILENAME)
    source = sources.get(filename, "")
    short = filename.replace("\\", "/").rsplit("/", 1)[-1]
    backend = str(meta.get("backend") or "engine")
    return ImportedRun(
        name=short,
        filename=filename,
        source=source,
        backend="torch" if backend.startswith("torch") else "engine",
    )


def imported_result(doc: dict[str, Any]) -> RunResult:
    """The ``RunResult`` a run of the document would have had: the events, the printed output
    (its ``mark`` events on stdout) and the error with the line it came from."""
    events = doc["events"]
    stdout = "".join(f"{e['label']}\n" for e in events if e["kind"] == "mark" and e.get("stream") == "stdout")
    error: RunError | None = None
    if (meta_error := doc["meta"].get("error")) is not None:
        src = next((e["src"] for e in reversed(events) if e["kind"] == "error"), None) or {}
        error = RunError(
            str(meta_error["type"]), str(meta_error["message"]), src.get("file"), src.get("line")
        )
    return RunResult(ok=error is None, trace=doc, error=error, stdout=stdout, filename=describe(doc).filename)
