"""What each checkpointing strategy buys, measured: one model run under several strategies.

The model is an MLP of ``n`` blocks (``Linear(w, 4w)``, ``Tanh``, ``Linear(4w, w)``, the blocks of
the ``mlp_memory_*`` scenarios, wider), written once as a scenario text per strategy
(``model_source``) that runs unchanged on the engine and on real PyTorch (it does ``import engine
as torch``, which the torch backend maps to torch). Each run is a real run: its trace gives the
memory figures (engine/trace/memory.py), and the script measures itself the way one would on
torch, independently of our trace: the bytes that pass its outermost saved-tensor hooks in the
forward, and how many times each block's ``forward`` started (forward pre-hooks). Those two measurements
must be equal on both backends (tests/app/test_compare.py, and bench/bench_memory.py for the
larger sizes).

Note [Strategies compared]
~~~~~~~~~~~~~~~~~~~~~~~~~~
- ``none``: no checkpointing; every activation is saved until the backward uses it.
- ``per_block``: ``checkpoint(block, h, use_reentrant=False)`` for each block: a block's
  activations are recomputed when the backward reaches it; only block inputs are kept.
- ``nested``: pairs of blocks under an outer checkpoint, each block under an inner one (the
  ``mlp_memory_nested`` scenario): the forward keeps one input per pair, and a block may run three
  times (forward, its pair's recomputation, its own recomputation).
- ``sequential``: ``checkpoint_sequential(blocks, round(sqrt(n)), h, use_reentrant=False)``: about
  sqrt(n) segments, so sqrt(n) segment inputs are kept and one segment (sqrt(n) blocks) is
  recomputed at a time: Chen et al. 2016's O(sqrt n) memory for one extra forward.
- ``selective``: ``per_block`` with a selective policy (``create_selective_checkpoint_contexts``):
  the matrix products' outputs are kept (``MUST_SAVE``), ``tanh`` is recomputed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.trace.memory import memory_metrics

WIDTH = 16
BATCH = 256
MEASURED = "measured:"  # the line the model script prints its own measurements on


@dataclass(frozen=True)
class Strategy:
    id: str
    title: str
    description: str
    body: str  # the script's ``forward(h)``, checkpointing its way


STRATEGIES: dict[str, Strategy] = {
    s.id: s
    for s in (
        Strategy(
            "none",
            "no checkpointing",
            "every activation is saved until the backward uses it",
            "def forward(h):\n    return blocks(h)\n",
        ),
        Strategy(
            "per_block",
            "one checkpoint per block",
            "each block's activations are recomputed when the backward reaches it",
            "def forward(h):\n"
            "    for block in blocks:\n"
            "        h = checkpoint(block, h, use_reentrant=False)\n"
            "    return h\n",
        ),
        Strategy(
            "nested",
            "nested checkpoints",
            "pairs of blocks in an outer checkpoint, each block in an inner one",
            "def pair(first, second):\n"
            "    def run_pair(h):\n"
            "        h = checkpoint(first, h, use_reentrant=False)\n"
            "        return checkpoint(second, h, use_reentrant=False)\n"
            "\n"
            "    return run_pair\n"
            "\n"
            "\n"
            "def forward(h):\n"
            "    for i in range(0, N - 1, 2):\n"
            "        h = checkpoint(pair(blocks[i], blocks[i + 1]), h, use_reentrant=False)\n"
            "    if N % 2:\n"
            "        h = checkpoint(blocks[N - 1], h, use_reentrant=False)\n"
            "    return h\n",
        ),
        Strategy(
            "sequential",
            "checkpoint_sequential, sqrt(N) segments",
            "about sqrt(N) segments: their inputs are kept, one segment is recomputed at a time",
            "SEGMENTS = max(1, round(math.sqrt(N)))\n"
            "\n"
            "\n"
            "def forward(h):\n"
            "    return checkpoint_sequential(blocks, SEGMENTS, h, use_reentrant=False)\n",
        ),
        Strategy(
            "selective",
            "selective: save matmuls, recompute the rest",
            "one checkpoint per block; a policy keeps the matrix products' outputs",
            "SAVE = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}\n"
            "\n"
            "\n"
            "def policy(ctx, func, *args, **kwargs):\n"
            "    return CheckpointPolicy.MUST_SAVE if func in SAVE else CheckpointPolicy.PREFER_RECOMPUTE\n"
            "\n"
            "\n"
            "def forward(h):\n"
            "    context_fn = functools.partial(create_selective_checkpoint_contexts, policy)\n"
            "    for block in blocks:\n"
            "        h = checkpoint(block, h, use_reentrant=False, context_fn=context_fn)\n"
            "    return h\n",
        ),
    )
}

SWEEP_STRATEGIES = ("none", "per_block", "sequential")
SWEEP_NS = (2, 4, 8, 16, 32, 64)


class CompareError(ValueError):
    """A request the comparison cannot run (unknown strategy, N out of range)."""


def check_request(strategy: str, n: int) -> None:
    if strategy not in STRATEGIES:
        raise CompareError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    if not 1 <= n <= 64:
        raise CompareError(f"n must be between 1 and 64 blocks, not {n}")


def model_source(strategy: str, n: int) -> str:
    """The scenario text of the model under ``strategy``: it runs on either backend."""
    check_request(strategy, n)
    s = STRATEGIES[strategy]
    return f'''"""Compare: {s.title}, {n} blocks

