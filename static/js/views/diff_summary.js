// The top of the diff page: the two runs (backend, status, a link to each viewer), then the
// verdicts the server computed (engine/trace/diff.py): checkpoint events identical or where they
// diverge, and the gradients. While a run is still going, it says what it waits for.

import { captionHTML, esc } from "../format.js";

let root = null;
let onShowFirst = null;

export function mount(el, options) {
  root = el;
  onShowFirst = options.onShowFirst;
  root.classList.add("diff-summary-view");
  root.addEventListener("click", (e) => {
    if (e.target.closest(".show-first")) onShowFirst();
  });
}

// `name`: the side's name from the server when it says more than the backend ("broken", a
// scenario id: Note [Naming the sides of a diff]); `title`: the run's title, when the two differ.
function runCard(side, run, label, name, title) {
  if (!run) return `<div class="diff-run side-${side}"><span class="dim">loading…</span></div>`;
  const status = run.status === "running" ? `running… ${run.progress.toLocaleString()} events` : run.status;
  const events = run.status === "done" || run.status === "error" ? `${run.n_events.toLocaleString()} events` : "";
  return `
    <div class="diff-run side-${side}">
      <span class="side-tag">${side}</span>
      ${name ? `<span class="side-name side-name-${esc(name)}">${esc(name)}</span>` : ""}
      ${title ? `<span class="side-title">${esc(title)}</span>` : ""}
      <span class="backend-badge backend-${esc(run.backend)}">${esc(label || run.backend_label || run.backend)}</span>
      <span class="status status-${esc(run.status)}">${esc(status)}</span>
      <span class="small">${esc(events)}</span>
      <a class="small" href="/runs/${encodeURIComponent(run.id)}">open in the viewer</a>
      ${run.error ? `<span class="diff-run-error" title="${esc(run.error.message || "")}">ended with ${esc(run.error.type)}</span>` : ""}
    </div>`;
}

function verdictHTML(diff) {
  const ok = diff.checkpoint_equal;
  const first = diff.first_divergence;
  const button =
    first !== null && first !== undefined
      ? ` <button type="button" class="show-first">show row ${first}</button>`
      : "";
  const gradsList = diff.grads.problems.length
    ? `<ul class="grads-problems">${diff.grads.problems.map((p) => `<li>${esc(p)}</li>`).join("")}</ul>`
    : "";
  const ignored = Object.entries(diff.ignored || {});
  const ignoredHTML = ignored.length
    ? `<p class="small diff-ignored">Not compared (missing from one trace): ${ignored
        .map(([k, v]) => `<code>${esc(k)}</code> ${v.map(esc).join(", ")}`)
        .join("; ")}</p>`
    : "";
  return `
    <p class="verdict ${ok ? "ok" : "bad"}" data-equal="${ok}">
      <span class="verdict-mark">${ok ? "✔" : "✖"}</span>
      <span class="verdict-text">${captionHTML(capitalise(diff.verdict))}</span>${button}
    </p>
    <p class="verdict grads ${diff.grads.equal ? "ok" : "bad"}" data-equal="${diff.grads.equal}">
      <span class="verdict-mark">${diff.grads.equal ? "✔" : "✖"}</span>
      <span class="verdict-text">${esc(capitalise(diff.grads.equal ? diff.grads.verdict : "gradients differ"))}</span>
    </p>
    ${gradsList}${ignoredHTML}`;
}

function capitalise(text) {
  return text ? text[0].toUpperCase() + text.slice(1) : "";
}

export function render(state) {
  const labels = state.diff ? state.diff.runs : {};
  const card = (side) => {
    const run = state.runs[side];
    const name = state.diff && state.diff[`${side}_label`];
    const other = state.runs[side === "a" ? "b" : "a"];
    const titled = run && other && run.title !== other.title;
    return runCard(
      side,
      run,
      labels[side] && labels[side].backend_label,
      run && name && name !== run.backend ? name : "",
      titled ? run.title : "",
    );
  };
  const runs = `<div class="diff-runs">${card("a")}<span class="vs">vs</span>${card("b")}</div>`;
  let body;
  if (state.error) body = `<p class="index-error">${esc(state.error)}</p>`;
  else if (state.diff) body = verdictHTML(state.diff);
  else body = `<p class="verdict waiting">Waiting for both runs to finish…</p>`;
  root.innerHTML = runs + body;
}
