// Memory over the run: bytes after every event (each event's `mem`), drawn stacked on a canvas —
// saved for the backward, recomputed, and the rest of what is live — with the stretches of the
// backward and of recomputations shaded and a cursor at the current step. Once the run has
// finished, the server's memory report (GET /api/runs/{id}/memory, Note [Memory report] in
// engine/trace/memory.py) adds the marks under the plot (pack, unpack, recomputation, early stop,
// holder GC, each a shape of its own) and the peak, whose card lists what was alive then and why.
// The panel's other tabs are the saved-tensor ledger (views/ledger.js) and the memory by module
// (views/modules.js), mounted by main.js in `ledgerRoot()` and `modulesRoot()`.
//
// The chart and the marks are drawn when events arrive, the report loads or the size changes; a
// step only moves the cursor and the numbers, so it costs nothing on long runs. A click or a drag
// on the chart moves the step (step s = the state after s events: event seq is at step seq + 1).

import { perFrame } from "../frame.js";
import { bytes, esc } from "../format.js";

const SERIES = [
  // Okabe–Ito colours: told apart with any common colour vision deficiency.
  { key: "live", label: "live", color: "#0072b2" },
  { key: "saved", label: "saved", color: "#d55e00" },
  { key: "recomputed", label: "recomputed", color: "#cc79a7" },
];
const COLOR = Object.fromEntries(SERIES.map((s) => [s.key, s.color]));
// What each figure of the readout is, for its tooltip.
const MEANING = {
  saved: "bytes held by saved variables of graph nodes as tensors (the area at the bottom)",
  recomputed: "bytes made again by a recomputation and waiting in recomputed[gid] (the middle area)",
  live: "every tensor alive: saved, recomputed and the rest (the top line; the pale area is the rest)",
};

// The marks under the plot, one shape per kind (colour is never the only difference), in two
// lanes: what happens to holders, and recomputations. The shapes are CSS classes (app.css,
// "memory timeline and ledger"), shared with the ledger.
export const MARKS = [
  { kind: "pack", label: "pack", glyph: "g-down", lane: 0, help: "a holder packed in place of a saved tensor" },
  { kind: "unpack", label: "unpack", glyph: "g-up", lane: 0, help: "the backward asked a holder for its tensor" },
  { kind: "holder_gc", label: "holder GC", glyph: "g-cross", lane: 0, help: "a holder was garbage-collected" },
  { kind: "recompute_start", label: "recompute", glyph: "g-diamond", lane: 1, help: "a recomputation started" },
  { kind: "early_stop", label: "early stop", glyph: "g-square", lane: 1, help: "a recomputation stopped early" },
];
// Beyond this many marks, the marks of one kind falling in one pixel column are drawn once (each
// mark element says how many it stands for in data-n).
const MAX_MARK_ELEMENTS = 3000;

// What each part of the peak is, in words (Note [Memory report]), with its colour.
const PARTS = [
  { part: "recomputed", label: "recomputed, not taken yet", color: "#cc79a7" },
  { part: "checkpoint_inputs", label: "inputs a checkpoint keeps", color: "#0072b2" },
  { part: "saved", label: "saved for the backward", color: "#d55e00" },
  { part: "gradients", label: "gradients (.grad)", color: "#009e73" },
  { part: "leaves", label: "made by you (parameters, inputs)", color: "#56b4e9" },
  { part: "other", label: "other (outputs, temporaries)", color: "#999999" },
];

const MARGIN = { left: 54, right: 10, top: 8 };
const LANE = 11; // px per lane of marks
const AXIS = 13; // px of step labels under the marks

let root = null;
let plot = null;
let canvas = null;
let marksEl = null;
let cursor = null;
let readout = null;
let legend = null;
let peakButton = null;
let card = null;
let ledgerPane = null;
let modulesPane = null; // the "Modules" tab (views/modules.js)
let shownTab = "timeline";
let timelinePane = null;
let player = null;
let onPick = null;
let onOpenLedger = null;
let report = null; // the server's memory report, once loaded
let layout = { left: 0, width: 1, n: 0, top: 0, height: 1, max: 1 };
let cardPinned = false;

