"""The torch backend (``engine.trace.torch_backend``) against the engine, scenario by scenario.

This is the fidelity test the diff view shows: each bundled scenario, run on real torch 2.8.0
and on the engine, must give the same checkpoint events (holder deaths may be reordered within
a run, see ``engine/trace/diff.py``), the same error, and the same gradients (Note [One random
stream for both backends]).
"""

from __future__ import annotations

from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from app.runner import SCENARIOS_DIR, ScenarioInfo, list_scenarios, run_scenario
from engine.trace import torch_backend
from engine.trace.causes import cause_index, check_causes
from engine.trace.diff import compare_grads, diff_traces
from engine.trace.story import story_document
from engine.trace.validate import check_document
from tests.trace._check import validate
from tests.trace._probe_view import checkpoint_events

pytestmark = pytest.mark.oracle

SCENARIOS = list_scenarios()


@pytest.mark.parametrize("info", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_engine_and_torch_traces_agree(info: ScenarioInfo, torch_oracle: ModuleType) -> None:
    ours = run_scenario(info.path, trusted=True)
    theirs = run_scenario(info.path, trusted=True, backend="torch")
    assert ours.trace is not None and theirs.trace is not None, theirs.error
    assert theirs.trace["meta"]["backend"] == "torch 2.8.0"
    assert ours.trace["meta"]["backend"] == "engine"
    validate(theirs.trace)
    check_document(theirs.trace)  # what the viewer requires of an imported trace
    assert (ours.error and ours.error.type) == (theirs.error and theirs.error.type), theirs.error
    diff = diff_traces(ours.trace, theirs.trace)
    assert diff.checkpoint_equal, diff.summary()
    assert checkpoint_events(ours.trace["events"]) == checkpoint_events(theirs.trace["events"])
    # Each holder stands for the same node's slot (torch's are found by probing: Note [Which node
    # a pack was for]); the diff compares it on unpacks, this says which pack when it fails.
    assert _packs(theirs.trace) == _packs(ours.trace)
    problems = compare_grads(ours.extra["grads"], theirs.extra["grads"])
    met_error = any(e["kind"] == "checkpoint_error" for e in ours.trace["events"])  # caught, shown
    assert ours.extra["grads"] or not ours.ok or met_error, "the scenario ends with no gradient to compare"
    assert not problems, problems
    # Modules are named alike (Note [Module paths]), and every node torch's trace shows in a module
    # the engine shows in the same module (the engine shows a few more nodes).
    assert theirs.trace["meta"].get("modules") == ours.trace["meta"].get("modules")
    assert not _node_modules(theirs.trace) - _node_modules(ours.trace)
    # The story layer reads a torch trace as it reads the engine's: its cause links follow Note
    # [Cause links], and the steps, chapters and predict-mode questions tell the same story.
    check_causes(theirs.trace["events"], cause_index(theirs.trace["events"]))
    mine, torch_story = story_document(ours.trace["events"]), story_document(theirs.trace["events"])
    assert [(s["kind"], s["frame"], len(s["seqs"])) for s in torch_story["steps"]] == [
        (s["kind"], s["frame"], len(s["seqs"])) for s in mine["steps"]
    ]
    assert [c["title"] for c in torch_story["chapters"]] == [c["title"] for c in mine["chapters"]]
    # Holders that die together may die in another order on torch (the diff allows it), so the
    # answer of "which holder is freed next?" may differ; every other answer is the same.
    assert [(q["kind"], q["answer"] if q["kind"] != "next_gc" else "") for q in torch_story["questions"]] == [
        (q["kind"], q["answer"] if q["kind"] != "next_gc" else "") for q in mine["questions"]
    ]


def test_without_checkpoints_torch_sees_every_saved_tensor(torch_oracle: ModuleType) -> None:
    # What the nodes of a composite call (linear: t, addmm) saved is reported for each of them, so
    # outside checkpoints a torch trace holds what the engine's does (docs/torch_backend.md).
    from engine.trace.memory import memory_metrics, saved_ledger

    path = SCENARIOS[[s.id for s in SCENARIOS].index("mlp_memory_none")].path
    ours = run_scenario(path, trusted=True)
    theirs = run_scenario(path, trusted=True, backend="torch")
    assert ours.trace is not None and theirs.trace is not None

    def kept(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((x["slot"], x["bytes"]) for x in saved_ledger(trace["events"]))

    assert kept(theirs.trace) == kept(ours.trace)
    assert (
        memory_metrics(theirs.trace["events"])["peak_held"]
        == memory_metrics(ours.trace["events"])["peak_held"]
    )


def _node_modules(trace: dict[str, Any]) -> Counter[tuple[str, Any]]:
    """(node name, module) of each node made in a module but AccumulateGrad (torch names it its own
    way) and a reentrant checkpoint's CheckpointFunctionBackward: torch makes that node inside
    CheckpointFunction.apply, where no op is recorded, so the torch backend first sees it when an
    op uses its output, under that op's module (docs/torch_backend.md). The node sets themselves
    differ a little too."""
    return Counter(
        (e["name"], e["module"])
        for e in trace["events"]
        if e["kind"] == "node_new"
        and e.get("module") is not None
        and not e["name"].endswith("AccumulateGrad")
        and e["name"] != "CheckpointFunctionBackward"
    )


def _packs(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each pack, and the node and slot its holder stands for (its ``saved`` event's)."""
    events = trace["events"]
    names = {e["node"]: e["name"] for e in events if e["kind"] == "node_new"}
    saved_for = {
        e["holder"]: (names.get(e["node"]), e["slot"])
        for e in events
        if e["kind"] == "saved" and e["packed"] == "holder"
    }
    return [(e["frame"], e["index"], saved_for.get(e["holder"])) for e in events if e["kind"] == "pack"]


def _checkpoint_internals(torch: ModuleType) -> dict[str, Any]:
    cp = torch.utils.checkpoint
    hooks = torch.autograd.graph.saved_tensors_hooks
    names = ("checkpoint", "_CheckpointFrame", "_checkpoint_hook", "_recomputation_hook", "uuid")
    state = {n: getattr(cp, n) for n in names}
    state["_NoopSaveInputs"] = getattr(cp, "_NoopSaveInputs", None)
    state["enter"], state["exit"] = hooks.__enter__, hooks.__exit__
    state["backward"], state["grad"] = torch.autograd.backward, torch.autograd.grad
    state["_str"] = torch._tensor_str._str
    state["modes"] = torch.overrides._get_current_function_mode_stack()
    return state


def test_patches_are_undone_also_when_the_block_raises(torch_oracle: ModuleType) -> None:
    torch = torch_oracle
    before = _checkpoint_internals(torch)
    with pytest.raises(ZeroDivisionError), torch_backend.record() as tr:
        x = torch.ones(2, requires_grad=True)
        torch.utils.checkpoint.checkpoint(torch.sin, x, use_reentrant=False).sum().backward()
        assert _checkpoint_internals(torch) != before
        1 / 0  # noqa: B018
    assert _checkpoint_internals(torch) == before
    kinds = [e["kind"] for e in tr.events]
    assert kinds[-1] == "error" and "pack" in kinds and "recompute_start" in kinds


def test_a_plain_pytorch_program_is_recorded_with_its_names(torch_oracle: ModuleType) -> None:
    """What a user's own training step looks like: a model with a checkpointed block."""
    torch = torch_oracle
    from torch.utils.checkpoint import checkpoint

    with torch_backend.record() as tr:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
        inp = torch.randn(2, 4)
        out = checkpoint(model, inp, use_reentrant=False)
        loss = out.pow(2).sum()
        loss.backward()
    events = tr.events
    frames = [e for e in events if e["kind"] == "frame_new"]
    assert [f["label"] for f in frames] == ["Sequential"]
    names = {e["name"] for e in events if e["kind"] == "tensor_new"}
    assert {"inp", "out", "loss", "model.0.weight", "model.2.bias"} <= names
    packs = [e for e in events if e["kind"] == "pack"]
    rpacks = [e for e in events if e["kind"] == "rpack"]
    assert packs and [p["shape"] for p in packs] == [r["shape"] for r in rpacks]
    assert any(e["kind"] == "grad_accumulate" for e in events)
    assert events[-1]["mem"]["recomputed"] == 0


def test_record_refuses_to_nest_with_an_engine_recording(torch_oracle: ModuleType) -> None:
    from engine import trace

    with trace.record(), pytest.raises(RuntimeError, match="cannot be nested"), torch_backend.record():
        pass


def test_scenarios_see_torch_through_the_import_shim(torch_oracle: ModuleType) -> None:
    namespace: dict[str, Any] = {}
    with torch_backend.engine_is_torch(namespace):
        code = "import engine as torch\nfrom engine.utils.checkpoint import checkpoint\nfrom engine import trace\n"
        exec(code, namespace)
    assert namespace["torch"] is torch_oracle
    assert namespace["checkpoint"] is torch_oracle.utils.checkpoint.checkpoint
    assert namespace["trace"].__name__ == "engine.trace"


def test_dropout_masks_come_from_the_engine_stream(torch_oracle: ModuleType) -> None:
    # dropout_rng prints whether checkpointed gradients equal the reference: True with
    # preserve_rng_state, False without. On torch that only holds if checkpoint's RNG stash and
    # restore carry the engine's stream too (Note [One random stream for both backends]).
    ours = run_scenario(SCENARIOS_DIR / "dropout_rng.py", trusted=True)
    theirs = run_scenario(SCENARIOS_DIR / "dropout_rng.py", trusted=True, backend="torch")
    assert theirs.stdout == ours.stdout
    assert "preserve_rng_state = False -> gradients equal the reference: False" in theirs.stdout
    assert not compare_grads(ours.extra["grads"], theirs.extra["grads"])


def test_engine_rng_is_undone(torch_oracle: ModuleType) -> None:
    from engine.trace.torch_backend import engine_rng

    before = (torch_oracle.get_rng_state, torch_oracle.random.set_rng_state, torch_oracle.randn)
    with engine_rng():
        assert torch_oracle.get_rng_state is not before[0]
        state = torch_oracle.get_rng_state()
        first = torch_oracle.nn.functional.dropout(torch_oracle.ones(64), 0.5)
        torch_oracle.set_rng_state(state)
        again = torch_oracle.nn.functional.dropout(torch_oracle.ones(64), 0.5)
        assert torch_oracle.equal(first, again)
    assert (torch_oracle.get_rng_state, torch_oracle.random.set_rng_state, torch_oracle.randn) == before
    assert not torch_oracle.utils._python_dispatch._get_current_dispatch_mode_stack()
