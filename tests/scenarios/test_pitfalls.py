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
from engine.trace.memory import memory_report, peak_split
from engine.trace.story import story_text

SCENARIOS = {s.id: s for s in list_scenarios()}
PAIRS = [
    "no_grad_inputs",
    "recompute_mismatch",
    "memory_kept",
    "memory_small_region",
    "memory_one_region",
    "memory_wrong_figure",
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


def test_the_pack_has_its_pairs_with_their_metadata() -> None:
    pairs = {p.pair: p for p in pitfall_pairs()}
    assert list(pairs) == PAIRS  # in the order of their titles: "Pitfall 1", ..., "Pitfall 3a", "Pitfall 3b"
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


def _mem_at(scenario_id: str, backend: str, kind: str) -> list[dict[str, int]]:
    return [e["mem"] for e in events(scenario_id, backend, kind)]


def _baseline(scenario_id: str, backend: str) -> RunResult:
    result = run_scenario(SCENARIOS[scenario_id].path, trusted=True, backend=backend)
    assert result.ok and result.trace is not None, result.error
    return result


def test_memory_small_region_saves_the_wide_activations_anyway(backend: str) -> None:
    broken, fixed = "pitfall_memory_small_region_broken", "pitfall_memory_small_region_fixed"
    # The same model with no checkpoint (mlp_memory_none) and with one per block (its fix).
    none = _baseline("mlp_memory_none", backend).trace
    per_block = _baseline("mlp_memory_per_block", backend).trace
    assert none is not None and per_block is not None
    none_start = next(e for e in none["events"] if e["kind"] == "backward_start")["mem"]
    per_block_start = next(e for e in per_block["events"] if e["kind"] == "backward_start")["mem"]
    # Checkpointing only the Tanh: the next Linear saves its output anyway, and each checkpoint
    # keeps its wide input (4 x 256 bytes) to run again: more is alive than with no checkpoint.
    # (``live``, not ``saved``: a torch trace's ``saved`` is a lower bound under checkpoints.)
    [start] = _mem_at(broken, backend, "backward_start")
    assert start["live"] == none_start["live"] + 1024
    seq = events(broken, backend, "backward_start")[0]["seq"]
    trace = run(broken, backend).trace
    assert trace is not None
    assert peak_split(trace["events"], seq)["parts"]["checkpoint_inputs"] == 1024
    findings = {f["kind"]: f["text"] for f in _report(broken, backend)["diagnosis"]}
    assert findings["region_small"].startswith("The checkpointed regions hold 1.0 KB of the ")
    # Checkpointing the whole block: what mlp_memory_per_block holds, no region too small.
    assert _mem_at(fixed, backend, "backward_start") == [per_block_start]
    assert start["live"] - per_block_start["live"] == 2048
    assert "region_small" not in {f["kind"] for f in _report(fixed, backend)["diagnosis"]}


def test_memory_one_region_moves_the_peak_into_the_recomputation(backend: str, tmp_path: Path) -> None:
    broken, fixed = "pitfall_memory_one_region_broken", "pitfall_memory_one_region_fixed"
    # The broken file without its checkpoint: the peak checkpointing should have lowered.
    source = SCENARIOS[broken].path.read_text(encoding="utf-8")
    line = "h = checkpoint(model, x, use_reentrant=False)"
    assert source.count(line) == 1
    plain = tmp_path / "no_checkpoint.py"
    plain.write_text(source.replace(line, "h = model(x)"), encoding="utf-8")
    baseline = run_scenario(plain, trusted=True, backend=backend)
    assert baseline.trace is not None and baseline.stdout == run(broken, backend).stdout
    no_checkpoint = memory_report(baseline.trace["events"])["metrics"]
    metrics = _report(broken, backend)["metrics"]
    assert metrics["recomputations"] == 1
    # The forward held little, but the one recomputation brings it all back: the same peak.
    baseline_start = next(e for e in baseline.trace["events"] if e["kind"] == "backward_start")["mem"]
    assert _mem_at(broken, backend, "backward_start")[0]["live"] <= baseline_start["live"] - 1024
    # Almost the same peak (95 % on the engine); a torch trace records some tensors at other
    # moments (docs/torch_backend.md): there the plain run peaks about a tenth higher.
    assert metrics["peak_live"] >= 0.85 * no_checkpoint["peak_live"]
    if backend == "engine":
        assert metrics["peak_live"] >= 0.9 * no_checkpoint["peak_live"]
    report = _report(broken, backend)
    # The activations, made again at once, are a large part of the peak.
    assert report["peak"]["parts"]["recomputed"] >= metrics["peak_live"] / 3
    text = {f["kind"]: f["text"] for f in report["diagnosis"]}["peak_in_recompute"]
    assert "the recomputation of `model#0`" in text
    # One checkpoint per block: four recomputations of one block each, a lower peak.
    fixed_report = _report(fixed, backend)
    assert fixed_report["metrics"]["recomputations"] == 4
    assert fixed_report["metrics"]["peak_live"] <= metrics["peak_live"] - 512
    assert fixed_report["metrics"]["peak_live"] < 0.85 * no_checkpoint["peak_live"]
    assert fixed_report["peak"]["parts"]["recomputed"] < fixed_report["metrics"]["peak_live"] / 4
    assert "peak_in_recompute" not in {f["kind"] for f in fixed_report["diagnosis"]}


def test_memory_wrong_figure_after_the_backward_does_not_move(backend: str) -> None:
    broken, fixed = "pitfall_memory_wrong_figure_broken", "pitfall_memory_wrong_figure_fixed"
    assert lines(broken, backend) == [
        "checkpoint=False: memory after backward: 2368 bytes",
        "checkpoint=True: memory after backward: 2368 bytes",
    ]
    assert lines(fixed, backend) == [
        "checkpoint=False: held for the backward when it starts: 704 bytes; memory after backward: "
        "2368 bytes",
        "checkpoint=True: held for the backward when it starts: 192 bytes; memory after backward: 2368 bytes",
    ]
    # The broken trace agrees with what the fixed side counts: its two backwards start holding
    # 704 and 192 bytes (saved tensors and checkpoint inputs, split as at a peak). Not read from
    # the fixed trace: under its counting hook a torch trace does not report what nodes saved.
    trace = run(broken, backend).trace
    assert trace is not None
    held = [
        sum(peak_split(trace["events"], e["seq"])["parts"][p] for p in ("saved", "checkpoint_inputs"))
        for e in events(broken, backend, "backward_start")
    ]
    assert held == [704, 192]
    for scenario in (broken, fixed):
        # The two steps end with the same bytes alive.
        end_without, end_with = _mem_at(scenario, backend, "backward_end")
        assert end_without["live"] == end_with["live"]
        # The memory report: at the peak, parameters and gradients, which checkpointing never shrinks.
        findings = {f["kind"]: f["text"] for f in _report(scenario, backend)["diagnosis"]}
        assert "parameters, gradients and your own tensors make the rest" in findings["other_dominates"]
        assert _report(scenario, backend)["metrics"]["runs"] == {"Sequential": {"forward": 2, "recompute": 2}}


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
        ("I checkpointed nn.GELU and saved no memory", "pitfall_memory_small_region_broken"),
        ("checkpoint the whole model, peak memory is the same", "pitfall_memory_one_region_broken"),
        (
            "torch.cuda.memory_allocated() after loss.backward() unchanged with checkpointing",
            "pitfall_memory_wrong_figure_broken",
        ),
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
