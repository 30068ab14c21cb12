// The compare page (/compare?n=4&torch=1): one model under each checkpointing strategy
// (POST /api/compare, app/compare.py Note [Strategies compared]) as a table and a trade-off plot,
// and the sweep of N (POST /api/compare/sweep) as a log-log plot. The server makes the runs as it
// has room: the page asks again every POLL_MS until every row is in. Nothing here computes a
// figure; the views only lay out what the server sent.
//
// For tests: document.body.dataset.compareDone is "1" once every row of the current N is in (and
// compareN says which N), sweepDone once the sweep is; window.lens.compare / .sweep are the answers.

import { postJSON, readConfig } from "./api.js";
import * as plots from "./views/compare_plots.js";
import * as table from "./views/compare_table.js";

const $ = (sel) => document.querySelector(sel);
const config = readConfig();
const POLL_MS = 700;

const state = {
  n: config.n || 4,
  torch: Boolean(config.torch),
  compare: null, // the last answer for the current N and backends
  sweep: null,
  error: null,
};

let generation = 0; // bumped when N or the backends change: older answers are dropped
let timer = null;

const finished = (doc) => Boolean(doc && doc.done);

function renderProgress() {
  const el = $("#cmp-progress");
  const doc = state.compare;
  if (!doc) {
    el.textContent = state.error ? "" : "Starting the runs…";
    return;
  }
  const rows = doc.rows;
  const ended = rows.filter((r) => r.status === "done" || r.status === "error").length;
  const failed = rows.filter((r) => r.status === "error").length;
  const running = rows.filter((r) => r.status === "running").length;
  let text = `${ended} of ${rows.length} runs done`;
  if (failed) text += ` (${failed} failed)`;
  if (!doc.done) text += running ? `, ${running} running…` : ", waiting…";
  el.textContent = text;
  el.classList.toggle("busy", !doc.done);
}

function renderWhy() {
  const el = $("#cmp-why");
  const nested = state.compare && state.compare.rows.find((r) => r.strategy === "nested" && r.backend === "engine");
  if (!nested || nested.status !== "done" || !nested.measured) {
    el.hidden = true;
    return;
  }
  const calls = nested.measured.block_calls;
  el.replaceChildren();
  const q = document.createElement("b");
  q.textContent = "Why does “nested” run some blocks three times? ";
  const text = document.createTextNode(
    `Its blocks ran ${calls.length > 8 ? `${calls.slice(0, 6).join(", ")}, …` : calls.join(", ")} times. The first block of each pair runs in the forward; ` +
      "again when the backward reaches the pair and the outer checkpoint recomputes it to rebuild the " +
      "second block's input (it stops early right there, before the second block); and a third time " +
      "when its own inner checkpoint recomputes it for its backward. ",
  );
  const link = document.createElement("a");
  link.href = table.peakURL(nested);
  link.textContent = "Step through the nested run →";
  el.append(q, text, link);
  el.hidden = false;
}

function render() {
  $("#cmp-n-title").textContent = String(state.n);
  $("#cmp-n-plot").textContent = String(state.n);
  $("#cmp-n-intro").textContent = String(state.n);
  const available = state.compare ? state.compare.available_backends : null;
  if (available) $("#cmp-torch-label").hidden = !available.includes("torch");
  const alert = $("#cmp-alert");
  $("#cmp-alert-text").textContent = state.error || "";
  alert.hidden = !state.error;
  renderProgress();
  table.render(state);
  plots.render(state);
  renderWhy();
  document.body.dataset.compareDone = finished(state.compare) ? "1" : "0";
  document.body.dataset.compareN = state.compare ? String(state.compare.n) : "";
  document.body.dataset.sweepDone = finished(state.sweep) ? "1" : "0";
}

function backends() {
  return state.torch ? ["engine", "torch"] : ["engine"];
}

async function tick(gen) {
  timer = null;
  try {
    if (!finished(state.compare)) {
      const doc = await postJSON("/api/compare", { n: state.n, backends: backends() });
      if (gen !== generation) return;
      state.compare = doc;
      // torch asked for by the URL, but not installed here: go on without it.
      if (state.torch && !doc.available_backends.includes("torch")) state.torch = false;
    }
    // The table's runs are asked for first, so they are made before the sweep's.
    if (!finished(state.sweep)) {
      const doc = await postJSON("/api/compare/sweep", {});
      if (gen !== generation) return;
      state.sweep = doc;
    }
    state.error = null;
  } catch (err) {
    if (gen !== generation) return;
    state.error = `The server refused: ${err.message}`;
    render();
    return; // "Try again" starts polling again
  }
  render();
  if (!finished(state.compare) || !finished(state.sweep)) timer = setTimeout(() => tick(gen), POLL_MS);
}

function restart() {
  generation += 1;
  if (timer !== null) clearTimeout(timer);
  timer = null;
  state.compare = null;
  state.error = null;
  const url = new URL(location.href);
  url.searchParams.set("n", String(state.n));
  if (state.torch) url.searchParams.set("torch", "1");
  else url.searchParams.delete("torch");
  history.replaceState(null, "", url);
  render();
  tick(generation);
}

function onN() {
  const input = $("#cmp-n");
  const n = Number(input.value);
  if (!input.value || !Number.isInteger(n)) {
    state.error = "N must be a whole number of blocks, from 2 to 64.";
    render();
    return;
  }
  if (n === state.n && !state.error) return; // Enter fires both change and submit
  state.n = n; // out of range: the server says what is wrong, in the alert
  restart();
}

function main() {
  table.mount($("#cmp-table"));
  plots.mount($("#cmp-tradeoff"), $("#cmp-sweep"));
  $("#cmp-n").value = String(state.n);
  $("#cmp-torch").checked = state.torch;
  $("#cmp-n").addEventListener("change", onN);
  $("#cmp-form").addEventListener("submit", (e) => {
    e.preventDefault();
    onN();
  });
  $("#cmp-torch").addEventListener("change", (e) => {
    state.torch = e.target.checked;
    restart();
  });
  $("#cmp-retry").addEventListener("click", () => {
    state.error = null;
    generation += 1;
    render();
    tick(generation);
  });
  let resizing = null;
  window.addEventListener("resize", () => {
    cancelAnimationFrame(resizing);
    resizing = requestAnimationFrame(() => plots.render(state));
  });
  render();
  tick(generation);
}

window.lens = {
  get compare() {
    return state.compare;
  },
  get sweep() {
    return state.sweep;
  },
};

main();
