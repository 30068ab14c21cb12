// The run page's "Embed" button: a small dialog with the <iframe> snippet that embeds this run at
// the current step and level (GET /embed/runs/{id}, docs/viewer.md "Embedding"), and a Copy
// button. The snippet is made when the dialog opens, so it names the step shown then.

let dialog = null;
let code = null;
let status = null;
let returnTo = null;
let page = null; // {runId, title(), step(), level()}

// The snippet: an absolute URL (it is pasted into another site), the title escaped for an attribute.
export function snippet({ runId, title, step, level }) {
  const url = `${location.origin}/embed/runs/${encodeURIComponent(runId)}?step=${step}&level=${level}`;
  const name = String(title || "run").replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  return `<iframe src="${url}" width="800" height="500" style="border:1px solid #e2e8f0;border-radius:8px" title="Autograd Lens: ${name}" loading="lazy"></iframe>`;
}

export function mountButton(container, options) {
  if (!container || document.getElementById("run-embed")) return;
  page = options;
  const b = document.createElement("button");
  b.type = "button";
  b.id = "run-embed";
  b.className = "small-button";
  b.textContent = "Embed";
  b.title = "Embed this run, at this step, in another page";
  b.addEventListener("click", open);
  container.append(b);
}

function ensureDialog() {
  if (dialog) return dialog;
  dialog = document.createElement("div");
  dialog.className = "modal embed-dialog";
  dialog.hidden = true;
  dialog.setAttribute("role", "dialog");
  dialog.setAttribute("aria-modal", "true");
  dialog.setAttribute("aria-labelledby", "embed-title");
  dialog.innerHTML = `
    <div class="modal-box">
      <h2 id="embed-title">Embed this run</h2>
      <p class="embed-help">Paste this into a page: a compact viewer of the run, opening at this step.</p>
      <textarea class="embed-code" rows="4" readonly aria-label="The iframe snippet"></textarea>
      <div class="embed-actions">
        <button type="button" class="embed-copy">Copy</button>
        <span class="embed-status" role="status"></span>
        <button type="button" class="modal-close">Close (Esc)</button>
      </div>
    </div>`;
  code = dialog.querySelector(".embed-code");
  status = dialog.querySelector(".embed-status");
  dialog.querySelector(".embed-copy").addEventListener("click", copy);
  dialog.querySelector(".modal-close").addEventListener("click", close);
  dialog.addEventListener("click", (e) => {
    if (e.target === dialog) close();
  });
  // The page's shortcuts (arrows, letters) must not step the run behind the dialog.
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      close();
    }
    e.stopPropagation();
  });
  document.body.append(dialog);
  return dialog;
}

function open() {
  ensureDialog();
  code.value = snippet({ runId: page.runId, title: page.title(), step: page.step(), level: page.level() });
  status.textContent = "";
  returnTo = document.activeElement;
  dialog.hidden = false;
  code.focus();
  code.select();
}

function close() {
  if (!dialog || dialog.hidden) return;
  dialog.hidden = true;
  if (returnTo && returnTo.focus) returnTo.focus();
  returnTo = null;
}

async function copy() {
  code.select();
  try {
    await navigator.clipboard.writeText(code.value);
  } catch {
    // No clipboard permission (an insecure origin, a headless browser): the selected text's copy.
    if (!document.execCommand("copy")) {
      status.textContent = "Select the text and copy it (Ctrl+C).";
      return;
    }
  }
  status.textContent = "Copied.";
}

export function isOpen() {
  return Boolean(dialog && !dialog.hidden);
}
