// The step controls, Python Tutor's row plus what a trace needs: the level of detail (the story,
// or every event), First / Back / "Step i of n" / Forward / Last, a slider, play/pause with a
// speed, "previous/next event of kind …", a box to jump to a step, breakpoints ("run to next"),
// and predict mode. The view only reads the player and the page's model; moving goes through `act`.
//
// At the story level the counter, the slider and the jump box count story steps
// (engine/trace/story.py); at the "every event" level they count events. The URL always holds the
// event step (?step=N), so a permalink means the same at both levels.

import { BREAK_KINDS } from "../breakpoints.js";
import { esc } from "../format.js";

const KINDS = [
  ["recompute_start", "recompute"],
  ["unpack", "unpack"],
  ["pack", "pack"],
  ["early_stop", "early stop"],
  ["holder_gc", "holder GC"],
  ["node_exec", "node exec"],
  ["rpack", "rpack"],
  ["recomputed_take", "recomputed take"],
  ["frame_new", "frame new"],
  ["frame_gc", "frame GC"],
  ["backward_start", "backward start"],
  ["checkpoint_error", "checkpoint error"],
  ["error", "error"],
  ["mark", "print / mark"],
];

const SPEEDS = [1, 2, 4, 8, 16, 30, 60, 120];

let root = null;
let player = null;
let act = null;
let model = null; // {level(), story(), bps, frames(), predictOn()}
let el = {};

