"""Tutorial-level programs run unchanged on both libraries (issue 13): each file here is written
as a learner would write it after changing a PyTorch tutorial's import line to
``import engine as torch``, runs once on the engine and once on real torch 2.8.0 (through the
torch backend's import shim, with one random stream for both: tests/programs/_run.py), and must
print the same things, numbers equal within float32's 1e-5 (relative)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = sorted(p for p in HERE.glob("*.py") if not p.name.startswith(("_", "test_")))
NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|-?inf|nan")


def run(backend: str, path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tests.programs._run", backend, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{path.name} on {backend} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def same(a: str, b: str, rel: float = 1e-5) -> list[str]:
    """The lines where ``a`` and ``b`` differ: in their words, or in a number beyond ``rel``."""
    problems = []
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        return [f"{len(la)} lines against {len(lb)}"]
    for i, (x, y) in enumerate(zip(la, lb, strict=True)):
        if NUMBER.sub("#", x) != NUMBER.sub("#", y):
            problems.append(f"line {i + 1}: {x!r} != {y!r}")
            continue
        for p, q in zip(NUMBER.findall(x), NUMBER.findall(y), strict=True):
            fp, fq = float(p), float(q)
            if not (math.isclose(fp, fq, rel_tol=rel, abs_tol=1e-6) or (math.isnan(fp) and math.isnan(fq))):
                problems.append(f"line {i + 1}: {p} != {q}  ({x!r})")
                break
    return problems


def test_there_are_programs() -> None:
    assert len(PROGRAMS) >= 6


def test_same_compares_numbers_and_words() -> None:
    assert same("loss 1.000001", "loss 1.0000012") == []
    assert same("loss 1.0", "loss 1.1") != []
    assert same("loss 1.0", "lost 1.0") != []


@pytest.mark.oracle
@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_prints_what_torch_prints(path: Path, torch_oracle: ModuleType) -> None:
    ours, theirs = run("engine", path), run("torch", path)
    assert ours.strip(), "the program printed nothing"
    problems = same(ours, theirs)
    assert not problems, "\n".join(problems[:10]) + f"\n--- engine:\n{ours}\n--- torch:\n{theirs}"
