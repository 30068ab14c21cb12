// Memory over the run: live, saved and recomputed bytes after every event (each event's `mem`),
// as a line chart on a canvas, with the stretches that ran a recomputation shaded and a cursor at
// the current step. The chart is drawn when events arrive or the size changes; a step only moves
// the cursor and the numbers, so it costs nothing on long runs.

import { perFrame } from "../frame.js";
import { bytes } from "../format.js";

const SERIES = [
  // Okabe–Ito colours: told apart with any common colour vision deficiency.
  { key: "live", label: "live", color: "#0072b2" },
  { key: "saved", label: "saved", color: "#d55e00" },
  { key: "recomputed", label: "recomputed", color: "#cc79a7" },
];

let root = null;
let canvas = null;
let cursor = null;
let readout = null;
let player = null;
let onPick = null;
let layout = { left: 0, width: 1, n: 0 };

export function mount(el, options) {
  root = el;
  player = options.player;
  onPick = options.onPick;
  root.classList.add("memory-view");
  root.innerHTML = `
    <div class="view-head"><h2>Memory</h2><span class="mem-readout"></span></div>
    <div class="mem-plot"><canvas></canvas><div class="mem-cursor"></div></div>`;
  canvas = root.querySelector("canvas");
  cursor = root.querySelector(".mem-cursor");
  readout = root.querySelector(".mem-readout");
  new ResizeObserver(() => grow()).observe(root.querySelector(".mem-plot"));
  canvas.addEventListener("click", (e) => {
    const r = canvas.getBoundingClientRect();
    const x = (e.clientX - r.left - layout.left) / layout.width;
    if (layout.n) onPick(Math.round(Math.max(0, Math.min(1, x)) * layout.n));
  });
}

// Events arrived (or the size changed): redraw on the next frame.
export const grow = perFrame(draw);

function draw() {
  const plot = canvas.parentElement;
  const dpr = window.devicePixelRatio || 1;
  const W = plot.clientWidth;
  const H = plot.clientHeight;
  if (!W || !H) return;
  canvas.width = Math.round(W * dpr);
  canvas.height = Math.round(H * dpr);
  canvas.style.width = `${W}px`;
  canvas.style.height = `${H}px`;
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  const events = player.events;
  const n = events.length;
  const left = 54;
  const top = 8;
  const bottom = 16;
  const pw = Math.max(1, W - left - 8);
  const ph = Math.max(1, H - top - bottom);
  layout = { left, width: pw, n };
  if (!n) return;

  // One column per pixel: the maximum of each series over the events it covers (peaks matter).
  const cols = Math.max(1, Math.min(n, Math.floor(pw)));
  const maxes = SERIES.map(() => new Float64Array(cols));
  const recompute = new Uint8Array(cols);
  const backward = new Uint8Array(cols);
  let top1 = 1;
  for (let i = 0; i < n; i++) {
    const c = Math.min(cols - 1, Math.floor((i * cols) / n));
    const e = events[i];
    const m = e.mem || {};
    for (let s = 0; s < SERIES.length; s++) {
      const v = m[SERIES[s].key] || 0;
      if (v > maxes[s][c]) maxes[s][c] = v;
      if (v > top1) top1 = v;
    }
    if (e.phase === "recompute") recompute[c] = 1;
    else if (e.phase === "backward") backward[c] = 1;
  }
  const x = (c) => left + ((c + 0.5) * pw) / cols;
  const y = (v) => top + ph - (v / top1) * ph;
  const colW = pw / cols;

  // Phases behind the lines: backward grey, recomputation orange (the "wave" of checkpointing).
  for (let c = 0; c < cols; c++) {
    if (recompute[c]) g.fillStyle = "rgba(251, 146, 60, 0.22)";
    else if (backward[c]) g.fillStyle = "rgba(148, 163, 184, 0.16)";
    else continue;
    g.fillRect(left + c * colW, top, Math.max(1, colW), ph);
  }
  // Axes and the scale.
  g.strokeStyle = "#cbd5e1";
  g.lineWidth = 1;
  g.beginPath();
  g.moveTo(left, top);
  g.lineTo(left, top + ph);
  g.lineTo(left + pw, top + ph);
  g.stroke();
  g.fillStyle = "#64748b";
  g.font = "10px system-ui, sans-serif";
  g.textAlign = "right";
  g.fillText(bytes(top1), left - 4, top + 8);
  g.fillText("0", left - 4, top + ph);
  g.textAlign = "left";
  g.fillText("step 1", left, H - 3);
  g.textAlign = "right";
  g.fillText(`step ${n}`, left + pw, H - 3);

  for (let s = SERIES.length - 1; s >= 0; s--) {
    g.strokeStyle = SERIES[s].color;
    g.lineWidth = 1.5;
    g.beginPath();
    for (let c = 0; c < cols; c++) {
      if (c === 0) g.moveTo(x(c), y(maxes[s][c]));
      else g.lineTo(x(c), y(maxes[s][c]));
    }
    g.stroke();
  }
  placeCursor(lastStep);
}

let lastStep = 0;

function placeCursor(step) {
  lastStep = step;
  const n = layout.n;
  if (!n || step < 1) {
    cursor.style.display = "none";
    return;
  }
  cursor.style.display = "block";
  const px = layout.left + ((step - 0.5) / n) * layout.width;
  cursor.style.transform = `translateX(${px}px)`;
}

let shownReadout = "";

// How each figure moved in this step (one event's, or a story step's events): from the first
// memory change's old value to the last one's new value.
function deltas(changes) {
  let from = null;
  let to = null;
  for (const [, path, old, now] of changes || []) {
    if (path.length !== 1 || path[0] !== "mem") continue;
    if (from === null) from = old;
    to = now;
  }
  const out = {};
  if (from && to) for (const s of SERIES) out[s.key] = (to[s.key] || 0) - (from[s.key] || 0);
  return out;
}

export function render(state, ctx) {
  placeCursor(ctx.step);
  const mem = state.mem || {};
  const peak = state.peak || {};
  const moved = deltas(ctx.eventChanges);
  const html = SERIES.map((s) => {
    const d = moved[s.key] || 0;
    const delta = d ? ` <span class="mem-delta">${d > 0 ? "+" : "−"}${bytes(Math.abs(d))}</span>` : "";
    return (
      `<span class="mem-item${d ? " changed" : ""}"><i style="background:${s.color}"></i>${s.label} <b>${bytes(mem[s.key] || 0)}</b>` +
      `${delta}<span class="dim"> peak ${bytes(peak[s.key] || 0)}</span></span>`
    );
  }).join("");
  // Most steps leave the numbers as they were: rebuild the readout only when its text changes.
  if (html !== shownReadout) readout.innerHTML = shownReadout = html;
}
