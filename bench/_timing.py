"""What the benches share: timing a call several times over, and the engine with emission removed."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rounds(fn: Callable[[], object], repeat: int, number: int = 1) -> list[float]:
    """Seconds per call of ``fn`` in each of ``repeat`` rounds of ``number`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return times


def best(fn: Callable[[], object], repeat: int, number: int = 1) -> float:
    """Seconds per call of ``fn``: the least disturbed (the fastest) of ``repeat`` rounds."""
    return min(rounds(fn, repeat, number))


def no_emit_build(dest: Path) -> Path:
    """A copy of engine/ in ``dest`` with every ``emit.enabled`` check replaced by ``False`` (Python
    then compiles the checks away): the engine with emission removed. Returns ``dest``."""
    target = dest / "engine"
    shutil.copytree(ROOT / "engine", target, ignore=shutil.ignore_patterns("__pycache__"))
    pattern = re.compile(r"\bemit\.enabled\b")
    n = 0
    for path in target.rglob("*.py"):
        if path.parent.name == "trace":
            continue
        text = path.read_text()
        new, k = pattern.subn("False", text)
        if k:
            path.write_text(new)
            n += k
    if n == 0:
        raise SystemExit("no emission points found: nothing to compare")
    return dest
