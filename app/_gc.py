"""Pausing Python's cyclic garbage collector, from any thread, for work that must not see it run.

Note [Pausing the collector]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Two kinds of work in the server turn the collector off while they run:

- A scenario's run (``app/runner.py``, ``execute``): every holder and tensor then dies by
  reference counting, at the same event in every run, which keeps traces deterministic.
- Work over a long run's events: annotating them as they arrive (``EventWriter``), and deriving
  its story and memory report (``app/routes/derived.py``). They make many long-lived objects
  (the parsed events, the reducer's state), and each full collection walks all of them: the
  collector took 60 % of the time of a 99k-event run's story (3.1 s with it, 1.2 s without).
  Nothing they build holds a reference cycle, so reference counting frees all of it.

The collector is one switch for the whole process, and several threads can want it off at
once, so ``paused()`` counts: the first pause turns it off, the last one to end turns it back
on, if it was on before the first. A block that re-enabled it on its own would end another
thread's pause in the middle of a run.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The cyclic garbage collector is off for the block (Note [Pausing the collector])."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
