"""``app/_gc.py``: pauses of the cyclic garbage collector from several threads (Note [Pausing the
collector])."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from app._gc import paused


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_off_inside_and_on_after() -> None:
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pause_ending_leaves_it_off_while_another_thread_is_paused() -> None:
    inside, leave = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with paused():
            inside.set()
            leave.wait()
            seen.append(gc.isenabled())

    t = threading.Thread(target=other)
    t.start()
    inside.wait()
    with paused():
        pass
    assert not gc.isenabled()  # the other thread's pause still holds
    leave.set()
    t.join()
    assert seen == [False] and gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with paused():
        pass
    assert not gc.isenabled()