An MLP of {n} blocks (Linear {WIDTH}->{4 * WIDTH}, Tanh, Linear {4 * WIDTH}->{WIDTH}) on a batch of {BATCH}:
{s.description}.
Made by the compare page (app/compare.py): the same model runs under each strategy, and the
last line it prints is its own measurement of itself.
"""

import functools
import json
import math

import engine as torch
from engine import nn
from engine.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
)

torch.manual_seed(0)
N = {n}


def make_block():
    return nn.Sequential(nn.Linear({WIDTH}, {4 * WIDTH}), nn.Tanh(), nn.Linear({4 * WIDTH}, {WIDTH}))


blocks = nn.Sequential(*[make_block() for _ in range(N)])
x = torch.randn({BATCH}, {WIDTH}, requires_grad=True)

# The script measures itself as one would on torch: bytes through the outermost saved-tensor
# hooks in the forward, and the calls of each block's forward, recomputations included (a pre-hook:
# a recomputation that stops early never returns from the block, so a forward hook misses it).
calls = [0] * N
for i, block in enumerate(blocks):
    block.register_forward_pre_hook(lambda module, args, i=i: calls.__setitem__(i, calls[i] + 1))
packed = []


def pack(t):
    packed.append(t.numel() * t.element_size())
    return t


{s.body}

with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    out = forward(x)
loss = out.pow(2).mean()
loss.backward()
measured = {{"saved_bytes": sum(packed), "saved_tensors": len(packed), "block_calls": calls}}
print("{MEASURED}", json.dumps(measured))
'''


def measured_of(events: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """What the model script printed about itself (its ``mark`` event), or None."""
    for e in reversed(events):
        label = e.get("label") if e["kind"] == "mark" else None
        if isinstance(label, str) and label.startswith(MEASURED):
            value: dict[str, Any] = json.loads(label[len(MEASURED) :])
            return value
    return None


def figures_of(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a row needs from a run's events (the part worth caching)."""
    return {"metrics": memory_metrics(events), "measured": measured_of(events)}


