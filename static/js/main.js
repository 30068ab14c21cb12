// The run page: loads the run, streams its events into the Player, and renders every view from
// the Player's state at each step. Once the run has finished it loads the run's story (story.js:
// story steps, chapters, cause links, predict-mode questions, all derived by the server) and
// steps through it: the story level is the default, "every event" the other level. The URL
// always says which run, step, level, breakpoints and mode are shown
// (/runs/{id}?step=N&level=events&bp=line:12&predict=1), so reloading or sharing it gives the
// same view. `step` is always the event step, at either level.

import { readConfig } from "./api.js";
import { Breakpoints } from "./breakpoints.js";
import { mount as mountDownloads } from "./downloads.js";
import { mountButton as mountEmbedButton } from "./embed.js";
import { setTerms } from "./glossary.js";
import { Player } from "./player.js";
import { dataSource } from "./source_data.js";
import { Story } from "./story.js";
import { isOpen as tourOpen, maybeStartTour, mountButton as mountTourButton } from "./tour.js";
import * as caption from "./views/caption.js";
import * as chapters from "./views/chapters.js";
import * as controls from "./views/controls.js";
import * as frames from "./views/frames.js";
import * as graph from "./views/graph.js";
import * as help from "./views/help.js";
import * as ledger from "./views/ledger.js";
import * as log from "./views/log.js";
import * as memory from "./views/memory.js";
import * as modules from "./views/modules.js";
import * as predict from "./views/predict.js";
import * as source from "./views/source.js";
import * as truncated from "./views/truncated.js";

const config = readConfig();
// The embed page (templates/embed.html, docs/viewer.md "Embedding") runs this same script with
// `embed: true`: only the views whose panels the page has are mounted and rendered.
const embed = Boolean(config.embed);
const mounted = new Set(); // the names of the views mounted on this page
const has = (name) => mounted.has(name);
const runId = config.run_id || decodeURIComponent(location.pathname.split("/").filter(Boolean).pop() || "");
const $ = (sel) => document.querySelector(sel);
// The server, or the data inlined in an exported HTML file (source_data.js).
const lensData = dataSource(runId, config);

let player = null;
let run = null;
let finished = false;
let wanted = null; // the step asked for in the URL, reached once enough events have arrived
let playing = null; // the play loop's animation frame request, while playing
let urlTimer = null;
let story = null; // the run's Story once loaded (after the run has finished)
let early = {}; // documents asked for at once when the run had finished before the page opened
const params = new URL(location.href).searchParams;
let wantedLevel = params.get("level") === "events" ? "events" : "story";
let level = "events"; // the story level needs the story: it becomes the level once loaded
const bps = Breakpoints.parse(params.get("bp"));
let predictOn = params.get("predict") === "1";
const whyStack = []; // steps to return to after following "why?" links, innermost last
let pendingAnswer = null; // {question, target} while predict mode asks before a move

// Every keyboard shortcut, listed by "?" (views/help.js).
const SHORTCUTS = [
  { keys: "→ / ←", action: "next / previous step (a story step at the story level, an event at the other)" },
  { keys: "Shift+→ / Shift+←", action: "next / previous event of the kind chosen in the menu" },
  { keys: "Home / End", action: "first / last step" },
  { keys: "Space", action: "play or pause" },
  { keys: "L", action: "switch between the story and every event (keeps the position)" },
  { keys: "W", action: "why? jump to the event that caused this step" },
  { keys: "B", action: "back to where you were before the last why?" },
  { keys: "P / Shift+P", action: "run to the next / previous breakpoint" },
  { keys: "Q", action: "predict mode on or off" },
  { keys: "1 … 9, 0", action: "answer the open prediction (0 skips)" },
  { keys: "C", action: "go to the chapters list" },
  { keys: "?", action: "this list of shortcuts" },
  { keys: "Esc", action: "close a dialog or a card" },
];

// --- rendering ---------------------------------------------------------------------------------

// Rendered in this order, by name (the name keys `lens.profile`).
const VIEWS = Object.entries({ controls, caption, predict, chapters, source, frames, graph, log, memory, ledger, modules });

