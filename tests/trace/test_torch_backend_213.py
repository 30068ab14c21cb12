"""The torch backend under real torch 2.13.0, for every bundled scenario.

Each scenario runs in the 2.13 interpreter (``torch213_python``, a subprocess: it cannot share this
process's torch 2.8.0) through the backend's entry point, and in the engine here. The engine
follows 2.8, so where the two traces differ they must differ the way
../shared/reference/torch_2_8_vs_2_13.md says 2.13 differs from 2.8 (its section numbers below),
and nowhere else in the saved-tensor traffic.
"""

from __future__ import annotations

import functools
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.runner import RunResult, list_scenarios, run_scenario
from tests.conftest import TORCH213_VERSION
from tests.trace._check import check_invariants, validate
from tests.trace._torch213 import (
    DUMMY_SHAPE,
    PROJECT_ROOT,
    BackendRun,
    FrameSaves,
    frame_saves,
    printed,
    run_backend,
    run_python,
)

SCENARIOS = {s.id: s.path for s in list_scenarios()}

Runner = Callable[[str], BackendRun]


@functools.cache
def engine_run(scenario: str) -> RunResult:
    return run_scenario(SCENARIOS[scenario], trusted=True)


def engine_doc(scenario: str) -> dict[str, Any]:
    doc = engine_run(scenario).trace
    assert doc is not None
    return doc


def check_document(doc: dict[str, Any]) -> None:
    """What ``tests.trace._check.check`` checks of an engine trace, for a document read from JSON:
    the schema, and the invariants it cannot express."""
    validate(doc)
    events = doc["events"]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert doc["meta"]["n_events"] == len(events)
    check_invariants(events)
    assert [e["t_ns"] for e in events] == sorted(e["t_ns"] for e in events)


