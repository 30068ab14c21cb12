"""The memory report (engine/trace/memory.py, Note [Memory report]) on every golden trace: the
peak's parts add up to the live bytes the events state, the ledger has one entry per save and its
links are events of the right kinds, and the findings of Note [Why checkpointing saved little]
name what the bundled scenarios show."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from engine.trace.memory import MEM_PARTS, memory_metrics, memory_report, peak_split, saved_ledger

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NAMES = sorted(p.stem for p in GOLDEN.glob("*.json"))


@cache
def events_of(name: str) -> list[dict[str, Any]]:
    return list(json.loads((GOLDEN / f"{name}.json").read_text())["trace"]["events"])


@pytest.mark.parametrize("name", NAMES)
def test_the_peak_is_the_events_own_and_its_parts_add_up(name: str) -> None:
    events = events_of(name)
    m = memory_metrics(events)
    lives = [e["mem"]["live"] for e in events]
    assert m["peak_live"] == max(lives)
    assert m["peak_live_seq"] == lives.index(max(lives))
    held = [e["mem"]["saved"] + e["mem"]["recomputed"] for e in events]
    assert m["peak_held"] == max(held) and m["peak_held_seq"] == held.index(max(held))
    for seq in {m["peak_live_seq"], m["peak_held_seq"], len(events) // 2}:
        assert seq is not None
        peak = peak_split(events, seq)
        assert set(peak["parts"]) == set(MEM_PARTS)
        assert sum(peak["parts"].values()) == events[seq]["mem"]["live"], f"{name} at event {seq}"
        assert sum(i["bytes"] for i in peak["alive"]) == peak["live"]
        assert [i["bytes"] for i in peak["alive"]] == sorted(
            (i["bytes"] for i in peak["alive"]), reverse=True
        )


@pytest.mark.parametrize("name", NAMES)
def test_counts_are_the_events(name: str) -> None:
    events = events_of(name)
    m = memory_metrics(events)
    kinds = [e["kind"] for e in events]
    assert m["recomputations"] == kinds.count("recompute_start")
    assert m["early_stops"] == kinds.count("early_stop")
    assert m["holders"] == kinds.count("pack")
    recompute_ops = sum(1 for e in events if e["kind"] == "op" and e["phase"] == "recompute")
    assert m["recomputed_ops"] + m["sac_cached_ops"] == recompute_ops
    assert m["sac_cached_ops"] == 0 or name == "selective_checkpoint"
    assert sum(r["forward"] + r["recompute"] for r in m["runs"].values()) == kinds.count("fn_start")


@pytest.mark.parametrize("name", NAMES)
def test_the_ledger_has_one_entry_per_save_and_links_to_events_of_the_right_kind(name: str) -> None:
    events = events_of(name)
    ledger = saved_ledger(events)
    packs = [e for e in events if e["kind"] == "pack"]
    kept = [e for e in events if e["kind"] == "saved" and e["packed"] != "holder"]
    assert [x["seq"] for x in ledger] == sorted(e["seq"] for e in packs + kept)
    kind = {e["seq"]: e["kind"] for e in events}
    for x in ledger:
        assert all(kind[s] == "unpack" for s in x["unpacks"])
        assert all(kind[s] == "recompute_start" for s in x["recomputed_by"])
        assert all(kind[s] == "rpack" for s in x["refilled"])
        assert all(kind[s] == "recomputed_take" for s in x["taken"])
        if x["end"] is not None:
            assert kind[x["end"]] in (
                ("holder_gc",) if x["kept"] == "holder" else ("saved_release", "node_free")
            )
            assert x["end"] > x["seq"]
        if x["kept"] == "holder":
            pack = next(e for e in packs if e["seq"] == x["seq"])
            assert x["bytes"] == pack["nbytes"] and x["holder"] == pack["holder"]
            # Whatever refilled it was an rpack of its own frame and index.
            for s in x["refilled"]:
                assert (events[s]["frame"], events[s]["index"]) == (pack["frame"], pack["index"])
        assert x["fate"]


def test_checkpointing_lowers_what_is_held_for_the_backward() -> None:
    none, per_block, nested = (
        memory_metrics(events_of(f"mlp_memory_{s}")) for s in ("none", "per_block", "nested")
    )
    assert none["peak_held"] > per_block["peak_held"] >= nested["peak_held"]
    assert none["recomputed_ops"] == 0 < per_block["recomputed_ops"] < nested["recomputed_ops"]
    assert none["holders"] == 0 < per_block["holders"] < nested["holders"]


def test_nested_checkpoints_run_the_inner_function_again_for_each_recomputation() -> None:
    runs = memory_metrics(events_of("nested_checkpoint"))["runs"]
    # inner#1 and inner#2 in the forward, once more each inside big#0's recomputation, and their
    # own recomputations: the inner function runs three times per block.
    assert runs["inner"] == {"forward": 3, "recompute": 2}
    assert runs["big"] == {"forward": 1, "recompute": 1}


def test_every_recomputed_holder_in_nested_checkpoint_was_refilled_and_taken() -> None:
    ledger = saved_ledger(events_of("nested_checkpoint"))
    recomputed = [x for x in ledger if x["fate"].startswith("recomputed")]
    assert recomputed
    assert all(x["refilled"] and x["taken"] and x["recomputed_by"] for x in recomputed)
    made_in_recompute = [x for x in ledger if x["phase"] == "recompute" and x["kept"] == "holder"]
    assert made_in_recompute and all("Rule 3" in x["fate"] for x in made_in_recompute if not x["unpacks"])


def findings(name: str) -> dict[str, str]:
    return {f["kind"]: f["text"] for f in memory_report(events_of(name))["diagnosis"]}


def test_why_checkpointing_saved_little() -> None:
    assert "no_checkpoint" in findings("mlp_memory_none")
    assert "no_checkpoint" not in findings("mlp_memory_per_block")
    # The tiny MLP's peak is its parameters and gradients: the wrong figure to judge by.
    assert "other_dominates" in findings("mlp_memory_per_block")
    # early_stop_off recomputes the whole function: its peak moves into the recomputation.
    assert "peak_in_recompute" in findings("early_stop_off")
    # rule6 keeps `y` and `z`, made inside the checkpoint, in variables of its own.
    text = findings("rule6_retain_graph")["outside_reference"]
    assert "`y`" in text and "`z`" in text
    assert "outside_reference" not in findings("mlp_memory_per_block")


def test_a_selective_checkpoint_s_cached_ops_are_not_work_done_again() -> None:
    # Both matrix products of selective_checkpoint come from the cache in the recomputation.
    assert memory_metrics(events_of("selective_checkpoint"))["sac_cached_ops"] == 2


def test_the_policy_that_decided_each_save() -> None:
    policies = {x["policy"] for x in saved_ledger(events_of("mlp_memory_per_block"))}
    assert policies == {"saved", "recomputed by checkpoint"}
    # selective_checkpoint keeps both matrix products' outputs (MUST_SAVE); tanh runs again.
    sac = saved_ledger(events_of("selective_checkpoint"))
    by_policy = {
        p: sorted(x["node_name"] for x in sac if x["policy"] == p)
        for p in ("cached by SAC", "recomputed by checkpoint")
    }
    # The output of the second matrix product, which sin saved, comes back from the cache.
    assert by_policy["cached by SAC"] == ["SinBackward0"]
    assert "TanhBackward0" in by_policy["recomputed by checkpoint"]


def test_the_report_is_json_and_its_marks_are_the_events() -> None:
    events = events_of("nested_checkpoint")
    report = memory_report(events)
    assert json.loads(json.dumps(report)) == report
    for kind, seqs in report["marks"].items():
        assert seqs == [e["seq"] for e in events if e["kind"] == kind]


def meta_of(name: str) -> dict[str, Any]:
    return dict(json.loads((GOLDEN / f"{name}.json").read_text())["trace"]["meta"])


def test_modules_are_named_by_their_path_in_the_variables() -> None:
    # Note [Module paths]: `block = OuterBlock(3)` holds sub1 and sub2, each with lin1 and lin2.
    paths = {m["path"] for m in meta_of("nested_checkpoint")["modules"].values()}
    assert paths == {
        "block",
        "block.sub1",
        "block.sub2",
        *(f"block.sub{i}.lin{j}" for i in (1, 2) for j in (1, 2)),
    }
    # `blocks = nn.ModuleList(...)`: each Linear and Tanh of each block.
    paths = {m["path"] for m in meta_of("mlp_memory_per_block")["modules"].values()}
    assert {f"blocks.{i}.{j}" for i in range(4) for j in range(3)} <= paths
    assert "modules" not in meta_of("single_checkpoint"), "no module ran: no table"


@pytest.mark.parametrize(
    "name", ["mlp_memory_none", "mlp_memory_per_block", "mlp_memory_nested", "nested_checkpoint"]
)
def test_the_module_breakdown_accounts_for_every_save(name: str) -> None:
    events = events_of(name)
    report = memory_report(events, modules=meta_of(name)["modules"])
    rows = report["modules"]
    first = [x for x in report["ledger"] if x["phase"] != "recompute"]
    assert sum(r["saved"] + r["holders"] for r in rows) == sum(x["bytes"] for x in first)
    assert sum(r["entries"] for r in rows) == len(first)
    # Per module, a tensor's bytes count in full (two modules saving views of one storage both
    # count it), so only each row bounds its own figure.
    assert all(0 <= r["held_at_peak"] <= r["saved"] for r in rows)


def test_checkpointing_turns_a_module_s_saved_tensors_into_holders() -> None:
    def by_path(name: str) -> dict[str, Any]:
        rows = memory_report(events_of(name), modules=meta_of(name)["modules"])["modules"]
        return {r["path"]: r for r in rows}

    none, per_block = by_path("mlp_memory_none"), by_path("mlp_memory_per_block")
    for path in (f"blocks.{i}.{j}" for i in range(4) for j in range(3)):
        assert none[path]["saved"] > 0 and none[path]["holders"] == 0
        assert per_block[path]["saved"] == 0 and per_block[path]["holders"] == none[path]["saved"]
        assert per_block[path]["recomputed"] == per_block[path]["holders"]
