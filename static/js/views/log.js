// The event log: every event of the run, one row each, the current one selected. Virtualised: only
// the rows in view exist in the DOM (a 100,000-event run has 100,000 rows), all of one height.
// Clicking a row jumps to its step.

import { perFrame } from "../frame.js";
import { captionText } from "../format.js";

const ROW = 22; // px, matches .log-row in app.css

let root = null;
let scroller = null;
let spacer = null;
let rowsEl = null;
let player = null;
let onPick = null;
let current = -1; // index of the selected event (step - 1)
// The scroll position and height, cached: reading them while a step renders would force a layout
// (see defer in main.js). Scroll events and a ResizeObserver keep them current.
let viewTop = 0;
let viewHeight = 400;

export function mount(el, options) {
  root = el;
  player = options.player;
  onPick = options.onPick;
  root.classList.add("log-view");
  root.innerHTML = `
    <div class="view-head"><h2>Events</h2><span class="log-count"></span></div>
    <div class="log-scroll" tabindex="-1"><div class="log-spacer"><div class="log-rows"></div></div></div>`;
  scroller = root.querySelector(".log-scroll");
  spacer = root.querySelector(".log-spacer");
  rowsEl = root.querySelector(".log-rows");
  scroller.addEventListener("scroll", () => {
    viewTop = scroller.scrollTop;
    schedule();
  });
  new ResizeObserver(() => {
    viewHeight = scroller.clientHeight;
    schedule();
  }).observe(scroller);
  rowsEl.addEventListener("click", (e) => {
    const row = e.target.closest(".log-row");
    if (row) onPick(Number(row.dataset.step));
  });
}

// New events arrived: grow the list (cheap: one height).
export function grow() {
  root.querySelector(".log-count").textContent = `${player.length.toLocaleString()} events`;
  spacer.style.height = `${player.length * ROW}px`;
  schedule();
}

const schedule = perFrame(draw);

// A row's classes: its event's phase; the current event; a story step's own events in bold, the
// other events it spans shaded (what this step did).
function rowClass(i) {
  const sel = (i === current ? " current" : "") + (i > spanFrom && i < current ? " in-step" : "") + (storySeqs.has(i) ? " story" : "");
  return `log-row phase-${player.events[i].phase || "none"}${sel}`;
}

// Note [Log rows kept]
// ~~~~~~~~~~~~~~~~~~~
// A step moves the selection (and, at the story level, the span of events the step covers); a
// jump moves the window of rows in view as well. Rewriting the rows (innerHTML) made the browser
// drop and rebuild every row's elements, their styles and their layout, at every step and more so
// at every jump. So the row elements are made once and kept, one per place in the window, in
// order (`pool`): a step sets only the classes that differ, and a move of the window rewrites
// what each kept row shows (its position, step number, kind and caption: the data of the text
// nodes it already has), so no element is made or dropped unless the window's size changes. A
// row looks exactly as a freshly made one does: every row is made empty and filled the same way.
let pool = []; // pool[k]: the row at place k of the window, {el, cls, i, kindCls, texts}

function makeRow() {
  const el = document.createElement("div");
  const texts = [];
  for (const cls of ["log-step", "log-kind", "log-text"]) {
    const span = document.createElement("span");
    span.className = cls;
    texts.push(span.appendChild(document.createTextNode("")));
    el.appendChild(span);
  }
  rowsEl.appendChild(el);
  return { el, cls: "", i: -1, kindCls: "", texts };
}

// Show event i in a kept row, writing only what differs.
function fill(row, i) {
  const cls = rowClass(i);
  if (row.cls !== cls) row.el.className = row.cls = cls;
  if (row.i === i) return;
  row.i = i;
  const e = player.events[i];
  row.el.dataset.step = String(i + 1);
  row.el.style.top = `${i * ROW}px`;
  const kindCls = `log-kind kind-${e.kind}`;
  if (row.kindCls !== kindCls) row.texts[1].parentNode.className = row.kindCls = kindCls;
  const [step, kind, text] = row.texts;
  step.data = String(i + 1);
  kind.data = e.kind;
  text.data = captionText(player.captions[i]);
}

function draw() {
  const n = player.length;
  const start = Math.max(0, Math.floor(viewTop / ROW) - 5);
  const end = Math.min(n, Math.ceil((viewTop + viewHeight) / ROW) + 5);
  const count = Math.max(0, end - start);
  while (pool.length < count) pool.push(makeRow());
  while (pool.length > count) pool.pop().el.remove();
  for (let k = 0; k < count; k++) fill(pool[k], start + k);
}

let spanFrom = -1; // the step the current step started from (events after it belong to it)
let storySeqs = new Set();

export function render(state, ctx) {
  current = ctx.step - 1;
  spanFrom = ctx.stepStart - 1;
  storySeqs = new Set(ctx.storyStep ? ctx.storyStep.seqs : []);
  if (current >= 0) {
    // Keep the selected row in view, a few rows from the edges.
    const top = current * ROW;
    if (top < viewTop + ROW || top > viewTop + viewHeight - 2 * ROW) {
      // Whole pixels, as the scroll position is: the scroll event that follows then draws nothing new.
      viewTop = Math.round(Math.max(0, Math.min(top - viewHeight / 2, player.length * ROW - viewHeight)));
      const want = viewTop;
      ctx.defer("log", () => (scroller.scrollTop = want));
    }
  }
  draw();
}