export function mount(rootEl, options) {
  root = rootEl;
  player = options.player;
  act = options.act;
  model = options.model;
  root.classList.add("controls-view");
  root.setAttribute("role", "toolbar");
  root.setAttribute("aria-label", "Step controls");
  root.innerHTML = `
    <div class="ctl-row">
      <div class="ctl-group ctl-level" role="radiogroup" aria-label="Level of detail">
        <button type="button" role="radio" class="ctl-level-story" data-level="story" title="Only the steps that change the checkpoint story (L switches)">Story</button>
        <button type="button" role="radio" class="ctl-level-events" data-level="events" title="Every event the engine recorded (L switches)">Every event</button>
      </div>
      <div class="ctl-group nav">
        <button type="button" class="ctl-first" title="First (Home)" aria-label="First step">⇤</button>
        <button type="button" class="ctl-back" title="Back (←)">◀ Back</button>
        <span class="ctl-step" aria-live="polite">Step 0 of 0</span>
        <button type="button" class="ctl-forward" title="Forward (→)">Forward ▶</button>
        <button type="button" class="ctl-last" title="Last (End)" aria-label="Last step">⇥</button>
      </div>
      <div class="ctl-group play">
        <button type="button" class="ctl-play" title="Play / pause (Space)">▶ Play</button>
        <select class="ctl-speed" aria-label="Speed">${SPEEDS.map((s) => `<option value="${s}"${s === 4 ? " selected" : ""}>${s}/s</option>`).join("")}</select>
      </div>
      <div class="ctl-group kinds">
        <button type="button" class="ctl-prev-kind" title="Previous event of this kind (Shift+←)" aria-label="Previous event of this kind">◀</button>
        <select class="ctl-kind" title="Kind of event to jump to" aria-label="Kind of event to jump to"></select>
        <button type="button" class="ctl-next-kind" title="Next event of this kind (Shift+→)" aria-label="Next event of this kind">▶</button>
      </div>
      <div class="ctl-group bps">
        <button type="button" class="ctl-prev-bp" title="Run back to the previous breakpoint (Shift+P)" aria-label="Run back to the previous breakpoint">◀◀</button>
        <details class="ctl-bp-menu">
          <summary title="Breakpoints: source lines (click a line number), event kinds, frames">breakpoints <span class="ctl-bp-count"></span></summary>
          <div class="bp-panel" role="group" aria-label="Breakpoints">
            <p class="bp-help">Stop at every event of a kind, at a recomputation of a frame, or at a source line (click its number in the source).</p>
            <fieldset class="bp-kinds"><legend>event kinds</legend>
              ${BREAK_KINDS.map(([k, label]) => `<label><input type="checkbox" data-bp-kind="${k}"> ${label}</label>`).join("")}
            </fieldset>
            <fieldset class="bp-frames"><legend>next recomputation of</legend><div class="bp-frame-list"></div></fieldset>
            <div class="bp-lines"></div>
            <button type="button" class="bp-clear">clear all</button>
          </div>
        </details>
        <button type="button" class="ctl-next-bp" title="Run to the next breakpoint (P)" aria-label="Run to the next breakpoint">▶▶</button>
      </div>
      <label class="ctl-group ctl-predict" title="Answer a question before each decision is shown (story level)"><input type="checkbox" class="ctl-predict-box"> predict</label>
      <form class="ctl-group jump">
        <label><span class="ctl-jump-label">step</span> <input class="ctl-jump" type="number" min="0" step="1" inputmode="numeric"></label>
        <button type="submit">Go</button>
      </form>
    </div>
    <input class="ctl-slider" type="range" min="0" max="0" value="0" aria-label="Step">`;
  for (const name of [
    "first", "back", "step", "forward", "last", "play", "speed", "prev-kind", "kind", "next-kind", "jump", "slider",
    "prev-bp", "next-bp", "bp-count", "jump-label", "predict-box",
  ]) {
    el[name] = root.querySelector(`.ctl-${name}`);
  }
  el.levels = [...root.querySelectorAll(".ctl-level button")];
  el.bpFrames = root.querySelector(".bp-frame-list");
  el.bpLines = root.querySelector(".bp-lines");
  el.kind.innerHTML = KINDS.map(([k, label]) => `<option value="${k}">${label}</option>`).join("");
  for (const b of el.levels) b.addEventListener("click", () => act("level", b.dataset.level));
  el.first.addEventListener("click", () => act("first"));
  el.back.addEventListener("click", () => act("back"));
  el.forward.addEventListener("click", () => act("forward"));
  el.last.addEventListener("click", () => act("last"));
  el.play.addEventListener("click", () => act("toggle-play"));
  // After choosing from a menu, the arrow keys step again (instead of changing the choice).
  el.speed.addEventListener("change", () => {
    el.speed.blur();
    act("speed", Number(el.speed.value));
  });
  el["prev-kind"].addEventListener("click", () => act("prev-kind", el.kind.value));
  el["next-kind"].addEventListener("click", () => act("next-kind", el.kind.value));
  el.kind.addEventListener("change", () => {
    el.kind.blur();
    update();
  });
  el["prev-bp"].addEventListener("click", () => act("prev-bp"));
  el["next-bp"].addEventListener("click", () => act("next-bp"));
  root.querySelector(".bp-panel").addEventListener("change", (e) => {
    const t = e.target;
    if (t.dataset.bpKind) model.bps.toggle("kind", t.dataset.bpKind);
    else if (t.dataset.bpFrame) model.bps.toggle("frame", Number(t.dataset.bpFrame));
  });
  root.querySelector(".bp-panel").addEventListener("click", (e) => {
    const t = e.target.closest("button");
    if (!t) return;
    if (t.classList.contains("bp-clear")) model.bps.clear();
    else if (t.dataset.bpLine) model.bps.toggle("line", Number(t.dataset.bpLine));
  });
  // The breakpoints menu closes with Escape or a click elsewhere, like any menu.
  const menu = root.querySelector(".ctl-bp-menu");
  menu.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && menu.open) {
      menu.open = false;
      menu.querySelector("summary").focus();
      e.stopPropagation();
    }
  });
  document.addEventListener("click", (e) => {
    if (menu.open && !menu.contains(e.target)) menu.open = false;
  });
  el["predict-box"].addEventListener("change", () => act("predict", el["predict-box"].checked));
  el.slider.addEventListener("input", () => act("slide", Number(el.slider.value)));
  root.querySelector("form.jump").addEventListener("submit", (e) => {
    e.preventDefault();
    if (el.jump.value !== "") act("jump", Number(el.jump.value));
  });
}

export function selectedKind() {
  return el.kind.value;
}

export function speed() {
  return Number(el.speed.value);
}

export function setPlaying(playing) {
  el.play.textContent = playing ? "❚❚ Pause" : "▶ Play";
  el.play.classList.toggle("on", playing);
}

