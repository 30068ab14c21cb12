"""Running the torch backend (``python -m engine.trace.torch_backend``) in another interpreter, and
reading its traces for what torch 2.8 and 2.13 do differently.

The interpreter is ``torch213_python`` (tests/conftest.py): torch 2.13.0 and numpy, no project
install, so ``engine`` comes from ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import defaultdict
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

    def count(self, kind: str, dummies: bool | None = None) -> int:
        """How many ``kind`` events; only the dummies' (True) or all but them (False)."""
        return sum(
            1
            for k, shape in self.saves
            if k == kind and (dummies is None or (shape == DUMMY_SHAPE) == dummies)
        )


def frame_saves(doc: dict[str, Any]) -> dict[int, FrameSaves]:
    """Per frame (by id, which counts frames in creation order), its saved-tensor traffic."""
    frames: dict[int, FrameSaves] = defaultdict(lambda: FrameSaves([], []))
    holder_shape: dict[int, list[int]] = {}
    for e in doc["events"]:
        kind = e["kind"]
        if kind == "frame_new":
            frames[e["frame"]]  # a frame that saves nothing still counts
        elif kind in ("pack", "rpack"):
            if kind == "pack":
                holder_shape[e["holder"]] = e["shape"]
            frames[e["frame"]].saves.append((kind, e["shape"]))
        elif kind == "unpack" and e.get("frame") is not None:
            frames[e["frame"]].saves.append((kind, holder_shape[e["holder"]]))
        elif kind == "early_stop":
            frames[e["frame"]].early_stops.append((e["count"], e["total"]))
    return dict(frames)


def without_dummies(frames: dict[int, FrameSaves]) -> dict[int, FrameSaves]:
    """What 2.13 does where 2.8 saves a dummy with every nested checkpoint's inputs (reference
    §1.1-1.2): the same traffic without the dummies, and early stops that many holders sooner."""
    out = {}
    for frame, fs in frames.items():
        dummies = fs.count("pack", dummies=True)
        out[frame] = FrameSaves(
            [(k, shape) for k, shape in fs.saves if shape != DUMMY_SHAPE],
            [(count - dummies, total - dummies) for count, total in fs.early_stops],
        )
    return out


def stdout_lines(doc: dict[str, Any]) -> list[str]:
    """What the scenario printed, one ``print`` call per item (the trace's stdout marks)."""
    return [e["label"] for e in doc["events"] if e["kind"] == "mark" and e.get("stream") == "stdout"]
