// The event log: every event of the run, one row each, the current one selected. Virtualised: only
// the rows in view exist in the DOM (a 100,000-event run has 100,000 rows), all of one height.
// Clicking a row jumps to its step.

import { perFrame } from "../frame.js";
import { captionText, esc } from "../format.js";

const ROW = 22; // px, matches .log-row in app.css

let root = null;
let scroller = null;
let spacer = null;
let rowsEl = null;
let player = null;
let onPick = null;
let current = -1; // index of the selected event (step - 1)
let drawn = { start: -1, end: -1, length: -1 };
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
  return `log-row phase-${esc(player.events[i].phase || "none")}${sel}`;
}

// Note [Log rows kept]
// ~~~~~~~~~~~~~~~~~~~
// A step moves the selection, and at the story level the span of events the step covers; the
// rows in view are usually the same. Rewriting them (innerHTML) made the browser rebuild and lay
// out every row at every step, the costliest part of a step after the graph's; so while the
// rows in view are the same ones, only the classes that differ are set (`classes` holds what
// each row has), and the rows are rewritten only when the window of rows or the run's length
// changes.
let classes = []; // classes[i - drawn.start]: the class attribute of row i

function draw() {
  const n = player.length;
  const start = Math.max(0, Math.floor(viewTop / ROW) - 5);
  const end = Math.min(n, Math.ceil((viewTop + viewHeight) / ROW) + 5);
  if (start === drawn.start && end === drawn.end && n === drawn.length) {
    const rows = rowsEl.children;
    for (let i = start; i < end; i++) {
      const cls = rowClass(i);
      if (classes[i - start] !== cls) {
        rows[i - start].className = cls;
        classes[i - start] = cls;
      }
    }
    return;
  }
  const html = [];
  classes = [];
  for (let i = start; i < end; i++) {
    const e = player.events[i];
    const cls = rowClass(i);
    classes.push(cls);
    html.push(
      `<div class="${cls}" data-step="${i + 1}" style="top:${i * ROW}px">` +
        `<span class="log-step">${i + 1}</span><span class="log-kind kind-${esc(e.kind)}">${esc(e.kind)}</span>` +
        `<span class="log-text">${esc(captionText(player.captions[i]))}</span></div>`,
    );
  }
  rowsEl.innerHTML = html.join("");
  drawn = { start, end, length: n };
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
      viewTop = Math.max(0, Math.min(top - viewHeight / 2, player.length * ROW - viewHeight));
      const want = viewTop;
      ctx.defer("log", () => (scroller.scrollTop = want));
    }
  }
  draw();
}
