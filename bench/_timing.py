"""What the benches share: timing a call several times over."""

from __future__ import annotations

import time
from collections.abc import Callable


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
