// The home page: the bundled scenarios, a local file, or text typed in the editor. Each starts a
// run (POST /api/runs) and opens its viewer. A bundled scenario can also run on real PyTorch
// ("torch"), or on both backends at once ("diff": two runs, then the diff page comparing them).
// A trace file (a user's own PyTorch program, traced locally) opens without running anything
// (POST /api/traces). The editor's text can be shared behind a permalink (POST /api/shared, /s/<id>),
// and a permalink or a run's "edit and run again" (/runs/<id>/edit) opens the home page with a
// text for the editor in its config (`open`).

import { getJSON, postFile, postJSON, readConfig } from "./api.js";
import { createEditor } from "./editor.js";
import { bytes, captionHTML, esc } from "./format.js";
import * as pitfalls from "./pitfalls.js";

const $ = (sel) => document.querySelector(sel);
const config = readConfig();
// The backends this server can run ({engine: "engine", torch: "torch 2.8.0"}; no torch key
// when torch is not installed there).
const backends = config.backends || { engine: "engine" };

// Where a newcomer should start: shown first, marked.
const FEATURED = ["single_checkpoint", "nested_checkpoint"];

const STARTER = `"""My scenario

One checkpointed block: the forward saves holders instead of tensors,
and the backward recomputes the block to get them back.
"""
import engine as torch
from engine.utils.checkpoint import checkpoint

x = torch.randn(4, requires_grad=True)


def block(t):
    return t.sin().exp()


y = checkpoint(block, x, use_reentrant=False)
y.sum().backward()
print("x.grad:", x.grad)
`;

function showError(where, err) {
  const el = $(where);
  el.textContent = err ? err.message || String(err) : "";
  el.hidden = !err;
}

async function start(body, button) {
  showError("#run-error", null);
  showError("#scenarios-error", null);
  if (button) button.disabled = true;
  document.body.classList.add("busy");
  try {
    const created = await postJSON("/api/runs", body);
    location.assign(created.url || `/runs/${encodeURIComponent(created.id)}`);
  } catch (err) {
    showError(body.scenario ? "#scenarios-error" : "#run-error", err);
    if (button) button.disabled = false;
    document.body.classList.remove("busy");
  }
}

// Both backends, then the page comparing them, which waits for the two runs to finish.
async function startDiff(scenario, button) {
  showError("#scenarios-error", null);
  button.disabled = true;
  document.body.classList.add("busy");
  try {
    const a = await postJSON("/api/runs", { scenario, backend: "engine" });
    const b = await postJSON("/api/runs", { scenario, backend: "torch" });
    location.assign(`/diff?a=${encodeURIComponent(a.id)}&b=${encodeURIComponent(b.id)}`);
  } catch (err) {
    showError("#scenarios-error", err);
    button.disabled = false;
    document.body.classList.remove("busy");
  }
}

