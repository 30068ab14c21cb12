// The diff page (/diff?a=RUN&b=RUN): waits until both runs have finished (polling their status),
// then shows GET /api/diff: the verdicts on top, the two traces as aligned rows below, scrolled
// to the first divergence. Everything the page shows comes from the server's diff
// (engine/trace/diff.py); nothing here compares events.

import { getJSON, readConfig } from "./api.js";
import * as rows from "./views/diff_rows.js";
import * as summary from "./views/diff_summary.js";

const config = readConfig();
const params = new URL(location.href).searchParams;
const ids = { a: config.a || params.get("a"), b: config.b || params.get("b") };
const POLL_MS = 400;

const state = {
  runs: { a: null, b: null },
  diff: null,
  error: null,
  checkpointOnly: true,
};

function render() {
  summary.render(state);
  rows.render(state);
}

const finished = (run) => run && (run.status === "done" || run.status === "error");

function showFirst() {
  if (state.diff && state.diff.first_divergence !== null) rows.scrollToRow(state.diff.first_divergence);
}

async function loadDiff() {
  const url = `/api/diff?a=${encodeURIComponent(ids.a)}&b=${encodeURIComponent(ids.b)}`;
  state.diff = await getJSON(url);
  // Two different scenarios (a pitfall's broken and fixed): the heading names both sides.
  if (state.runs.a && state.runs.b && state.runs.a.title !== state.runs.b.title) {
    document.getElementById("diff-title").textContent = `Diff: ${state.diff.a_label} vs ${state.diff.b_label}`;
  }
  document.title = `${state.diff.equal ? "✔" : "✖"} diff · ${config.title || "runs"} · Autograd Lens`;
  render();
  showFirst();
  document.body.dataset.ready = "1";
  document.body.dataset.equal = String(state.diff.equal);
}

async function poll() {
  try {
    const [a, b] = await Promise.all([
      getJSON(`/api/runs/${encodeURIComponent(ids.a)}`),
      getJSON(`/api/runs/${encodeURIComponent(ids.b)}`),
    ]);
    state.runs = { a, b };
    if (finished(a) && finished(b)) {
      await loadDiff();
      return;
    }
    render();
    setTimeout(poll, POLL_MS);
  } catch (err) {
    state.error = `Cannot show this diff: ${err.message}`;
    render();
    document.body.dataset.ready = "error";
  }
}

function main() {
  summary.mount(document.getElementById("diff-summary"), { onShowFirst: showFirst });
  rows.mount(document.getElementById("diff-rows"), {
    onFilter: (on) => {
      state.checkpointOnly = on;
      rows.render(state);
      showFirst();
    },
  });
  render();
  poll();
}

// For tests: the page's state, read-only by convention.
window.lens = {
  get diff() {
    return state.diff;
  },
};

main();
