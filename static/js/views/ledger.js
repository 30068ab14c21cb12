// The saved-tensor ledger: one row per saved variable and per holder of the run, from the server's
// memory report (GET /api/runs/{id}/memory, `ledger`; Note [Memory report] in
// engine/trace/memory.py). Each row is a bar on the run's time axis from its save (a `saved`, or
// a `pack` when a checkpoint's holder stood in for the tensor) to its end (`saved_release` /
// `node_free`, or the holder's GC), with a marker at each unpack, recomputation, refill and take;
// a click on a marker jumps to that event's step (event seq is at step seq + 1). Above the rows:
// what checkpointing did, and why it saved little when it did (`diagnosis`), each finding with a
// link to where the trace shows it. Nothing here is computed: the rows say what the server says.
//
// The ledger lives in the memory panel's "Saved tensors" tab; `open()` shows it larger, in a
// dialog (Esc closes it; focus goes back to where it was). A step only moves the cursor and
// re-marks the rows whose state it changed: rows saved at or before the step, and the rows of the
// step's own events.

import { bytes, captionHTML, esc } from "../format.js";
import { mountModal } from "../modal.js";

// The markers of a row, one shape each (the classes are shared with the memory timeline). `lane`
// is where on the row's track they sit: above the bar, on it, or below it.
const MARKERS = [
  { field: "recomputed_by", kind: "recompute_start", glyph: "g-diamond", lane: "below", label: "recomputation started" },
  { field: "refilled", kind: "rpack", glyph: "g-dot", lane: "below", label: "refilled into recomputed[gid]" },
  { field: "taken", kind: "recomputed_take", glyph: "g-ring", lane: "below", label: "taken back by the unpack" },
  { field: "unpacks", kind: "unpack", glyph: "g-up", lane: "above", label: "unpacked" },
];
const LEGEND = [
  { glyph: "g-down", kind: "pack", label: "packed (holder)" },
  { glyph: "g-down", kind: "saved", label: "saved (tensor)" },
  { glyph: "g-up", kind: "unpack", label: "unpack" },
  { glyph: "g-diamond", kind: "recompute_start", label: "recomputation" },
  { glyph: "g-dot", kind: "rpack", label: "refill" },
  { glyph: "g-ring", kind: "recomputed_take", label: "take" },
  { glyph: "g-cross", kind: "holder_gc", label: "holder GC" },
  { glyph: "g-bar", kind: "release", label: "released" },
];

let root = null;
let body = null; // what moves into the dialog: summary, findings, rows
let rowsEl = null;
let cursor = null;
let onPick = null;
let entries = [];
let rowEls = [];
let bySeq = new Map(); // event seq -> indexes of the rows that show it
let n = 1; // events of the run: the time axis
let upTo = 0; // rows [0, upTo) are marked "past" (Note [Ledger rows marked while shown])
let pastWanted = 0; // rows [0, pastWanted) are saved at or before the current step
let marked = []; // rows marked as holding the step's events
let lastStep = -1;
let dialog = null;
let dialogBody = null;
let dialogNow = null;
let returnTo = null;
let now = { step: 0, caption: "" }; // the step shown, for the dialog's "now at" line

export function mount(el, options) {
  root = el;
  onPick = options.onPick;
  root.classList.add("ledger-view");
  root.innerHTML = `<div class="lg-body"><p class="empty">The ledger of saved tensors is computed once the run has finished.</p></div>
    <p class="lg-away" hidden>The ledger is open in a larger window. <button type="button" class="lg-back">Close it</button></p>`;
  body = root.querySelector(".lg-body");
  root.querySelector(".lg-back").addEventListener("click", close);
  // Every click on a marker or a "show" link is a jump (event delegation: rows are many).
  const jump = (e) => {
    const target = e.target.closest("[data-goto]");
    if (!target || !body.contains(target)) return;
    onPick(Number(target.dataset.goto));
  };
  body.addEventListener("click", jump);
  // Shown again (its tab chosen, the window resized): bring the step's row into view.
  new ResizeObserver(() => {
    markPast();
    if (marked.length && !isOpen()) reveal(rowEls[marked[0]]);
  }).observe(root);
  mountDialog();
}