// The story step shown, when the story level is on and the player stands exactly at one.
function storyStepAt(step) {
  if (level !== "story" || !story || step === 0 || !story.isAt(step)) return null;
  return story.steps[story.indexAt(step)];
}

// The cause links of what is shown: one event's, or a story step's (the cause of its first event
// from outside the step, and the effects of all its events outside it).
function linksAt(step, shown) {
  if (!story || step === 0) return null;
  if (!shown) return story.linksOf(step - 1);
  const inside = new Set(shown.seqs);
  const out = { cause: null, source: null, effects: [] };
  const seen = new Set();
  for (const seq of shown.seqs) {
    const l = story.linksOf(seq);
    if (!l) continue;
    if (!out.cause && l.cause && !inside.has(l.cause.seq)) out.cause = l.cause;
    if (!out.source && l.source) out.source = l.source;
    for (const x of l.effects || []) {
      if (!inside.has(x.seq) && !seen.has(x.seq)) {
        seen.add(x.seq);
        out.effects.push(x);
      }
    }
  }
  out.effects.sort((a, b) => a.seq - b.seq);
  return out;
}

function context(move) {
  const step = player.step;
  const shown = storyStepAt(step);
  // At a story step, "what changed" is everything since the previous story step.
  const changes = shown
    ? player.changes.slice(story.startOf(shown.index), step).flat()
    : step > 0
      ? player.changes[step - 1]
      : [];
  return {
    step,
    length: player.length,
    finished,
    event: player.event,
    next: player.nextEvent,
    caption: player.caption,
    changed: step > 0 ? player.changed[step - 1] : [],
    level,
    storyStep: shown,
    stepStart: shown ? story.startOf(shown.index) : Math.max(0, step - 1),
    storyIndex: story ? story.indexAt(step) : -1,
    links: linksAt(step, shown),
    eventAt: (seq) => player.events[seq] || null,
    whyBack: whyStack.length ? whyStack[whyStack.length - 1] : null,
    predictOn: predictOn && Boolean(story),
    atEnd: step >= player.length,
    eventChanges: changes,
    // The change lists applied or undone by this move; null (with full) to recheck everything.
    touched: move ? move.touched : null,
    full: !move || !move.touched,
    single: Boolean(move && Math.abs(move.to - move.from) === 1),
    playing: Boolean(playing),
    defer,
  };
}

// Per-view render times are kept when a bench or a curious developer sets `lens.profile = {}`.
function renderAll(move) {
  const ctx = context(move);
  const state = player.state;
  const profile = window.lens.profile;
  for (const [name, view] of VIEWS) {
    if (!has(name)) continue;
    const t0 = profile ? performance.now() : 0;
    view.render(state, ctx);
    if (profile) (profile[name] ||= []).push(performance.now() - t0);
  }
  document.body.dataset.step = String(ctx.step);
  scheduleUrl();
}

// Views must not read geometry (scroll positions, bounding boxes) while rendering a step: a read
// after another view's writes forces a style and layout pass on the spot, and several such reads
// per step cost more than the step itself. What needs geometry (keeping the current line, row,
// card or node in view) is deferred to one callback before the next frame, keyed per view so
// only the latest request of each runs.
const deferred = new Map();
let deferredFrame = 0;

function defer(key, fn) {
  deferred.set(key, fn);
  if (!deferredFrame) {
    deferredFrame = requestAnimationFrame(() => {
      deferredFrame = 0;
      const fns = [...deferred.values()];
      deferred.clear();
      for (const f of fns) f();
    });
  }
}

// history.replaceState is rate-limited by browsers: write the URL once stepping pauses. While the
// step the URL asks for has not arrived yet, the URL keeps asking for it.
function scheduleUrl() {
  clearTimeout(urlTimer);
  urlTimer = setTimeout(() => {
    if (wanted !== null) return;
    const url = new URL(location.href);
    url.searchParams.set("step", String(player.step));
    const put = (key, value) => (value ? url.searchParams.set(key, value) : url.searchParams.delete(key));
    put("level", (story ? level : wantedLevel) === "events" ? "events" : "");
    put("bp", bps.toString());
    put("predict", predictOn ? "1" : "");
    if (url.href !== location.href) history.replaceState(null, "", url);
    const full = $("#embed-full"); // the embed page's "view full run" link follows the step
    if (full && config.view) full.href = `${config.view}${url.search}`;
  }, 120);
}

