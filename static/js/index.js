// The home page: the bundled scenarios, a local file, or text typed in the editor. Each starts a
// run (POST /api/runs) and opens its viewer.

import { getJSON, postJSON } from "./api.js";
import { captionHTML, esc } from "./format.js";

const $ = (sel) => document.querySelector(sel);

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

async function loadScenarios() {
  const list = $("#scenario-list");
  try {
    const scenarios = await getJSON("/api/scenarios");
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
        </li>`,
      )
      .join("");
    if (!scenarios.length) list.innerHTML = `<li class="loading">No bundled scenarios.</li>`;
  } catch (err) {
    list.innerHTML = "";
    showError("#scenarios-error", err);
  }
}

function main() {
  const editor = $("#editor");
  editor.value = STARTER;
  loadScenarios();

  $("#scenario-list").addEventListener("click", (e) => {
    const btn = e.target.closest(".scenario-open");
    if (btn) start({ scenario: btn.dataset.id }, btn);
  });

  $("#scenario-file").addEventListener("change", async (e) => {
    const file = e.target.files && e.target.files[0];
    if (!file) return;
    const text = await file.text();
    // Show it in the editor too, so a failing file can be fixed and run again.
    editor.value = text;
    $("#editor-name").value = file.name;
    start({ source: text, filename: file.name }, null);
  });

  $("#editor-form").addEventListener("submit", (e) => {
    e.preventDefault();
    start({ source: editor.value, filename: $("#editor-name").value || "scenario.py" }, e.submitter);
  });

  editor.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      $("#editor-form").requestSubmit();
    } else if (e.key === "Tab" && !e.shiftKey) {
      // Indent with spaces, as Python wants, instead of leaving the textarea.
      e.preventDefault();
      editor.setRangeText("    ", editor.selectionStart, editor.selectionEnd, "end");
    }
  });
}

main();