// Counts per kind in the menu, and the kinds with no event greyed out.
export function grow() {
  for (const opt of el.kind.options) {
    const [, label] = KINDS.find(([k]) => k === opt.value);
    const n = player.countOf(opt.value);
    opt.textContent = `${label} (${n})`;
    opt.disabled = n === 0;
  }
  update();
}

// The breakpoint menu: kinds checked, one checkbox per frame, the source lines set.
export function renderBreakpoints() {
  const bps = model.bps;
  for (const box of root.querySelectorAll("[data-bp-kind]")) box.checked = bps.has("kind", box.dataset.bpKind);
  const frames = model.frames();
  el.bpFrames.innerHTML = frames.length
    ? frames
        .map(
          (f) =>
            `<label><input type="checkbox" data-bp-frame="${f.frame}"${bps.has("frame", f.frame) ? " checked" : ""}> ${esc(f.name)}</label>`,
        )
        .join("")
    : `<span class="bp-none">no checkpoint frames in this run</span>`;
  const lines = [...bps.lines].sort((a, b) => a - b);
  el.bpLines.innerHTML = lines.length
    ? `source lines: ${lines.map((l) => `<button type="button" class="bp-line" data-bp-line="${l}" title="remove">line ${l} ×</button>`).join(" ")}`
    : "";
  el["bp-count"].textContent = bps.size ? `(${bps.size})` : "";
  update();
}

// Note [Controls written when they differ]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A step sets a dozen of the controls' properties, most to the value they already have. Writing
// an attribute or a text, even unchanged, makes the browser invalidate the element's style (and a
// text is a new text node, laid out again), so each is written only when it differs.
function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function setAttr(node, name, value) {
  if (node.getAttribute(name) !== value) node.setAttribute(name, value);
}

function setProp(node, name, value) {
  if (node[name] !== value) node[name] = value;
}

function update() {
  const n = player.length;
  const s = player.step;
  const story = model.story();
  const atStory = model.level() === "story" && story;
  for (const b of el.levels) {
    const on = b.dataset.level === model.level();
    setAttr(b, "aria-checked", String(on));
    if (b.classList.contains("on") !== on) b.classList.toggle("on", on);
    setProp(b, "disabled", b.dataset.level === "story" && !story);
    if (b.disabled) setProp(b, "title", "The story level is ready when the run has finished");
  }
  if (atStory) {
    const i = story.indexAt(s);
    const exact = story.isAt(s);
    const k = story.length;
    const where = exact ? "" : ` · between steps (event ${s.toLocaleString()})`;
    setText(el.step, `Story step ${(i + 1).toLocaleString()} of ${k.toLocaleString()}${where}`);
    setProp(el.slider, "max", String(k));
    setAttr(el.slider, "aria-label", "Story step");
    if (Number(el.slider.value) !== i + 1) el.slider.value = String(i + 1);
    setProp(el.jump, "max", String(k));
    setText(el["jump-label"], "story step");
    setProp(el.forward, "disabled", story.next(s) === null && s >= n);
    setProp(el.last, "disabled", el.forward.disabled);
  } else {
    setText(el.step, `Step ${s.toLocaleString()} of ${n.toLocaleString()}`);
    setProp(el.slider, "max", String(n));
    setAttr(el.slider, "aria-label", "Step");
    if (Number(el.slider.value) !== s) el.slider.value = String(s);
    setProp(el.jump, "max", String(n));
    setText(el["jump-label"], "step");
    setProp(el.forward, "disabled", s >= n);
    setProp(el.last, "disabled", s >= n);
  }
  setProp(el.first, "disabled", s === 0);
  setProp(el.back, "disabled", s === 0);
  const kind = el.kind.value;
  setProp(el["prev-kind"], "disabled", player.prevOf(kind) === null);
  setProp(el["next-kind"], "disabled", player.nextOf(kind) === null);
  setProp(el["prev-bp"], "disabled", model.bps.size === 0);
  setProp(el["next-bp"], "disabled", model.bps.size === 0);
  setProp(el["predict-box"], "checked", model.predictOn());
  setProp(el["predict-box"], "disabled", !story);
}

export function render() {
  update();
}