// --- actions -----------------------------------------------------------------------------------

const atStory = () => level === "story" && story !== null;

// The step a forward move goes to, at the current level.
function forwardTarget() {
  if (!atStory()) return player.step + 1;
  const next = story.next(player.step);
  return next === null ? player.length : next;
}

function forward() {
  const target = forwardTarget();
  // Predict mode: a story step with a question is shown only once the question is answered.
  if (predictOn && atStory() && target > player.step) {
    const q = story.questionAt.get(story.indexAt(target));
    if (q && story.isAt(target) && !predict.answered(q)) {
      pendingAnswer = { question: q, target };
      predict.ask(q);
      return null;
    }
  }
  return player.goto(target);
}

function onAnswer(question) {
  const target = pendingAnswer && pendingAnswer.question === question ? pendingAnswer.target : null;
  pendingAnswer = null;
  if (target !== null && player.goto(target) === null) renderAll(null);
}

function setLevel(next) {
  if (next === "story" && !story) return null;
  level = next;
  wantedLevel = next;
  renderAll(null); // the position is kept: only what a step means changes
  return null;
}

function act(name, arg) {
  if (!player) return;
  wanted = null; // the user took over from the URL's step
  if (playing && name !== "toggle-play" && name !== "speed") stop(); // any other move pauses
  if (predict.isAsking() && name !== "predict") return; // answer (or skip) first
  switch (name) {
    case "first":
      return player.first();
    case "back":
      if (!atStory()) return player.back();
      return player.goto(story.prev(player.step) ?? 0);
    case "forward":
      return forward();
    case "last":
      return player.last();
    case "goto":
      return player.goto(arg);
    case "slide": // the slider counts story steps at the story level
    case "jump":
      return player.goto(atStory() ? story.positionOf(Number(arg) - 1) : arg);
    case "level":
      return setLevel(arg);
    case "toggle-level":
      return setLevel(level === "story" ? "events" : "story");
    case "why": {
      const links = linksAt(player.step, storyStepAt(player.step));
      if (!links || !links.cause || links.cause.seq < 0) return null;
      whyStack.push(player.step);
      return player.goto(links.cause.seq + 1);
    }
    case "goto-cause":
      whyStack.push(player.step);
      return player.goto(arg);
    case "why-back":
      if (!whyStack.length) return null;
      return player.goto(whyStack.pop()) || renderAll(null);
    case "next-bp":
    case "prev-bp": {
      const find = name === "next-bp" ? bps.nextFrom : bps.prevFrom;
      const s = find.call(bps, player.events, player.step, source.sameFileAs);
      return s === null ? null : player.goto(s);
    }
    case "predict":
      predictOn = Boolean(arg) && Boolean(story) && has("predict");
      if (!predictOn) predict.reset();
      if (predictOn && !atStory()) return setLevel("story"); // questions belong to story steps
      renderAll(null);
      return null;
    case "next-kind": {
      const s = player.nextOf(arg);
      return s === null ? null : player.goto(s);
    }
    case "prev-kind": {
      const s = player.prevOf(arg);
      return s === null ? null : player.goto(s);
    }
    case "toggle-play":
      return playing ? stop() : play();
    case "speed":
      if (playing) {
        stop();
        play();
      }
      return null;
    default:
      return null;
  }
}

function play() {
  if (player.step >= player.length) player.first();
  const every = 1000 / controls.speed();
  let due = performance.now();
  // A frame-driven loop: at high speeds several steps may be due in one frame, rendered once.
  const tick = (now) => {
    if (!playing) return;
    const steps = Math.floor((now - due) / every) + 1;
    if (steps > 0) {
      due += steps * every;
      let target = player.step;
      for (let i = 0; i < steps; i++) target = atStory() ? (story.next(target) ?? player.length) : target + 1;
      player.goto(Math.min(player.length, target));
      if (player.step >= player.length && finished) {
        stop();
        return;
      }
    }
    playing = requestAnimationFrame(tick);
  };
  playing = requestAnimationFrame(tick);
  controls.setPlaying(true);
}

