"""Comparing the final gradients of two runs of a scenario (``RunResult.extra["grads"]``: the
engine's and torch's), for ``autograd-lens diff`` and the diff view (docs/diff.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def compare_grads(
    ga: Mapping[str, Any],
    gb: Mapping[str, Any],
    rtol: float = 1e-5,
    atol: float = 1e-6,
    *,
    a_label: str = "engine",
    b_label: str = "torch",
) -> list[str]:
    """The problems between two ``{name: nested list}`` gradient maps: a name on one side only, a
    shape mismatch, values not within ``rtol``/``atol`` (with the largest absolute difference).
    ``None`` (no gradient) must be ``None`` on both sides. An empty list: equal."""
    import numpy as np

    problems: list[str] = []
    for name in sorted(set(ga) | set(gb), key=str):
        if name not in gb:
            problems.append(f"{name}: only in {a_label}")
            continue
        if name not in ga:
            problems.append(f"{name}: only in {b_label}")
            continue
        va, vb = ga[name], gb[name]
        if va is None or vb is None:
            if (va is None) != (vb is None):
                missing = a_label if va is None else b_label
                problems.append(f"{name}: no gradient in {missing}")
            continue
        try:
            xa = np.asarray(va, dtype=np.float64)
            xb = np.asarray(vb, dtype=np.float64)
        except (TypeError, ValueError) as e:
            problems.append(f"{name}: not numbers ({e})")
            continue
        if xa.shape != xb.shape:
            problems.append(f"{name}: shape {list(xa.shape)} in {a_label}, {list(xb.shape)} in {b_label}")
            continue
        if not np.allclose(xa, xb, rtol=rtol, atol=atol, equal_nan=True):
            both = np.isfinite(xa) & np.isfinite(xb)
            diff = float(np.max(np.abs(xa[both] - xb[both]))) if both.any() else math.nan
            nan = "" if bool(np.array_equal(np.isnan(xa), np.isnan(xb))) else ", NaN in different places"
            problems.append(f"{name}: max abs difference {diff:.3g} (rtol={rtol:g}, atol={atol:g}){nan}")
    return problems


def grads_verdict(
    ga: Mapping[str, Any] | None,
    gb: Mapping[str, Any] | None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    *,
    a_label: str = "engine",
    b_label: str = "torch",
) -> dict[str, Any]:
    """``compare_grads`` as a JSON-ready verdict: ``{"equal", "problems", "verdict", "rtol",
    "atol"}``. ``None`` is a run that reported no gradients: that cannot be called equal."""
    missing = [label for label, g in ((a_label, ga), (b_label, gb)) if g is None]
    if missing:
        problems = [f"no gradients reported by {label}" for label in missing]
    else:
        assert ga is not None and gb is not None
        problems = compare_grads(ga, gb, rtol, atol, a_label=a_label, b_label=b_label)
    if not problems:
        n = len(ga or {})
        verdict = f"gradients equal ({n} tensor{'' if n == 1 else 's'})"
    else:
        verdict = "gradients differ: " + "; ".join(problems[:3]) + (" …" if len(problems) > 3 else "")
    return {"equal": not problems, "problems": problems, "verdict": verdict, "rtol": rtol, "atol": atol}
