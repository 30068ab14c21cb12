// The caption of the current event: one sentence from the server (engine/trace/captions.py), and
// a line of facts about the event (its kind, phase, graph task and source line).

import { captionHTML, esc, gidLabel } from "../format.js";

let root = null;
let textEl = null;
let metaEl = null;

export function mount(el) {
  root = el;
  root.classList.add("caption-view");
  root.innerHTML = `<div class="caption-meta"></div><p class="caption-text" aria-live="polite"></p>`;
  textEl = root.querySelector(".caption-text");
  metaEl = root.querySelector(".caption-meta");
}

export function render(state, ctx) {
  const event = ctx.event;
  if (!event) {
    metaEl.innerHTML = `<span class="chip">start</span>`;
    textEl.innerHTML = ctx.length
      ? "Nothing has run yet. Step forward (→) to watch the scenario's first event."
      : ctx.finished
        ? "This run recorded no events."
        : "Waiting for the first events…";
    root.dataset.kind = "";
    return;
  }
  const facts = [
    `<span class="chip kind kind-${esc(event.kind)}">${esc(event.kind)}</span>`,
    `<span class="chip phase phase-${esc(event.phase || "none")}">${esc(event.phase || "")}</span>`,
  ];
  if (event.gid !== null && event.gid !== undefined) facts.push(`<span class="chip">${esc(gidLabel(event.gid))}</span>`);
  if (event.src && event.src.line) facts.push(`<span class="where">line ${event.src.line}</span>`);
  facts.push(`<span class="where">event #${event.seq}</span>`);
  metaEl.innerHTML = facts.join(" ");
  textEl.innerHTML = captionHTML(ctx.caption) || `Event <code>${esc(event.kind)}</code>.`;
  root.dataset.kind = event.kind;
}