function stop() {
  if (playing) cancelAnimationFrame(playing);
  playing = null;
  controls.setPlaying(false);
  renderAll(null); // views that skip work while playing catch up
}

function onKey(e) {
  const t = e.target;
  // Text fields and menus keep their keys; a slider or a checkbox keeps only Space (its own toggle).
  const typing = t && (t.isContentEditable || ["TEXTAREA", "SELECT"].includes(t.tagName));
  const field = t && t.tagName === "INPUT" && !["range", "checkbox", "radio"].includes(t.type);
  if (typing || field || (t && t.type === "checkbox" && e.key === " ")) return;
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  if (help.isOpen() || tourOpen() || ledger.isOpen() || modules.isOpen()) return; // the dialogs handle their own keys
  if (predict.isAsking()) {
    if (/^[0-9]$/.test(e.key) || e.key === "Escape") {
      predict.pick(e.key === "0" || e.key === "Escape" ? "skip" : e.key);
      e.preventDefault();
    }
    return;
  }
  // Enter or Space on a button or link activates it, as usual.
  if ((e.key === " " || e.key === "Enter") && t && t.closest && t.closest("button, a, summary, [role=button]")) return;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  let handled = true;
  if (e.key === "ArrowRight") act(e.shiftKey ? "next-kind" : "forward", controls.selectedKind());
  else if (e.key === "ArrowLeft") act(e.shiftKey ? "prev-kind" : "back", controls.selectedKind());
  else if (e.key === "Home") act("first");
  else if (e.key === "End") act("last");
  else if (e.key === " ") act("toggle-play");
  else if (key === "l") act("toggle-level");
  else if (key === "w") act("why");
  else if (key === "b") act("why-back");
  else if (key === "p") act(e.shiftKey ? "prev-bp" : "next-bp");
  else if (key === "q") act("predict", !predictOn);
  else if (key === "c") document.querySelector("#view-chapters a[data-chapter]")?.focus();
  else if (e.key === "?") help.show(SHORTCUTS);
  else handled = false;
  if (handled) e.preventDefault();
}

// --- loading -----------------------------------------------------------------------------------

function showError(error) {
  const box = $("#run-error");
  if (!error) {
    box.hidden = true;
    return;
  }
  const where = error.line ? ` at line ${error.line}${error.file ? ` of ${error.file}` : ""}` : "";
  box.innerHTML = "";
  const title = document.createElement("strong");
  title.textContent = `${error.type || "Error"}${where}`;
  const msg = document.createElement("pre");
  msg.textContent = error.message || "";
  box.append(title, msg);
  if (error.line && has("source")) {
    const btn = document.createElement("button");
    btn.type = "button";
    btn.textContent = "Show the line";
    btn.addEventListener("click", () => source.scrollToError());
    box.append(btn);
  }
  box.hidden = false;
  if (has("source")) source.setError(error);
}

// What recorded the trace: the engine, or real PyTorch ("torch 2.8.0", from the trace's meta).
function showBackend(info) {
  const el = $("#run-backend");
  if (!el) return;
  const backend = info.backend || "engine";
  el.textContent = info.backend_label || backend;
  el.className = `backend-badge backend-${backend}`;
  el.title = backend === "torch" ? "recorded from real PyTorch" : "recorded from the engine";
  el.hidden = false;
  $("#run-origin").hidden = !info.imported;
}

function showStatus(status, text) {
  const el = $("#run-status");
  el.className = `status status-${status}`;
  el.textContent = text || status;
}

function notice(text) {
  const el = $("#run-notice");
  el.hidden = !text;
  el.textContent = text || "";
}

function onItems(items) {
  const before = player.length;
  try {
    player.append(items);
  } catch (err) {
    notice(`The event stream is inconsistent: ${err.message}. Reload the page.`);
    return;
  }
  if (player.length === before) return;
  if (!finished) showStatus("running", `running… ${player.length.toLocaleString()} events`);
  if (has("log")) log.grow();
  if (has("memory")) memory.grow();
  if (has("controls")) controls.grow();
  if (wanted !== null && player.length >= wanted) {
    const target = wanted;
    wanted = null;
    player.goto(target);
  } else if (before === 0) {
    renderAll(null);
  }
}

