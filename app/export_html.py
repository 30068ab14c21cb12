"""One self-contained HTML file of a run (docs/viewer.md, "Exports"): the run page with its
stylesheet, its script modules (bundled into one inline module, ``bundle``) and the run's data
inlined, so that it opens from disk with no server and no network.

The data (``lens_data``) is what the viewer would otherwise ask the server for: the run (as
``GET /api/runs/{id}`` answers it), the trace with each event's changes and caption
(``trace.json?derived=true``), the story and memory documents, the graph as DOT. The page keeps
it in ``<script type="application/json" id="lens-data">``; ``static/js/source_data.js`` reads
it instead of fetching.

Note [Bundling the viewer]
~~~~~~~~~~~~~~~~~~~~~~~~~~
The viewer is native ES modules with no build step, and a ``file://`` page can load neither
them nor anything else from disk. ``bundle`` follows the static imports from ``main.js`` and
wraps each module in a function, in dependency order (imports first), that returns its exports:
``import { a, b as c } from "./x.js"`` becomes ``const { a, b: c } = __lens["js/x.js"]`` and
``import * as ns`` binds the whole object. This is enough for how our modules are written (no
cycles, no default exports, no ``export let`` a module reassigns: imports are copies, not live
bindings); anything else is refused with ``BundleError``, so a new kind of import fails the
export's tests rather than the page. The result is one inline ``<script type="module">``, with
``</script`` and ``<!--`` escaped, and the control characters of the vendored viz-js (its wasm
binary is a string literal) written as ``\\xNN``, since an HTML parser replaces a NUL.
"""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path
from typing import Any

import jinja2
from jinja2.utils import htmlsafe_json_dumps

from engine.trace.export import annotate, document_of, to_dot
from engine.trace.glossary import glossary
from engine.trace.memory import memory_report
from engine.trace.state import initial_state
from engine.trace.story import story_document

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "static"
TEMPLATES = ROOT / "templates"

__all__ = ["BundleError", "bundle", "lens_data", "page_html", "run_of_trace"]


class BundleError(ValueError):
    """A module the bundler cannot turn into a function (Note [Bundling the viewer])."""


_IMPORT = re.compile(r'^import\s+([^;"]*?)\s+from\s+"([^"]+)";?[ \t]*$', re.M)
_BARE_IMPORT = re.compile(r'^import\s*["(]', re.M)
_EXPORT_DECL = re.compile(r"^export\s+(?=(?:async\s+)?function\b|class\b|const\b)", re.M)
_DECL_NAME = re.compile(r"(?:async\s+)?(?:function\s*\*?|class|const)\s+([A-Za-z_$][\w$]*)")
_EXPORT_LIST = re.compile(r"^export\s*\{([^}]*)\}\s*;?[ \t]*$", re.M)
_UNSUPPORTED = re.compile(r"^export\s+(?:default|let|var|\*)", re.M)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _key(path: Path) -> str:
    return path.relative_to(STATIC).as_posix()


def _binding(clause: str, ref: str, where: str) -> str:
    clause = " ".join(clause.split())
    if clause.startswith("* as "):
        return f"const {clause[5:]} = {ref};"
    if clause.startswith("{") and clause.endswith("}"):
        names = [n.strip() for n in clause[1:-1].split(",") if n.strip()]
        parts = [": ".join(p.strip() for p in n.split(" as ")) for n in names]
        return f"const {{ {', '.join(parts)} }} = {ref};"
    raise BundleError(f"{where}: unsupported import {clause!r} (named or namespace imports only)")


def _module(path: Path, deps: dict[str, str]) -> str:
    """One module as ``__lens[key] = (() => {...; return {exports}})();``."""
    text = path.read_text(encoding="utf-8")
    where = _key(path)
    if _UNSUPPORTED.search(text) or _BARE_IMPORT.search(text):
        raise BundleError(f"{where}: default, let, star or side-effect exports/imports are not bundled")
    exports: list[str] = []

    def declared(m: re.Match[str]) -> str:
        name = _DECL_NAME.match(m.string, m.end())
        if name is None:
            raise BundleError(f"{where}: cannot read the name of an export")
        exports.append(name.group(1))
        return ""

    def listed(m: re.Match[str]) -> str:
        for n in (n.strip() for n in m.group(1).split(",") if n.strip()):
            local, _, public = n.partition(" as ")
            exports.append(f"{public.strip()}: {local.strip()}" if public else local.strip())
        return ""

    body = _IMPORT.sub(lambda m: _binding(m.group(1), f'__lens["{deps[m.group(2)]}"]', where), text)
    body = _EXPORT_DECL.sub(declared, body)
    body = _EXPORT_LIST.sub(listed, body)
    body = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", body)
    return f'__lens["{where}"] = (() => {{\n{body}\nreturn {{ {", ".join(exports)} }};\n}})();\n'


