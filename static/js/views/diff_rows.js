// The two traces as aligned rows (GET /api/diff): run a's event on the left, run b's on the right,
// a gap where one side has nothing. The first divergence is marked and scrolled into view; a filter
// keeps the checkpoint events only (on by default: they are what must match). Virtualised like the
// event log: a long trace has as many rows as events, and only those in view exist in the DOM.

import { perFrame } from "../frame.js";
import { esc } from "../format.js";

const ROW = 24; // px, matches .diff-row in app.css

const STATUS = {
  same: ["=", "same on both sides"],
  differ: ["≠", "differs"],
  only_a: ["◀", "only in"],
  only_b: ["▶", "only in"],
};

let root = null;
let scroller = null;
let spacer = null;
let rowsEl = null;
let countEl = null;
let filterEl = null;
let headA = null;
let headB = null;
let onFilter = null;
let diff = null;
let shown = []; // indexes into diff.rows, after the filter
let viewTop = 0;
let viewHeight = 400;
let urls = { a: "", b: "" };

export function mount(el, options) {
  root = el;
  onFilter = options.onFilter;
  root.classList.add("diff-rows-view");
  root.innerHTML = `
    <div class="view-head">
      <h2>Aligned events</h2>
      <label class="diff-filter"><input type="checkbox" checked> checkpoint events only</label>
      <span class="diff-legend">
        <span class="lg-row st-same">= same</span>
        <span class="lg-row st-differ">≠ differs</span>
        <span class="lg-row st-only_a">◀ only left</span>
        <span class="lg-row st-only_b">▶ only right</span>
        <span class="lg-row reordered">⇅ holder GC order (allowed)</span>
      </span>
      <span class="diff-count small"></span>
    </div>
    <div class="diff-colhead"><span>row</span><span class="head-a"></span><span></span><span class="head-b"></span></div>
    <div class="diff-scroll" tabindex="-1"><div class="diff-spacer"><div class="diff-list"></div></div></div>`;
  scroller = root.querySelector(".diff-scroll");
  spacer = root.querySelector(".diff-spacer");
  rowsEl = root.querySelector(".diff-list");
  countEl = root.querySelector(".diff-count");
  filterEl = root.querySelector(".diff-filter input");
  headA = root.querySelector(".head-a");
  headB = root.querySelector(".head-b");
  filterEl.addEventListener("change", () => onFilter(filterEl.checked));
  scroller.addEventListener("scroll", () => {
    viewTop = scroller.scrollTop;
    schedule();
  });
  new ResizeObserver(() => {
    viewHeight = scroller.clientHeight;
    schedule();
  }).observe(scroller);
}

function side(row, which, runUrl) {
  const seq = row[which];
  if (seq === null || seq === undefined) return `<span class="cell gap side-${which}"></span>`;
  const text = row[`${which}_text`] || "";
  // What differs, once, on the right.
  const fields = which === "b" && row.fields.length ? `<span class="fields">${esc(row.fields.join(", "))}</span>` : "";
  // The viewer's step N shows the state after N events, with event N - 1 current.
  return (
    `<span class="cell side-${which}"><a class="seq" href="${runUrl}?step=${seq + 1}" title="open this event in the run's viewer">#${seq}</a>` +
    `<span class="kind kind-${esc(row.kind)}">${esc(row.kind)}</span>` +
    `<span class="desc" title="${esc(text)}">${esc(text)}</span>${fields}</span>`
  );
}

const schedule = perFrame(draw);

function draw() {
  if (!diff) return;
  const n = shown.length;
  const start = Math.max(0, Math.floor(viewTop / ROW) - 5);
  const end = Math.min(n, Math.ceil((viewTop + viewHeight) / ROW) + 5);
  const html = [];
  for (let k = start; k < end; k++) {
    const i = shown[k];
    const r = diff.rows[i];
    const [mark, what] = STATUS[r.status];
    const label = r.status === "only_a" ? `${what} ${diff.a_label}` : r.status === "only_b" ? `${what} ${diff.b_label}` : what;
    const fields = r.fields.length ? ` in ${r.fields.join(", ")}` : "";
    const classes = [
      "diff-row",
      `st-${r.status}`,
      r.checkpoint ? "ck" : "plain",
      r.reordered ? "reordered" : "",
      i === diff.first_divergence ? "first" : "",
    ].join(" ");
    html.push(
      `<div class="${classes}" data-row="${i}" style="top:${k * ROW}px">` +
        `<span class="rowno">${i}</span>${side(r, "a", urls.a)}` +
        `<span class="st" title="${esc(label + fields)}${r.reordered ? " (holder GC order differs: allowed)" : ""}">${r.reordered ? "⇅" : mark}</span>` +
        `${side(r, "b", urls.b)}</div>`,
    );
  }
  rowsEl.innerHTML = html.join("");
}

// Scroll so that row `i` of the diff (if shown) sits a third of the way down.
export function scrollToRow(i) {
  const k = shown.indexOf(i);
  if (k < 0) return;
  viewHeight = scroller.clientHeight || viewHeight;
  viewTop = Math.max(0, k * ROW - Math.floor(viewHeight / 3));
  scroller.scrollTop = viewTop;
  draw();
}

export function render(state) {
  diff = state.diff;
  if (!diff) {
    countEl.textContent = "";
    rowsEl.innerHTML = `<p class="empty diff-empty">The aligned events appear here once both runs have finished.</p>`;
    spacer.style.height = "";
    return;
  }
  urls = { a: `/runs/${encodeURIComponent(diff.runs.a.id)}`, b: `/runs/${encodeURIComponent(diff.runs.b.id)}` };
  headA.textContent = diff.a_label;
  headB.textContent = diff.b_label;
  filterEl.checked = state.checkpointOnly;
  shown = [];
  diff.rows.forEach((r, i) => {
    if (r.checkpoint || !state.checkpointOnly) shown.push(i);
  });
  countEl.textContent = `${shown.length.toLocaleString()} of ${diff.rows.length.toLocaleString()} rows`;
  spacer.style.height = `${shown.length * ROW}px`;
  draw();
}