export function mount(el, options) {
  root = el;
  player = options.player;
  onPick = options.onPick;
  onOpenLedger = options.onOpenLedger || null;
  root.classList.add("memory-view");
  root.innerHTML = `
    <div class="view-head">
      <h2 id="mem-title">Memory</h2>
      <div class="mem-tabs" role="tablist" aria-labelledby="mem-title">
        <button type="button" role="tab" id="mem-tab-timeline" aria-controls="mem-pane-timeline" aria-selected="true" data-tab="timeline">Timeline</button>
        <button type="button" role="tab" id="mem-tab-ledger" aria-controls="mem-pane-ledger" aria-selected="false" tabindex="-1" data-tab="ledger">Saved tensors</button>
        <button type="button" role="tab" id="mem-tab-modules" aria-controls="mem-pane-modules" aria-selected="false" tabindex="-1" data-tab="modules">Modules</button>
      </div>
      <button type="button" class="mem-open-ledger" title="Open the saved-tensor ledger in a larger window (Esc closes it)"
        aria-label="Open the saved-tensor ledger in a larger window">⤢<span class="mem-larger-text"> Open larger</span></button>
    </div>
    <div class="mem-pane mem-timeline" id="mem-pane-timeline" role="tabpanel" aria-labelledby="mem-tab-timeline">
      <div class="mem-readout" aria-live="off"></div>
      <div class="mem-chart">
        <div class="mem-plot" tabindex="0" role="slider" aria-label="Memory over the run: click or drag to move the step"
          aria-valuemin="0" aria-valuenow="0"><canvas></canvas><div class="mem-marks" aria-hidden="true"></div><div class="mem-cursor"></div></div>
        <button type="button" class="mem-peak" hidden aria-haspopup="dialog" aria-expanded="false"></button>
      </div>
      <div class="mem-legend"></div>
    </div>
    <div class="mem-pane mem-ledger-pane" id="mem-pane-ledger" role="tabpanel" aria-labelledby="mem-tab-ledger" hidden></div>
    <div class="mem-pane mem-modules-pane" id="mem-pane-modules" role="tabpanel" aria-labelledby="mem-tab-modules" hidden></div>`;
  plot = root.querySelector(".mem-plot");
  canvas = plot.querySelector("canvas");
  marksEl = plot.querySelector(".mem-marks");
  cursor = plot.querySelector(".mem-cursor");
  readout = root.querySelector(".mem-readout");
  legend = root.querySelector(".mem-legend");
  peakButton = root.querySelector(".mem-peak");
  timelinePane = root.querySelector(".mem-timeline");
  ledgerPane = root.querySelector(".mem-ledger-pane");
  modulesPane = root.querySelector(".mem-modules-pane");
  renderLegend();
  new ResizeObserver(() => grow()).observe(plot);

  for (const tab of root.querySelectorAll("[role=tab]")) tab.addEventListener("click", () => showTab(tab.dataset.tab));
  root.querySelector(".mem-open-ledger").addEventListener("click", () => onOpenLedger && onOpenLedger(shownTab));
  mountScrub();
  mountPeak();
}

// The element the ledger view is mounted in (the "Saved tensors" tab).
export function ledgerRoot() {
  return ledgerPane;
}

// The element the modules view is mounted in (the "Modules" tab).
export function modulesRoot() {
  return modulesPane;
}

export function showTab(name) {
  for (const tab of root.querySelectorAll("[role=tab]")) {
    const on = tab.dataset.tab === name;
    tab.setAttribute("aria-selected", String(on));
    tab.tabIndex = on ? 0 : -1;
    tab.classList.toggle("on", on);
  }
  shownTab = name;
  timelinePane.hidden = name !== "timeline";
  ledgerPane.hidden = name !== "ledger";
  modulesPane.hidden = name !== "modules";
  // "Open larger" opens the modules from their tab, the ledger otherwise.
  const larger = root.querySelector(".mem-open-ledger");
  const what = name === "modules" ? "the memory by module" : "the saved-tensor ledger";
  larger.title = `Open ${what} in a larger window (Esc closes it)`;
  larger.setAttribute("aria-label", `Open ${what} in a larger window`);
  if (name === "timeline") grow();
  else hideCard();
}

// The server's memory report of the finished run (null when it could not be loaded).
export function load(doc) {
  report = doc;
  renderLegend();
  grow();
}

// --- scrubbing: a click or a drag on the chart moves the step -----------------------------------

function stepAtX(clientX) {
  const r = plot.getBoundingClientRect();
  const f = (clientX - r.left - layout.left) / layout.width;
  if (!layout.n) return null;
  if (f < 0) return 0;
  return Math.min(layout.n, Math.floor(f * layout.n) + 1);
}

