"""Note [Palette] of static/css/app.css: the colours that carry meaning stay apart for readers
with deuteranopia or protanopia, not only for everyone else.

Each colour is simulated as a dichromat sees it (Machado, Oliveira & Fernandes 2009, severity 1,
applied to linear RGB), and every pair of one group must stay at least ``MIN_DISTANCE`` apart in
CIELAB (CIE76). The groups are what one panel shows side by side: the outlines (a checkpoint
frame, a recomputation, a holder, done, the current step), the node fills of the graph, and the
memory chart's series. The colours are read from the stylesheet and the memory view, so changing
one there is what this test checks.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CSS = ROOT / "static" / "css" / "app.css"
MEMORY_JS = ROOT / "static" / "js" / "views" / "memory.js"

MIN_DISTANCE = 15.0

MACHADO = {
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
}

Rgb = tuple[float, float, float]


def linear(hex_colour: str) -> Rgb:
    h = hex_colour.lstrip("#")
    out = []
    for i in (0, 2, 4):
        c = int(h[i : i + 2], 16) / 255
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return (out[0], out[1], out[2])


def simulate(rgb: Rgb, vision: str) -> Rgb:
    if vision == "typical":
        return rgb
    m = MACHADO[vision]
    r, g, b = (min(1.0, max(0.0, row[0] * rgb[0] + row[1] * rgb[1] + row[2] * rgb[2])) for row in m)
    return (r, g, b)


def lab(rgb: Rgb) -> Rgb:
    r, g, b = rgb
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return float(t ** (1 / 3)) if t > 0.008856 else 7.787 * t + 16 / 116

    fx, fy, fz = f(x), f(y), f(z)
    return (116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz))


def distance(a: str, b: str, vision: str) -> float:
    la, lb = lab(simulate(linear(a), vision)), lab(simulate(linear(b), vision))
    return float(sum((p - q) ** 2 for p, q in zip(la, lb, strict=True)) ** 0.5)


def root_vars() -> dict[str, str]:
    block = re.search(r":root\s*\{(.*?)\}", CSS.read_text(), re.S)
    assert block, "app.css has no :root block"
    return dict(re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6})\s*;", block.group(1)))


def groups() -> dict[str, dict[str, str]]:
    v = root_vars()
    outlines = ("frame", "recompute", "holder", "ok", "focus")
    fills = ("fill-created", "fill-executing", "fill-executed", "fill-leaf", "fill-saved", "holder-bg")
    series = dict(
        re.findall(r'key: "(\w+)", label: "[^"]*", color: "(#[0-9a-fA-F]{6})"', MEMORY_JS.read_text())
    )
    return {
        "outlines": {k: v[k] for k in outlines},
        "graph fills": {k: v[k] for k in fills},
        "memory series": series,
    }


def test_the_palette_is_read_from_the_stylesheet_and_the_memory_view() -> None:
    g = groups()
    assert len(g["outlines"]) == 5
    assert len(g["graph fills"]) == 6
    assert set(g["memory series"]) == {"live", "saved", "recomputed"}


@pytest.mark.parametrize("vision", ["typical", "deuteranopia", "protanopia"])
@pytest.mark.parametrize("group", ["outlines", "graph fills", "memory series"])
def test_colours_that_mean_different_things_stay_apart(group: str, vision: str) -> None:
    colours = groups()[group]
    close = [
        f"{a} {colours[a]} and {b} {colours[b]}: {distance(colours[a], colours[b], vision):.1f}"
        for a, b in itertools.combinations(colours, 2)
        if distance(colours[a], colours[b], vision) < MIN_DISTANCE
    ]
    assert not close, f"{group} look alike with {vision}: " + "; ".join(close)


def test_the_simulation_tells_red_from_green_only_for_typical_vision() -> None:
    # The check itself can fail: a red and a green that anyone with typical vision tells apart
    # are close for a deuteranope.
    red, green = "#d62728", "#2ca02c"
    assert distance(red, green, "typical") > 60
    assert distance(red, green, "deuteranopia") < MIN_DISTANCE
