"""The Pitfalls pack (docs/pitfalls.md): each broken scenario shows its symptom and its fixed twin
does not, on the engine and on real torch 2.8.0 alike; the pairs, their metadata and the search
that finds a scenario by its error text.

The torch side runs the same file through ``run_scenario(backend="torch")``, which records real
PyTorch's trace, its printed lines and its warnings: every claim below is checked on both traces.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app.pitfalls import GROUP, pitfall_pairs, search_scenarios, words
from app.runner import RunResult, list_scenarios, run_scenario
from engine.trace.memory import memory_report
from engine.trace.story import story_text

SCENARIOS = {s.id: s for s in list_scenarios()}
PAIRS = [
    "no_grad_inputs",
    "recompute_mismatch",
    "memory_kept",
    "nested_reruns",
    "ambient_hooks",
    "side_effects",
]
BACKENDS = ["engine", pytest.param("torch", marks=pytest.mark.oracle)]
WARNING = "UserWarning: None of the inputs have requires_grad=True. Gradients will be None"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "torch":
        request.getfixturevalue("torch_oracle")  # fails, never skips, when torch is missing
    return str(request.param)


@cache
def run(scenario_id: str, backend: str) -> RunResult:
    result = run_scenario(SCENARIOS[scenario_id].path, trusted=True, backend=backend)
    assert result.ok, result.error
    assert result.trace is not None
    return result


def lines(scenario_id: str, backend: str) -> list[str]:
    return run(scenario_id, backend).stdout.splitlines()


def events(scenario_id: str, backend: str, kind: str) -> list[dict[str, Any]]:
    trace = run(scenario_id, backend).trace
    assert trace is not None
    return [e for e in trace["events"] if e["kind"] == kind]


def warnings_of(scenario_id: str, backend: str) -> list[str]:
    return [e["label"] for e in events(scenario_id, backend, "mark") if e.get("stream") == "stderr"]


# --- the pack ------------------------------------------------------------------------------------


def test_the_pack_has_the_six_pairs_with_their_metadata() -> None:
    pairs = {p.pair: p for p in pitfall_pairs()}
    assert list(pairs) == PAIRS  # in the order of their titles: "Pitfall 1", "Pitfall 2", ...
    for p in pairs.values():
        assert (p.broken.group, p.fixed.group) == (GROUP, GROUP)
        assert (p.broken.variant, p.fixed.variant) == ("broken", "fixed")
        assert p.broken.id == f"pitfall_{p.pair}_broken" and p.fixed.id == f"pitfall_{p.pair}_fixed"
        assert p.symptoms, f"{p.pair}: the broken side names the error text or symptom people search for"
        assert all(r.startswith("https://github.com/") for r in p.reports)
        # The metadata paragraph is not part of the description.
        assert "Group:" not in p.broken.description and "Variant:" not in p.fixed.description


def test_an_indented_metadata_line_continues_the_value_above() -> None:
    assert SCENARIOS["pitfall_ambient_hooks_broken"].symptoms == (
        "save_on_cpu / saved_tensors_hooks pack_hook not called for tensors inside checkpoint "
        "(activations not offloaded)",
    )


def test_scenarios_without_metadata_read_as_before() -> None:
    info = SCENARIOS["single_checkpoint"]
    assert (info.group, info.pair, info.variant, info.symptoms, info.reports) == (None, None, None, (), ())
    assert info.description.startswith("`checkpoint(f, x, use_reentrant=False)`")


# --- 1. reentrant checkpoint over inputs that do not require grad ---------------------------------


def test_no_grad_inputs(backend: str) -> None:
    broken, fixed = "pitfall_no_grad_inputs_broken", "pitfall_no_grad_inputs_fixed"
    assert warnings_of(broken, backend) == [WARNING]
    assert "adapter.weight.grad: None" in lines(broken, backend)
    assert "out.requires_grad: False" in lines(broken, backend)
    assert "head.weight.grad is None: False" in lines(broken, backend)  # the loss still trains the head
    assert warnings_of(fixed, backend) == []
    assert [line for line in lines(fixed, backend) if line.startswith("adapter.weight.grad")] == [
        "adapter.weight.grad is None: False",
        "adapter.weight.grad is None: False",
    ]


# --- 2. a forward that changes when recomputed ---------------------------------------------------


def test_recompute_mismatch(backend: str) -> None:
    broken = lines("pitfall_recompute_mismatch_broken", backend)
    assert (
        "CheckpointError: torch.utils.checkpoint: Recomputed values for the following tensors have "
        "different metadata than during the forward pass." in broken
    )
    assert "    recomputed metadata: {'shape': Size([4, 6]), ...}" in broken
    # debug=True's op logs, side by side: identical up to the cat over the cache.
    table = broken[broken.index("original forward      | recomputation") + 1 :]
    assert table == [
        "f32[4, 4] t           | f32[4, 4] t",
        "f32[3, 4] addmm       | f32[3, 4] addmm",
        "f32[3, 4] cat         | f32[6, 4] cat   <- first difference",
    ]
    # Met twice: without debug=True, then with it (one recomputation each).
    assert len(events("pitfall_recompute_mismatch_broken", backend, "recompute_start")) == 2
    fixed = lines("pitfall_recompute_mismatch_fixed", backend)
    assert fixed == ["keys in the cache: 0", "x.grad shape: (3, 4)"]


# --- 3. checkpointing that does not reduce memory --------------------------------------------------


def _report(scenario_id: str, backend: str) -> dict[str, Any]:
    trace = run(scenario_id, backend).trace
    assert trace is not None
    return dict(memory_report(trace["events"]))


def _live_at_backward(scenario_id: str, backend: str) -> int:
    return int(events(scenario_id, backend, "backward_start")[0]["mem"]["live"])


def test_memory_kept_alive_by_a_reference_outside(backend: str) -> None:
    broken, fixed = "pitfall_memory_kept_broken", "pitfall_memory_kept_fixed"
    assert "bytes the logging dict keeps alive: 2048" in lines(broken, backend)
    # The same model with no checkpoint at all (mlp_memory_none) holds less when the backward starts.
    baseline = run_scenario(SCENARIOS["mlp_memory_none"].path, trusted=True, backend=backend)
    assert baseline.trace is not None
    no_checkpoint = next(e for e in baseline.trace["events"] if e["kind"] == "backward_start")["mem"]["live"]
    assert _live_at_backward(broken, backend) == no_checkpoint + 2048 - 1024  # + pre-activations kept
    assert _live_at_backward(fixed, backend) == _live_at_backward(broken, backend) - 2048
    # The memory report says where the bytes are: kept outside, by the names the scenario gave them.
    findings = {f["kind"]: f for f in _report(broken, backend)["diagnosis"]}
    assert "outside_reference" in findings
    assert "2.0 KB made inside checkpointed functions is still alive" in findings["outside_reference"]["text"]
    assert "`pre`, `hidden`" in findings["outside_reference"]["text"]
    assert "outside_reference" not in {f["kind"] for f in _report(fixed, backend)["diagnosis"]}
    # The checkpoints themselves behave the same in both: each block runs twice.
    for scenario in (broken, fixed):
        assert _report(scenario, backend)["metrics"]["runs"] == {"run_block": {"forward": 4, "recompute": 4}}


# --- 4. nested checkpoints ------------------------------------------------------------------------


def test_nested_checkpoints_run_the_inner_function_three_times(backend: str) -> None:
    assert lines("pitfall_nested_reruns_broken", backend)[-1] == "runs: {'inner': 3, 'outer': 2}"
    assert lines("pitfall_nested_reruns_fixed", backend)[-1] == "runs: {'inner': 2, 'outer': 1}"
    modes = [e["mode"] for e in events("pitfall_nested_reruns_broken", backend, "fn_start")]
    assert sorted(modes) == ["forward", "forward", "forward", "recompute", "recompute"]
    frames = events("pitfall_nested_reruns_broken", backend, "frame_new")
    assert any(f["created_in"] != "forward" for f in frames), "a fresh inner frame in the recomputation"


# --- 5. ambient saved-tensor hooks around a checkpoint ---------------------------------------------


def test_ambient_hooks_see_only_the_checkpoint_inputs(backend: str) -> None:
    broken = lines("pitfall_ambient_hooks_broken", backend)
    packed = [line for line in broken if line.startswith("pack")]
    # Per checkpoint: its empty dummy and its input; then the input of the loss's pow.
    assert [p.split(" shape ")[1] for p in packed] == ["(0,)", "(2, 4)", "(0,)", "(2, 4)", "(2, 4)"]
    assert broken[-1] == "tensors the offload hook packed: 5"
    holders = len(events("pitfall_ambient_hooks_broken", backend, "pack"))
    assert holders > 0, "the activations went to the checkpoint's holders instead"
    fixed = lines("pitfall_ambient_hooks_fixed", backend)
    assert fixed[-1] == "tensors the offload hook packed: 8"
    assert "pack   #3 shape (4, 8)" in fixed  # the second block's weight, offloaded now


# --- 6. side effects in a checkpointed function ----------------------------------------------------


def test_side_effects_run_again_and_rng_is_not_replayed(backend: str) -> None:
    assert lines("pitfall_side_effects_broken", backend) == [
        "block starts, call 1",
        "block ends",
        "block starts, call 2",  # the recomputation: the counter and the first print run again
        "calls counted in one step: 2",  # "block ends" is not printed again: early stop
        "gradients equal the reference: False",
    ]
    assert len(events("pitfall_side_effects_broken", backend, "early_stop")) == 1
    assert lines("pitfall_side_effects_fixed", backend) == [
        "block starts, call 1",
        "block ends",
        "calls counted in one step: 1",
        "gradients equal the reference: True",
    ]


# --- the story says the cause in plain words --------------------------------------------------------


def story(scenario_id: str, backend: str) -> str:
    trace = run(scenario_id, backend).trace
    assert trace is not None
    return story_text(trace["events"])


def test_the_story_names_the_warning_and_explains_the_error(backend: str) -> None:
    assert f"A warning is printed: {WARNING}." in story("pitfall_no_grad_inputs_broken", backend)
    text = story("pitfall_recompute_mismatch_broken", backend)
    assert "`CheckpointError` in frame `attention#0`: torch.utils.checkpoint: Recomputed values" in text
    assert "the recomputation saved a tensor of another shape" in text
    assert "`CheckpointError` in frame `attention#1`: An error happened while unpacking tensors" in text
    assert "where the two lists first differ is where the function behaved differently" in text
    assert "In plain words" not in story("pitfall_recompute_mismatch_fixed", backend)


# --- the search ------------------------------------------------------------------------------------

TRACEBACK = """Traceback (most recent call last):
  File "/home/me/train.py", line 112, in <module>
    loss.backward()
