"""The torch backend under real torch 2.13.0, for every bundled scenario.

Each scenario runs in the 2.13 interpreter (``torch213_python``, a subprocess: it cannot share this
process's torch 2.8.0) through the backend's entry point, and in the engine here. The engine
follows 2.8, so where the two traces differ they must differ the way
../shared/reference/torch_2_8_vs_2_13.md says 2.13 differs from 2.8 (its section numbers below),
and nowhere else in the saved-tensor traffic.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.runner import RunResult, list_scenarios, run_scenario
from tests.conftest import TORCH213_VERSION
from tests.trace._check import validate
from tests.trace._torch213 import (
    DUMMY_SHAPE,
    BackendRun,
    FrameSaves,
    frame_saves,
    run_backend,
    run_python,
    stdout_lines,
    without_dummies,
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


@pytest.fixture(scope="session")
def backend_213(torch213_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    """The backend's run of a scenario under torch 2.13, once per session (several tests read it)."""
    runs: dict[str, BackendRun] = {}
    out_dir = tmp_path_factory.mktemp("torch213")

    def run(scenario: str) -> BackendRun:
        if scenario not in runs:
            runs[scenario] = run_backend(torch213_python, SCENARIOS[scenario], out_dir / f"{scenario}.json")
        return runs[scenario]

    yield run


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
    assert Path(engine_file).resolve() == (Path(__file__).parents[2] / "engine" / "__init__.py").resolve()


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
    validate(run.doc)
    meta = run.doc["meta"]
    assert meta["backend"] == f"torch {TORCH213_VERSION}"
    assert [e["seq"] for e in run.doc["events"]] == list(range(len(run.doc["events"])))
    assert meta["n_events"] == len(run.doc["events"])
    assert (meta.get("error") is None) == mine.ok, meta.get("error")
    if not mine.ok:
        assert mine.error is not None
        assert meta["error"]["type"] == mine.error.type

    # Every dummy is gone (§1.1): not in a parent's forward packs, nor its recomputation, nor its
    # unpacks, nor the holder count early stop waits for (§2.1); all else is 2.8's, frame by frame.
    theirs = frame_saves(run.doc)
    assert not any(shape == DUMMY_SHAPE for fs in theirs.values() for _, shape in fs.saves)
    assert theirs == without_dummies(frame_saves(engine_doc(scenario)))


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
    # 2.8 packs [dummy, x] for sub1 then [dummy, h1] for sub2; 2.13 packs x, h1.
    assert [s for k, s in mine[outer].saves if k == "pack"] == [DUMMY_SHAPE, [2, 3], DUMMY_SHAPE, [2, 3]]
    assert [s for k, s in theirs[outer].saves if k == "pack"] == [[2, 3], [2, 3]]
    # In 2.8 the parent's recomputation starts at the unpack of a dummy (§1.2); in 2.13 at an input.
    assert next(s for k, s in mine[outer].saves if k == "unpack") == DUMMY_SHAPE
    assert next(s for k, s in theirs[outer].saves if k == "unpack") == [2, 3]
    # Body runs and recomputations are the same: 3 frames in the forward, 2 more in the outer
    # recomputation, 3 recomputations, each ending by early stop.
    for doc in (run.doc, engine_doc("nested_checkpoint")):
        kinds = [e["kind"] for e in doc["events"]]
        assert kinds.count("frame_new") == 5
        assert kinds.count("recompute_start") == kinds.count("early_stop") == 3


@pytest.mark.torch213
def test_selective_checkpoint_calls_the_policy_in_the_forward_only(backend_213: Runner) -> None:
    """§1.5 / §2.4: 2.8 calls the policy again for every op the recomputation re-runs."""
    run = backend_213("selective_checkpoint")
    assert run.doc is not None, run.stderr

    def calls(doc: dict[str, Any]) -> list[list[str]]:
        # "policy: <func> <forward|recompute> -> <decision>"
        return [line.split()[1:] for line in stdout_lines(doc) if line.startswith("policy:")]

    theirs = calls(run.doc)
    assert [(op, when) for op, when, _, _ in theirs] == [
        ("aten.mm.default", "forward"),
        ("aten.tanh.default", "forward"),
        ("aten.mm.default", "forward"),
        ("aten.sin.default", "forward"),
    ]
    mine = calls(engine_doc("selective_checkpoint"))
    assert [when for _, when, _, _ in mine] == ["forward"] * 4 + ["recompute"] * 3
    # The decisions of the forward agree.
    assert (
        [d for *_, d in theirs]
        == [d for *_, d in mine[:4]]
        == [
            "MUST_SAVE",
            "PREFER_RECOMPUTE",
            "MUST_SAVE",
            "PREFER_RECOMPUTE",
        ]
    )


@pytest.mark.torch213
def test_inplace_error_names_the_node_by_class(backend_213: Runner) -> None:
    """§1.6: the version-counter error says ``Add`` where 2.8 says ``AddBackward0``, and its hint
    changed."""
    run = backend_213("inplace_error")
    assert run.doc is not None, run.stderr
    (theirs,) = [line for line in stdout_lines(run.doc) if line.startswith("RuntimeError:")]
    (mine,) = [line for line in stdout_lines(engine_doc("inplace_error")) if line.startswith("RuntimeError:")]
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