async function onDone(summary) {
  finished = true;
  const status = summary.status || "done";
  showStatus(status, status === "done" ? `done · ${player.length.toLocaleString()} events` : status);
  if (summary.error) {
    run.error = summary.error;
    showError(summary.error);
    // Cut by a limit while this page watched: the run's document now says where (the banner).
    if (summary.error.limit && !run.truncated) {
      lensData
        .run()
        .then((fresh) => truncated.show(fresh, $("#run-notice"), () => act("last")))
        .catch(() => {});
    }
  }
  if (wanted !== null) {
    const target = wanted;
    wanted = null;
    player.goto(target);
  }
  renderAll(null);
  await loadStory();
  if (has("memory")) await loadMemory();
  if (!has("graph")) document.body.dataset.graph = "0";
  else if (!player.length && !summary.error) graph.note("This run recorded no events, so there is no graph.");
  else if (!player.length) graph.note("The run failed before recording anything: no graph to draw.");
  else await loadGraph();
  document.body.dataset.ready = "1";
}

// The story level of the finished run (GET /api/runs/{id}/story): the default level from then on,
// unless the URL asked for every event. A run with no events has an empty story.
async function loadStory() {
  try {
    story = new Story(await (early.story || lensData.story()));
  } catch (err) {
    notice(`The story of this run could not be loaded (${err.message}); every event is shown.`);
    return;
  }
  if (has("chapters")) chapters.load(story);
  predict.load(story.questions);
  level = wantedLevel;
  if (!story.length) level = "events";
  if (has("controls")) controls.renderBreakpoints();
  renderAll(null);
  document.body.dataset.story = "1";
  if (!embed) maybeStartTour(run);
}

// The memory report of the finished run (GET /api/runs/{id}/memory): the timeline's marks and
// peak, and the saved-tensor ledger.
async function loadMemory() {
  let doc = null;
  try {
    doc = await (early.memory || lensData.memory());
  } catch (err) {
    ledger.load(null, err.message);
    modules.load(null, err.message);
    return;
  }
  memory.load(doc);
  ledger.load(doc);
  modules.load(doc);
  renderAll(null);
  document.body.dataset.memory = "1";
}

// The checkpoint frames the run created, for "next recomputation of …" breakpoints.
function framesOfRun() {
  const steps = player.kindIndex.get("frame_new") || [];
  return steps.map((s) => {
    const e = player.events[s - 1];
    return { frame: e.frame, name: `${e.label}#${e.frame}` };
  });
}

async function loadGraph() {
  try {
    graph.note("Laying out the graph…");
    const dot = await (early.dot || lensData.graphDot());
    // Drawn at the step the views were last rendered at, or once asked for if it is too big to
    // lay out at once (Note [Graphs too big to lay out at once] in views/graph.js).
    const drawn = await graph.load(dot, () => (document.body.dataset.graph = "1"));
    document.body.dataset.graph = drawn === "drawn" ? "1" : "deferred";
  } catch (err) {
    graph.note(`No graph for this run (${err.message}).`);
    document.body.dataset.graph = "0";
  }
}

