// The run page: loads the run, streams its events into the Player, and renders every view from
// the Player's state at each step. The URL always says which run and step is shown
// (/runs/{id}?step=N), so reloading or sharing it gives the same view.

import { getJSON, getText, readConfig } from "./api.js";
import { Player } from "./player.js";
import { openStream } from "./stream.js";
import * as caption from "./views/caption.js";
import * as controls from "./views/controls.js";
import * as frames from "./views/frames.js";
import * as graph from "./views/graph.js";
import * as log from "./views/log.js";
import * as memory from "./views/memory.js";
import * as source from "./views/source.js";

const config = readConfig();
const runId = config.run_id || decodeURIComponent(location.pathname.split("/").filter(Boolean).pop() || "");
const $ = (sel) => document.querySelector(sel);

let player = null;
let run = null;
let finished = false;
let wanted = null; // the step asked for in the URL, reached once enough events have arrived
let playing = null; // the play loop's animation frame request, while playing
let urlTimer = null;

// --- rendering ---------------------------------------------------------------------------------

// Rendered in this order, by name (the name keys `lens.profile`).
const VIEWS = Object.entries({ controls, caption, source, frames, graph, log, memory });

function context(move) {
  const step = player.step;
  return {
    step,
    length: player.length,
    finished,
    event: player.event,
    next: player.nextEvent,
    caption: player.caption,
    eventChanges: step > 0 ? player.changes[step - 1] : [],
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
    if (url.href !== location.href) history.replaceState(null, "", url);
  }, 120);
}

// --- actions -----------------------------------------------------------------------------------

function act(name, arg) {
  if (!player) return;
  wanted = null; // the user took over from the URL's step
  if (playing && name !== "toggle-play" && name !== "speed") stop(); // any other move pauses
  switch (name) {
    case "first":
      return player.first();
    case "back":
      return player.back();
    case "forward":
      return player.forward();
    case "last":
      return player.last();
    case "goto":
      return player.goto(arg);
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
      const target = Math.min(player.length, player.step + steps);
      player.goto(target);
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
  if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName)) && t.type !== "range") return;
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  let handled = true;
  if (e.key === "ArrowRight") act(e.shiftKey ? "next-kind" : "forward", controls.selectedKind());
  else if (e.key === "ArrowLeft") act(e.shiftKey ? "prev-kind" : "back", controls.selectedKind());
  else if (e.key === "Home") act("first");
  else if (e.key === "End") act("last");
  else if (e.key === " ") act("toggle-play");
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
  if (error.line) {
    const btn = document.createElement("button");
    btn.type = "button";
    btn.textContent = "Show the line";
    btn.addEventListener("click", () => source.scrollToError());
    box.append(btn);
  }
  box.hidden = false;
  source.setError(error);
}

// What recorded the trace: the engine, or real PyTorch ("torch 2.8.0", from the trace's meta).
function showBackend(info) {
  const el = $("#run-backend");
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
  log.grow();
  memory.grow();
  controls.grow();
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
  }
  if (wanted !== null) {
    const target = wanted;
    wanted = null;
    player.goto(target);
  }
  renderAll(null);
  if (!player.length && !summary.error) graph.note("This run recorded no events, so there is no graph.");
  else if (!player.length) graph.note("The run failed before recording anything: no graph to draw.");
  else await loadGraph();
  document.body.dataset.ready = "1";
}

async function loadGraph() {
  try {
    graph.note("Laying out the graph…");
    const dot = await getText(`/api/runs/${encodeURIComponent(runId)}/graph.dot`);
    await graph.load(dot); // drawn at the step the views were last rendered at
    document.body.dataset.graph = "1";
  } catch (err) {
    graph.note(`No graph for this run (${err.message}).`);
    document.body.dataset.graph = "0";
  }
}

async function start() {
  document.addEventListener("keydown", onKey);
  try {
    run = await getJSON(`/api/runs/${encodeURIComponent(runId)}`);
  } catch (err) {
    showStatus("error", "not found");
    showError({ type: "Cannot open this run", message: err.message });
    return;
  }
  $("#run-title").textContent = run.title || run.filename || `run ${runId}`;
  document.title = `${run.title || run.filename || "run"} · Autograd Lens`;
  $("#run-file").textContent = run.filename || "";
  showBackend(run);
  $("#run-trace").href = `/api/runs/${encodeURIComponent(runId)}/trace.json`;
  showStatus(run.status, run.status);

  player = new Player(run.initial_state || {});
  controls.mount($("#view-controls"), { player, act });
  caption.mount($("#view-caption"));
  source.mount($("#view-source"));
  frames.mount($("#view-frames"));
  graph.mount($("#view-graph"));
  log.mount($("#view-log"), { player, onPick: (s) => act("goto", s) });
  memory.mount($("#view-memory"), { player, onPick: (s) => act("goto", s) });
  source.load({ source: run.source, filename: run.filename, error: run.error });
  if (run.error) showError(run.error);
  player.onMove((move) => renderAll(move));

  const asked = new URL(location.href).searchParams.get("step");
  wanted = asked !== null && /^\d+$/.test(asked) ? Number(asked) : null;
  renderAll(null);
  controls.grow();

  openStream(runId, {
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
  graphClasses: (id) => graph.classesFor(id),
  act,
  profile: null,
};

start();
