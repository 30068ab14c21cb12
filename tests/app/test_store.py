"""``app/store.py`` (SQLite: runs, event batches, resume queries, restarts) and ``EventWriter``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from app.runner import SCENARIOS_DIR, run_scenario
from app.runs import EventWriter
from app.store import INTERRUPTED, Store, dumps, dumps_batch, items_after
from engine.trace.delta import Change
from engine.trace.export import annotate, to_dot
from engine.trace.story import story_document
from tests.scenarios._golden import GOLDEN_DIR


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "sub" / "runs.sqlite3")
    s.open()
    return s


def items(first: int, n: int) -> list[dict[str, Any]]:
    return [
        {"event": {"seq": s, "kind": "mark"}, "changes": [], "caption": f"e{s}"}
        for s in range(first, first + n)
    ]


def new_run(store: Store, run_id: str = "run1") -> None:
    store.create_run(run_id, scenario=None, title="T", filename="t.py", source="x = 1\n", trusted=False)


def test_open_creates_the_file_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "runs.sqlite3"
    store = Store(path)
    assert not path.parent.exists()  # nothing on disk before open()
    store.open()
    store.open()  # idempotent
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables >= {"runs", "batches"}


def test_a_run_round_trips(store: Store) -> None:
    new_run(store)
    run = store.get_run("run1")
    assert run is not None
    assert (run.status, run.title, run.filename, run.source, run.trusted) == (
        "queued",
        "T",
        "t.py",
        "x = 1\n",
        False,
    )
    assert (run.n_events, run.progress, run.error, run.started_at, run.finished) == (0, 0, None, None, False)
    assert store.get_run("nope") is None
    with pytest.raises(sqlite3.IntegrityError):
        new_run(store)  # ids are unique
    store.set_running("run1")
    store.set_progress("run1", 40)
    store.set_progress("run1", 10)  # progress never goes back
    run = store.get_run("run1")
    assert run is not None and (run.status, run.progress) == ("running", 40) and run.started_at


def test_batches_are_contiguous(store: Store) -> None:
    new_run(store)
    assert store.append_batch("run1", 0, items(0, 5)) == 5
    with pytest.raises(ValueError, match="must start at seq 5"):
        store.append_batch("run1", 6, items(6, 2))  # a hole
    with pytest.raises(ValueError, match="must start at seq 5"):
        store.append_batch("run1", 3, items(3, 2))  # an overlap
    with pytest.raises(KeyError):
        store.append_batch("nope", 0, items(0, 1))
    assert store.append_batch("run1", 5, items(5, 5)) == 10
    run = store.get_run("run1")
    assert run is not None and run.n_events == 10


def test_resume_queries(store: Store) -> None:
    new_run(store)
    for first in range(0, 30, 10):
        store.append_batch("run1", first, items(first, 10))
    assert [(b.first_seq, b.last_seq) for b in store.batches_after("run1", -1)] == [
        (0, 9),
        (10, 19),
        (20, 29),
    ]
    assert [b.first_seq for b in store.batches_after("run1", 9)] == [10, 20]
    assert [b.first_seq for b in store.batches_after("run1", -1, limit=1)] == [0]
    assert store.batches_after("run1", 29) == []
    inside = store.batches_after("run1", 14)
    assert inside[0].first_seq == 10
    data, n = items_after(inside[0], 14)
    assert n == 5 and [i["event"]["seq"] for i in json.loads(data)] == [15, 16, 17, 18, 19]
    assert items_after(inside[1], 14) == (inside[1].data, 10)  # untouched: sent as stored
    assert [i["event"]["seq"] for i in store.items("run1")] == list(range(30))


def test_finish_stores_the_outcome(store: Store) -> None:
    new_run(store)
    store.append_batch("run1", 0, items(0, 3))
    error = {"type": "ValueError", "message": "boom", "file": "t.py", "line": 4, "limit": None}
    doc = json.dumps({"events": [1, "é"]}, ensure_ascii=False)
    store.finish(
        "run1",
        status="error",
        error=error,
        stdout="hi\n",
        meta={"n_events": 3},
        sources={"t.py": "x"},
        dot="g",
        trace_json=doc,
    )
    run = store.get_run("run1")
    assert run is not None
    assert (run.status, run.error, run.stdout, run.progress, run.finished) == (
        "error",
        error,
        "hi\n",
        3,
        True,
    )
    assert store.trace_parts("run1") == ({"n_events": 3}, {"t.py": "x"})
    assert store.dot("run1") == "g"
    assert store.trace_json("run1") == doc
    with pytest.raises(ValueError, match="finishes as one of"):
        store.finish("run1", status="running", error=None)


def test_a_restart_interrupts_only_unfinished_runs(store: Store) -> None:
    for run_id in ("q", "r", "d"):
        new_run(store, run_id)
    store.set_running("r")
    store.append_batch("r", 0, items(0, 2))
    store.finish("d", status="done", error=None)
    reopened = Store(store.path)  # what a new server process does
    reopened.open()
    assert sorted(reopened.mark_interrupted()) == ["q", "r"]
    for run_id in ("q", "r"):
        run = reopened.get_run(run_id)
        assert run is not None and run.status == "error"
        assert run.error is not None and run.error["message"] == INTERRUPTED
    done = reopened.get_run("d")
    assert done is not None and (done.status, done.error) == ("done", None)
    assert [i["caption"] for i in reopened.items("r")] == ["e0", "e1"]
    assert reopened.mark_interrupted() == []


def test_dumps_is_json_a_browser_parses() -> None:
    assert dumps({"a": [1.5, float("nan"), float("inf")]}) == '{"a":[1.5,null,null]}'
    text = dumps({"s": "\ud800 é"})  # a lone surrogate and a non-ASCII character
    assert text.isascii() and json.loads(text) == {"s": "\ud800 é"}


@pytest.mark.parametrize(
    "value",
    [
        [{"event": {"seq": 0, "t": 1e-05, "big": 1e16, "x": float("nan"), "y": -float("inf")}}],
        [{"changes": [Change("set", ("now",), {"seq": 0}, {"seq": 1})], "caption": "é ✓"}],
        [{"s": "\ud800"}],  # a lone surrogate: orjson refuses it, json escapes it
        [{"n": 2**70}],  # beyond 64 bits
        [{"k": {1: "int key"}}],
    ],
)
def test_dumps_batch_writes_the_document_dumps_writes(value: Any) -> None:
    # Note [Encoding batches]: the same JSON once parsed, and never an error where dumps has none.
    data = dumps_batch(value)
    assert json.loads(data.decode("utf-8")) == json.loads(dumps(value))


def test_a_batch_with_non_ascii_text_reads_back(store: Store) -> None:
    new_run(store)
    batch = [{"event": {"seq": 0, "kind": "mark", "label": "naïve ✓"}, "changes": [], "caption": "é"}]
    store.append_batch("run1", 0, batch)
    assert list(store.items("run1")) == batch


def test_the_event_writer_stores_annotated_batches(store: Store) -> None:
    result = run_scenario(SCENARIOS_DIR / "single_checkpoint.py", trusted=True)
    assert result.trace is not None
    events = result.trace["events"]
    new_run(store)
    appended: list[int] = []
    writer = EventWriter(store, "run1", 64, lambda: appended.append(1))
    writer.add(events[:100])  # events may come in pieces, as from an incremental runner
    writer.add(events[100:])
    writer.flush()
    assert len(appended) == -(-len(events) // 64)
    assert [(b.last_seq - b.first_seq + 1) for b in store.batches_after("run1", -1, limit=1000)][:-1] == [
        64
    ] * (len(appended) - 1)
    stored = list(store.items("run1"))
    assert [i["event"] for i in stored] == json.loads(json.dumps(events))
    derived = [{"changes": i["changes"], "caption": i["caption"], "changed": i["changed"]} for i in stored]
    assert derived == json.loads(json.dumps(annotate(events)))


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN_DIR.glob("*.json")))
def test_the_event_writer_draws_the_graph_to_dot_draws(store: Store, name: str) -> None:
    # The server draws a run's graph from what its writer collected while annotating, with no
    # second replay of the reducer: the same DOT as to_dot of the events, also after a resume.
    events = json.loads((GOLDEN_DIR / f"{name}.json").read_text())["trace"]["events"]
    new_run(store)
    writer = EventWriter(store, "run1", 16)
    half = len(events) // 2
    writer.add(events[:half])
    writer.flush()
    writer.add(events[half : half + 3])  # not stored yet: a resume replays up to the last batch
    writer.resume(events)
    writer.add(events[writer.count :])
    writer.flush()
    trace = json.loads((GOLDEN_DIR / f"{name}.json").read_text())["trace"]
    assert writer.graph_dot(trace) == to_dot(trace).source  # meta.modules folds module instances
    # Note [Documents ready at done]: the story, as GET story would derive it.
    story = writer.story_json(events)
    assert story == json.dumps(story_document(events), separators=(",", ":"))


def test_a_story_or_graph_that_fails_to_build_does_not_stop_the_events(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = json.loads((GOLDEN_DIR / "nested_checkpoint.json").read_text())["trace"]["events"]
    new_run(store)
    writer = EventWriter(store, "run1", 16)

    def broken(*_: Any) -> None:
        raise RuntimeError("a story bug")

    assert writer.story is not None and writer.dot is not None
    monkeypatch.setattr(writer.story, "see", broken)
    monkeypatch.setattr(writer.dot, "see", broken)
    writer.add(events)
    writer.flush()
    assert writer.story is None and writer.story_json(events) is None  # derived when asked for
    assert writer.dot is None and writer.graph_dot({"events": events}) is None  # no graph, as before
    assert [i["event"] for i in store.items("run1")] == events


def test_events_come_from_the_stored_trace_once_finished_else_from_the_batches(store: Store) -> None:
    new_run(store)
    store.append_batch("run1", 0, items(0, 3))
    assert store.events("run1") == [{"seq": s, "kind": "mark"} for s in range(3)]
    # Once finished, the stored document is read: the batches' changes are not parsed at all.
    trace = {"schema": "x", "meta": {}, "events": [{"seq": 0, "kind": "op"}]}
    store.finish("run1", status="done", error=None, trace_json=json.dumps(trace))
    assert store.events("run1") == trace["events"]


def test_documents_are_stored_with_a_finished_run_and_read_back(store: Store) -> None:
    new_run(store)
    assert store.document_json("run1", "story") is None  # not finished: derived when asked for
    store.finish("run1", status="done", error=None, documents={"memory": '{"m":"é"}'})
    assert store.document_json("run1", "memory") == '{"m":"é"}'
    assert store.document_json("run1", "story") is None  # a document that failed to build
    with pytest.raises(ValueError, match="no stored document 'compare'"):
        store.document_json("run1", "compare")


def test_prune_keeps_the_newest_finished_runs_and_every_unfinished_one(store: Store) -> None:
    for i in range(5):
        store.create_run(f"run{i}", scenario=None, title="t", filename="t.py", source="", trusted=False)
        store.append_batch(f"run{i}", 0, items(0, 3))
    for i in (0, 2, 3, 4):  # run1 is still queued: never deleted, however old
        store.finish(f"run{i}", status="done", error=None)
    assert store.prune(2) == ["run2", "run0"]
    assert store.run_ids() == ["run1", "run3", "run4"]
    with sqlite3.connect(store.path) as conn:  # their events went with them
        assert {r[0] for r in conn.execute("SELECT DISTINCT run_id FROM batches")} == {"run1", "run3", "run4"}
    assert store.prune(2) == []
