"""``app/runner.py``: trusted runs, errors with their scenario line, output and warnings in the trace,
the event cap, progress, and the scenario catalogue."""

from __future__ import annotations

import gc
from dataclasses import asdict
from pathlib import Path

import pytest

from app.runner import (
    PROJECT_ROOT,
    SCENARIOS_DIR,
    RunError,
    RunResult,
    display_name,
    list_scenarios,
    resolve_scenario,
    run_scenario,
)
from app.sandbox import Limits

HEADER = "import engine as torch\nfrom engine.utils.checkpoint import checkpoint\n"


def test_a_bundled_file_runs_with_a_portable_name() -> None:
    result = run_scenario(SCENARIOS_DIR / "single_checkpoint.py", trusted=True)
    assert result.ok, result.error
    assert result.filename == "scenarios/single_checkpoint.py"
    assert result.trace is not None
    assert list(result.trace["sources"]) == ["scenarios/single_checkpoint.py"]
    files = {e["src"]["file"] for e in result.trace["events"] if e["src"]}
    assert files == {"scenarios/single_checkpoint.py"}
    assert result.stdout.startswith("x.grad: tensor(")


def test_a_path_given_as_a_string_is_read_as_a_file() -> None:
    by_str = run_scenario(str(SCENARIOS_DIR / "single_checkpoint.py"), trusted=True)
    assert by_str.filename == "scenarios/single_checkpoint.py"
    assert by_str.trace is not None and len(by_str.trace["events"]) > 50


def test_files_outside_the_project_keep_their_absolute_name(tmp_path: Path) -> None:
    path = tmp_path / "mine.py"
    path.write_text(HEADER + "x = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\n")
    result = run_scenario(path, trusted=True)
    assert result.ok
    assert result.filename == str(path.resolve()) == display_name(path)
    assert display_name(PROJECT_ROOT / "scenarios" / "x.py") == "scenarios/x.py"


def test_an_error_reports_type_message_and_scenario_line() -> None:
    text = HEADER + "x = torch.ones(2, 3)\ny = torch.ones(4, 5)\nz = x @ y\nprint('unreached')\n"
    result = run_scenario(text, trusted=True)
    assert not result.ok
    assert result.error is not None
    assert (result.error.type, result.error.file, result.error.line) == ("RuntimeError", "<scenario>", 5)
    assert "cannot be multiplied" in result.error.message or "shapes" in result.error.message
    assert result.trace is not None
    last = result.trace["events"][-1]
    assert last["kind"] == "error" and last["src"] == {"file": "<scenario>", "line": 5}
    assert result.stdout == ""


def test_an_error_inside_a_function_points_at_the_innermost_scenario_line() -> None:
    text = "def f(n):\n    if n == 0:\n        raise ValueError('bottom')\n    return f(n - 1)\n\nf(3)\n"
    result = run_scenario(text, trusted=True)
    assert result.error == RunError("ValueError", "bottom", "<scenario>", 3, None)
    assert str(result.error) == "<scenario>:3: ValueError: bottom"


def test_a_syntax_error_has_its_line_and_no_trace() -> None:
    result = run_scenario("x = 1\ny = = 2\n", trusted=True)
    assert result.error is not None
    assert (result.error.type, result.error.line) == ("SyntaxError", 2)
    assert result.trace is None


@pytest.mark.parametrize("text", ["x = 1\x00\n", "\udcff = 1\n"], ids=["nul", "surrogate"])
def test_unparsable_text_is_a_syntax_error_not_an_exception(text: str) -> None:
    result = run_scenario(text, trusted=True)
    assert result.error is not None and result.error.type == "SyntaxError"


def test_a_long_one_line_text_is_not_taken_for_a_path() -> None:
    result = run_scenario("x = 1;" * 200, trusted=True)  # would be ENAMETOOLONG as a path
    assert result.ok, result.error


def test_a_file_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.py"
    path.write_bytes(b"x = '\xe9'\n")
    result = run_scenario(path, trusted=True)
    assert result.error is not None and result.error.type == "UnicodeDecodeError"


def test_prints_become_marks_at_their_line() -> None:
    text = HEADER + "x = torch.ones(2)\nprint('hello', 1, sep='-')\nprint('a', end='')\nprint('b')\n"
    result = run_scenario(text, trusted=True)
    assert result.stdout == "hello-1\nab\n"
    assert result.trace is not None
    marks = [e for e in result.trace["events"] if e["kind"] == "mark"]
    assert [(m["label"], m["stream"], m["src"]["line"]) for m in marks] == [
        ("hello-1", "stdout", 4),
        ("a", "stdout", 5),
        ("b", "stdout", 6),
    ]


def test_warnings_are_shown_not_raised_whatever_the_host_filters() -> None:
    # pytest turns warnings into errors here (pyproject's filterwarnings); a scenario must not care.
    text = HEADER + "x = torch.ones(2, requires_grad=True)\ny = checkpoint(lambda t: t.sin(), x)\n"
    result = run_scenario(text, trusted=True)
    assert result.ok, result.error
    assert result.stdout.startswith("UserWarning: torch.utils.checkpoint: the use_reentrant parameter")
    assert result.trace is not None
    marks = [e for e in result.trace["events"] if e["kind"] == "mark"]
    assert len(marks) == 1 and marks[0]["stream"] == "stderr" and marks[0]["src"]["line"] == 4