function mountScrub() {
  let dragging = false;
  let last = null;
  const pick = (e) => {
    const s = stepAtX(e.clientX);
    if (s === null || s === last) return;
    last = s;
    onPick(s);
  };
  plot.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    dragging = true;
    last = null;
    plot.setPointerCapture(e.pointerId);
    plot.classList.add("dragging");
    hideCard();
    pick(e);
  });
  plot.addEventListener("pointermove", (e) => {
    if (dragging) pick(e);
  });
  const end = (e) => {
    if (!dragging) return;
    dragging = false;
    plot.classList.remove("dragging");
    if (plot.hasPointerCapture(e.pointerId)) plot.releasePointerCapture(e.pointerId);
  };
  plot.addEventListener("pointerup", end);
  plot.addEventListener("pointercancel", end);
}

// --- drawing (on new events, a loaded report or a new size) --------------------------------------

// Events arrived (or the size changed): redraw on the next frame.
export const grow = perFrame(draw);

// Note [The memory chart's columns]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The chart is redrawn on every frame in which events arrive, from every event so far: reading
// `e.mem.live` off 100,000 parsed events per frame made the stream's load quadratic (0.6 s of a
// 100,000-event run's load). So each event's figures are copied once, when the chart first sees
// it, into typed arrays indexed by seq, and a draw reads only those. This relies on the Player's
// events being append-only (events[i] never changes once appended) and on a run page showing one
// run: `taken` counts the events copied, and only events[taken..] are read.
const PHASE_BACKWARD = 1;
const PHASE_RECOMPUTE = 2;
let columns = {
  taken: 0,
  live: new Float64Array(0),
  saved: new Float64Array(0),
  recomputed: new Float64Array(0),
  phase: new Uint8Array(0),
};

function takeNewEvents(events) {
  const n = events.length;
  if (n > columns.live.length) {
    const size = Math.max(n, 2 * columns.live.length, 1024);
    const bigger = (Kind, old) => {
      const a = new Kind(size);
      a.set(old);
      return a;
    };
    columns = {
      taken: columns.taken,
      live: bigger(Float64Array, columns.live),
      saved: bigger(Float64Array, columns.saved),
      recomputed: bigger(Float64Array, columns.recomputed),
      phase: bigger(Uint8Array, columns.phase),
    };
  }
  const { live, saved, recomputed, phase } = columns;
  for (let i = columns.taken; i < n; i++) {
    const e = events[i];
    const m = e.mem || {};
    live[i] = m.live || 0;
    saved[i] = m.saved || 0;
    recomputed[i] = m.recomputed || 0;
    phase[i] = e.phase === "recompute" ? PHASE_RECOMPUTE : e.phase === "backward" ? PHASE_BACKWARD : 0;
  }
  columns.taken = n;
}

