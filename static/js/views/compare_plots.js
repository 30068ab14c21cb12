// The two plots of the compare page, drawn as SVG by hand (no chart library):
// - the trade-off: peak held for the backward (y) against extra block runs (x), one point per
//   strategy of the table (engine runs: torch's trace sees memory only in part);
// - the sweep: peak held against N, log-log, a line per strategy of POST /api/compare/sweep, with
//   Chen et al.'s c·sqrt(N) curve dashed beside the sqrt(N)-segment points and the fitted exponents.
// Every point is a link to its run, opened at its peak step. Colours are Okabe-Ito (app.css Note
// [Palette]) and each series also has its own marker shape.

import { bytes, esc } from "../format.js";
import { peakURL } from "./compare_table.js";

const SHAPES = { none: "circle", per_block: "square", nested: "diamond", sequential: "triangle", selective: "down" };
const ORDER = ["circle", "square", "diamond", "triangle", "down"];
// Short names for the plots' labels (the table carries the full titles).
const SHORT = {
  none: "no checkpointing",
  per_block: "one per block",
  nested: "nested",
  sequential: "√N segments",
  selective: "selective",
};

let tradeoffRoot = null;
let sweepRoot = null;

export function mount(tradeoffEl, sweepEl) {
  tradeoffRoot = tradeoffEl;
  sweepRoot = sweepEl;
}

const shapeOf = (strategy, i) => SHAPES[strategy] || ORDER[i % ORDER.length];
const shortOf = (row) => SHORT[row.strategy] || row.title;

// A marker's path, centred on (x, y), about 2r across.
function marker(shape, x, y, r) {
  const f = (v) => v.toFixed(1);
  switch (shape) {
    case "square":
      return `M${f(x - r * 0.9)},${f(y - r * 0.9)}h${f(1.8 * r)}v${f(1.8 * r)}h${f(-1.8 * r)}Z`;
    case "diamond":
      return `M${f(x)},${f(y - 1.3 * r)}L${f(x + 1.3 * r)},${f(y)}L${f(x)},${f(y + 1.3 * r)}L${f(x - 1.3 * r)},${f(y)}Z`;
    case "triangle":
      return `M${f(x)},${f(y - 1.3 * r)}L${f(x + 1.25 * r)},${f(y + 0.85 * r)}L${f(x - 1.25 * r)},${f(y + 0.85 * r)}Z`;
    case "down":
      return `M${f(x)},${f(y + 1.3 * r)}L${f(x + 1.25 * r)},${f(y - 0.85 * r)}L${f(x - 1.25 * r)},${f(y - 0.85 * r)}Z`;
    default:
      return `M${f(x - r)},${f(y)}a${f(r)},${f(r)} 0 1,0 ${f(2 * r)},0a${f(r)},${f(r)} 0 1,0 ${f(-2 * r)},0Z`;
  }
}

// A legend swatch: the series' marker (and its line) in a small inline SVG.
function swatch(strategy, shape, dashed = false) {
  const line = dashed
    ? `<path d="M2,8H30" class="cmp-law" stroke-dasharray="5 4"/>`
    : `<path d="M2,8H30" class="cmp-line"/><path d="${marker(shape, 16, 8, 4.5)}" class="cmp-marker"/>`;
  return `<svg class="cmp-swatch-svg s-${esc(strategy)}" width="32" height="16" viewBox="0 0 32 16" aria-hidden="true">${line}</svg>`;
}

const COUNT_STEPS = [1, 2, 5, 10];

// Round tick values from 0 to the first at or above `max` (about `count` of them); `steps` are
// the allowed multiples of a power of ten (whole numbers only for counts).
function linearTicks(max, count, steps = [1, 2, 2.5, 5, 10]) {
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw || 1));
  const step = steps.map((m) => m * mag).find((s) => s >= raw) || raw;
  const ticks = [0];
  while (ticks[ticks.length - 1] < max - step * 1e-9) ticks.push(Number((ticks.length * step).toFixed(6)));
  return ticks;
}

// Byte ticks: round numbers of KB or MB.
function byteUnit(max) {
  return max >= 1 << 20 ? { size: 1 << 20, name: "MB" } : { size: 1 << 10, name: "KB" };
}