@pytest.fixture(scope="session")
def backend_213(torch213_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """The backend's run of a scenario under torch 2.13, once per session (several tests read it)."""
    runs: dict[str, BackendRun] = {}
    out_dir = tmp_path_factory.mktemp("torch213")

    def run(scenario: str) -> BackendRun:
        if scenario not in runs:
            runs[scenario] = run_backend(torch213_python, SCENARIOS[scenario], out_dir / f"{scenario}.json")
        return runs[scenario]

    return run


@pytest.mark.torch213
def test_interpreter_has_torch_213_and_imports_the_engine(torch213_python: Path) -> None:
    done = run_python(
        torch213_python,
        ["-c", "import engine, numpy, torch; print(torch.__version__); print(engine.__file__)"],
    )
    assert done.returncode == 0, done.stderr
    version, engine_file = done.stdout.split()
    assert version.split("+")[0] == TORCH213_VERSION
    # The engine under test is this checkout's, not an installed copy.
    assert Path(engine_file).resolve() == PROJECT_ROOT / "engine" / "__init__.py"


@pytest.mark.torch213
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_trace(scenario: str, backend_213: Runner) -> None:
    """Exit status, schema, backend, and the saved-tensor traffic of every frame."""
    run = backend_213(scenario)
    mine = engine_run(scenario)
    # Where the engine's run raises, 2.13's does too: no bundled scenario reaches a behaviour
    # that raises in one version only (§2.6).
    assert run.returncode == (0 if mine.ok else 1), run.stderr
    assert run.doc is not None, run.stderr
    check_document(run.doc)
    meta = run.doc["meta"]
    assert meta["backend"] == f"torch {TORCH213_VERSION}"
    assert (meta.get("error") is None) == mine.ok, meta.get("error")
    if not mine.ok:
        assert mine.error is not None
        assert meta["error"]["type"] == mine.error.type

    # Every dummy is gone (§1.1): not in a parent's forward packs, nor its recomputation, nor its
    # unpacks, nor the holder count early stop waits for, and the first input's unpack starts the
    # parent's recomputation (§1.2, §2.1); all else is 2.8's, frame by frame, in order.
    theirs = frame_saves(run.doc)
    assert not any(shape == DUMMY_SHAPE for fs in theirs.values() for _, shape in fs.saves)
    assert theirs == frame_saves(engine_doc(scenario), as_213=True)


@pytest.mark.torch213
def test_nested_checkpoint_packs_no_dummy_in_the_parent(backend_213: Runner) -> None:
    """§2.1: the outer frame saves the two inner checkpoints' inputs and, in 2.8, a dummy before
    each; the outer body saves nothing of its own."""
    run = backend_213("nested_checkpoint")
    assert run.doc is not None, run.stderr
    mine, theirs = frame_saves(engine_doc("nested_checkpoint")), frame_saves(run.doc)
    outer = next(e["frame"] for e in run.doc["events"] if e["kind"] == "frame_new" and e["parent"] is None)

    def table_row(fs: FrameSaves) -> tuple[int, int, int]:
        return fs.count("pack"), fs.count("unpack"), fs.count("rpack")

    # outer frame: packs / unpacks / recompute-packs, and where early stop comes.
    assert table_row(mine[outer]) == (4, 4, 4)
    assert mine[outer].early_stops == [(4, 4)]
    assert table_row(theirs[outer]) == (2, 2, 2)
    assert theirs[outer].early_stops == [(2, 2)]
    # 2.8 packs [dummy, x] for sub1's checkpoint, then [dummy, h1] for sub2's; 2.13 packs x, h1.
    # The backward reads sub2's inputs first: in 2.8 the dummy's unpack starts the outer
    # recomputation (§1.2), which stops early at h1's rpack, and h1's unpack follows; in 2.13 h1's
    # unpack starts it.
    x = h1 = [2, 3]
    d = DUMMY_SHAPE
    assert mine[outer].saves == [
        *[("pack", d), ("pack", x), ("pack", d), ("pack", h1)],
        ("unpack", d),
        *[("rpack", d), ("rpack", x), ("rpack", d), ("rpack", h1)],
        ("unpack", h1),
        *[("unpack", d), ("unpack", x)],
    ]
    assert theirs[outer].saves == [
        *[("pack", x), ("pack", h1)],
        ("unpack", h1),
        *[("rpack", x), ("rpack", h1)],
        ("unpack", x),
    ]
    # Body runs and recomputations are the same: 3 frames in the forward, 2 more in the outer
    # recomputation, 3 recomputations, each ending by early stop.
    for doc in (run.doc, engine_doc("nested_checkpoint")):
        kinds = [e["kind"] for e in doc["events"]]
        assert kinds.count("frame_new") == 5
        assert kinds.count("recompute_start") == kinds.count("early_stop") == 3


# The reference's own nested scenarios (§2.1), written for the engine: "outer(x) =
# checkpoint(sub2, checkpoint(sub1, x)), sub_i(h) = tanh(h @ W_i + b_i); one backward", and "the
# same with x.exp() before the inner checkpoints and .sin() after them".
REFERENCE_NESTED = """
import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
W1, W2 = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
b1, b2 = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)


def sub1(h):
    return torch.tanh(h @ W1 + b1)


def sub2(h):
    return torch.tanh(h @ W2 + b2)


def outer(h):
    return {body}


out = checkpoint(outer, x, use_reentrant=False)
out.sum().backward()
"""
NESTED_BODIES = {
    "plain": "checkpoint(sub2, checkpoint(sub1, h, use_reentrant=False), use_reentrant=False)",
    "exp_sin": "checkpoint(sub2, checkpoint(sub1, h.exp(), use_reentrant=False), use_reentrant=False).sin()",
}


@dataclass
class NestedTable:
    """The rows of the reference's tables, and where the backward first reads the outer frame."""

    outer: tuple[int, int, int]  # outer frame: packs / unpacks / recompute-packs
    outer_early_stop: list[tuple[int, int]]
    all_frames: tuple[int, int, int]  # all frames: packs / unpacks / recompute-packs
    forward_holders: int
    body_runs: dict[str, int]
    first_outer_unpack: int  # the index of the outer frame's holder the backward unpacks first


def nested_table(doc: dict[str, Any]) -> NestedTable:
    frames = frame_saves(doc)
    label = {e["frame"]: e["label"] for e in doc["events"] if e["kind"] == "frame_new"}
    outer = next(f for f, name in label.items() if name == "outer")
    o = frames[outer]
    # Each recomputation ends by early stop, one per frame of the forward.
    assert (
        Counter(label[e["frame"]] for e in doc["events"] if e["kind"] == "recompute_start")
        == Counter(label[e["frame"]] for e in doc["events"] if e["kind"] == "early_stop")
        == {"outer": 1, "sub1": 1, "sub2": 1}
    )
    return NestedTable(
        outer=(o.count("pack"), o.count("unpack"), o.count("rpack")),
        outer_early_stop=o.early_stops,
        all_frames=(
            sum(fs.count("pack") for fs in frames.values()),
            sum(fs.count("unpack") for fs in frames.values()),
            sum(fs.count("rpack") for fs in frames.values()),
        ),
        forward_holders=sum(1 for e in doc["events"] if e["kind"] == "pack" and e["phase"] == "forward"),
        body_runs=dict(Counter(label[e["frame"]] for e in doc["events"] if e["kind"] == "fn_start")),
        first_outer_unpack=next(
            e["index"] for e in doc["events"] if e["kind"] == "unpack" and e["frame"] == outer
        ),
    )


@pytest.mark.torch213
@pytest.mark.parametrize(
    ("body", "in_28", "in_213"),
    [
        (
            "plain",
            NestedTable((4, 4, 4), [(4, 4)], (13, 10, 10), 10, {"outer": 2, "sub1": 3, "sub2": 2}, 2),
            NestedTable((2, 2, 2), [(2, 2)], (11, 8, 8), 8, {"outer": 2, "sub1": 3, "sub2": 2}, 1),
        ),
        (
            "exp_sin",
            NestedTable((6, 6, 6), [(6, 6)], (18, 12, 12), 12, {"outer": 2, "sub1": 3, "sub2": 3}, 5),
            NestedTable((4, 4, 4), [(4, 4)], (16, 10, 10), 10, {"outer": 2, "sub1": 3, "sub2": 3}, 3),
        ),
    ],
)
def test_reference_nested_tables(
    body: str, in_28: NestedTable, in_213: NestedTable, torch213_python: Path, tmp_path: Path
) -> None:
    """§2.1's tables, row by row: the engine gives the 2.8 column, torch 2.13 the other."""
    scenario = tmp_path / f"nested_{body}.py"
    scenario.write_text(REFERENCE_NESTED.format(body=NESTED_BODIES[body]))
    mine = run_scenario(scenario, trusted=True)
    assert mine.ok and mine.trace is not None, mine.error
    run = run_backend(torch213_python, scenario, tmp_path / "trace.json")
    assert run.returncode == 0 and run.doc is not None, run.stderr
    assert nested_table(mine.trace) == in_28
    assert nested_table(run.doc) == in_213


@pytest.mark.torch213
def test_selective_checkpoint_calls_the_policy_in_the_forward_only(backend_213: Runner) -> None:
    """§1.5 / §2.4: 2.8 calls the policy again for every op the recomputation re-runs."""
    run = backend_213("selective_checkpoint")
    assert run.doc is not None, run.stderr

    def calls(lines: list[str]) -> list[list[str]]:
        # "policy: <func> <forward|recompute> -> <decision>"
        return [line.split()[1:] for line in lines if line.startswith("policy:")]

    theirs = calls(printed(run))
    assert [(op, when) for op, when, _, _ in theirs] == [
        ("aten.mm.default", "forward"),
        ("aten.tanh.default", "forward"),
        ("aten.mm.default", "forward"),
        ("aten.sin.default", "forward"),
    ]
    mine = calls(engine_run("selective_checkpoint").stdout.splitlines())
    assert [when for _, when, _, _ in mine] == ["forward"] * 4 + ["recompute"] * 3
    # The decisions of the forward agree.
    decisions = ["MUST_SAVE", "PREFER_RECOMPUTE", "MUST_SAVE", "PREFER_RECOMPUTE"]
    assert [d for *_, d in theirs] == [d for *_, d in mine[:4]] == decisions


@pytest.mark.torch213
def test_inplace_error_names_the_node_by_class(backend_213: Runner) -> None:
    """§1.6: the version-counter error says ``Add`` where 2.8 says ``AddBackward0``, and its hint
    changed."""
    run = backend_213("inplace_error")
    assert run.doc is not None, run.stderr
    (theirs,) = [line for line in printed(run) if line.startswith("RuntimeError:")]
    (mine,) = [
        line for line in engine_run("inplace_error").stdout.splitlines() if line.startswith("RuntimeError:")
    ]
    assert "which is output 0 of Add, is at version 1" in theirs
    assert theirs.endswith("set_detect_anomaly(True, check_nan=False).")
    assert "which is output 0 of AddBackward0, is at version 1" in mine
    assert mine.endswith("set_detect_anomaly(True).")


@pytest.mark.torch213
def test_determinism_error_tip_has_the_compile_paragraph(backend_213: Runner) -> None:
    """§1.7 / §2.3: 2.13's CheckpointError tip ends with a torch.compile paragraph."""
    run = backend_213("determinism_error")
    assert run.returncode == 1, run.stderr
    assert run.doc is not None, run.stderr
    theirs = run.doc["meta"]["error"]["message"]
    mine = (engine_run("determinism_error").error or pytest.fail("the engine's run must fail")).message
    assert "Number of tensors saved during recomputation: 1." in theirs
    assert "enable checkpoint\u2011debug mode globally." in theirs
    assert "torch.compile with automatic_dynamic_shapes" in theirs
    assert "torch.compile" not in mine


@pytest.mark.parametrize("version", ["2.7.1", "2.9.0", "2.14.1", "1.13.0"])
def test_check_version_rejects_other_versions(version: str) -> None:
    from engine.trace.torch_backend import check_version

    with pytest.raises(RuntimeError, match="unsupported torch version"):
        check_version(version)


@pytest.mark.parametrize("version", ["2.8.0", "2.8.0+cu128", "2.13.0", "2.13.0+cpu"])
def test_check_version_accepts_the_supported_ones(version: str) -> None:
    from engine.trace.torch_backend import check_version

    check_version(version)


# Runs the entry point in a process whose torch is missing or fake; runpy gives ``python -m``'s
# exit status and streams.
_ENTRY = (
    "import runpy, sys\n"
    "{prelude}\n"
    "sys.argv = ['engine.trace.torch_backend', *sys.argv[1:]]\n"
    "runpy.run_module('engine.trace.torch_backend', run_name='__main__', alter_sys=True)\n"
)


@pytest.mark.torch213
def test_entry_point_refuses_an_unsupported_version(torch213_python: Path, tmp_path: Path) -> None:
    prelude = "import torch, torch.version\ntorch.__version__ = torch.version.__version__ = '2.9.0'"
    out = tmp_path / "trace.json"
    done = run_python(
        torch213_python,
        ["-c", _ENTRY.format(prelude=prelude), str(SCENARIOS["single_checkpoint"]), "-o", str(out)],
    )
    assert done.returncode == 2, done.stderr
    assert "unsupported torch version" in done.stderr
    assert "2.9.0" in done.stderr
    assert not out.exists() or not out.read_text().strip()


def test_entry_point_without_torch(tmp_path: Path) -> None:
    # A None entry in sys.modules makes ``import torch`` raise ImportError, so any interpreter
    # with numpy will do.
    prelude = "sys.modules['torch'] = None"
    out = tmp_path / "trace.json"
    done = run_python(
        Path(sys.executable),
        ["-c", _ENTRY.format(prelude=prelude), str(SCENARIOS["single_checkpoint"]), "-o", str(out)],
    )
    assert done.returncode == 2, done.stderr
    assert "torch" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists() or not out.read_text().strip()


@pytest.mark.torch213
def test_diff_against_a_213_trace_shows_what_changed(
    backend_213: Runner, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``autograd-lens diff --against``: the engine (2.8's design) against a 2.13 trace file. The
    first divergence is 2.8's dummy among a checkpoint's saved inputs (§1.1); under nesting, the
    parent also packs it (§2.1)."""
    from app.cli import main

    for scenario in ("single_checkpoint", "nested_checkpoint"):
        run = backend_213(scenario)
        assert run.doc is not None, run.stderr
        trace = tmp_path / f"{scenario}.json"
        trace.write_text(json.dumps(run.doc))
        out = tmp_path / f"{scenario}.diff.json"
        assert main(["diff", scenario, "--against", str(trace), "-o", str(out), "-q"]) == 1
        diff = json.loads(out.read_text())
        assert diff["b_label"] == f"torch {TORCH213_VERSION}"
        assert diff["grads"]["verdict"] == "gradients not compared (a trace file has none)"
        first = diff["rows"][diff["first_divergence"]]
        assert (first["kind"], first["fields"]) == ("inputs_saved", ["saved"])
        assert first["a_text"].endswith(": 2 saved") and first["b_text"].endswith(": 1 saved")
        text = capsys.readouterr().out
        assert text.startswith(
            f"checkpoint events diverge at row {diff['first_divergence']}: inputs_saved differs"
        )
        dummies = [
            r
            for r in diff["rows"]
            if r["kind"] == "pack"
            and r["b"] is None
            and engine_doc(scenario)["events"][r["a"]]["shape"] == DUMMY_SHAPE
        ]
        assert len(dummies) == (2 if scenario == "nested_checkpoint" else 0)


def test_diff_against_refuses_a_file_that_is_no_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "autograd-lens/trace"}')
    assert main(["diff", "single_checkpoint", "--against", str(bad)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"autograd-lens: {bad} is not a trace: the document: 'version' is missing"
    )
