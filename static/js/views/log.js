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
let drawn = { start: -1, end: -1, current: -2, length: -1 };
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

function draw() {
  const n = player.length;
  const start = Math.max(0, Math.floor(viewTop / ROW) - 5);
  const end = Math.min(n, Math.ceil((viewTop + viewHeight) / ROW) + 5);
  if (start === drawn.start && end === drawn.end && n === drawn.length && span === drawn.span) {
    // Same rows: move the selection only.
    if (current !== drawn.current) {
      const old = rowsEl.querySelector(".log-row.current");
      if (old) old.classList.remove("current");
      const row = current >= start && current < end ? rowsEl.children[current - start] : null;
      if (row) row.classList.add("current");
      drawn.current = current;
    }
    return;
  }
  const html = [];
  for (let i = start; i < end; i++) {
    const e = player.events[i];
    // A story step's own events in bold, the other events it spans shaded: what this step did.
    const sel = (i === current ? " current" : "") + (i > spanFrom && i < current ? " in-step" : "") + (storySeqs.has(i) ? " story" : "");
    html.push(
      `<div class="log-row phase-${esc(e.phase || "none")}${sel}" data-step="${i + 1}" style="top:${i * ROW}px">` +
        `<span class="log-step">${i + 1}</span><span class="log-kind kind-${esc(e.kind)}">${esc(e.kind)}</span>` +
        `<span class="log-text">${esc(captionText(player.captions[i]))}</span></div>`,
    );
  }
  rowsEl.innerHTML = html.join("");
  drawn = { start, end, current, length: n, span };
}

let spanFrom = -1; // the step the current step started from (events after it belong to it)
let storySeqs = new Set();
let span = "";

export function render(state, ctx) {
  current = ctx.step - 1;
  spanFrom = ctx.stepStart - 1;
  storySeqs = new Set(ctx.storyStep ? ctx.storyStep.seqs : []);
  span = `${spanFrom}:${ctx.storyStep ? ctx.storyStep.index : ""}`;
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