function draw() {
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
  const left = MARGIN.left;
  const top = MARGIN.top;
  const lanes = report ? 2 : 0;
  const pw = Math.max(1, W - left - MARGIN.right);
  const ph = Math.max(1, H - top - lanes * LANE - AXIS - 2);
  layout = { left, width: pw, n, top, height: ph, max: 1 };
  plot.dataset.plotLeft = String(left);
  plot.dataset.plotWidth = String(pw);
  plot.dataset.n = String(n);
  plot.setAttribute("aria-valuemax", String(n));
  if (!n) {
    marksEl.replaceChildren();
    peakButton.hidden = true;
    return;
  }

  // One column per pixel: the maximum of each series over the events it covers (peaks matter).
  takeNewEvents(events);
  const cols = Math.max(1, Math.min(n, Math.floor(pw)));
  const maxes = Object.fromEntries(SERIES.map((s) => [s.key, new Float64Array(cols)]));
  const recompute = new Uint8Array(cols);
  const backward = new Uint8Array(cols);
  const [liveMax, savedMax, recMax] = [maxes.live, maxes.saved, maxes.recomputed];
  const { live: liveOf, saved: savedOf, recomputed: recOf, phase: phaseOf } = columns;
  let top1 = 1;
  for (let i = 0; i < n; i++) {
    const c = Math.min(cols - 1, Math.floor((i * cols) / n));
    const lv = liveOf[i];
    const sv = savedOf[i];
    const rv = recOf[i];
    if (lv > liveMax[c]) liveMax[c] = lv;
    if (sv > savedMax[c]) savedMax[c] = sv;
    if (rv > recMax[c]) recMax[c] = rv;
    const held = sv + rv;
    if (lv > top1) top1 = lv;
    if (held > top1) top1 = held;
    if (phaseOf[i] === PHASE_RECOMPUTE) recompute[c] = 1;
    else if (phaseOf[i] === PHASE_BACKWARD) backward[c] = 1;
  }
  layout.max = top1;
  const colW = pw / cols;
  // Whole pixels per column: fractional edges leave faint seams between columns.
  const x0 = (c) => Math.floor(left + c * colW);
  const cw = (c) => Math.max(1, x0(c + 1) - x0(c));
  const y = (v) => top + ph - (v / top1) * ph;

  // Phases behind the areas: backward grey, recomputation orange (the "wave" of checkpointing).
  for (let c = 0; c < cols; c++) {
    if (recompute[c]) g.fillStyle = "rgba(251, 146, 60, 0.22)";
    else if (backward[c]) g.fillStyle = "rgba(148, 163, 184, 0.16)";
    else continue;
    g.fillRect(x0(c), top, cw(c), ph);
  }

  // The areas, stacked: saved at the bottom, recomputed on it, the rest of live on top.
  const saved = maxes.saved;
  const rec = maxes.recomputed;
  const live = maxes.live;
  const band = (fill, lo, hi) => {
    g.fillStyle = fill;
    for (let c = 0; c < cols; c++) {
      const a = lo(c);
      const b = hi(c);
      if (b <= a) continue;
      g.fillRect(x0(c), y(b), cw(c), y(a) - y(b));
    }
  };
  band("rgba(0, 114, 178, 0.16)", (c) => saved[c] + rec[c], (c) => Math.max(live[c], saved[c] + rec[c]));
  band(COLOR.recomputed, (c) => saved[c], (c) => saved[c] + rec[c]);
  band(COLOR.saved, () => 0, (c) => saved[c]);
  // Live, the total, as a line over the stack.
  g.strokeStyle = COLOR.live;
  g.lineWidth = 1.5;
  g.beginPath();
  for (let c = 0; c < cols; c++) {
    const x = left + (c + 0.5) * colW;
    if (c === 0) g.moveTo(x, y(live[c]));
    else g.lineTo(x, y(live[c]));
  }
  g.stroke();

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
  if (lanes) {
    g.fillText("holders", left - 4, top + ph + LANE - 1);
    g.fillText("recomp.", left - 4, top + ph + 2 * LANE - 1);
  }
  g.textAlign = "left";
  g.fillText("step 1", left, H - 3);
  g.textAlign = "right";
  g.fillText(`step ${n}`, left + pw, H - 3);

  drawMarks(n, pw, top + ph);
  const peak = placePeak();
  if (peak) {
    // The point itself: a ring on the live line.
    g.strokeStyle = "#0f172a";
    g.lineWidth = 2;
    g.beginPath();
    g.arc(peak.x, peak.y, 4, 0, 2 * Math.PI);
    g.stroke();
  }
  placeCursor(lastStep);
}

// The marks of the report under the plot, as elements of the shared glyph classes.
function drawMarks(n, pw, base) {
  if (!report || !report.marks) {
    marksEl.replaceChildren();
    return;
  }
  const total = MARKS.reduce((k, m) => k + (report.marks[m.kind] || []).length, 0);
  const merge = total > MAX_MARK_ELEMENTS;
  const html = [];
  for (const m of MARKS) {
    const seqs = report.marks[m.kind] || [];
    const top = base + 2 + m.lane * LANE;
    let col = -1;
    let count = 0;
    const flush = () => {
      if (!count) return;
      const x = merge ? col + 0.5 : null;
      html.push(markHTML(m, x, top, count));
      count = 0;
    };
    for (const seq of seqs) {
      const x = layout.left + ((seq + 0.5) / n) * pw;
      if (!merge) {
        html.push(markHTML(m, x, top, 1, seq));
        continue;
      }
      const c = Math.floor(x);
      if (c !== col) {
        flush();
        col = c;
      }
      count++;
    }
    flush();
  }
  marksEl.innerHTML = html.join("");
}

function markHTML(m, x, top, count, seq) {
  const at = seq === undefined ? "" : ` data-seq="${seq}"`;
  return `<i class="mem-mark glyph ${m.glyph} mk-${m.kind}" data-kind="${m.kind}" data-n="${count}"${at} style="left:${x.toFixed(1)}px;top:${top}px"></i>`;
}