// A run of the editor's text: wait a moment for it to end (most do within a second), so that an
// error is shown in the editor, on its line, where it can be fixed; a run that succeeds, or is
// still going after a few seconds, opens its viewer as any other.
async function runDraft(editor, body, button) {
  showError("#run-error", null);
  $("#run-error-open").hidden = true;
  editor.clearError();
  if (button) button.disabled = true;
  document.body.classList.add("busy");
  try {
    const created = await postJSON("/api/runs", body);
    const url = created.url || `/runs/${encodeURIComponent(created.id)}`;
    const deadline = Date.now() + 5000;
    let run = null;
    while (Date.now() < deadline) {
      run = await getJSON(`/api/runs/${encodeURIComponent(created.id)}`);
      if (run.status === "done" || run.status === "error") break;
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    if (!run || run.status !== "error" || !run.error) {
      location.assign(url);
      return;
    }
    const error = run.error;
    const ours = error.line && (!error.file || error.file === run.filename);
    const message = `${error.type || "Error"}: ${error.message}`;
    showError("#run-error", new Error(ours ? `${message} (line ${error.line})` : message));
    if (ours) editor.markError(error.line, message);
    const open = $("#run-error-open");
    open.querySelector("a").href = url;
    open.hidden = false;
  } catch (err) {
    showError("#run-error", err);
  }
  if (button) button.disabled = false;
  document.body.classList.remove("busy");
}

function actions(id) {
  const torch = backends.torch;
  const off = torch ? "" : ' disabled title="torch is not installed on this server"';
  return `
    <div class="scenario-actions">
      <span class="small">run on</span>
      <button type="button" class="run-engine" data-id="${esc(id)}" data-backend="engine" title="run on the engine">engine</button>
      <button type="button" class="run-torch" data-id="${esc(id)}" data-backend="torch"${off || ` title="run on real PyTorch (${esc(torch)})"`}>torch</button>
      <button type="button" class="run-diff" data-id="${esc(id)}"${off || ' title="run on both and compare the traces side by side"'}>diff</button>
    </div>`;
}

async function loadScenarios() {
  const list = $("#scenario-list");
  try {
    // Scenarios of a group (the Pitfalls pack) are listed in their own section, not here.
    const scenarios = (await getJSON("/api/scenarios")).filter((s) => !s.group);
    const rank = (s) => (FEATURED.includes(s.id) ? FEATURED.indexOf(s.id) : FEATURED.length);
    scenarios.sort((a, b) => rank(a) - rank(b));
    list.innerHTML = scenarios
      .map(
        (s) => `
        <li class="scenario${FEATURED.includes(s.id) ? " featured" : ""}" data-id="${esc(s.id)}">
          <button type="button" class="scenario-open" data-id="${esc(s.id)}">
            <span class="scenario-title">${esc(s.title)}</span>
            <span class="scenario-id">${esc(s.id)}.py${FEATURED.includes(s.id) ? ' <span class="start-here">start here</span>' : ""}</span>
          </button>
          <p class="scenario-desc">${captionHTML(s.description || "")}</p>
          ${actions(s.id)}
        </li>`,
      )
      .join("");
    if (!scenarios.length) list.innerHTML = `<li class="loading">No bundled scenarios.</li>`;
  } catch (err) {
    list.innerHTML = "";
    showError("#scenarios-error", err);
  }
}

// --- a scenario opened in the editor: a shared permalink (/s/<id>) or "edit and run again" ------

const EARLIER_DRAFT_KEY = "autograd-lens:earlier-draft";

// Put `open.source` in the editor. The draft it replaces is kept (nothing typed is lost) and can
// be put back with one click.
function openInEditor(editor, open) {
  const earlier = editor.value;
  const keep = earlier.trim() && earlier !== open.source && earlier !== STARTER;
  if (keep) {
    try {
      localStorage.setItem(EARLIER_DRAFT_KEY, earlier);
    } catch {
      // storage disabled: the earlier draft is still restorable from this page below
    }
  }
  editor.value = open.source;
  $("#editor-name").value = open.filename || "scenario.py";
  const text =
    open.origin === "run"
      ? `Editing the scenario of the run “${open.title}” (${open.filename}). Change it and run it again: the old run stays as it was.`
      : `A shared scenario, ${open.filename}, from the link ${location.origin}${open.url}. Run it as it is, or change it first.`;
  $("#editor-notice-text").textContent = text; // titles and file names are the user's: text only
  $("#editor-notice").hidden = false;
  const restore = $("#editor-restore");
  restore.hidden = !keep;
  restore.onclick = () => {
    editor.value = earlier;
    restore.hidden = true;
    $("#editor-notice-text").textContent = "Your earlier draft is back in the editor.";
  };
  $("#edit-title").scrollIntoView({ block: "start" });
  editor.focus();
}

async function share(editor) {
  const button = $("#editor-share");
  showError("#run-error", null);
  button.disabled = true;
  try {
    const shared = await postJSON("/api/shared", { source: editor.value, filename: $("#editor-name").value || "scenario.py" });
    $("#share-url").value = `${location.origin}${shared.url}`;
    $("#share-result").hidden = false;
    $("#share-url").select();
  } catch (err) {
    showError("#run-error", err);
  } finally {
    button.disabled = false;
  }
}

async function copyShareUrl() {
  const input = $("#share-url");
  input.select();
  try {
    await navigator.clipboard.writeText(input.value);
    $("#share-copy").textContent = "Copied";
  } catch {
    document.execCommand("copy"); // no clipboard permission (an http page): the old way
    $("#share-copy").textContent = "Copied";
  }
}

function main() {
  loadScenarios();
  pitfalls.mount(document.getElementById("pitfalls"));
  // The editor loads its bundle first; the handlers below wait for it.
  const ready = createEditor({
    mount: $("#editor"),
    textarea: $("#editor-source"),
    form: $("#editor-form"),
    starter: STARTER,
  });
  ready.then((editor) => {
    if (config.open) openInEditor(editor, config.open);
    document.body.dataset.editorReady = "1";
  });
  $("#editor-share").addEventListener("click", () => ready.then((editor) => share(editor)));
  $("#share-copy").addEventListener("click", () => copyShareUrl());

  $("#scenario-list").addEventListener("click", (e) => {
    const open = e.target.closest(".scenario-open");
    if (open) return start({ scenario: open.dataset.id }, open);
    const run = e.target.closest("[data-backend]");
    if (run) return start({ scenario: run.dataset.id, backend: run.dataset.backend }, run);
    const diff = e.target.closest(".run-diff");
    if (diff) return startDiff(diff.dataset.id, diff);
    return null;
  });

  $("#scenario-file").addEventListener("change", async (e) => {
    const file = e.target.files && e.target.files[0];
    if (!file) return;
    const text = await file.text();
    // Show it in the editor too, so a failing file can be fixed and run again.
    (await ready).value = text;
    $("#editor-name").value = file.name;
    start({ source: text, filename: file.name }, null);
  });

  $("#trace-file").addEventListener("change", async (e) => {
    const file = e.target.files && e.target.files[0];
    if (!file) return;
    showError("#trace-error", null);
    document.body.classList.add("busy");
    // A big trace takes seconds to send and check (every event is): say so meanwhile.
    const progress = $("#trace-progress");
    progress.textContent = `Sending and checking ${file.name} (${bytes(file.size)})…`;
    progress.hidden = false;
    try {
      const created = await postFile("/api/traces", file);
      location.assign(created.url);
    } catch (err) {
      progress.hidden = true;
      showError("#trace-error", err);
      document.body.classList.remove("busy");
      e.target.value = ""; // choosing the same file again, once fixed, fires "change" again
    }
  });

  $("#editor-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const button = e.submitter || $("#editor-form button[type=submit]");
    ready.then((editor) => {
      const body = { source: editor.value, filename: $("#editor-name").value || "scenario.py" };
      runDraft(editor, body, button);
    });
  });
}

main();
