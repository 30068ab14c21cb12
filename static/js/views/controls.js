// The step controls, Python Tutor's row plus what a trace needs: First / Back / "Step i of n" /
// Forward / Last, a slider, play/pause with a speed, "previous/next event of kind …", and a box to
// jump to a step. Keyboard: ← → step, Shift+← → previous/next of the chosen kind, Home/End,
// Space plays or pauses. The view only reads the player; moving goes through `act`.

const KINDS = [
  ["recompute_start", "recompute"],
  ["unpack", "unpack"],
  ["pack", "pack"],
  ["early_stop", "early stop"],
  ["holder_gc", "holder GC"],
  ["node_exec", "node exec"],
  ["rpack", "rpack"],
  ["recomputed_take", "recomputed take"],
  ["frame_new", "frame new"],
  ["frame_gc", "frame GC"],
  ["backward_start", "backward start"],
  ["checkpoint_error", "checkpoint error"],
  ["error", "error"],
  ["mark", "print / mark"],
];

const SPEEDS = [1, 2, 4, 8, 16, 30, 60, 120];

let root = null;
let player = null;
let act = null;
let el = {};

export function mount(rootEl, options) {
  root = rootEl;
  player = options.player;
  act = options.act;
  root.classList.add("controls-view");
  root.innerHTML = `
    <div class="ctl-row">
      <div class="ctl-group nav">
        <button type="button" class="ctl-first" title="First (Home)">⇤ First</button>
        <button type="button" class="ctl-back" title="Back (←)">◀ Back</button>
        <span class="ctl-step" aria-live="polite">Step 0 of 0</span>
        <button type="button" class="ctl-forward" title="Forward (→)">Forward ▶</button>
        <button type="button" class="ctl-last" title="Last (End)">Last ⇥</button>
      </div>
      <div class="ctl-group play">
        <button type="button" class="ctl-play" title="Play / pause (Space)">▶ Play</button>
        <label>speed <select class="ctl-speed">${SPEEDS.map((s) => `<option value="${s}"${s === 4 ? " selected" : ""}>${s}/s</option>`).join("")}</select></label>
      </div>
      <div class="ctl-group kinds">
        <button type="button" class="ctl-prev-kind" title="Previous event of this kind (Shift+←)">◀</button>
        <select class="ctl-kind" title="Kind of event to jump to"></select>
        <button type="button" class="ctl-next-kind" title="Next event of this kind (Shift+→)">▶</button>
      </div>
      <form class="ctl-group jump">
        <label>step <input class="ctl-jump" type="number" min="0" step="1" inputmode="numeric"></label>
        <button type="submit">Go</button>
      </form>
    </div>
    <input class="ctl-slider" type="range" min="0" max="0" value="0" aria-label="Step">`;
  for (const name of ["first", "back", "step", "forward", "last", "play", "speed", "prev-kind", "kind", "next-kind", "jump", "slider"]) {
    el[name] = root.querySelector(`.ctl-${name}`);
  }
  el.kind.innerHTML = KINDS.map(([k, label]) => `<option value="${k}">${label}</option>`).join("");
  el.first.addEventListener("click", () => act("first"));
  el.back.addEventListener("click", () => act("back"));
  el.forward.addEventListener("click", () => act("forward"));
  el.last.addEventListener("click", () => act("last"));
  el.play.addEventListener("click", () => act("toggle-play"));
  // After choosing from a menu, the arrow keys step again (instead of changing the choice).
  el.speed.addEventListener("change", () => {
    el.speed.blur();
    act("speed", Number(el.speed.value));
  });
  el["prev-kind"].addEventListener("click", () => act("prev-kind", el.kind.value));
  el["next-kind"].addEventListener("click", () => act("next-kind", el.kind.value));
  el.kind.addEventListener("change", () => {
    el.kind.blur();
    update();
  });
  el.slider.addEventListener("input", () => act("goto", Number(el.slider.value)));
  root.querySelector("form.jump").addEventListener("submit", (e) => {
    e.preventDefault();
    if (el.jump.value !== "") act("goto", Number(el.jump.value));
  });
}

export function selectedKind() {
  return el.kind.value;
}

export function speed() {
  return Number(el.speed.value);
}

export function setPlaying(playing) {
  el.play.textContent = playing ? "❚❚ Pause" : "▶ Play";
  el.play.classList.toggle("on", playing);
}

// Counts per kind in the menu, and the kinds with no event greyed out.
export function grow() {
  for (const opt of el.kind.options) {
    const [, label] = KINDS.find(([k]) => k === opt.value);
    const n = player.countOf(opt.value);
    opt.textContent = `${label} (${n})`;
    opt.disabled = n === 0;
  }
  update();
}

function update() {
  const n = player.length;
  const s = player.step;
  el.step.textContent = `Step ${s.toLocaleString()} of ${n.toLocaleString()}`;
  el.slider.max = String(n);
  if (Number(el.slider.value) !== s) el.slider.value = String(s);
  el.jump.max = String(n);
  el.first.disabled = el.back.disabled = s === 0;
  el.forward.disabled = el.last.disabled = s >= n;
  const kind = el.kind.value;
  el["prev-kind"].disabled = player.prevOf(kind) === null;
  el["next-kind"].disabled = player.nextOf(kind) === null;
}

export function render() {
  update();
}