// The peak marker: at the first event where live is highest, labelled with its bytes.
function placePeak() {
  const peak = report && report.peak;
  if (!peak || peak.seq === null || peak.seq === undefined || !layout.n) {
    peakButton.hidden = true;
    return null;
  }
  const x = layout.left + ((peak.seq + 0.5) / layout.n) * layout.width;
  const yy = layout.top + layout.height - (peak.live / layout.max) * layout.height;
  peakButton.hidden = false;
  peakButton.textContent = `peak ${bytes(peak.live)}`;
  peakButton.setAttribute("aria-label", `peak ${bytes(peak.live)} after event #${peak.seq}: what was alive then`);
  peakButton.dataset.seq = String(peak.seq);
  // The label sits beside the point, on the side with room.
  const right = x > layout.left + layout.width * 0.6;
  peakButton.classList.toggle("left", right);
  peakButton.style.left = `${x}px`;
  peakButton.style.top = `${Math.max(0, yy)}px`;
  return { x, y: yy };
}

// --- the peak's card: what was alive at the peak, and the split by part --------------------------

function mountPeak() {
  card = document.createElement("div");
  card.className = "mem-peak-card";
  card.id = "mem-peak-card";
  card.hidden = true;
  card.setAttribute("role", "dialog");
  card.setAttribute("aria-label", "What was alive at the memory peak");
  document.body.append(card);
  peakButton.setAttribute("aria-controls", card.id);
  peakButton.addEventListener("mouseenter", () => showCard());
  peakButton.addEventListener("mouseleave", () => {
    if (!cardPinned && !card.matches(":hover")) hideCard();
  });
  card.addEventListener("mouseleave", () => {
    if (!cardPinned && document.activeElement !== peakButton) hideCard();
  });
  peakButton.addEventListener("focus", () => showCard());
  peakButton.addEventListener("blur", (e) => {
    if (!cardPinned && !card.contains(e.relatedTarget)) hideCard();
  });
  peakButton.addEventListener("click", () => {
    cardPinned = !cardPinned || card.hidden;
    if (cardPinned) showCard();
    else hideCard();
  });
  // Esc closes the card wherever the focus is (hovered, it has none); focus inside it goes back
  // to the marker.
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Escape" || card.hidden) return;
    e.preventDefault();
    const inside = card.contains(document.activeElement);
    hideCard();
    if (inside) {
      peakButton.focus({ preventScroll: true });
      hideCard(); // the focus above shows it again
    }
  });
  // The card is placed in the window: when the page scrolls (narrow windows), it goes.
  window.addEventListener("scroll", () => hideCard(), { passive: true });
  card.addEventListener("focusout", (e) => {
    if (!cardPinned && !card.contains(e.relatedTarget) && e.relatedTarget !== peakButton) hideCard();
  });
  card.addEventListener("click", (e) => {
    const go = e.target.closest("[data-goto]");
    if (!go) return;
    cardPinned = false;
    hideCard();
    onPick(Number(go.dataset.goto));
  });
}

function showCard() {
  const peak = report && report.peak;
  if (!peak || peak.seq === null) return;
  card.innerHTML = cardHTML(peak);
  card.hidden = false;
  peakButton.setAttribute("aria-expanded", "true");
  // Beside the marker, inside the window (the card is outside the panel, which clips).
  const r = peakButton.getBoundingClientRect();
  const w = card.offsetWidth;
  const h = card.offsetHeight;
  const left = Math.max(6, Math.min(window.innerWidth - w - 6, r.left + r.width / 2 - w / 2));
  const above = r.top - h - 6;
  const top = above >= 6 ? above : Math.min(window.innerHeight - h - 6, r.bottom + 6);
  card.style.left = `${left}px`;
  card.style.top = `${Math.max(6, top)}px`;
}

function hideCard() {
  if (!card || card.hidden) return;
  card.hidden = true;
  cardPinned = false;
  peakButton.setAttribute("aria-expanded", "false");
}

