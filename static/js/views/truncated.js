// The banner of a run cut short by a limit (GET /api/runs/{id}: truncated, event_limit, error.limit):
// the trace up to the cut is all there and opens as usual; the banner says where and why it ends.

const fmt = (n) => Number(n).toLocaleString("en-US");

// The banner's text for a run document, or "" when its trace is whole.
export function text(run) {
  if (!run || !run.truncated) return "";
  const at = fmt(run.n_events);
  const tail = "the run was cut there; what happened before is all here.";
  if (run.event_limit) {
    return `Stopped at event ${at} of the limit ${fmt(run.event_limit)} (max_events): ${tail}`;
  }
  const limit = run.error && run.error.limit ? ` by the ${run.error.limit} limit` : "";
  return `Stopped at event ${at}${limit}: ${tail}`;
}

// Show (or hide) the banner after `anchor`; `onLast` goes to the last event kept.
export function show(run, anchor, onLast) {
  let box = document.getElementById("run-truncated");
  const message = text(run);
  if (!message) {
    if (box) box.hidden = true;
    return;
  }
  if (!box) {
    box = document.createElement("div");
    box.id = "run-truncated";
    box.className = "notice truncated-banner";
    box.setAttribute("role", "status");
    anchor.after(box);
  }
  box.innerHTML = "";
  const msg = document.createElement("span");
  msg.className = "truncated-text";
  msg.textContent = message;
  const btn = document.createElement("button");
  btn.type = "button";
  btn.textContent = "Go to the last event";
  btn.addEventListener("click", () => onLast());
  box.append(msg, " ", btn);
  box.hidden = false;
}
