// The keyboard shortcuts dialog ("?"): a modal listing every shortcut main.js handles. Focus moves
// into it and comes back to where it was when it closes (Escape, the close button, or a click
// outside the box).

let dialog = null;
let list = null;
let returnTo = null;

export function mount() {
  dialog = document.createElement("div");
  dialog.className = "modal help-dialog";
  dialog.hidden = true;
  dialog.setAttribute("role", "dialog");
  dialog.setAttribute("aria-modal", "true");
  dialog.setAttribute("aria-labelledby", "help-title");
  dialog.innerHTML = `
    <div class="modal-box">
      <h2 id="help-title">Keyboard shortcuts</h2>
      <table class="shortcuts"><tbody></tbody></table>
      <button type="button" class="modal-close">Close (Esc)</button>
    </div>`;
  list = dialog.querySelector("tbody");
  dialog.querySelector(".modal-close").addEventListener("click", hide);
  dialog.addEventListener("click", (e) => {
    if (e.target === dialog) hide();
  });
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      hide();
    } else if (e.key === "Tab") {
      // The only focusable element is the close button: keep focus inside the dialog.
      e.preventDefault();
      dialog.querySelector(".modal-close").focus();
    }
  });
  document.body.append(dialog);
}

export function show(shortcuts) {
  list.replaceChildren(
    ...shortcuts.map(({ keys, action }) => {
      const tr = document.createElement("tr");
      const k = document.createElement("th");
      const kbd = document.createElement("kbd");
      kbd.textContent = keys;
      k.append(kbd);
      const a = document.createElement("td");
      a.textContent = action;
      tr.append(k, a);
      return tr;
    }),
  );
  returnTo = document.activeElement;
  dialog.hidden = false;
  dialog.querySelector(".modal-close").focus();
}

export function hide() {
  if (!dialog || dialog.hidden) return;
  dialog.hidden = true;
  if (returnTo && returnTo.focus) returnTo.focus();
  returnTo = null;
}

export function isOpen() {
  return Boolean(dialog && !dialog.hidden);
}
