"""The web app: ``create_app(settings)`` builds it; ``python -m app`` (or ``uvicorn app.main:app``)
serves it. See docs/api.md.

Nothing here touches the disk until the app starts (its lifespan opens the database), and
``app.main.app`` is only built when first asked for, so importing this module in tests creates no
``./data``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings
from app.routes import api, compare, derived, diff, pages, pitfalls, shared, stream, traces
from app.runs import RunManager

log = logging.getLogger("autograd_lens")

DESCRIPTION = """Run autograd scenarios (bundled, or your own text in a sandbox) and step through
their traces: every pack, unpack, recomputation, early stop and holder GC of activation
checkpointing, with the reducer's state changes and a caption per event."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """The FastAPI app. ``settings`` default to ``Settings.from_env()``."""
    settings = settings or Settings.from_env()
    manager = RunManager(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(manager.start)
        if manager.interrupted:
            log.warning("marked %d unfinished runs as interrupted", len(manager.interrupted))
        try:
            yield
        finally:
            manager.stop()

    app = FastAPI(title="Autograd Lens", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.runs = manager
    app.state.templates = Jinja2Templates(directory=str(settings.templates_dir))
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_body_bytes,
        per_path={"/api/traces": settings.max_trace_bytes},
    )
    app.add_middleware(ContentSecurityPolicy)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _internal_error)
    app.include_router(api.router)
    app.include_router(traces.router)
    app.include_router(stream.router)
    app.include_router(derived.router)
    app.include_router(compare.router)
    app.include_router(compare.page_router)
    app.include_router(diff.router)
    app.include_router(pitfalls.router)
    app.include_router(shared.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=settings.static_dir, check_dir=False), name="static")
    return app


# --- errors: always JSON with a "detail" a person can read ---------------------------------------


def _where(loc: Any) -> str:
    return ".".join(str(part) for part in loc) if loc else "request"


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # Without "input" and "ctx": the input can be a whole uploaded scenario, echoed back.
    errors = [
        {k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in jsonable_encoder(exc.errors())
    ]
    summary = "; ".join(f"{_where(e.get('loc'))}: {e.get('msg')}" for e in errors) or "invalid request"
    return JSONResponse({"detail": summary, "errors": errors}, status_code=422)


async def _internal_error(_: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error", exc_info=exc)
    return JSONResponse({"detail": f"internal server error ({type(exc).__name__})"}, status_code=500)


class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` (``per_path``: another limit for a path) with 413
    before they are read into memory: by ``Content-Length`` at once, or while reading a body sent
    without one (chunked)."""

    def __init__(self, app: ASGIApp, max_bytes: int, per_path: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.per_path = per_path or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = self.per_path.get(scope["path"], self.max_bytes)
        length = Headers(scope=scope).get("content-length")
        if length is not None:
            if not length.isdigit():
                await _reply(scope, receive, send, 400, "the Content-Length header is not a number")
                return
            if int(length) > limit:
                await _reply(scope, receive, send, 413, _too_large(limit))
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # nobody is left to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _reply(scope, receive, send, 413, _too_large(limit))
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _too_large(limit: int) -> str:
    return f"the request body is larger than {limit} bytes"


async def _reply(scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
    await JSONResponse({"detail": detail}, status_code=status)(scope, receive, send)


# --- the Content-Security-Policy of every page --------------------------------------------------

# Note [Content-Security-Policy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Every string a user controls (scenario text, file names, printed output, error messages, the
# names and labels inside an uploaded trace) reaches the pages as data and is rendered as text.
# The policy is the second line of defence, should a view ever put one into markup: scripts only
# from this server's files, never inline, never an event-handler attribute, never eval (the page
# configuration is a ``<script type="application/json">`` data block, which is not executed and
# needs no permission). ``'wasm-unsafe-eval'`` lets the Graphviz WebAssembly module compile; it
# allows no JavaScript eval. Styles may be inline (the graph's SVG and the views set them); a
# style runs no code. A route's own directives win (the embed page's ``frame-ancestors *``), the
# rest are added. A download (``Content-Disposition: attachment``, the one-file export) gets no
# policy: it is opened from disk, where its inlined scripts must run and headers do not follow.
CSP_DIRECTIVES: dict[str, str] = {
    "default-src": "'self'",
    "script-src": "'self' 'wasm-unsafe-eval'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data: blob:",
    "font-src": "'self' data:",
    "connect-src": "'self'",
    "worker-src": "'self' blob:",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'self'",
}


def merged_policy(route_policy: str | None) -> str:
    """``CSP_DIRECTIVES`` with the directives a route set itself in their place."""
    directives = dict(CSP_DIRECTIVES)
    for part in (route_policy or "").split(";"):
        name, _, value = part.strip().partition(" ")
        if name:
            directives[name.lower()] = value.strip()
    return "; ".join(f"{name} {value}".strip() for name, value in directives.items())


class ContentSecurityPolicy:
    """Send Note [Content-Security-Policy]'s policy with every response but downloads."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if not headers.get("content-disposition", "").startswith("attachment"):
                    headers["Content-Security-Policy"] = merged_policy(headers.get("content-security-policy"))
            await send(message)

        await self.app(scope, receive, send_with_policy)


# --- serving -------------------------------------------------------------------------------------


def serve(host: str | None = None, port: int | None = None, settings: Settings | None = None) -> None:
    """Serve the app with uvicorn (blocks). ``host``/``port`` override the settings'."""
    import uvicorn

    settings = settings or Settings.from_env()
    uvicorn.run(
        create_app(settings),
        host=host or settings.host,
        port=port or settings.port,
        # One process: runs in progress live in it (Note [One in-process run at a time] in runs.py),
        # and on startup it marks the database's unfinished runs as interrupted.
        workers=1,
        # An open event stream of a run that never finishes would hold a shutdown for ever.
        timeout_graceful_shutdown=3,
        access_log=settings.access_log,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m app", description="Serve the Autograd Lens web app.")
    parser.add_argument("--host", help="default: $AUTOGRAD_LENS_HOST or 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: $AUTOGRAD_LENS_PORT or 8000")
    args = parser.parse_args(argv)
    serve(args.host, args.port)


def __getattr__(name: str) -> Any:
    # ``uvicorn app.main:app`` reads this attribute: the app is built (from the environment) on
    # that first access, not when the module is imported.
    if name == "app":
        instance = create_app()
        globals()["app"] = instance
        return instance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