// The server's memory report (null, with a message, when it could not be loaded).
export function load(doc, problem) {
  entries = doc ? doc.ledger || [] : [];
  n = Math.max(1, doc && doc.metrics ? doc.metrics.events : 1);
  upTo = 0;
  pastWanted = 0;
  marked = [];
  lastStep = -1;
  bySeq = new Map();
  if (!doc) {
    body.innerHTML = `<p class="empty">The ledger could not be loaded${problem ? ` (${esc(problem)})` : ""}.</p>`;
    rowEls = [];
    return;
  }
  body.innerHTML = `
    ${summaryHTML(doc.metrics)}
    ${findingsHTML(doc.diagnosis || [])}
    <div class="lg-legend" aria-label="What the marks mean">${LEGEND.map(
      (l) => `<span class="mem-key"><i class="glyph ${l.glyph} mk-${l.kind}"></i>${l.label}</span>`,
    ).join("")}</div>
    <div class="lg-table" role="table" aria-label="Saved tensors, in the order they were saved">
      <div class="lg-row lg-header" role="row">
        <span role="columnheader">saved for the backward</span>
        <span role="columnheader" class="lg-axis"><span>step 1</span><span>time →</span><span>step ${n}</span></span>
      </div>
      <div class="lg-rows">${entries.length ? entries.map(rowHTML).join("") : '<p class="empty">Nothing was saved for the backward in this run.</p>'}<div class="lg-cursor-layer" aria-hidden="true"><div class="lg-cursor"></div></div></div>
    </div>`;
  rowsEl = body.querySelector(".lg-rows");
  cursor = body.querySelector(".lg-cursor");
  rowEls = [...rowsEl.querySelectorAll(".lg-entry")];
  entries.forEach((entry, i) => {
    for (const seq of seqsOf(entry)) {
      if (!bySeq.has(seq)) bySeq.set(seq, []);
      bySeq.get(seq).push(i);
    }
  });
}

function seqsOf(entry) {
  const out = [entry.seq, ...entry.unpacks, ...entry.recomputed_by, ...entry.refilled, ...entry.taken];
  if (entry.end !== null && entry.end !== undefined) out.push(entry.end);
  return out;
}

