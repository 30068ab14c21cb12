"""A real server process for the load and fault tests (and ``bench/bench_class.py``): ``python -m
app --port PORT`` on a data directory of its own, as a deployment runs it, so a test can measure
its memory, kill it with ``SIGKILL`` and find its sandbox workers; and the asynchronous clients
that read its event streams.

Nothing here sleeps to wait for something: ``poll`` asks again until a condition holds or a
deadline passes (and then fails, saying what it waited for)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests._sse import Message, SseReader

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def poll(what: str, check: Callable[[], T | None], timeout: float = 60.0, every: float = 0.05) -> T:
    """``check()`` again and again until it returns something other than None or False."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {what}")
        time.sleep(every)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def rss_mb(pid: int) -> float:
    """The resident memory of a process (``VmRSS``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``: a server's sandbox workers."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def workers(pid: int) -> list[int]:
    """The sandbox workers (``python -m app._worker``) of the server process ``pid``."""
    found = []
    for child in children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"app._worker" in cmdline:
            found.append(child)
    return found


def is_zombie_or_gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@dataclass
class Server:
    """``python -m app`` on ``port`` with ``data_dir``; ``env`` adds ``AUTOGRAD_LENS_*`` settings."""

    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> Server:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "AUTOGRAD_LENS_DATA_DIR": str(self.data_dir), **self.env}
        log = (self.data_dir / f"server-{self.port}.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        poll(f"the server on port {self.port} to answer", self._ready, timeout=60, every=0.1)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the server exited with status {self.proc.returncode}: {self.log()}")
        try:
            with urllib.request.urlopen(self.url + "/api/scenarios", timeout=5) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def log(self) -> str:
        path = self.data_dir / f"server-{self.port}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def kill9(self) -> list[int]:
        """``SIGKILL`` the server, as a crash would; returns the sandbox workers it had then (each
        in its own session: the kernel ends them, Note [A worker dies with its server])."""
        assert self.proc is not None
        left = workers(self.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        return left

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        stray = workers(self.pid)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in stray:  # workers this test's server started and did not reap
            kill_quietly(pid)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the API, blocking ---

    def api(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def run(self, run_id: str) -> dict[str, Any]:
        status, run = self.api(f"/api/runs/{run_id}")
        assert status == 200, run
        return dict(run)

    def text(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return str(response.read().decode())

    def start_run(self, **body: Any) -> str:
        status, created = self.api("/api/runs", body)
        assert status in (200, 201), created
        return str(created["id"])

    def finished(self, run_id: str, timeout: float = 120.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            run = self.run(run_id)
            return run if run["status"] in ("done", "error") else None

        return poll(f"run {run_id} to finish", check, timeout=timeout, every=0.1)


def kill_quietly(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# --- asynchronous stream clients -----------------------------------------------------------------


async def messages(
    client: httpx.AsyncClient, run_id: str, *, after: int | None = None, limit: int = 0
) -> list[Message]:
    """The SSE messages of ``/events`` to its ``done`` (resuming after seq ``after`` with
    ``Last-Event-ID``); ``limit=N``: the first N only, then the client drops the connection
    mid-stream, as a closed tab or a lost network does."""
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    out: list[Message] = []
    reader = SseReader()
    async with client.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if (message := reader.feed(line)) is not None:
                out.append(message)
                if message.event == "done" or len(out) == limit:
                    break  # leaving the block closes the connection
    return out


def async_client(url: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(base_url=url, limits=limits, timeout=httpx.Timeout(120.0))


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# --- the class: many viewers opening the bundled scenarios ---------------------------------------


@dataclass
class Viewer:
    scenario: str
    status: int = 0
    run_id: str = ""
    reused: bool = False
    first: str | None = None  # the first message's event: "events" (or "done": a run without events)
    seconds: float = 0.0  # from the POST to the first message


# A viewer's two requests are written by hand on asyncio's streams: one process plays every viewer
# on the server's own machine, and an HTTP client library's own cost per request (a few ms in
# httpx) would be most of what is measured.


async def _request(
    host: str, port: int, method: str, path: str, body: bytes = b""
) -> tuple[int, dict[str, str], asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    writer.write(head.encode() + b"\r\n" + body)
    status_line = await reader.readline()
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, reader, writer


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):  # the server may have closed first
        await writer.wait_closed()


async def post_run(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """``POST /api/runs``: its status and JSON."""
    host, port = url.removeprefix("http://").split(":")
    status, headers, reader, writer = await _request(
        host, int(port), "POST", "/api/runs", json.dumps(body).encode()
    )
    try:
        data = await reader.readexactly(int(headers["content-length"]))
    finally:
        await _close(writer)
    return status, json.loads(data)


async def first_message(url: str, run_id: str) -> str | None:
    """The ``event:`` of the first message of a run's stream, read up to the blank line that ends
    it (the chunked body decoded) and not parsed further."""
    host, port = url.removeprefix("http://").split(":")
    status, headers, reader, writer = await _request(host, int(port), "GET", f"/api/runs/{run_id}/events")
    try:
        assert status == 200 and headers.get("transfer-encoding") == "chunked", (status, headers)
        body = b""
        while b"\n\n" not in body and b"\r\n\r\n" not in body:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                break
            body += (await reader.readexactly(size + 2))[:-2]
    finally:
        await _close(writer)
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith("event:"):
            return line.partition(":")[2].strip()
    return None


async def open_scenario(url: str, viewer: Viewer) -> Viewer:
    """What a viewer's click on a card does: ``POST /api/runs``, then the run's stream up to its
    first message."""
    t0 = time.perf_counter()
    viewer.status, created = await post_run(url, {"scenario": viewer.scenario})
    if viewer.status in (200, 201):
        viewer.run_id, viewer.reused = created["id"], created["reused"]
        viewer.first = await first_message(url, viewer.run_id)
    viewer.seconds = time.perf_counter() - t0
    return viewer


def class_of(urls: list[str], scenarios: list[str], viewers: int) -> list[Viewer]:
    """``viewers`` viewers at once, spread over ``scenarios`` (and over the servers at ``urls``)."""

    async def main() -> list[Viewer]:
        crowd = [Viewer(scenarios[i % len(scenarios)]) for i in range(viewers)]
        return list(
            await asyncio.gather(*(open_scenario(urls[i % len(urls)], v) for i, v in enumerate(crowd)))
        )

    return asyncio.run(main())