async function start() {
  document.addEventListener("keydown", onKey);
  try {
    run = await lensData.run();
  } catch (err) {
    showStatus("error", "not found");
    showError({ type: "Cannot open this run", message: err.message });
    return;
  }
  $("#run-title").textContent = run.title || run.filename || `run ${runId}`;
  document.title = `${run.title || run.filename || "run"} · Autograd Lens`;
  if ($("#run-file")) $("#run-file").textContent = run.filename || "";
  showBackend(run);
  if ($("#run-trace")) $("#run-trace").href = lensData.traceHref;
  if ($("#run-export")) {
    $("#run-export").href = lensData.exportHref || "#";
    $("#run-export").hidden = !lensData.exportHref; // an exported file is its own export
  }
  if ($("#run-chrome")) {
    $("#run-chrome").href = lensData.chromeHref || "#";
    $("#run-chrome").hidden = !lensData.chromeHref;
  }
  if ($("#run-edit")) {
    // A run that has a scenario text on this server: not a trace file opened here, not a file.
    $("#run-edit").href = `/runs/${encodeURIComponent(runId)}/edit`;
    $("#run-edit").hidden = !lensData.exportHref || Boolean(run.imported) || !run.source;
  }
  showStatus(run.status, run.status);

  player = new Player(run.initial_state || {});
  // Note [Loading a finished run]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The events are asked for before the views are mounted (nothing is handled before this
  // function returns: the handlers run in later tasks, after the mounting below). When the run
  // had already finished, its story, graph and memory report are asked for at once too, instead
  // of after the last event, so that fetching them (or, for a run stored before its documents were
  // kept with it, deriving them: Note [Documents ready at done] in app/runs.py) overlaps the
  // stream. They are still *used* in the same order and at the same moment as for a run that
  // finishes while watched (onDone): only the waiting moves. The memory report is asked for once
  // the story has arrived, so that deriving it does not delay the story, which the default level
  // needs. A document asked
  // for early that fails is reported where it is used, as before (the .catch only keeps an early
  // failure from being reported as unhandled before then).
  openEvents();
  if (run.status === "done" || run.status === "error") {
    early.story = lensData.story();
    if ($("#view-graph")) early.dot = lensData.graphDot();
    if ($("#view-memory")) {
      const memory = () => lensData.memory();
      early.memory = early.story.then(memory, memory);
    }
    for (const p of Object.values(early)) if (p) p.catch(() => {});
  }
  setTerms(config.glossary || []);
  help.mount();
  mountTourButton($(".run-head"));
  const model = { level: () => level, story: () => story, bps, frames: framesOfRun, predictOn: () => predictOn };
  // A view is mounted only where the page has its panel (the embed page has a few of them).
  const mount = (name, view, el, options) => {
    if (!el) return;
    view.mount(el, options);
    mounted.add(name);
  };
  mount("controls", controls, $("#view-controls"), { player, act, model });
  mount("caption", caption, $("#view-caption"), { act });
  mount("predict", predict, $("#view-predict"), { onAnswer });
  mount("chapters", chapters, $("#view-chapters"), { onPick: (s) => act("goto", s) });
  mount("source", source, $("#view-source"), { onToggleLine: (line) => bps.toggle("line", line) });
  bps.onChange(() => {
    if (has("source")) source.setBreakpoints(bps.lines);
    controls.renderBreakpoints();
    scheduleUrl();
  });
  mount("frames", frames, $("#view-frames"));
  mount("graph", graph, $("#view-graph"));
  mount("log", log, $("#view-log"), { player, onPick: (s) => act("goto", s) });
  const openLarger = (tab) => (tab === "modules" ? modules.open() : ledger.open());
  mount("memory", memory, $("#view-memory"), { player, onPick: (s) => act("goto", s), onOpenLedger: openLarger });
  if (has("memory")) {
    mount("ledger", ledger, memory.ledgerRoot(), { onPick: (s) => act("goto", s) });
    mount("modules", modules, memory.modulesRoot(), { onPick: (s) => act("goto", s) });
  }
  if (has("source")) {
    source.load({ source: run.source, filename: run.filename, error: run.error });
    source.setBreakpoints(bps.lines);
  }
  if (!embed) mountDownloads($("#run-downloads"));
  if (!embed) mountEmbedButton($(".run-head"), { runId, title: () => run.title, step: () => player.step, level: () => level });
  if (run.error) showError(run.error);
  truncated.show(run, $("#run-notice"), () => act("last"));
  player.onMove((move) => renderAll(move));

  const asked = new URL(location.href).searchParams.get("step");
  wanted = asked !== null && /^\d+$/.test(asked) ? Number(asked) : null;
  renderAll(null);
  if (has("controls")) controls.grow();
}

function openEvents() {
  lensData.events({
    onItems,
    onDone,
    onProblem: (text, { fatal }) => {
      notice(text);
      if (fatal) showStatus("error", "disconnected");
    },
  });
}

// For tests and the bench: the page's state, read-only by convention.
window.lens = {
  get player() {
    return player;
  },
  get run() {
    return run;
  },
  get story() {
    return story;
  },
  get level() {
    return level;
  },
  graphClasses: (id) => graph.classesFor(id),
  graphView: () => graph.view(),
  graphAudit: () => graph.audit(),
  act,
  profile: null,
};

start();
