"""Running the torch backend (``python -m engine.trace.torch_backend``) in another interpreter, and
reading its traces for what torch 2.8 and 2.13 do differently.

The interpreter is ``torch213_python`` (tests/conftest.py): torch 2.13.0 and numpy, no project
install, so ``engine`` comes from ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# A scenario takes a second or two; the margin is for a loaded machine (two xdist workers, each
# importing torch).
TIMEOUT_SECONDS = 300
# Every dummy 2.8 saves with a checkpoint's inputs is ``torch.empty((0,), requires_grad=True)``.
DUMMY_SHAPE = [0]


@dataclass
class BackendRun:
    returncode: int
    stderr: str
    doc: dict[str, Any] | None  # None when no trace was written


def backend_env() -> dict[str, str]:
    """This environment, with ``PYTHONPATH`` the project alone: whatever it held for .venv must not
    reach an interpreter with another torch."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    return env


def run_python(python: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env=backend_env(),
        cwd=PROJECT_ROOT,
    )


def run_backend(python: Path, scenario: Path, out: Path) -> BackendRun:
    """``python -m engine.trace.torch_backend scenario -o out``, and the trace it wrote."""
    done = run_python(python, ["-m", "engine.trace.torch_backend", str(scenario), "-o", str(out)])
    doc = json.loads(out.read_text()) if out.is_file() and out.stat().st_size else None
    return BackendRun(done.returncode, done.stderr, doc)


@dataclass
class FrameSaves:
    """One frame's saved-tensor traffic: ``(kind, shape)`` in event order for its packs, rpacks and
    unpacks (an unpack has the shape its holder was packed with), and its early stops."""

    saves: list[tuple[str, list[int]]]
    early_stops: list[tuple[int, int]]  # (count, total)

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.saves if k == kind)


def frame_saves(doc: dict[str, Any], as_213: bool = False) -> dict[int, FrameSaves]:
    """Per frame (by id, which counts frames in creation order), its saved-tensor traffic.

    ``as_213``, for a 2.8 trace (the engine's): what 2.13 does instead, where 2.8 saves an empty
    dummy with every nested checkpoint's inputs (reference §1.1-1.2, §2.1). The dummies' packs,
    rpacks and unpacks go, and early stop waits for that many fewer holders. The unpack of a
    dummy is the one that starts the parent's recomputation in 2.8 (the input saver unpacks the
    dummy first); in 2.13 the first input's unpack does, so that unpack takes the dummy's place.
    """
    frames: dict[int, FrameSaves] = defaultdict(lambda: FrameSaves([], []))
    holder_shape: dict[int, list[int]] = {}
    dummies: Counter[int] = Counter()  # per frame, the holders of dummies
    # (frame, node) of the input saver whose dummy was just unpacked -> where in the frame's
    # saves its first input's unpack goes
    took_place: dict[tuple[int, int], int] = {}
    for e in doc["events"]:
        kind = e["kind"]
        if kind == "frame_new":
            frames[e["frame"]]  # a frame that saves nothing still counts
            continue
        if kind not in ("pack", "rpack", "unpack", "early_stop") or e.get("frame") is None:
            continue
        frame = frames[e["frame"]]
        if kind == "early_stop":
            d = dummies[e["frame"]] if as_213 else 0
            frame.early_stops.append((e["count"] - d, e["total"] - d))
            continue
        if kind == "pack":
            holder_shape[e["holder"]] = e["shape"]
        shape = e["shape"] if kind != "unpack" else holder_shape[e["holder"]]
        if as_213 and shape == DUMMY_SHAPE:
            if kind == "pack":
                dummies[e["frame"]] += 1
            elif kind == "unpack":
                took_place[e["frame"], e["node"]] = len(frame.saves)
            continue
        at = took_place.pop((e["frame"], e.get("node")), None) if kind == "unpack" else None
        frame.saves.insert(len(frame.saves) if at is None else at, (kind, shape))
    return dict(frames)


def printed(run: BackendRun) -> list[str]:
    """The lines the scenario printed: the trace's stdout marks (the entry point records each
    ``print`` as one, as ``autograd-lens trace`` does; it also echoes them to stderr)."""
    assert run.doc is not None, run.stderr
    return [line for label in stdout_lines(run.doc) for line in label.splitlines()]


def stdout_lines(doc: dict[str, Any]) -> list[str]:
    """What the scenario printed, one ``print`` call per item (the trace's stdout marks)."""
    return [e["label"] for e in doc["events"] if e["kind"] == "mark" and e.get("stream") == "stdout"]
