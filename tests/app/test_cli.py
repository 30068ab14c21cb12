"""``autograd-lens`` (``app/cli.py``): trace, dot, diff, scenarios, serve, backends, exit codes and
progress."""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import app.cli
from app.cli import Progress, build_parser, main
from app.runner import PROJECT_ROOT, RunResult, list_scenarios, run_scenario


def test_scenarios_lists_every_id_with_its_title(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    infos = list_scenarios()
    assert len(lines) == len(infos)
    assert lines[0].split(None, 1) == [infos[0].id, infos[0].title]


def test_trace_writes_the_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.json"
    assert main(["trace", "single_checkpoint", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "autograd-lens/trace"
    assert doc["events"][0]["seq"] == 0
    err = capsys.readouterr().err
    assert "x.grad: tensor(" in err  # the scenario's output goes to stderr
    assert f"wrote {len(doc['events'])} events to {out}" in err


def test_trace_story_prints_chapters_and_captioned_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "nested_checkpoint", "--story", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== forward ==\n")
    assert "== backward g0 ==" in out and "== early stop after 4/4 ==" in out
    steps = re.findall(r"^\s+(\d+)\. \[#(\d+)", out, re.M)
    assert 40 < len(steps) < 80 and steps[0] == ("1", "41")
    assert main(["trace", "nested_checkpoint", "--story", "--format", "chrome", "-q"]) == 2
    assert "--story prints text" in capsys.readouterr().err


def test_trace_to_stdout_by_path(capsys: pytest.CaptureFixture[str]) -> None:
    path = PROJECT_ROOT / "scenarios" / "early_stop_on.py"
    assert main(["trace", str(path), "-q"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["sources"].keys() == {"scenarios/early_stop_on.py"}
    assert captured.err == ""  # -q: no scenario output


def test_trace_chrome_format(tmp_path: Path) -> None:
    out = tmp_path / "trace.chrome.json"
    assert main(["trace", "nested_checkpoint", "-o", str(out), "--format", "chrome", "-q"]) == 0
    doc = json.loads(out.read_text())
    assert doc["traceEvents"]
    assert {"ph", "name"} <= set(doc["traceEvents"][0])


def test_a_failing_scenario_exits_1_and_still_writes_its_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trace.json"
    assert main(["trace", "determinism_error", "-o", str(out)]) == 1
    assert json.loads(out.read_text())["events"][-1]["kind"] == "error"
    err = capsys.readouterr().err
    assert "the scenario failed: scenarios/determinism_error.py:28: CheckpointError" in err


def test_unknown_scenario_exits_2_and_names_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "no_such_thing"]) == 2
    err = capsys.readouterr().err
    assert "no_such_thing" in err and "single_checkpoint" in err


def test_dot_writes_dot_source(tmp_path: Path) -> None:
    out = tmp_path / "graph.dot"
    assert main(["dot", "single_checkpoint", "-o", str(out), "-q"]) == 0
    text = out.read_text()
    assert text.lstrip().startswith("digraph")
    assert "cluster" in text  # the checkpoint frame


@pytest.mark.usefixtures("graphviz_dot")
def test_dot_renders_svg(tmp_path: Path) -> None:
    out = tmp_path / "graph.svg"
    assert main(["dot", "nested_checkpoint", "-o", str(out), "-q"]) == 0
    assert "<svg" in out.read_text()


def test_dot_refuses_other_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dot", "single_checkpoint", "-o", str(tmp_path / "graph.png")]) == 2
    assert ".svg" in capsys.readouterr().err


def test_serve_starts_the_web_app_with_the_given_address(monkeypatch: pytest.MonkeyPatch) -> None:
    import app.main

    calls: list[tuple[str | None, int | None]] = []
    monkeypatch.setattr(app.main, "serve", lambda host, port: calls.append((host, port)))
    assert main(["serve", "--host", "127.0.0.2", "--port", "8123"]) == 0
    assert calls == [("127.0.0.2", 8123)]


def test_untrusted_runs_in_the_sandbox(tmp_path: Path) -> None:
    trusted, sandboxed = tmp_path / "t.json", tmp_path / "s.json"
    assert main(["trace", "early_stop_off", "-o", str(trusted), "-q"]) == 0
    assert main(["trace", "early_stop_off", "-o", str(sandboxed), "-q", "--untrusted"]) == 0
    kinds = [[e["kind"] for e in json.loads(p.read_text())["events"]] for p in (trusted, sandboxed)]
    assert kinds[0] == kinds[1]


def test_untrusted_limits_are_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "loop.py"
    script.write_text("while True:\n    pass\n")
    assert (
        main(["trace", str(script), "--untrusted", "--cpu-seconds", "1", "-o", str(tmp_path / "x.json")]) == 1
    )
    assert "CPU time limit of 1 s exceeded" in capsys.readouterr().err


def test_progress_shows_the_event_count_after_half_a_second() -> None:
    stream = io.StringIO()
    progress = Progress(stream, enabled=True)
    progress(10)
    assert stream.getvalue() == ""  # short runs stay quiet
    progress.start = time.monotonic() - 1
    progress(1234)
    assert stream.getvalue() == "\rrecording... 1234 events"
    progress.done()
    assert stream.getvalue().endswith("\r\033[K")
    quiet = io.StringIO()
    off = Progress(quiet, enabled=False)
    off.start -= 1
    off(5)
    off.done()
    assert quiet.getvalue() == ""


def test_module_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "scenarios"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "single_checkpoint" in done.stdout


# --- backends and diff ---------------------------------------------------------------------------


def test_torch_is_refused_for_untrusted_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "single_checkpoint", "--untrusted", "--backend", "torch"]) == 2
    assert "--backend torch runs trusted local code only" in capsys.readouterr().err


def test_torch_missing_is_a_clear_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    for argv in (["trace", "single_checkpoint", "--backend", "torch"], ["diff", "single_checkpoint"]):
        assert main(argv) == 2
        assert "--backend torch needs PyTorch: pip install torch==2.8.0" in capsys.readouterr().err


def test_the_help_says_torch_is_for_trusted_code() -> None:
    for command in ("trace", "dot", "diff"):
        assert "trusted local code only" in " ".join(cli_help(command).split()), command


def cli_help(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    help_text: str = sub.choices[command].format_help()
    return help_text


def test_trace_on_torch(tmp_path: Path, torch_oracle: ModuleType) -> None:
    out = tmp_path / "trace.json"
    assert main(["trace", "single_checkpoint", "--backend", "torch", "-o", str(out), "-q"]) == 0
    doc = json.loads(out.read_text())
    assert doc["meta"]["backend"].startswith("torch")
    assert [e["kind"] for e in doc["events"] if e["kind"] in ("pack", "early_stop")] == [
        "pack",
        "pack",
        "early_stop",
    ]


def test_diff_of_identical_traces_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], torch_oracle: ModuleType
) -> None:
    out = tmp_path / "diff.json"
    assert main(["diff", "single_checkpoint", "-o", str(out)]) == 0
    assert capsys.readouterr().out == "checkpoint events identical: 24 events; gradients equal (1 tensor)\n"
    doc = json.loads(out.read_text())
    assert doc["equal"] and doc["checkpoint_equal"] and doc["grads"]["equal"]
    assert (doc["a_label"], doc["b_label"], doc["scenario"]) == ("engine", "torch", "single_checkpoint")
    assert main(["diff", "single_checkpoint", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == doc["rows"]


def engine_twice(*, changed_shape: bool) -> Callable[..., RunResult]:
    """``run_scenario`` with the engine behind both backends, the second's second pack changed:
    the diff's verdicts without needing torch."""

    def fake(path: Path, *, backend: str = "engine", **kwargs: Any) -> RunResult:
        result = run_scenario(path, **kwargs)
        if backend == "torch" and result.trace is not None:
            result.extra["grads"] = {k: [g + 1.0 for g in v] for k, v in result.extra["grads"].items()}
            if changed_shape:
                pack = [e for e in result.trace["events"] if e["kind"] == "pack"][1]
                pack["shape"] = [4]
        return result

    return fake


def test_diff_prints_the_divergence_and_the_grads_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(app.cli, "run_scenario", engine_twice(changed_shape=True))
    assert main(["diff", "single_checkpoint", "-q"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("checkpoint events diverge at row ")
    assert "pack differs in shape" in lines[0] and lines[0].endswith("; gradients differ")
    marked = next(line for line in lines if line.startswith(">"))
    assert "pack f#0[1] [3]" in marked and "pack f#0[1] [4]" in marked and "(shape)" in marked
    assert lines[-2:] == ["gradients:", "  x: max abs difference 1 (rtol=1e-05, atol=1e-06)"]


def test_diff_with_equal_events_but_different_grads_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(app.cli, "run_scenario", engine_twice(changed_shape=False))
    assert main(["diff", "single_checkpoint", "-q"]) == 1
    assert capsys.readouterr().out.startswith("checkpoint events identical: 24 events; gradients differ\n")


def test_diff_of_an_unknown_scenario_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "no_such_thing"]) == 2
    assert "no_such_thing" in capsys.readouterr().err


SCRIPT = """import argparse
import sys

import engine as torch
from engine.utils.checkpoint import checkpoint
from helpers import block

parser = argparse.ArgumentParser()
parser.add_argument("--n", type=int, default=4)
args = parser.parse_args()
x = torch.randn(args.n, requires_grad=True)
checkpoint(block, x, use_reentrant=False).sum().backward()
print("n", args.n, "argv0", sys.argv[0].rsplit("/", 1)[-1])
"""


def test_a_file_runs_like_python_file_args(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A user's script imports its sibling modules and parses its own arguments (after --).
    (tmp_path / "helpers.py").write_text("def block(t):\n    return t.sin().exp()\n")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    argv_before, path_before = list(sys.argv), list(sys.path)
    out = tmp_path / "t.json"
    assert main(["trace", str(script), "-o", str(out), "--", "--n", "6"]) == 0
    assert "n 6 argv0 train.py" in capsys.readouterr().err
    assert json.loads(out.read_text())["events"][0]["shape"] == [6]
    assert (sys.argv, sys.path) == (argv_before, path_before)  # undone
    # Without arguments, the script's defaults; the CLI's own never reach it.
    assert main(["trace", str(script), "-o", str(out), "-q"]) == 0
    assert json.loads(out.read_text())["events"][0]["shape"] == [4]


def test_arguments_after_dashes_only_for_commands_that_run_a_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["scenarios", "--", "x"]) == 2
    assert capsys.readouterr().err.strip() == "autograd-lens: scenarios takes no arguments after --"