function cardHTML(peak) {
  const live = peak.live || 1;
  const bar = PARTS.filter((p) => peak.parts[p.part])
    .map((p) => `<i style="width:${((100 * peak.parts[p.part]) / live).toFixed(2)}%;background:${p.color}" title="${esc(p.label)}"></i>`)
    .join("");
  const parts = PARTS.filter((p) => peak.parts[p.part])
    .map((p) => `<li><i style="background:${p.color}"></i>${esc(p.label)} <b>${bytes(peak.parts[p.part])}</b></li>`)
    .join("");
  const zero = PARTS.filter((p) => !peak.parts[p.part]).map((p) => esc(p.label.split(" (")[0]));
  const rows = (peak.alive || [])
    .map((a) => {
      const names = a.names && a.names.length ? a.names.map((x) => `<code>${esc(x)}</code>`).join(", ") : `tensor ${a.tensors.join(", ")}`;
      const color = (PARTS.find((p) => p.part === a.part) || PARTS[5]).color;
      return (
        `<tr data-storage="${a.storage}"><td class="num">${bytes(a.bytes)}</td>` +
        `<td><i class="mem-part" style="background:${color}"></i>${names}</td>` +
        `<td>${esc(a.what || "")}</td><td class="num">${a.line ?? "–"}</td></tr>`
      );
    })
    .join("");
  return `
    <h3>Peak: ${bytes(peak.live)} live after event #${peak.seq}${peak.phase ? ` (${esc(peak.phase)})` : ""}</h3>
    <div class="mem-split" aria-hidden="true">${bar}</div>
    <ul class="mem-parts">${parts}</ul>
    ${zero.length ? `<p class="dim small">0 B: ${zero.join(", ")}.</p>` : ""}
    <p class="mem-card-sub">What was alive, biggest first:</p>
    <div class="mem-alive-scroll"><table class="mem-alive">
      <thead><tr><th>bytes</th><th>tensor</th><th>why alive</th><th>line</th></tr></thead>
      <tbody>${rows}</tbody></table></div>
    <button type="button" data-goto="${peak.seq + 1}">Go to the peak (step ${peak.seq + 1})</button>`;
}

// --- a step: the cursor and the numbers -----------------------------------------------------------

let lastStep = 0;

function placeCursor(step) {
  lastStep = step;
  const n = layout.n;
  if (!n || step < 1) {
    setStyle("display", "none");
    return;
  }
  // Only the transform changes from step to step; writing the same top and height again would
  // still mark the cursor for layout.
  const px = layout.left + ((step - 0.5) / n) * layout.width;
  setStyle("display", "block");
  setStyle("transform", `translateX(${px}px)`);
  setStyle("top", `${layout.top - 4}px`);
  setStyle("height", `${layout.height + 4}px`);
}

const cursorStyle = {}; // what placeCursor last wrote
function setStyle(key, value) {
  if (cursorStyle[key] === value) return;
  cursor.style[key] = cursorStyle[key] = value;
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

// The readout doubles as the legend of the areas: saved, recomputed, live (the rest is pale).
const READOUT_ORDER = ["saved", "recomputed", "live"];

export function render(state, ctx) {
  placeCursor(ctx.step);
  plot.setAttribute("aria-valuenow", String(ctx.step));
  const mem = state.mem || {};
  const peak = state.peak || {};
  const moved = deltas(ctx.eventChanges);
  const html = READOUT_ORDER.map((key) => {
    const d = moved[key] || 0;
    const delta = d ? ` <span class="mem-delta">${d > 0 ? "+" : "−"}${bytes(Math.abs(d))}</span>` : "";
    return (
      `<span class="mem-item mem-item-${key}${d ? " changed" : ""}" title="${key}: ${MEANING[key]}"><i></i>${key} <b>${bytes(mem[key] || 0)}</b>` +
      `${delta}<span class="dim"> max so far ${bytes(peak[key] || 0)}</span></span>`
    );
  }).join("");
  // Most steps leave the numbers as they were: rebuild the readout only when its text changes.
  if (html !== shownReadout) readout.innerHTML = shownReadout = html;
}

// The legend of the marks and of the shaded phases (with the number of each mark once loaded).
function renderLegend() {
  if (!legend) return;
  const marks = MARKS.map((m) => {
    const k = report && report.marks ? (report.marks[m.kind] || []).length : null;
    return (
      `<span class="mem-key" data-kind="${m.kind}" title="${esc(m.help)}"><i class="glyph ${m.glyph} mk-${m.kind}"></i>${m.label}` +
      `${k === null ? "" : ` <b class="mem-key-n">${k}</b>`}</span>`
    );
  }).join("");
  legend.innerHTML =
    `${report ? marks : '<span class="dim">marks and the peak appear once the run has finished</span>'}` +
    '<span class="mem-key" title="events of the backward"><i class="mem-shade backward"></i>backward</span>' +
    '<span class="mem-key" title="events of a recomputation"><i class="mem-shade recompute"></i>recomputing</span>';
}
