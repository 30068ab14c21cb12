"""What checkpointing buys, checked against outside numbers (issue 12; docs/memory.md).

    .venv/bin/python bench/bench_memory.py [--no-torch]

1. For each strategy of app/compare.py (Note [Strategies compared]) and N in {4, 16, 64}: the
   engine's figures next to torch 2.8.0's for the same model script: what the script measures
   itself (bytes through its outermost saved-tensor hooks, calls of each block's forward) and the
   trace's counts (recomputations, early stops, holders). They must be equal; the bench prints
   each and exits 1 if one differs.
2. The sqrt(N) law: the bytes held for the backward by sqrt(N) segments, N = 4..64, fitted to
   c * N^k; Chen et al. 2016 predict k = 0.5 (no checkpointing: k = 1).
3. One transformer layer (pre-LN attention + MLP, with dropout): the bytes it saves for its
   backward, measured on each backend through saved-tensor hooks (each storage once), next to
   Korthikanti et al. 2022's s*b*h*(34 + 5*a*s/h) bytes for 16-bit activations. A documented
   comparison, not a tuned equality: docs/memory.md says where float32 and this exact layer differ.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.compare import STRATEGIES, fit_exponent, model_source, row_of  # noqa: E402
from app.runner import run_scenario  # noqa: E402

NS = (4, 16, 64)
COMPARED = ("measured", "recomputations", "early_stops", "holders", "extra_block_runs")

# One transformer layer as Korthikanti et al. 2022 (section 4) count it: sequence s, batch b,
# hidden h, a heads; dropout after the attention softmax, after the attention projection and
# after the MLP. Written against `torch`, run with `import engine as torch` mapped by the backend.
S, B, H, A = 64, 4, 64, 4
LAYER = f'''"""One transformer layer: the activation bytes it saves for its backward"""

import json

import engine as torch
from engine import nn
import engine.nn.functional as F

torch.manual_seed(0)
S, B, H, A = {S}, {B}, {H}, {A}


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(H)
        self.qkv = nn.Linear(H, 3 * H)
        self.proj = nn.Linear(H, H)
        self.ln2 = nn.LayerNorm(H)
        self.fc1 = nn.Linear(H, 4 * H)
        self.fc2 = nn.Linear(4 * H, H)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(H, dim=-1)
        q, k, v = (t.reshape(S, B * A, H // A).transpose(0, 1) for t in (q, k, v))
        scores = F.softmax(q @ k.transpose(1, 2) / math.sqrt(H // A), dim=-1)
        attn = (F.dropout(scores, 0.1) @ v).transpose(0, 1).reshape(S, B, H)
        x = x + F.dropout(self.proj(attn), 0.1)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), 0.1)


layer = Layer()
x = torch.randn(S, B, H, requires_grad=True)
params = {{p.data_ptr() for p in layer.parameters()}}
seen = {{}}


def pack(t):
    # Each storage once, parameters left out: the activations the layer keeps.
    if t.data_ptr() not in params:
        seen[t.data_ptr()] = max(seen.get(t.data_ptr(), 0), t.numel() * t.element_size())
    return t


with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    y = layer(x)
y.sum().backward()
print("measured:", json.dumps({{"saved_bytes": sum(seen.values()), "tensors": len(seen)}}))
'''


def measured(text: str, backend: str) -> dict[str, Any]:
    result = run_scenario(text, trusted=True, backend=backend)
    if result.trace is None or result.error is not None:
        raise SystemExit(f"the {backend} run failed: {result.error}")
    for e in reversed(result.trace["events"]):
        if e["kind"] == "mark" and str(e.get("label", "")).startswith("measured:"):
            import json

            value: dict[str, Any] = json.loads(e["label"][len("measured:") :])
            return value
    raise SystemExit(f"the {backend} run printed no measurement")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-torch", action="store_true", help="the engine alone")
    args = parser.parse_args()
    backends = ["engine"] + ([] if args.no_torch or importlib.util.find_spec("torch") is None else ["torch"])
    failed = False

    print(
        f"1. engine vs {' and '.join(backends[1:]) or '(torch not run)'}: the model scripts' own measurements"
    )
    print(
        f"{'strategy':<12}{'N':>4}  {'hook bytes':>12}  {'block runs':>10}  {'recomp.':>7}  {'holders':>7}  same"
    )
    for n in NS:
        for s in STRATEGIES:
            rows = {b: row_of(s, n, b, _events(model_source(s, n), b)) for b in backends}
            e = rows["engine"]
            same = all(all(rows[b][k] == e[k] for k in COMPARED) for b in backends[1:])
            failed |= not same
            mark = "" if len(backends) == 1 else ("yes" if same else "NO")
            calls = sum(e["measured"]["block_calls"])
            print(
                f"{s:<12}{n:>4}  {e['measured']['saved_bytes']:>12,}  {calls:>10}  {e['recomputations']:>7}  {e['holders']:>7}  {mark}"
            )

    print("\n2. bytes held for the backward against N (engine), fitted to c * N^k")
    ns = (4, 8, 16, 32, 64)
    for s in ("none", "per_block", "sequential"):
        held = [row_of(s, n, "engine", _events(model_source(s, n), "engine"))["peak_held"] for n in ns]
        print(
            f"   {STRATEGIES[s].title:<42} k = {fit_exponent(ns, held):.3f}   ({', '.join(f'{v:,}' for v in held)})"
        )

    formula = S * B * H * (34 + 5 * A * S / H)
    print(f"\n3. one transformer layer, s={S} b={B} h={H} a={A}: activation bytes saved for the backward")
    print(f"   Korthikanti et al. 2022, 16-bit: s*b*h*(34 + 5*a*s/h) = {formula:,.0f} bytes")
    layers = {b: measured(LAYER, b) for b in backends}
    for b, m in layers.items():
        print(
            f"   measured on {b:<6} (float32): {m['saved_bytes']:>9,} bytes in {m['tensors']} storages, {m['saved_bytes'] / formula:.2f} x the formula"
        )
    if len(layers) > 1 and len({m["saved_bytes"] for m in layers.values()}) > 1:
        failed = True
        print("   the backends differ")
    return 1 if failed else 0


def _events(text: str, backend: str) -> list[dict[str, Any]]:
    result = run_scenario(text, trusted=True, backend=backend)
    if result.trace is None or result.error is not None:
        raise SystemExit(f"the {backend} run failed: {result.error}")
    events: list[dict[str, Any]] = result.trace["events"]
    return events


if __name__ == "__main__":
    sys.exit(main())