def bundle(entry: Path | None = None) -> str:
    """The modules ``entry`` (default ``static/js/main.js``) imports, and itself, as one script
    (Note [Bundling the viewer])."""
    order: list[Path] = []
    specs: dict[Path, dict[str, str]] = {}
    visiting: list[Path] = []

    def visit(path: Path) -> None:
        if path in specs:
            return
        if path in visiting:
            chain = " -> ".join(_key(p) for p in [*visiting, path])
            raise BundleError(f"an import cycle cannot be bundled: {chain}")
        visiting.append(path)
        deps: dict[str, str] = {}
        for m in _IMPORT.finditer(path.read_text(encoding="utf-8")):
            dep = (path.parent / m.group(2)).resolve()
            if not dep.is_file() or STATIC not in dep.parents:
                raise BundleError(f"{_key(path)}: cannot bundle the import of {m.group(2)!r}")
            visit(dep)
            deps[m.group(2)] = _key(dep)
        visiting.pop()
        specs[path] = deps
        order.append(path)

    visit((entry or STATIC / "js" / "main.js").resolve())
    text = "const __lens = Object.create(null);\n" + "".join(_module(p, specs[p]) for p in order)
    return _html_safe(text)


def _html_safe(text: str) -> str:
    # Inside a script element only these two sequences mean something to the HTML parser; in
    # JavaScript they only occur in strings, regular expressions and comments, where "\/" and
    # "\!" mean "/" and "!".
    text = re.sub(r"</(script)", r"<\\/\1", text, flags=re.I)
    return text.replace("<!--", "<\\!--")


# --- the data ------------------------------------------------------------------------------------


def run_of_trace(
    doc: dict[str, Any], *, run_id: str, title: str, filename: str, source: str, backend: str = "engine"
) -> dict[str, Any]:
    """A run as ``GET /api/runs/{id}`` describes it, for a trace that is not a stored run (the
    CLI's export). Its error is the trace's ``meta.error``, with the line of its error event."""
    from app.imported import imported_result
    from app.runs import backend_label

    result = imported_result(doc)
    error = result.error
    return {
        "id": run_id,
        "status": "error" if error else "done",
        "scenario": None,
        "title": title,
        "backend": backend,
        "backend_label": backend_label(backend, doc.get("meta")),
        "imported": False,
        "filename": filename,
        "source": source,
        "error": None
        if error is None
        else {"type": error.type, "message": error.message, "file": error.file, "line": error.line},
        "n_events": len(doc["events"]),
        "progress": len(doc["events"]),
        "stdout": result.stdout,
        "created_at": "",
        "started_at": None,
        "finished_at": None,
        "initial_state": dict(initial_state()),
    }


def lens_data(
    run: dict[str, Any],
    trace: Any,
    *,
    story: Any = None,
    memory: Any = None,
    dot: str | None = None,
) -> dict[str, Any]:
    """What the exported page shows: ``trace`` with ``derived`` (computed if missing), and the
    story, memory and DOT documents (computed from the events if not given)."""
    doc = document_of(trace)
    events = doc["events"]
    if "derived" not in doc:
        doc["derived"] = annotate(events)
    meta = doc.get("meta") or {}
    return {
        "run": run,
        "trace": doc,
        "story": story_document(events) if story is None else story,
        "memory": memory_report(events, modules=meta.get("modules")) if memory is None else memory,
        "dot": (to_dot(doc).source if events else None) if dot is None else dot,
        "done": {"status": run["status"], "error": run.get("error"), "n_events": len(events)},
    }


# --- the page ------------------------------------------------------------------------------------


def _replace_once(html: str, old: str, new: str) -> str:
    if html.count(old) != 1:
        raise BundleError(f"the run page no longer has {old!r} exactly once: update app/export_html.py")
    return html.replace(old, new)


def page_html(data: dict[str, Any]) -> str:
    """The run page of ``data`` (``lens_data``) as one HTML file with nothing to fetch."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    run = data["run"]
    config = {
        "page": "run",
        "run_id": run["id"],
        "title": run["title"],
        "standalone": True,
        "glossary": glossary(),
    }
    html = env.get_template("run.html").render(
        config=config, config_json=htmlsafe_json_dumps(config), run_id=run["id"], title=run["title"]
    )
    css = (STATIC / "css" / "app.css").read_text(encoding="utf-8").replace("</style", "<\\/style")
    icon = base64.b64encode((STATIC / "favicon.svg").read_bytes()).decode()
    html = _replace_once(
        html, '<link rel="stylesheet" href="/static/css/app.css">', f"<style>\n{css}\n</style>"
    )
    html = _replace_once(html, 'href="/static/favicon.svg"', f'href="data:image/svg+xml;base64,{icon}"')
    html = _replace_once(html, '<body class="page-run">', '<body class="page-run" data-standalone="1">')
    trace_link = '<a id="run-trace" href="#" download>'
    html = _replace_once(
        html, trace_link, trace_link.replace("download", f'download="{escape(run["id"])}.trace.json"')
    )
    script = (
        f'<script type="application/json" id="lens-data">{htmlsafe_json_dumps(data)}</script>\n'
        f'<script type="module">\n{bundle()}</script>'
    )
    return _replace_once(html, '<script type="module" src="/static/js/main.js"></script>', script)
