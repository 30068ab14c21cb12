// A short guided tour of the run page, for a learner who has never heard of checkpointing. It
// starts by itself once (remembered in localStorage) on the two "start here" scenarios, and from
// the "Tour" button in the header at any time. `?tour=1` starts it, `?tour=0` never.
// Each stop outlines one part of the page and says in plain words what it is and how to read it.

const FEATURED = ["single_checkpoint", "nested_checkpoint"];
const SEEN_KEY = "autograd-lens.tour-seen";

const STOPS = [
  {
    target: "#view-controls .ctl-level",
    title: "Story or every event",
    text:
      "The run is told as a story: each step is one thing checkpointing does (pack a holder, unpack it, " +
      "recompute, stop early, free). “Every event” shows all of the engine's events instead. → and ← step; " +
      "switching keeps your place.",
  },
  {
    target: "#view-caption",
    title: "What just happened",
    text:
      "One sentence per step, in plain words. Dotted terms explain themselves on hover or focus. “why?” " +
      "jumps to the event that caused this one (and “← back” returns); “What changed” lists what the step changed.",
  },
  {
    target: "#view-chapters",
    title: "Chapters",
    text:
      "The run's phases: the forward, each checkpoint, the backward, each recomputation nested in the one that " +
      "needed it. Click one to jump there; the current one is highlighted.",
  },
  {
    target: "#view-source",
    title: "The code",
    text:
      "The scenario, with the line that just ran (green arrow) and the line that runs next (orange arrow). Click a line number " +
      "to set a breakpoint; P runs to it.",
  },
  {
    target: "#view-graph",
    title: "The autograd graph",
    text:
      "Every node the forward recorded, which the backward runs from the output back to the inputs. Orange boxes " +
      "are saved tensors; dashed amber boxes are holders: what checkpoint keeps instead of the tensor. " +
      "\"Legend\" (bottom left) says what every colour means; click a checkpoint's title to fold it into one box.",
  },
  {
    target: "#view-frames",
    title: "Checkpoint frames",
    text:
      "One card per checkpoint() call: its holders, the handles a recomputation gives them, and recomputed[g0], " +
      "where recomputed tensors wait to be unpacked. This is the state the PyTorch code keeps.",
  },
  {
    target: "#view-memory",
    title: "Memory",
    text:
      "Bytes alive, bytes held by saved tensors, and recomputed bytes, over the whole run. Checkpointing trades " +
      "the saved bytes for recomputation in the backward. Click the chart to jump.",
  },
  {
    target: "#view-controls .ctl-predict",
    title: "Predict mode",
    text:
      "Test yourself: before each decision (recompute or cache hit? will early stop fire?) you answer first, " +
      "then see what PyTorch did and why. Your score is kept.",
  },
];

let box = null;
let index = 0;
let stops = [];
let lit = null;
let returnTo = null;

export function isOpen() {
  return Boolean(box && !box.hidden);
}

export function mountButton(container) {
  if (!container || document.getElementById("tour-start")) return;
  const b = document.createElement("button");
  b.type = "button";
  b.id = "tour-start";
  b.className = "small-button";
  b.textContent = "Tour";
  b.title = "A short tour of this page";
  b.addEventListener("click", startTour);
  container.append(b);
}

export function maybeStartTour(run) {
  const asked = new URL(location.href).searchParams.get("tour");
  if (asked === "0") return;
  if (asked === "1") {
    startTour();
    return;
  }
  // Automated browsers (tests, the bench) get no surprise dialog.
  if (navigator.webdriver || !run || !FEATURED.includes(run.scenario)) return;
  try {
    if (localStorage.getItem(SEEN_KEY)) return;
    localStorage.setItem(SEEN_KEY, "1");
  } catch {
    return; // no storage: do not risk showing it on every visit
  }
  startTour();
}

function ensureBox() {
  if (box) return box;
  box = document.createElement("div");
  box.className = "tour-box";
  box.hidden = true;
  box.setAttribute("role", "dialog");
  box.setAttribute("aria-labelledby", "tour-title");
  box.innerHTML = `
    <p class="tour-count"></p>
    <h2 id="tour-title"></h2>
    <p class="tour-text"></p>
    <div class="tour-buttons">
      <button type="button" class="tour-back">Back</button>
      <button type="button" class="tour-next primary">Next</button>
      <button type="button" class="tour-close">Close</button>
    </div>`;
  box.querySelector(".tour-back").addEventListener("click", () => go(index - 1));
  box.querySelector(".tour-next").addEventListener("click", () => go(index + 1));
  box.querySelector(".tour-close").addEventListener("click", endTour);
  // The tour's keys stay in the tour: the page's own shortcuts must not step the run meanwhile.
  box.addEventListener("keydown", (e) => {
    let handled = true;
    if (e.key === "Escape") endTour();
    else if (e.key === "ArrowRight" || (e.key === "Enter" && !e.target.closest("button"))) go(index + 1);
    else if (e.key === "ArrowLeft") go(index - 1);
    else handled = false;
    e.stopPropagation();
    if (handled) e.preventDefault();
  });
  document.body.append(box);
  return box;
}

export function startTour() {
  stops = STOPS.filter((s) => document.querySelector(s.target));
  if (!stops.length) return;
  returnTo = document.activeElement;
  ensureBox().hidden = false;
  go(0);
}

function go(i) {
  if (i >= stops.length) {
    endTour();
    return;
  }
  index = Math.max(0, i);
  const stop = stops[index];
  const target = document.querySelector(stop.target);
  if (lit) lit.classList.remove("tour-target");
  lit = target;
  if (target) {
    target.classList.add("tour-target");
    target.scrollIntoView({ block: "nearest" });
  }
  box.querySelector(".tour-count").textContent = `Tour · ${index + 1} of ${stops.length}`;
  box.querySelector("#tour-title").textContent = stop.title;
  box.querySelector(".tour-text").textContent = stop.text;
  box.querySelector(".tour-back").disabled = index === 0;
  box.querySelector(".tour-next").textContent = index === stops.length - 1 ? "Done" : "Next";
  place(target);
  box.querySelector(".tour-next").focus();
}

// Next to its target, inside the viewport: below it if there is room, else above, else inside.
function place(target) {
  const r = target ? target.getBoundingClientRect() : { left: 20, bottom: 20, top: 20 };
  const w = box.offsetWidth;
  const h = box.offsetHeight;
  const left = Math.max(8, Math.min(r.left, window.innerWidth - w - 8));
  let top = r.bottom + 8;
  if (top + h > window.innerHeight - 8) top = r.top - h - 8;
  if (top < 8) top = Math.max(8, Math.min(r.top + 8, window.innerHeight - h - 8));
  box.style.left = `${left}px`;
  box.style.top = `${top}px`;
}

export function endTour() {
  if (!box || box.hidden) return;
  box.hidden = true;
  if (lit) lit.classList.remove("tour-target");
  lit = null;
  if (returnTo && returnTo.focus) returnTo.focus();
}
