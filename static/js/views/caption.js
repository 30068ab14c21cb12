// The caption of the current step: one sentence from the server (engine/trace/captions.py, or the
// story step's own for a group of events, engine/trace/story.py), a line of facts (kind, phase,
// graph task, source line, which events), what changed since the previous step
// (engine/trace/changed.py), and the step's cause links (engine/trace/causes.py): "why?" jumps to
// the event that caused it, "← back" returns, and what it led to is listed as links.

import { captionHTML, esc, gidLabel } from "../format.js";
import { decorate } from "../glossary.js";

const MAX_EFFECTS = 6;

let root = null;
let textEl = null;
let metaEl = null;
let changedEl = null;
let linksEl = null;
let act = null;

export function mount(el, options) {
  root = el;
  act = options.act;
  root.classList.add("caption-view");
  root.innerHTML = `
    <div class="caption-meta"></div>
    <p class="caption-text" aria-live="polite"></p>
    <div class="caption-links"></div>
    <div class="caption-changed" aria-label="What changed in this step"></div>`;
  textEl = root.querySelector(".caption-text");
  metaEl = root.querySelector(".caption-meta");
  changedEl = root.querySelector(".caption-changed");
  linksEl = root.querySelector(".caption-links");
  // One listener for every link the view draws: each carries the step it goes to.
  root.addEventListener("click", (e) => {
    const target = e.target.closest("[data-goto], [data-why], [data-back]");
    if (!target) return;
    e.preventDefault();
    if (target.dataset.why !== undefined) act("why");
    else if (target.dataset.back !== undefined) act("why-back");
    else act("goto-cause", Number(target.dataset.goto));
  });
}

function eventLabel(ctx, seq) {
  const e = ctx.eventAt(seq);
  return e ? `#${seq} ${e.kind}` : `#${seq}`;
}

export function render(state, ctx) {
  const event = ctx.event;
  const story = ctx.storyStep; // the story step shown, at the story level and exactly at one
  if (!event) {
    metaEl.innerHTML = `<span class="chip">start</span>`;
    textEl.innerHTML = ctx.length
      ? "Nothing has run yet. Step forward (→) to watch the scenario's first event."
      : ctx.finished
        ? "This run recorded no events."
        : "Waiting for the first events…";
    root.dataset.kind = "";
    changedEl.innerHTML = "";
    linksEl.innerHTML = ctx.whyBack !== null ? backLink(ctx) : "";
    return;
  }
  const facts = [
    `<span class="chip kind kind-${esc(event.kind)}">${esc(event.kind)}</span>`,
    `<span class="chip phase phase-${esc(event.phase || "none")}">${esc(event.phase || "")}</span>`,
  ];
  if (event.gid !== null && event.gid !== undefined) facts.push(`<span class="chip">${esc(gidLabel(event.gid))}</span>`);
  if (event.src && event.src.line) facts.push(`<span class="where">line ${event.src.line}</span>`);
  if (story && story.seqs.length > 1) facts.push(`<span class="where">events #${story.first}–#${story.last}</span>`);
  else facts.push(`<span class="where">event #${event.seq}</span>`);
  if (ctx.level === "story" && !story) facts.push(`<span class="chip between">between story steps</span>`);
  metaEl.innerHTML = facts.join(" ");
  const text = story ? story.caption : ctx.caption;
  textEl.innerHTML = captionHTML(text) || `Event <code>${esc(event.kind)}</code>.`;
  decorate(textEl);
  root.dataset.kind = event.kind;
  renderChanged(story ? story.changed : ctx.changed);
  renderLinks(ctx);
}

function renderChanged(lines) {
  if (!lines || !lines.length) {
    changedEl.innerHTML = "";
    return;
  }
  const items = lines.map((l) => `<li>${captionHTML(l)}</li>`).join("");
  changedEl.innerHTML = `<span class="changed-title">What changed</span><ul>${items}</ul>`;
}

function backLink(ctx) {
  return `<button type="button" class="why-back" data-back>← back to step ${ctx.whyBack}</button>`;
}

function renderLinks(ctx) {
  const links = ctx.links; // {cause, source, effects} of this step (main.js merges a group's)
  const parts = [];
  if (ctx.whyBack !== null) parts.push(backLink(ctx));
  if (links && links.cause) {
    const c = links.cause;
    if (c.seq >= 0) {
      parts.push(
        `<span class="why-line"><button type="button" class="why" data-why title="Jump to the event that caused this one (W)">why?</button> ` +
          `${captionHTML(c.why)} <a href="#" class="cause-link" data-goto="${c.seq + 1}">${esc(eventLabel(ctx, c.seq))}</a></span>`,
      );
    } else {
      parts.push(`<span class="why-line"><span class="why-none">why?</span> ${captionHTML(c.why)}</span>`);
    }
  }
  if (links && links.source) {
    const s = links.source;
    parts.push(
      `<span class="why-line">from: ${captionHTML(s.why)} <a href="#" class="cause-link" data-goto="${s.seq + 1}">${esc(eventLabel(ctx, s.seq))}</a></span>`,
    );
  }
  const effects = (links && links.effects) || [];
  if (effects.length) {
    const shown = effects.slice(0, MAX_EFFECTS).map(
      (x) =>
        `<a href="#" class="effect-link" data-goto="${x.seq + 1}" title="${esc(x.what.replace(/`/g, ""))}">${esc(eventLabel(ctx, x.seq))}</a>`,
    );
    const more = effects.length > MAX_EFFECTS ? ` and ${effects.length - MAX_EFFECTS} more` : "";
    parts.push(`<span class="effects-line">led to: ${shown.join(", ")}${more}</span>`);
  }
  linksEl.innerHTML = parts.join("");
}
