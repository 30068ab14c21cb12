"""The scenario library: its conventions, and that each scenario shows what its docstring says.

Conventions (for every file in ``scenarios/``): a docstring whose first line is the title and whose
rest explains what it teaches; a fixed seed; ``use_reentrant`` passed to every ``checkpoint`` and
``checkpoint_sequential`` call; small tensors, so a learner can step through every event.
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from functools import cache
from typing import Any

import pytest

from app.runner import RunResult, ScenarioInfo, list_scenarios, run_scenario

SCENARIOS = list_scenarios()
IDS = [s.id for s in SCENARIOS]
MAX_EVENTS = 1500  # a learner steps through these one by one
MAX_TENSOR_NUMEL = 64


@cache
def run(scenario_id: str) -> RunResult:
    info = next(s for s in SCENARIOS if s.id == scenario_id)
    return run_scenario(info.path, trusted=True)


def events(scenario_id: str, kind: str | None = None) -> list[dict[str, Any]]:
    result = run(scenario_id)
    assert result.trace is not None, result.error
    return [e for e in result.trace["events"] if kind is None or e["kind"] == kind]


# --- conventions ---------------------------------------------------------------------------------


def test_there_are_at_least_15_scenarios_with_distinct_titles() -> None:
    assert len(SCENARIOS) >= 15
    titles = [s.title for s in SCENARIOS]
    assert len(set(titles)) == len(titles)


@pytest.mark.parametrize("info", SCENARIOS, ids=IDS)
def test_scenario_conventions(info: ScenarioInfo) -> None:
    text = info.path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    assert info.title and info.title != info.id, "the docstring's first line is the title"
    assert len(info.description) > 80, "the docstring says what the scenario teaches"
    assert "import engine as torch" in text
    assert "manual_seed(0)" in text
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name in ("checkpoint", "checkpoint_sequential"):
                keywords = {k.arg for k in node.keywords}
                assert "use_reentrant" in keywords, f"line {node.lineno}: pass use_reentrant explicitly"


@pytest.mark.parametrize("info", SCENARIOS, ids=IDS)
def test_scenarios_are_small(info: ScenarioInfo) -> None:
    tensors = events(info.id, "tensor_new")
    assert len(events(info.id)) <= MAX_EVENTS
    biggest = max(tensors, key=lambda e: math.prod(e["shape"]))
    assert math.prod(biggest["shape"]) <= MAX_TENSOR_NUMEL, biggest


@pytest.mark.parametrize("info", SCENARIOS, ids=IDS)
def test_scenarios_run_to_the_end_unless_the_error_is_the_point(info: ScenarioInfo) -> None:
    result = run(info.id)
    if info.id == "determinism_error":
        assert result.error is not None and result.error.type == "CheckpointError"
    else:
        assert result.ok, result.error


# --- each scenario shows what it says ------------------------------------------------------------


def test_single_checkpoint() -> None:
    assert len(events("single_checkpoint", "frame_new")) == 1
    assert [e["count"] for e in events("single_checkpoint", "early_stop")] == [2]
    assert len(events("single_checkpoint", "pack")) == 2


def test_chain_of_blocks_recomputes_each_block_once_last_first() -> None:
    frames = [e["frame"] for e in events("chain_of_blocks", "frame_new")]
    assert len(frames) == 3
    assert [e["frame"] for e in events("chain_of_blocks", "recompute_start")] == frames[::-1]
    assert {e["label"] for e in events("chain_of_blocks", "frame_new")} == {"Block"}


def test_nested_recomputes_the_outer_frame_and_creates_fresh_inner_frames() -> None:
    frames = events("nested_checkpoint", "frame_new")
    outer = next(f for f in frames if f["parent"] is None)
    assert outer["label"] == "big"
    inner_in_forward = [f for f in frames if f["parent"] == outer["frame"] and f["created_in"] == "forward"]
    assert len(inner_in_forward) == 2
    assert any(f["created_in"] == {"recompute": outer["frame"]} for f in frames), "Rule 3"
    first = events("nested_checkpoint", "recompute_start")[0]
    assert first["frame"] == outer["frame"], "the parent is recomputed first (Rule 2)"


def test_early_stop_on_and_off() -> None:
    assert len(events("early_stop_on", "early_stop")) == 1
    assert not events("early_stop_off", "early_stop")
    assert [e["reason"] for e in events("early_stop_off", "recompute_end")] == ["completed"]
    on, off = run("early_stop_on").stdout, run("early_stop_off").stdout
    assert on.count("f: scale and shift") == 1 and off.count("f: scale and shift") == 2
    grads = [line for line in on.splitlines() if line.startswith("x.grad")]
    assert grads == [line for line in off.splitlines() if line.startswith("x.grad")]


def test_rule6_retain_graph_recomputes_inside_the_forward() -> None:
    starts = events("rule6_retain_graph", "recompute_start")
    assert len(starts) == 2
    assert len({e["gid"] for e in starts}) == 2
    fn_starts = events("rule6_retain_graph", "fn_start")
    assert [e["mode"] for e in fn_starts] == ["forward", "recompute", "recompute"]
    assert not [e for e in events("rule6_retain_graph", "rpack") if e["outcome"] == "skip"]


def test_rule6_no_retain_graph_skips_dead_holders() -> None:
    outcomes = [e["outcome"] for e in events("rule6_no_retain_graph", "rpack")]
    assert outcomes.count("skip") == 2
    assert outcomes.count("keep") >= 2


def test_several_backwards_recompute_once_per_graph_task() -> None:
    starts = events("several_backwards", "recompute_start")
    assert len(starts) == 3
    assert len({e["gid"] for e in starts}) == 3
    assert [e["retain_graph"] for e in events("several_backwards", "backward_start")] == [True, True, False]


def test_partial_backward_uses_autograd_grad_and_takes_fewer_tensors() -> None:
    starts = events("partial_backward_grad", "backward_start")
    assert [e["api"] for e in starts] == ["grad", "backward"]
    takes = Counter(e["gid"] for e in events("partial_backward_grad", "recomputed_take"))
    first, second = (e["gid"] for e in starts)
    assert takes[first] < takes[second]


def test_non_tensor_args_save_only_the_tensors() -> None:
    saved = events("non_tensor_args", "inputs_saved")
    assert len(saved) == 1
    assert len(saved[0]["tensors"]) == 3  # the dummy, x and w; b travels inside the kwargs dict


def test_dropout_needs_preserve_rng_state() -> None:
    assert run("dropout_rng").stdout.splitlines() == [
        "preserve_rng_state = True -> gradients equal the reference: True",
        "preserve_rng_state = False -> gradients equal the reference: False",
    ]


def test_inplace_error_is_caught_printed_and_fixed() -> None:
    out = run("inplace_error").stdout
    assert "RuntimeError: one of the variables needed for gradient computation has been modified" in out
    assert "x.grad:" in out
    assert len(events("inplace_error", "checkpoint_error")) == 1


def test_determinism_error_ends_the_run_at_its_line() -> None:
    result = run("determinism_error")
    assert result.error is not None
    assert result.error.file == "scenarios/determinism_error.py"
    assert result.error.line == 28
    assert "A different number of tensors was saved" in result.error.message
    kinds = [e["kind"] for e in events("determinism_error")]
    assert "checkpoint_error" in kinds and kinds[-1] == "error"


def test_selective_checkpoint_saves_mm_and_recomputes_the_rest() -> None:
    lines = run("selective_checkpoint").stdout.splitlines()
    policy = [line for line in lines if line.startswith("policy:")]
    assert policy[:4] == [
        "policy: engine.ops.mm forward -> MUST_SAVE",
        "policy: engine.ops.tanh forward -> PREFER_RECOMPUTE",
        "policy: engine.ops.mm forward -> MUST_SAVE",
        "policy: engine.ops.sin forward -> PREFER_RECOMPUTE",
    ]
    assert not any("sin recompute" in line for line in policy), "early stop before sin"


def test_reentrant_has_no_frames_and_refuses_autograd_grad() -> None:
    assert len(events("reentrant_vs_non_reentrant", "frame_new")) == 1  # the non-reentrant run only
    out = run("reentrant_vs_non_reentrant").stdout
    assert "RuntimeError: When use_reentrant=True" in out


def test_checkpoint_sequential_uses_sqrt_n_segments() -> None:
    assert run("checkpoint_sequential").stdout.startswith("layers: 9 segments: 3\n")
    assert len(events("checkpoint_sequential", "frame_new")) == 2  # the last segment is not checkpointed


def _before_backward(scenario_id: str) -> dict[str, int]:
    start = events(scenario_id, "backward_start")[0]
    return dict(start["mem"])


def test_memory_comparison_of_the_three_mlps() -> None:
    none, per_block, nested = (_before_backward(f"mlp_memory_{v}") for v in ("none", "per_block", "nested"))
    assert none["live"] > per_block["live"] > nested["live"]
    assert none["saved"] > per_block["saved"] > nested["saved"]
    runs = [len(events(f"mlp_memory_{v}", "fn_start")) for v in ("none", "per_block", "nested")]
    assert runs == [0, 8, 14]  # the price: more recomputation


def test_backward_inside_checkpoint_runs_its_side_effect_once() -> None:
    out = run("backward_inside_checkpoint").stdout
    assert out.count("inner backward done") == 1
    lines = dict(line.split(":", 1) for line in out.splitlines() if line.startswith(("w.grad", "inner")))
    assert lines["w.grad"] == lines["inner backward done, w.grad"]
    assert len(events("backward_inside_checkpoint", "recompute_start")) == 2
