"""The hostile-input suite: every attack of ``_corpus.py`` run as an uploaded scenario is.

Each entry is refused with an error naming its line, or contained by a named limit, or runs and
returns nothing that names the server's files; the canary file is never read, no file is written.

The path is the upload's: text -> ``compile_untrusted`` -> restricted globals -> ``execute`` in a
worker process with the resource limits, as ``nobody``. Entries whose limit holds for a whole
process (CPU seconds) run through ``run_scenario(..., trusted=False)`` itself, a worker each; the
rest run in one worker process set up the same way (``tests/security/_batch.py``): 0.3 s of
imports once instead of per entry. ``test_the_batch_path_is_the_worker_path`` checks the two
give the same answers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.runner import RunResult, run_scenario
from app.sandbox import PROJECT_ROOT, Limits, _worker_env
from tests.security._corpus import CORPUS, Attack

# The server's defaults, but a short CPU budget: the isolated entries spend it.
LIMITS = Limits(cpu_seconds=1.0, wall_seconds=30.0, max_events=20_000)
# One worker for the whole batch: the CPU budget of every entry in it together.
BATCH_LIMITS = Limits(cpu_seconds=60.0, wall_seconds=240.0, max_events=20_000)
SERVER_PATHS = (str(PROJECT_ROOT), sys.prefix, os.path.dirname(os.__file__))


@dataclass
class Arena:
    """What the attacks aim at: a canary file anyone may read and a directory anyone may write,
    so that only the sandbox stands between them and the scenario."""

    root: Path
    canary: Path
    drop: Path
    secret: str

    def text(self, attack: Attack) -> str:
        return attack.text.replace("CANARY", str(self.canary)).replace("DROP", str(self.drop))


def _prepare_arena() -> Arena:
    root = Path(tempfile.mkdtemp(prefix="autograd-lens-arena-"))
    root.chmod(0o755)
    secret = f"canary-{secrets.token_hex(8)}"
    canary = root / "canary.txt"
    canary.write_text(secret + "\n")
    canary.chmod(0o644)
    drop = root / "drop"
    drop.mkdir()
    drop.chmod(0o777)
    # An access time older than the modification time: the next read of the file sets it, even
    # on a filesystem mounted relatime.
    mtime = canary.stat().st_mtime
    os.utime(canary, (mtime - 3600, mtime))
    return Arena(root, canary, drop, secret)


def run_batch(jobs: list[tuple[str, str]], limits: Limits) -> dict[str, RunResult]:
    """Run ``(id, text)`` jobs in one worker process (``tests/security/_batch.py``), set up as
    ``app.sandbox.run_in_worker`` sets up a worker: its environment, session and directory."""
    payload = json.dumps({"limits": limits.to_dict(), "jobs": [{"id": i, "text": t} for i, t in jobs]})
    with tempfile.TemporaryDirectory(prefix="autograd-lens-") as workdir:
        os.chmod(workdir, 0o755)
        proc = subprocess.run(
            [sys.executable, "-m", "tests.security._batch"],
            input=payload.encode(),
            capture_output=True,
            cwd=workdir,
            env=_worker_env(workdir),
            start_new_session=True,
            timeout=limits.wall_seconds,
        )
    lines = proc.stdout.decode().splitlines()
    results = {}
    for head, body in zip(lines[::2], lines[1::2], strict=False):
        results[json.loads(head)["id"]] = RunResult.from_dict(json.loads(body))
    assert proc.returncode == 0 and len(results) == len(jobs), (
        f"the batch worker stopped after {len(results)} of {len(jobs)} entries "
        f"(exit {proc.returncode}): {proc.stderr.decode()[-2000:]}"
    )
    return results


def limits_of(attack: Attack) -> Limits:
    return dataclasses.replace(LIMITS, **dict(attack.limits))


@dataclass
class Outcomes:
    arena: Arena
    results: dict[str, RunResult]
    canary_atime_before: float
    canary_atime_after: float
    canary_read_detected: bool  # the control: reading the canary moves its access time


@pytest.fixture(scope="module")
def outcomes() -> Iterator[Outcomes]:
    arena = _prepare_arena()
    try:
        before = arena.canary.stat()
        batched = [(a.id, arena.text(a)) for a in CORPUS if not a.isolated]
        isolated = [a for a in CORPUS if a.isolated]
        with ThreadPoolExecutor(max_workers=2) as pool:
            batch = pool.submit(run_batch, batched, BATCH_LIMITS)
            singles = {
                a.id: pool.submit(run_scenario, arena.text(a), trusted=False, limits=limits_of(a))
                for a in isolated
            }
            results = {**batch.result(), **{k: f.result() for k, f in singles.items()}}
        atime = arena.canary.stat().st_atime
        control = arena.root / "control.txt"
        control.write_text("x")
        os.utime(control, (before.st_mtime - 3600, before.st_mtime))
        control_before = control.stat().st_atime
        control.read_text()
        yield Outcomes(arena, results, before.st_atime, atime, control.stat().st_atime != control_before)
    finally:
        shutil.rmtree(arena.root, ignore_errors=True)


def _answer_text(result: RunResult) -> str:
    return json.dumps(result.to_dict())


def test_the_corpus_is_large_and_well_formed() -> None:
    assert len(CORPUS) >= 100
    assert len({a.id for a in CORPUS}) == len(CORPUS)
    for a in CORPUS:
        assert a.outcome in ("refused", "limit", "harmless"), a
        assert (a.outcome == "refused") == (a.error is not None), a
        assert (a.outcome == "limit") == (a.limit is not None), a
        assert a.limit is None or a.limit in Limits.__dataclass_fields__, a


@pytest.mark.parametrize("attack", CORPUS, ids=[a.id for a in CORPUS])
def test_attack_is_refused_or_contained(attack: Attack, outcomes: Outcomes) -> None:
    result = outcomes.results[attack.id]
    if attack.outcome == "refused":
        assert not result.ok and result.error is not None, result
        assert result.error.type == attack.error, result.error
        assert result.error.line == attack.line, result.error
        assert result.error.file == "<scenario>", result.error
        assert attack.words in result.error.message, result.error
    elif attack.outcome == "limit":
        assert not result.ok and result.error is not None, result
        assert (result.error.type, result.error.limit) == ("LimitExceeded", attack.limit), result.error
        assert attack.limit in result.error.message or attack.limit != "max_tensor_numel", result.error
    # Whatever the outcome, the answer names none of the server's own files.
    answer = _answer_text(result)
    for path in SERVER_PATHS:
        assert path + "/" not in answer, f"{path} in {answer[:2000]}"


def test_the_canary_is_never_read(outcomes: Outcomes) -> None:
    assert outcomes.canary_read_detected, "this filesystem does not record reads: the check means nothing"
    assert outcomes.canary_atime_after == outcomes.canary_atime_before
    leaked = [k for k, r in outcomes.results.items() if outcomes.arena.secret in _answer_text(r)]
    assert leaked == []


def test_no_file_is_written(outcomes: Outcomes) -> None:
    assert list(outcomes.arena.drop.iterdir()) == []
    assert sorted(p.name for p in outcomes.arena.root.iterdir()) == ["canary.txt", "control.txt", "drop"]
    assert outcomes.arena.canary.read_text() == outcomes.arena.secret + "\n"
    assert stat.S_IMODE(outcomes.arena.drop.stat().st_mode) == 0o777


def test_the_batch_runs_as_nobody_like_the_worker(outcomes: Outcomes) -> None:
    batched = [r for k, r in outcomes.results.items() if not next(a for a in CORPUS if a.id == k).isolated]
    dropped = {r.extra.get("privileges_dropped") for r in batched}
    assert dropped == {os.geteuid() == 0}


SAMPLE = ["format_method", "kernel_tofile", "traceback_getattr", "zeros_1e9", "nested_mark", "null_byte"]


def test_the_batch_path_is_the_worker_path(outcomes: Outcomes) -> None:
    """A sample of the batched entries, each in a worker of its own: the same error, line and
    output as in the batch."""
    attacks = [a for a in CORPUS if a.id in SAMPLE]
    with ThreadPoolExecutor(max_workers=2) as pool:
        own = list(
            pool.map(lambda a: run_scenario(outcomes.arena.text(a), trusted=False, limits=LIMITS), attacks)
        )
    for attack, result in zip(attacks, own, strict=True):
        batched = outcomes.results[attack.id]
        assert (result.ok, result.stdout) == (batched.ok, batched.stdout)
        assert result.error is not None and batched.error is not None
        # The messages may differ for a RecursionError: the batch runs a frame or two deeper.
        where = ("type", "file", "line", "limit")
        assert [getattr(result.error, k) for k in where] == [getattr(batched.error, k) for k in where]


ANOMALY = (
    "import engine as torch\n"
    "def f(x):\n"
    "    return (x * 0).sqrt() / 0\n"
    "with torch.autograd.detect_anomaly():\n"
    "    x = torch.ones(2, requires_grad=True)\n"
    "    f(x).sum().backward()\n"
)


@pytest.mark.parametrize("trusted", [False, True], ids=["sandbox", "trusted"])
def test_anomaly_tracebacks_show_the_scenarios_frames_only(trusted: bool) -> None:
    """The forward traceback anomaly mode prints (and the trace marks) starts at the scenario's
    outermost frame: the worker's and the runner's frames below it are not the scenario's."""
    result = run_scenario(ANOMALY, trusted=trusted, limits=LIMITS, filename="<scenario>")
    assert result.error is not None and result.error.type == "RuntimeError"
    frames = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith('File "')]
    assert frames == ['File "<scenario>", line 6, in <module>', 'File "<scenario>", line 3, in f']
    marks = [e["label"] for e in result.trace["events"] if e["kind"] == "mark"]  # type: ignore[index]
    assert any('File "<scenario>", line 3, in f' in label for label in marks)
    assert not any("runner.py" in label or "_worker.py" in label or "runpy" in label for label in marks)