[rank0]: torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed values for the \
following tensors have different metadata than during the forward pass.
[rank0]: tensor at position 16:
[rank0]: saved metadata: {'shape': torch.Size([1, 12, 171, 128]), 'dtype': torch.bfloat16}
[rank0]: recomputed metadata: {'shape': torch.Size([1, 12, 342, 128]), 'dtype': torch.bfloat16}
"""


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (TRACEBACK, "pitfall_recompute_mismatch_broken"),
        (
            "/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:87: UserWarning: None of "
            'the inputs have requires_grad=True. Gradients will be None\n  warnings.warn("None of',
            "pitfall_no_grad_inputs_broken",
        ),
        ("none of the inputs have REQUIRES_GRAD=true", "pitfall_no_grad_inputs_broken"),
        ("gradient checkpointing did not reduce memory", "pitfall_memory_kept_broken"),
        ("nested checkpoint runs three times", "pitfall_nested_reruns_broken"),
        ("save_on_cpu does not offload inside checkpoint", "pitfall_ambient_hooks_broken"),
        ("my print runs twice in backward", "pitfall_side_effects_broken"),
    ],
)
def test_a_pasted_error_text_finds_its_scenario(query: str, expected: str) -> None:
    hits = search_scenarios(query)
    assert hits and hits[0].scenario.id == expected, [(h.scenario.id, h.score) for h in hits]
    assert all(h.score >= hits[0].score / 2 for h in hits), "weak matches next to a strong one are left out"


def test_a_whole_traceback_finds_its_scenario_alone() -> None:
    assert [h.scenario.id for h in search_scenarios(TRACEBACK)] == ["pitfall_recompute_mismatch_broken"]


def test_the_search_ignores_the_variable_parts() -> None:
    assert words("tensor at position 16: torch.Size([1, 12])") == words(
        "tensor at position 2: engine.Size([4])"
    )
    assert search_scenarios("") == [] and search_scenarios("1234 [5, 6]") == []
    assert search_scenarios("quantum chromodynamics lattice") == []


def test_every_symptom_finds_its_own_scenario_first() -> None:
    for info in SCENARIOS.values():
        for symptom in info.symptoms:
            assert search_scenarios(symptom)[0].scenario.id == info.id, symptom


def test_torch_oracle_is_the_reference(torch_oracle: ModuleType) -> None:
    # The torch runs above record real torch, not the engine under another name.
    trace = run("pitfall_side_effects_broken", "torch").trace
    assert trace is not None
    assert trace["meta"]["backend"].startswith("torch 2.8.0"), trace["meta"]["backend"]
    assert Path(SCENARIOS["pitfall_side_effects_broken"].path).is_file()