// The box of a label as the browser will draw it (the plot's font, measured on a canvas): its
// width, and its font's ascent and descent (what a <text>'s bounding box spans).
let measure = null;
function textBox(text, size = 11.5) {
  if (!measure) measure = document.createElement("canvas").getContext("2d");
  measure.font = `${size}px ${getComputedStyle(tradeoffRoot).fontFamily}`;
  const m = measure.measureText(text);
  const asc = Math.ceil(m.fontBoundingBoxAscent ?? size);
  const desc = Math.ceil(m.fontBoundingBoxDescent ?? size * 0.3);
  return { w: Math.ceil(m.width) + 4, asc, h: asc + desc }; // + the white halo
}

function overlaps(a, b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

// Puts each label beside its point where it overlaps no other label, marker or the plot's edge:
// right, left, above, below, then further out.
function placeLabels(items, box) {
  // A marker, its white outline and its corners' mitres.
  const taken = items.map((p) => ({ x: p.x - 12, y: p.y - 12, w: 24, h: 24 }));
  const out = [];
  for (const p of items) {
    const { w, h, asc } = textBox(p.label);
    const candidates = [];
    for (const d of [0, h, -h, 2 * h, -2 * h, 3 * h]) {
      candidates.push({ x: p.x + 15, y: p.y - h / 2 + d, anchor: "start" });
      candidates.push({ x: p.x - 15 - w, y: p.y - h / 2 + d, anchor: "end" });
    }
    candidates.splice(
      2,
      0,
      { x: p.x - w / 2, y: p.y - 13 - h, anchor: "middle" },
      { x: p.x - w / 2, y: p.y + 13, anchor: "middle" },
    );
    const fits = (c) => {
      const r = { x: c.x, y: c.y, w, h };
      return r.x >= box.x0 && r.x + w <= box.x1 && r.y >= box.y0 && r.y + h <= box.y1 && !taken.some((t) => overlaps(r, t));
    };
    const c = candidates.find(fits) || candidates[0];
    taken.push({ x: c.x, y: c.y, w, h });
    const tx = c.anchor === "start" ? c.x + 2 : c.anchor === "end" ? c.x + w - 2 : c.x + w / 2;
    out.push({ ...p, tx, ty: c.y + asc, anchor: c.anchor });
  }
  return out;
}

function pointTitle(row, extra) {
  return `${row.title}, N = ${row.n}: ${bytes(row.peak_held)} held for the backward at its peak (step ${row.peak_held_step})${extra}. Click to open the run at that step.`;
}

// --- the trade-off ------------------------------------------------------------------------------

function renderTradeoff(state) {
  const doc = state.compare;
  const rows = doc ? doc.rows.filter((r) => r.backend === "engine") : [];
  const done = rows.filter((r) => r.status === "done");
  if (!done.length) {
    tradeoffRoot.innerHTML = `<p class="cmp-plot-wait dim">${doc ? "Waiting for the first run…" : "Starting…"}</p>`;
    return;
  }
  const W = Math.max(320, tradeoffRoot.clientWidth || 560);
  const H = 330;
  const m = { l: 66, r: 16, t: 14, b: 46 };
  const maxX = Math.max(1, ...done.map((r) => r.extra_block_runs ?? 0));
  const xTicks = linearTicks(maxX, Math.min(maxX, 8), COUNT_STEPS);
  const xMax = xTicks[xTicks.length - 1] * 1.08 || 1;
  const maxY = Math.max(...done.map((r) => r.peak_held));
  const unit = byteUnit(maxY);
  const yTicks = linearTicks((maxY * 1.12) / unit.size, 5);
  const yMax = yTicks[yTicks.length - 1] * unit.size;
  const pad = 12; // keeps the x = 0 points off the axis
  const X = (v) => m.l + pad + (v / xMax) * (W - m.l - m.r - pad);
  const Y = (v) => H - m.b - (v / yMax) * (H - m.t - m.b);

  const grid = [
    ...yTicks.map(
      (t) =>
        `<path class="cmp-grid" d="M${m.l},${Y(t * unit.size)}H${W - m.r}"/><text class="cmp-tick" x="${m.l - 6}" y="${Y(t * unit.size) + 4}" text-anchor="end">${t} ${unit.name}</text>`,
    ),
    ...xTicks.map(
      (t) =>
        `<path class="cmp-grid" d="M${X(t)},${m.t}V${H - m.b}"/><text class="cmp-tick" x="${X(t)}" y="${H - m.b + 16}" text-anchor="middle">${t}</text>`,
    ),
  ].join("");
  const axes = `<path class="cmp-axis" d="M${m.l},${m.t}V${H - m.b}H${W - m.r}"/>
    <text class="cmp-axis-label" x="${(m.l + W - m.r) / 2}" y="${H - 8}" text-anchor="middle">extra block runs (recomputation cost) →</text>
    <text class="cmp-axis-label" transform="translate(14,${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle">held for the backward (peak) →</text>`;

  // Strategies with the very same figures would hide each other: spread them a little sideways.
  const groups = new Map();
  for (const r of done) {
    const k = `${r.extra_block_runs}/${r.peak_held}`;
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(r);
  }
  const items = done.map((r) => {
    const g = groups.get(`${r.extra_block_runs}/${r.peak_held}`);
    const i = g.indexOf(r);
    const dx = (i - (g.length - 1) / 2) * 22;
    const twins = g.filter((o) => o !== r).map(shortOf);
    return {
      row: r,
      shape: shapeOf(r.strategy, rows.indexOf(r)),
      x: X(r.extra_block_runs ?? 0) + dx,
      y: Y(r.peak_held),
      label: shortOf(r),
      extra: `, ${r.extra_block_runs} extra block runs${twins.length ? ` (the same figures as ${twins.join(", ")})` : ""}`,
    };
  });
  const placed = placeLabels(items, { x0: m.l + 2, x1: W - m.r, y0: m.t, y1: H - m.b - 2 });
  const points = placed
    .map(
      (p) => `<a class="cmp-point s-${esc(p.row.strategy)}" href="${esc(peakURL(p.row))}" data-strategy="${esc(p.row.strategy)}">
        <title>${esc(pointTitle(p.row, p.extra))}</title>
        <path class="cmp-marker" d="${marker(p.shape, p.x, p.y, 6)}"/>
        <text class="cmp-point-label" x="${p.tx.toFixed(1)}" y="${p.ty.toFixed(1)}" text-anchor="${p.anchor}">${esc(p.label)}</text>
      </a>`,
    )
    .join("");
  tradeoffRoot.innerHTML = `<svg class="cmp-svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img"
      aria-label="Peak held for the backward against extra block runs, one point per strategy">${grid}${axes}${points}</svg>`;
}

// --- the sweep ---------------------------------------------------------------------------------

function logTicks(lo, hi) {
  const unit = byteUnit(hi);
  const ticks = [];
  for (const u of [{ size: 1 << 10, name: "KB" }, { size: 1 << 20, name: "MB" }]) {
    for (let e = 0; e <= 3; e++) {
      for (const k of [1, 2, 5]) {
        const v = k * 10 ** e * u.size;
        if (u.name === "KB" && k * 10 ** e >= 1000) continue;
        if (v >= lo && v <= hi) ticks.push({ v, label: `${k * 10 ** e} ${u.name}` });
      }
    }
  }
  return ticks.length ? ticks : [{ v: hi, label: `${(hi / unit.size).toFixed(1)} ${unit.name}` }];
}

function renderSweep(state) {
  const doc = state.sweep;
  if (!doc) {
    sweepRoot.innerHTML = `<p class="cmp-plot-wait dim">Starting the sweep…</p>`;
    return;
  }
  const rows = doc.rows;
  const done = rows.filter((r) => r.status === "done");
  const failed = rows.filter((r) => r.status === "error");
  const progress = doc.done
    ? ""
    : `<p class="cmp-plot-wait dim" role="status">${done.length} of ${rows.length} runs of the sweep done…</p>`;
  if (!done.length) {
    sweepRoot.innerHTML = progress;
    return;
  }
  const W = Math.max(320, sweepRoot.clientWidth || 560);
  const H = 330;
  const m = { l: 66, r: 16, t: 14, b: 46 };
  const ns = doc.ns;
  const law = doc.sqrt_law || [];
  const values = [...done.map((r) => r.peak_held), ...law].filter((v) => v > 0);
  const lo = Math.min(...values) / 1.25;
  const hi = Math.max(...values) * 1.25;
  const nLo = Math.min(...ns) / 1.25;
  const nHi = Math.max(...ns) * 1.25;
  const X = (n) => m.l + ((Math.log(n) - Math.log(nLo)) / (Math.log(nHi) - Math.log(nLo))) * (W - m.l - m.r);
  const Y = (v) => H - m.b - ((Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo))) * (H - m.t - m.b);

  const grid = [
    ...logTicks(lo, hi).map(
      (t) =>
        `<path class="cmp-grid" d="M${m.l},${Y(t.v).toFixed(1)}H${W - m.r}"/><text class="cmp-tick" x="${m.l - 6}" y="${(Y(t.v) + 4).toFixed(1)}" text-anchor="end">${t.label}</text>`,
    ),
    ...ns.map(
      (n) =>
        `<path class="cmp-grid" d="M${X(n).toFixed(1)},${m.t}V${H - m.b}"/><text class="cmp-tick" x="${X(n).toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle">${n}</text>`,
    ),
  ].join("");
  const axes = `<path class="cmp-axis" d="M${m.l},${m.t}V${H - m.b}H${W - m.r}"/>
    <text class="cmp-axis-label" x="${(m.l + W - m.r) / 2}" y="${H - 8}" text-anchor="middle">N, the number of blocks (log scale) →</text>
    <text class="cmp-axis-label" transform="translate(14,${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle">held for the backward (log scale) →</text>`;

  const lawPath = law.length
    ? `<path class="cmp-law s-sequential" stroke-dasharray="6 4" d="${ns
        .map((n, i) => `${i ? "L" : "M"}${X(n).toFixed(1)},${Y(law[i]).toFixed(1)}`)
        .join("")}"><title>${esc(`c·√N (Chen et al. 2016), fitted through the √N-segment points: ${ns.map((n, i) => `N = ${n}: ${bytes(law[i])}`).join(", ")}`)}</title></path>`
    : "";
  const series = doc.strategies
    .map((s, i) => {
      const pts = done.filter((r) => r.strategy === s).sort((a, b) => a.n - b.n);
      const shape = shapeOf(s, i);
      const line = pts.length > 1 ? `<path class="cmp-line" d="${pts.map((r, j) => `${j ? "L" : "M"}${X(r.n).toFixed(1)},${Y(r.peak_held).toFixed(1)}`).join("")}"/>` : "";
      const marks = pts
        .map(
          (r) => `<a class="cmp-point" href="${esc(peakURL(r))}" data-strategy="${esc(s)}" data-n="${r.n}">
            <title>${esc(pointTitle(r, ""))}</title>
            <path class="cmp-marker" d="${marker(shape, X(r.n), Y(r.peak_held), 5)}"/></a>`,
        )
        .join("");
      return `<g class="cmp-series s-${esc(s)}" data-strategy="${esc(s)}">${line}${marks}</g>`;
    })
    .join("");

  const titleOf = (s) => {
    const r = rows.find((x) => x.strategy === s);
    return SHORT[s] || (r ? r.title : s);
  };
  const exps = doc.exponents || {};
  const legend = doc.strategies
    .map((s, i) => {
      const k = exps[s];
      const fit = k === undefined ? "" : `: N<sup>${esc(k.toFixed(2))}</sup>`;
      return `<li data-strategy="${esc(s)}">${swatch(s, shapeOf(s, i))}${esc(titleOf(s))}${fit}</li>`;
    })
    .join("");
  const lawItem = law.length
    ? `<li class="cmp-law-item">${swatch("sequential", "", true)}c·√N, Chen et al. 2016's O(√N) law</li>`
    : "";
  const note = Object.keys(exps).length
    ? `<p class="small cmp-fit-note">Exponents fitted over N = 4 … 64; each point opens its run at its peak.
        Why is “one per block” below the √N segments? It keeps one small input per block (linear in N)
        plus the insides of the one block being recomputed (the same for every N); at these sizes that
        constant part weighs most, so its slope is below 1 here and rises towards 1 as N grows.</p>`
    : "";
  const errors = failed.length
    ? `<p class="index-error">${failed.length} run${failed.length > 1 ? "s" : ""} of the sweep failed: ${esc(
        failed.map((r) => `${r.title}, N = ${r.n}`).join("; "),
      )}</p>`
    : "";
  sweepRoot.innerHTML = `${progress}<svg class="cmp-svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img"
      aria-label="Peak held for the backward against N, log-log">${grid}${axes}${lawPath}${series}</svg>
    <ul class="cmp-legend">${legend}${lawItem}</ul>${note}${errors}`;
}

export function render(state) {
  renderTradeoff(state);
  renderSweep(state);
}