def test_the_event_cap_stops_recording_with_a_clear_error() -> None:
    text = HEADER + "x = torch.ones(2, requires_grad=True)\nfor i in range(10000):\n    x = x * 1.0\n"
    result = run_scenario(text, trusted=True, limits=Limits(max_events=500))
    assert result.error is not None
    assert (result.error.type, result.error.limit, result.error.line) == ("LimitExceeded", "max_events", 5)
    assert "500 events" in result.error.message
    assert result.trace is not None
    assert len(result.trace["events"]) == 500
    assert result.trace["meta"]["truncated"] is True


def test_progress_ends_with_the_final_event_count() -> None:
    seen: list[int] = []
    result = run_scenario(SCENARIOS_DIR / "chain_of_blocks.py", trusted=True, on_progress=seen.append)
    assert result.trace is not None
    assert seen and seen[-1] == len(result.trace["events"])


def test_the_garbage_collector_is_restored() -> None:
    assert gc.isenabled()
    run_scenario("x = 1\n", trusted=True)
    assert gc.isenabled()
    run_scenario("raise KeyError('k')\n", trusted=True)
    assert gc.isenabled()


def test_traces_are_deterministic_within_a_process() -> None:
    from tests.scenarios._golden import normalize_trace

    a = run_scenario(SCENARIOS_DIR / "nested_checkpoint.py", trusted=True)
    b = run_scenario(SCENARIOS_DIR / "nested_checkpoint.py", trusted=True)
    assert a.trace is not None and b.trace is not None
    assert normalize_trace(a.trace) == normalize_trace(b.trace)


def test_run_result_round_trips_through_a_dict() -> None:
    result = RunResult(False, {"events": []}, RunError("E", "m", "f", 3, "cpu_seconds"), "out", "f", {"k": 1})
    assert RunResult.from_dict(result.to_dict()) == result


def test_scenario_catalogue() -> None:
    infos = list_scenarios()
    ids = [s.id for s in infos]
    assert ids == sorted(ids) and "single_checkpoint" in ids
    single = next(s for s in infos if s.id == "single_checkpoint")
    assert single.title == "A single checkpoint"
    assert "early_stop" in single.description


def test_resolve_scenario_by_id_or_path(tmp_path: Path) -> None:
    assert resolve_scenario("nested_checkpoint") == SCENARIOS_DIR / "nested_checkpoint.py"
    assert resolve_scenario("nested_checkpoint.py") == SCENARIOS_DIR / "nested_checkpoint.py"
    mine = tmp_path / "nested_checkpoint.py"
    mine.write_text("x = 1\n")
    assert resolve_scenario(str(mine)) == mine.resolve()
    with pytest.raises(FileNotFoundError, match="single_checkpoint"):
        resolve_scenario("no_such_scenario")


def test_ast_work_is_serialised_and_retried_after_a_collision() -> None:
    # Note [Building ASTs in threads]: CPython 3.11's spurious SystemError is retried; any other
    # error is not, and a build always runs holding the lock.
    from app import runner

    calls: list[bool] = []

    def flaky() -> str:
        calls.append(runner._AST_LOCK.locked())
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=33, after=30)")
        return "parsed"

    assert runner.with_ast(flaky) == "parsed"
    assert calls == [True, True]

    def broken() -> None:
        calls.append(runner._AST_LOCK.locked())
        raise SystemError("something else")

    calls.clear()
    with pytest.raises(SystemError, match="something else"):
        runner.with_ast(broken)
    assert calls == [True]

    def always() -> None:
        calls.append(True)
        raise SystemError("AST constructor recursion depth mismatch (before=1, after=2)")

    calls.clear()
    with pytest.raises(SystemError, match="mismatch"):
        runner.with_ast(always)
    assert len(calls) == runner._AST_TRIES


def test_scenario_info_is_read_again_when_the_file_changes(tmp_path: Path) -> None:
    from app.runner import scenario_info

    path = tmp_path / "s.py"
    path.write_text('"""First title"""\n')
    assert scenario_info(path).title == "First title"
    path.write_text('"""Second title, longer"""\n')
    assert scenario_info(path).title == "Second title, longer"


@pytest.mark.parametrize(
    "result",
    [
        RunResult(True, {"events": [{"seq": 0, "kind": "mark"}]}, None, "out\n", "s.py", {"grads": {}}),
        RunResult(False, None, RunError("ValueError", "bad", "s.py", 3, None)),
    ],
)
def test_to_dict_is_asdict_without_the_deep_copy(result: RunResult) -> None:
    # The worker sends this as its answer: the same document as dataclasses.asdict, fields in
    # order, but the trace is not copied (a long run's events would be, one by one).
    doc = result.to_dict()
    assert doc == asdict(result) and list(doc) == list(asdict(result))
    assert doc["trace"] is result.trace
    assert RunResult.from_dict(doc) == result
