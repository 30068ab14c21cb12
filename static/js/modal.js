// The "open larger" window of a memory tab (views/ledger.js, views/modules.js): a modal dialog
// the tab's content moves into and back out of. Close (Esc, the button or a click on the
// backdrop) is the view's, which puts the content back and returns the focus; so is the focus
// trap (`onTab`), since each view knows what in it can take the focus.

export function mountModal({ kind, title, boxClass, bodyClass, onClose, onTab }) {
  const dialog = document.createElement("div");
  dialog.className = `modal ${kind}-dialog`;
  dialog.hidden = true;
  dialog.setAttribute("role", "dialog");
  dialog.setAttribute("aria-modal", "true");
  dialog.setAttribute("aria-labelledby", `${kind}-title`);
  dialog.innerHTML = `
    <div class="modal-box ${boxClass}">
      <div class="ledger-box-head">
        <h2 id="${kind}-title" tabindex="-1"></h2>
        <button type="button" class="modal-close">Close (Esc)</button>
      </div>
      <p class="ledger-now" aria-live="polite"></p>
      <div class="${bodyClass}"></div>
    </div>`;
  dialog.querySelector("h2").textContent = title;
  dialog.querySelector(".modal-close").addEventListener("click", onClose);
  dialog.addEventListener("click", (e) => {
    if (e.target === dialog) onClose();
  });
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      onClose();
    } else if (e.key === "Tab") {
      onTab(e);
    }
  });
  document.body.append(dialog);
  return {
    dialog,
    body: dialog.querySelector(`.${bodyClass.split(" ").pop()}`),
    now: dialog.querySelector(".ledger-now"),
  };
}
