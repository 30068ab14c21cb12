"""Checkpointing modules from outside (app/whatif.py, Note [Checkpointing modules from outside]):
a script runs unchanged with chosen modules under checkpoint, and gets what it would have got
written that way; the CLI's ``memory --what-if`` puts both runs side by side."""

from __future__ import annotations

from types import ModuleType

import pytest

import engine
from app.cli import main
from app.runner import SCENARIOS_DIR, run_scenario
from app.whatif import WhatIfError, matches, parse_patterns
from engine.trace.memory import memory_metrics

NONE = SCENARIOS_DIR / "mlp_memory_none.py"
PER_BLOCK = SCENARIOS_DIR / "mlp_memory_per_block.py"
FIGURES = ("peak_held", "holders", "holder_bytes", "recomputations", "early_stops", "recomputed_ops")


def test_patterns_match_one_path_part_per_star() -> None:
    assert matches(["transformer", "h", "*"], "transformer.h.3")
    assert not matches(["transformer", "h", "*"], "transformer.h.3.attn")
    assert matches(["blocks", "*", "0"], "blocks.2.0")
    assert matches(["h", "1?"], "h.11") and not matches(["h", "1?"], "h.2")
    with pytest.raises(WhatIfError, match="names joined by dots"):
        parse_patterns(["blocks..0"])


def test_checkpointing_the_blocks_from_outside_is_the_per_block_scenario() -> None:
    # mlp_memory_per_block is mlp_memory_none with each block under checkpoint, written by hand.
    what_if = run_scenario(NONE, trusted=True, checkpoint_modules=["blocks.*"])
    written = run_scenario(PER_BLOCK, trusted=True)
    assert what_if.ok and written.ok and what_if.trace and written.trace
    assert what_if.extra["checkpointed"] == [f"blocks.{i}" for i in range(4)]
    a, b = memory_metrics(what_if.trace["events"]), memory_metrics(written.trace["events"])
    assert {k: a[k] for k in FIGURES} == {k: b[k] for k in FIGURES}
    plain = run_scenario(NONE, trusted=True)
    assert what_if.extra["grads"] == plain.extra["grads"], "checkpointing does not change the gradients"


def test_a_pattern_that_matches_nothing_is_the_runs_error_with_the_paths_there_were() -> None:
    result = run_scenario(NONE, trusted=True, checkpoint_modules=["decoder.*"])
    assert not result.ok and result.error is not None
    assert result.error.type == "WhatIfError"
    assert "'decoder.*' matched no module" in result.error.message
    assert "blocks.0.0" in result.error.message


def test_module_call_is_put_back_after_the_run() -> None:
    before = engine.nn.Module.__call__
    run_scenario(NONE, trusted=True, checkpoint_modules=["blocks.*"])
    assert engine.nn.Module.__call__ is before


def test_untrusted_runs_refuse_it() -> None:
    with pytest.raises(ValueError, match="trusted local code only"):
        run_scenario("x = 1", trusted=False, checkpoint_modules=["a"])


@pytest.mark.oracle
def test_torch_gets_the_same_from_the_same_pattern(torch_oracle: ModuleType) -> None:
    before = torch_oracle.nn.Module.__call__
    ours = run_scenario(NONE, trusted=True, checkpoint_modules=["blocks.*.0"])
    theirs = run_scenario(NONE, trusted=True, backend="torch", checkpoint_modules=["blocks.*.0"])
    assert torch_oracle.nn.Module.__call__ is before
    assert ours.trace and theirs.trace
    assert theirs.extra["checkpointed"] == ours.extra["checkpointed"]
    a, b = memory_metrics(ours.trace["events"]), memory_metrics(theirs.trace["events"])
    for key in ("holders", "recomputations", "early_stops"):
        assert a[key] == b[key], key


def test_the_cli_shows_both_runs_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "mlp_memory_none", "--what-if", "blocks.*", "-q"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["as", "written", "what", "if"]
    holders = next(line for line in lines if line.startswith("holders"))
    assert holders.split()[1:] == ["0", "20"]
    assert "what if: checkpointed blocks.0, blocks.1, blocks.2, blocks.3" in out
    assert "Nothing is checkpointed" in out
    assert main(["memory", "mlp_memory_none", "--what-if", "a..b", "-q"]) == 2
    assert "names joined by dots" in capsys.readouterr().err
