// Breakpoints: where "run to next" / "run to previous" stop. Three sorts, as in a debugger:
//   line:12             line 12 of the scenario starts running: the first event of a stretch of
//                       events at that line (click the line number in the source);
//   kind:recompute_start an event of that kind (recompute, early stop, holder GC, error, ...);
//   frame:2             a recomputation of checkpoint frame 2 ("next recompute of inner#2").
// They read only the events' own fields (src.line, kind, frame), and live in the URL as
// `?bp=line:12,kind:early_stop` so a permalink reproduces them.

export const BREAK_KINDS = [
  ["recompute_start", "recomputation"],
  ["early_stop", "early stop"],
  ["unpack", "unpack"],
  ["holder_gc", "holder GC"],
  ["frame_gc", "frame GC"],
  ["backward_start", "backward start"],
  ["checkpoint_error", "checkpoint error"],
  ["error", "error"],
];

export class Breakpoints {
  constructor() {
    this.lines = new Set();
    this.kinds = new Set();
    this.frames = new Set();
    this.listeners = new Set();
  }

  // `?bp=` text; unknown or malformed entries are ignored (a hand-edited URL must not break the page).
  static parse(text) {
    const bps = new Breakpoints();
    for (const part of String(text || "").split(",")) {
      const [sort, value] = part.split(":");
      if (sort === "line" && /^\d+$/.test(value || "")) bps.lines.add(Number(value));
      else if (sort === "kind" && BREAK_KINDS.some(([k]) => k === value)) bps.kinds.add(value);
      else if (sort === "frame" && /^\d+$/.test(value || "")) bps.frames.add(Number(value));
    }
    return bps;
  }

  toString() {
    return [
      ...[...this.lines].sort((a, b) => a - b).map((l) => `line:${l}`),
      ...[...this.kinds].map((k) => `kind:${k}`),
      ...[...this.frames].sort((a, b) => a - b).map((f) => `frame:${f}`),
    ].join(",");
  }

  get size() {
    return this.lines.size + this.kinds.size + this.frames.size;
  }

  onChange(fn) {
    this.listeners.add(fn);
  }

  toggle(sort, value) {
    const set = this[`${sort}s`];
    if (set.has(value)) set.delete(value);
    else set.add(value);
    for (const fn of this.listeners) fn();
  }

  has(sort, value) {
    return this[`${sort}s`].has(value);
  }

  clear() {
    this.lines.clear();
    this.kinds.clear();
    this.frames.clear();
    for (const fn of this.listeners) fn();
  }

  // Whether events[i] is a stop. `sameFile(file)`: whether an event's src file is the scenario
  // shown in the source pane. A line stops once per stretch of events on it, like a debugger
  // stopping when the line starts, not at each of the hundred events one line can make.
  matches(events, i, sameFile) {
    const event = events[i];
    if (this.kinds.has(event.kind)) return true;
    if (this.frames.size && event.kind === "recompute_start" && this.frames.has(event.frame)) return true;
    const line = lineOf(event, sameFile);
    return Boolean(line && this.lines.has(line) && (i === 0 || lineOf(events[i - 1], sameFile) !== line));
  }

  // The player step at which the next matching event after `step` is current, or null. The event
  // current at step s is events[s - 1], so the search starts at events[step].
  nextFrom(events, step, sameFile) {
    for (let i = step; i < events.length; i++) if (this.matches(events, i, sameFile)) return i + 1;
    return null;
  }

  prevFrom(events, step, sameFile) {
    for (let i = step - 2; i >= 0; i--) if (this.matches(events, i, sameFile)) return i + 1;
    return null;
  }
}

function lineOf(event, sameFile) {
  const src = event && event.src;
  return src && src.line && sameFile(src.file) ? src.line : 0;
}