function summaryHTML(m) {
  if (!m) return "";
  const parts = [
    `held for the backward at most <b>${bytes(m.peak_held)}</b>` +
      (m.peak_held_seq !== null && m.peak_held_seq !== undefined ? ` (${goto(m.peak_held_seq, `event #${m.peak_held_seq}`)})` : ""),
    `${m.saved_tensors} tensors kept as they are`,
    `${m.holders} holders in their place (standing in for ${bytes(m.holder_bytes)})`,
    `${m.recomputations} recomputations re-ran ${m.recomputed_ops} of ${m.forward_ops + m.recomputed_ops} ops`,
  ];
  return `<p class="lg-summary">${parts.join(" · ")}</p>`;
}

function findingsHTML(findings) {
  if (!findings.length) return "";
  const items = findings
    .map(
      (f) =>
        `<li data-kind="${esc(f.kind)}">${captionHTML(f.text)}` +
        (f.seq !== null && f.seq !== undefined ? ` ${goto(f.seq, "show", `show event #${f.seq}`)}` : "") +
        "</li>",
    )
    .join("");
  return `<div class="lg-findings"><h3>Why checkpointing saved little here</h3><ul>${items}</ul></div>`;
}

// A link-like button to the step at which event `seq` is the current one.
function goto(seq, text, label) {
  return `<button type="button" class="lg-goto" data-goto="${seq + 1}"${label ? ` aria-label="${esc(label)}"` : ""}>${text}</button>`;
}

const pos = (seq) => (100 * (seq + 0.5)) / n;

function marker(kind, glyph, lane, seq, label) {
  const text = `${label} at event #${seq}: go to step ${seq + 1}`;
  return (
    `<button type="button" class="lg-mark ${lane} mk-${kind}" data-kind="${kind}" data-seq="${seq}" data-goto="${seq + 1}" ` +
    `style="left:${pos(seq).toFixed(3)}%" title="${text}" aria-label="${text}"><i class="glyph ${glyph}"></i></button>`
  );
}

function rowHTML(entry, i) {
  const holder = entry.kept === "holder";
  const start = pos(entry.seq);
  const ended = entry.end !== null && entry.end !== undefined;
  const stop = ended ? pos(entry.end) : 100;
  const name = `<code>${esc(entry.node_name || "?")}</code>${entry.slot ? `.<code>${esc(entry.slot)}</code>` : ""}`;
  const chip = holder
    ? '<span class="lg-kept holder" title="a checkpoint\'s holder stood in for the tensor">holder</span>'
    : '<span class="lg-kept tensor" title="the tensor itself is kept for the backward">tensor</span>';
  const index = entry.index !== null && entry.index !== undefined ? `[${entry.index}]` : "";
  const kept = holder && entry.frame ? ` · in <code>${esc(entry.frame)}</code>${index}` : "";
  const size = holder
    ? `<span class="lg-bytes not-held" title="the tensor's bytes, which the holder does not hold">${bytes(entry.bytes)} not held</span>`
    : `<span class="lg-bytes" title="bytes held until it is released">${bytes(entry.bytes)}</span>`;
  const where = entry.line !== null && entry.line !== undefined ? `line ${entry.line}` : "no line";
  const during = entry.phase === "recompute" ? " · saved by a recomputation" : "";
  // What decided (engine/trace/memory.py): only a selective checkpoint's cache is worth a word
  // beyond the chip, since "saved" and "recomputed" are what tensor and holder already say.
  const policy =
    entry.policy === "cached by SAC"
      ? ' · <span class="lg-policy" title="a selective checkpoint policy kept this op\'s output: the recomputation handed it back instead of running the op">cached by SAC</span>'
      : "";
  const marks = [
    marker(holder ? "pack" : "saved", "g-down", "on", entry.seq, holder ? "packed into a holder" : "saved"),
    ...MARKERS.flatMap((m) => entry[m.field].map((seq) => marker(m.kind, m.glyph, m.lane, seq, m.label))),
  ];
  if (ended) {
    marks.splice(1, 0, marker(holder ? "holder_gc" : "release", holder ? "g-cross" : "g-bar", "on", entry.end, holder ? "holder GC" : "released"));
  }
  return `
    <div class="lg-row lg-entry ${holder ? "holder" : "tensor"}" role="row" data-i="${i}" data-id="${esc(entry.id)}" data-seq="${entry.seq}">
      <span class="lg-what" role="cell">
        <span class="lg-line1">${chip}${size} ${name}</span>
        <span class="lg-line2">${where}${kept}${during}${policy} · <span class="lg-fate">${esc(entry.fate)}</span></span>
      </span>
      <span class="lg-track" role="cell">
        <span class="lg-bar${ended ? "" : " open"}" style="left:${start.toFixed(3)}%;width:${Math.max(0.4, stop - start).toFixed(3)}%"
          title="${holder ? "the holder exists" : "the tensor is held"} from event #${entry.seq} ${ended ? `to event #${entry.end}` : "to the end of the run"}"></span>
        ${marks.join("")}
      </span>
    </div>`;
}

// Rows saved at or before `step`: those whose save event (seq) is at step seq + 1 <= step.
function countUpTo(step) {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid].seq + 1 <= step) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function render(state, ctx) {
  const step = ctx.step;
  now = { step, caption: ctx.caption || "" };
  if (isOpen()) showNow();
  if (!rowEls.length) return;
  if (step !== lastStep) {
    lastStep = step;
    pastWanted = countUpTo(step);
    if (!root.hidden || isOpen()) markPast();
    cursor.style.left = step < 1 ? "0%" : `${((100 * (step - 0.5)) / n).toFixed(3)}%`;
    cursor.hidden = step < 1;
  }
  // The rows of the events this step shows (one event, or a story step's).
  for (const i of marked) rowEls[i].classList.remove("now");
  marked = [];
  for (let seq = ctx.stepStart; seq < step; seq++) {
    for (const i of bySeq.get(seq) || []) {
      rowEls[i].classList.add("now");
      marked.push(i);
    }
  }
  if (marked.length && ctx.defer) {
    const el = rowEls[marked[0]];
    ctx.defer("ledger", () => reveal(el));
  }
}

// Note [Ledger rows marked while shown]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The rows saved by the current step are marked "past" (drawn in full, the others faded). A far
// jump changes that mark on up to every row (2,000 on a 100,000-event run), and the browser then
// has every one of them to invalidate, although the ledger sits in a tab that is usually not
// shown. So the marks are set only while the ledger is shown (its tab, or the larger window);
// while it is hidden `pastWanted` follows the step alone, and the rows catch up when it is shown
// again: the ResizeObserver fires when the tab is chosen (after the layout that shows it, before
// it is painted), and open() marks them before showing the window. The rows' "now" marks (the
// step's own events, a few rows) are set at every step.
function markPast() {
  const k = pastWanted;
  for (let i = Math.min(k, upTo); i < Math.max(k, upTo); i++) rowEls[i].classList.toggle("past", i < k);
  upTo = k;
}

// Scroll the ledger (in its tab or in the dialog), and only it, to show row `el`: scrollIntoView
// would scroll the page too when it scrolls (narrow windows).
function reveal(el) {
  const scroller = body.parentElement;
  if (!el.offsetParent || !scroller) return;
  const box = scroller.getBoundingClientRect();
  const r = el.getBoundingClientRect();
  const header = body.querySelector(".lg-header");
  const over = header ? header.offsetHeight : 0;
  if (r.top < box.top + over) scroller.scrollTop += r.top - box.top - over - 4;
  else if (r.bottom > box.bottom) scroller.scrollTop += r.bottom - box.bottom + 4;
}

// --- the larger window ------------------------------------------------------------------------------

function mountDialog() {
  ({ dialog, body: dialogBody, now: dialogNow } = mountModal({
    kind: "ledger",
    title: "Saved tensors: the ledger",
    boxClass: "ledger-box",
    bodyClass: "ledger-box-body",
    onClose: close,
    onTab: (e) => {
      // Keep focus inside the dialog.
      const focusable = [...dialog.querySelectorAll("button")].filter((b) => b.offsetParent);
      if (!focusable.length) return;
      const first = focusable[0];
      const last = focusable[focusable.length - 1];
      if (e.shiftKey && document.activeElement === first) {
        e.preventDefault();
        last.focus();
      } else if (!e.shiftKey && document.activeElement === last) {
        e.preventDefault();
        first.focus();
      }
    },
  }));
}

export function open() {
  if (isOpen()) return;
  returnTo = document.activeElement;
  markPast();
  dialogBody.append(body);
  root.querySelector(".lg-away").hidden = false;
  dialog.hidden = false;
  showNow();
  dialog.querySelector(".modal-close").focus();
  if (marked.length) reveal(rowEls[marked[0]]);
}

function showNow() {
  dialogNow.innerHTML = now.step ? `Now at step ${now.step}: ${captionHTML(now.caption)}` : "Now at the start of the run.";
}

export function close() {
  if (!isOpen()) return;
  dialog.hidden = true;
  root.querySelector(".lg-away").hidden = true;
  root.prepend(body);
  if (returnTo && returnTo.focus && document.contains(returnTo)) returnTo.focus();
  returnTo = null;
}

export function isOpen() {
  return Boolean(dialog && !dialog.hidden);
}