def row_of(strategy: str, n: int, backend: str, events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One strategy's figures, from its run's trace."""
    return row_from(strategy, n, backend, figures_of(events))


def row_from(strategy: str, n: int, backend: str, figures: dict[str, Any]) -> dict[str, Any]:
    m, measured = figures["metrics"], figures["measured"]
    calls = measured["block_calls"] if measured else []
    return {
        "strategy": strategy,
        "title": STRATEGIES[strategy].title,
        "backend": backend,
        "n": n,
        "peak_live": m["peak_live"],
        "peak_live_step": None if m["peak_live_seq"] is None else m["peak_live_seq"] + 1,
        "peak_held": m["peak_held"],
        "peak_held_step": None if m["peak_held_seq"] is None else m["peak_held_seq"] + 1,
        "peak_saved": m["peak_saved"],
        "recomputed_ops": m["recomputed_ops"],
        "sac_cached_ops": m["sac_cached_ops"],
        "extra_block_runs": sum(calls) - n if calls else None,
        "recomputations": m["recomputations"],
        "early_stops": m["early_stops"],
        "holders": m["holders"],
        "wall_ms": round(m["wall_ns"] / 1e6, 1),
        "measured": measured,
        "events": m["events"],
    }


def fit_exponent(ns: Sequence[int], values: Sequence[float]) -> float:
    """The exponent k of ``value ~ c * n**k``, by least squares on logs."""
    pts = [(math.log(n), math.log(v)) for n, v in zip(ns, values, strict=True) if n > 0 and v > 0]
    if len(pts) < 2:
        raise ValueError("an exponent needs two points or more")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def sqrt_law(ns: Sequence[int], values: Sequence[float]) -> list[float]:
    """Chen et al. 2016's O(sqrt n) curve through the measured points: c * sqrt(n), with c the
    least-squares fit of the points to sqrt(n)."""
    c = sum(v * math.sqrt(n) for n, v in zip(ns, values, strict=True)) / sum(ns)
    return [c * math.sqrt(n) for n in ns]


# --- the table, as text (the CLI's) ---------------------------------------------------------------

COLUMNS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    ("strategy", "<", lambda r: r["title"]),
    ("backend", "<", lambda r: r["backend"]),
    ("peak live", ">", lambda r: _traced(r, r["peak_live"])),
    ("held for backward", ">", lambda r: _traced(r, r["peak_held"])),
    ("extra block runs", ">", lambda r: "" if r["extra_block_runs"] is None else str(r["extra_block_runs"])),
    ("re-run ops", ">", lambda r: str(r["recomputed_ops"])),
    ("recomputations", ">", lambda r: str(r["recomputations"])),
    ("early stops", ">", lambda r: str(r["early_stops"])),
    ("hook bytes", ">", lambda r: _bytes(r["measured"]["saved_bytes"]) if r["measured"] else ""),
    ("wall", ">", lambda r: f"{r['wall_ms']:.0f} ms"),
]


# Note [Torch rows' memory]: a torch trace's ``mem`` counts the tensors the recorder sees. Outside
# checkpoints that is every saved tensor (the engine's figures, for mlp_memory_none); in a
# checkpointed run it does not see what nodes made under saved-tensor hooks saved (a
# recomputation's, the checkpoint inputs) nor a selective checkpoint's cache, so its memory
# figures are lower bounds: the table puts them in brackets. What the script measures itself
# (hook bytes, block runs) is exact on both backends.
TORCH_NOTE = "(bracketed: a lower bound; torch's trace does not see the tensors torch keeps inside)"


def _traced(row: dict[str, Any], n: int) -> str:
    return f"({_bytes(n)})" if row["backend"] == "torch" else _bytes(n)


def _bytes(n: int) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def table_text(rows: Sequence[dict[str, Any]]) -> str:
    cells = [[fmt(r) for _, _, fmt in COLUMNS] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (h, _, _) in enumerate(COLUMNS)]
    line = lambda values: "  ".join(  # noqa: E731
        f"{v:{a}{w}}" for v, (_, a, _), w in zip(values, COLUMNS, widths, strict=True)
    ).rstrip()
    note = [TORCH_NOTE] if any(r["backend"] == "torch" for r in rows) else []
    return "\n".join(
        [line([h for h, _, _ in COLUMNS]), line(["-" * w for w in widths]), *map(line, cells), *note]
    )


# --- the runs behind the compare page ----------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    strategy: str
    n: int
    backend: str

    @property
    def key(self) -> str:
        return f"compare/{self.strategy}/{self.n}"


class CompareService:
    """Makes and finds the runs of the compare page. Each (strategy, n, backend) runs once per
    server: a later visit reuses its run while the store has it. Runs are created as the run
    manager has room (``HEADROOM`` slots stay free for everyone else), so a sweep of 18 runs
    never takes the server from other users; the page asks again until every row is in."""

    HEADROOM = 4

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.runs: dict[Spec, str] = {}

    def ensure(self, specs: Sequence[Spec]) -> list[tuple[Spec, Any]]:
        """Each spec with its run record, or None while it waits for room."""
        out: list[tuple[Spec, Any]] = []
        for spec in specs:
            record = self._existing(spec)
            if record is None and self.manager.pending < self.manager.settings.max_pending - self.HEADROOM:
                record = self.manager.create_generated(
                    model_source(spec.strategy, spec.n),
                    filename=f"compare_{spec.strategy}_{spec.n}.py",
                    title=f"Compare: {STRATEGIES[spec.strategy].title}, {spec.n} blocks",
                    key=spec.key,
                    backend=spec.backend,
                )
                self.runs[spec] = record.id
            out.append((spec, record))
        return out

    def _existing(self, spec: Spec) -> Any:
        run_id = self.runs.get(spec)
        if run_id is None:
            return None
        record = self.manager.store.get_run(run_id)
        if record is None or (record.finished and record.status != "done"):
            del self.runs[spec]  # pruned, interrupted or failed: run it again
            return None
        return record
