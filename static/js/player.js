// The cursor over a run: which step is shown, and the state there.
//
// Step s is the state after the first s events: step 0 is the initial state (nothing has run),
// step n (n events) the end of the run. The event "at" step s (s >= 1) is events[s - 1], the one
// that just happened, whose caption is shown. Moving forward applies an event's changes, moving
// back undoes them (changes.js); a long jump restores the nearest snapshot first (one every
// SNAPSHOT_EVERY steps, free thanks to copy on write), so a jump costs at most SNAPSHOT_EVERY / 2
// events' changes (Note [Snapshots built ahead]). Listeners learn what a move changed: the change
// lists it applied or undid, or, after a snapshot, the differences between the two states (Note
// [Jump diffs] in changes.js).
//
// The player never asks the server anything: the stream appends (event, changes, caption) items
// as they arrive, and every step renders from the client-side state alone.

import { diffStates, Store } from "./changes.js";

const SNAPSHOT_EVERY = 256;
// Past this many changes between the state left and the state reached, a jump does not list its
// differences (Note [Jump diffs], Note [Diff only short jumps]).
const DIFF_LIMIT = 3000;

// requestIdleCallback, or (Safari) a timeout with a slice of 8 ms.
function idleCallback(fn) {
  // The timeout: on a page that is never idle (a busy machine), walk a little anyway.
  if (window.requestIdleCallback) return window.requestIdleCallback(fn, { timeout: 500 });
  return setTimeout(() => {
    const end = performance.now() + 8;
    fn({ timeRemaining: () => end - performance.now() });
  }, 1);
}

export class Player {
  constructor(initialState) {
    this.events = [];
    this.changes = [];
    this.captions = [];
    this.changed = []; // per event: what its changes did, in a few lines (engine/trace/changed.py)
    this.changeCount = [0]; // changeCount[s]: how many changes the first s events made
    this.kindIndex = new Map(); // kind -> ascending list of the steps at which that kind happens
    this.store = new Store(initialState);
    this.step = 0;
    // snapshots[k]: the state at step k * SNAPSHOT_EVERY, for k < snapshots.length.
    this.snapshots = [initialState];
    // A second store that walks the run ahead of the learner, in idle time (Note [Snapshots built
    // ahead]), and the step it is at.
    this.ahead = new Store(initialState);
    this.aheadStep = 0;
    this.aheadPending = false;
    this.listeners = new Set();
  }

  // Note [Snapshots built ahead]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Snapshots used to be taken only while stepping forward, so the first long jump into a part of
  // the run not yet walked replayed every event up to it (96 ms at p95 on a 100,000-event run).
  // Now a second Store walks the run as its events arrive, in idle time (slices of a few ms,
  // between frames), and takes the snapshots; a forward step that reaches the next snapshot's
  // step first takes it itself, as before. Either way snapshots[k] is pushed only when it is the
  // next one (k === snapshots.length), so the list stays complete and in order whoever pushes.
  // The two stores never write to each other's containers: each copies what it did not make
  // since its own last snapshot (copy on write, changes.js), and a snapshot is shared read-only.
  // If stepping has pushed snapshots past the walker, it restarts from the last one.
  _scheduleAhead() {
    if (this.aheadPending || this.aheadStep >= this.events.length) return;
    this.aheadPending = true;
    idleCallback((deadline) => {
      this.aheadPending = false;
      this._walkAhead(deadline);
      this._scheduleAhead();
    });
  }

  _walkAhead(deadline) {
    const end = performance.now() + Math.max(deadline.timeRemaining(), 4); // 4 ms when overdue
    const last = (this.snapshots.length - 1) * SNAPSHOT_EVERY;
    if (this.aheadStep < last) {
      this.ahead.restore(this.snapshots[this.snapshots.length - 1]);
      this.aheadStep = last;
    }
    while (this.aheadStep < this.events.length) {
      this.ahead.apply(this.changes[this.aheadStep]);
      this.aheadStep += 1;
      if (this.aheadStep === this.snapshots.length * SNAPSHOT_EVERY) {
        this.snapshots.push(this.ahead.snapshot());
        if (performance.now() >= end) return;
      }
    }
  }

  get state() {
    return this.store.root;
  }

  get length() {
    return this.events.length;
  }

  get event() {
    return this.step > 0 ? this.events[this.step - 1] : null;
  }

  get nextEvent() {
    return this.step < this.events.length ? this.events[this.step] : null;
  }

  get caption() {
    return this.step > 0 ? this.captions[this.step - 1] : null;
  }

  // Items from the stream: [{event, changes, caption}, ...], in order. Items already held (a
  // reconnection that resent them) are skipped; a gap is an error, since later changes would apply
  // to the wrong state.
  append(items) {
    for (const item of items) {
      const seq = item.event.seq;
      if (seq < this.events.length) continue;
      if (seq > this.events.length) {
        throw new Error(`events ${this.events.length}..${seq - 1} are missing from the stream`);
      }
      this.events.push(item.event);
      this.changes.push(item.changes);
      this.captions.push(item.caption);
      this.changed.push(item.changed || []);
      this.changeCount.push(this.changeCount[this.changeCount.length - 1] + item.changes.length);
      const step = this.events.length; // the step at which this event is the current one
      let steps = this.kindIndex.get(item.event.kind);
      if (!steps) this.kindIndex.set(item.event.kind, (steps = []));
      steps.push(step);
    }
    this._scheduleAhead();
  }

  onMove(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  // Move to step `target` (clamped) and tell the listeners. `move` is what they get: from, to,
  // and the lists of changes applied or undone (to render only what changed).
  goto(target) {
    target = Math.max(0, Math.min(this.events.length, Math.trunc(Number(target) || 0)));
    const from = this.step;
    if (target === from) return null;
    const touched = this._moveTo(target);
    const move = { from, to: target, touched };
    for (const fn of this.listeners) fn(move);
    return move;
  }

  forward() {
    return this.goto(this.step + 1);
  }

  back() {
    return this.goto(this.step - 1);
  }

  first() {
    return this.goto(0);
  }

  last() {
    return this.goto(this.events.length);
  }

  // The steps of the next / previous event of `kind` after / before the current step, or null.
  nextOf(kind) {
    const steps = this.kindIndex.get(kind) || [];
    const i = upperBound(steps, this.step);
    return i < steps.length ? steps[i] : null;
  }

  prevOf(kind) {
    const steps = this.kindIndex.get(kind) || [];
    const i = upperBound(steps, this.step - 1) - 1; // the last step < this.step (steps are integers)
    return i >= 0 ? steps[i] : null;
  }

  countOf(kind) {
    return (this.kindIndex.get(kind) || []).length;
  }

  // Returns the change lists applied (forward) or undone (back), in the order they were used;
  // when a snapshot was restored, one list of every difference between the state left and the
  // state reached instead, or null when they differ in too many places to list (Note [Jump
  // diffs] in changes.js): everything may have changed.
  //
  // Note [Diff only short jumps]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Listing the differences costs what differs, up to DIFF_LIMIT, and most random jumps on a long
  // run differ in about that many places or more: the walk was then the largest part of the
  // jump's JavaScript (about 2 ms of 5 at 100,000 events), and the views, given thousands of
  // differences or none, recheck everything at about the same cost. So the walk is tried only
  // when the events between the two states made at most DIFF_LIMIT changes in all
  // (`changeCount`, summed as they arrive): further apart, the jump is treated as a long replay
  // is, everything may have changed (graph.js and frames.js recheck in full past a few thousand
  // changes too). Short jumps (the next recomputation, a cause link, a breakpoint) keep their
  // list. Nothing but speed depends on this: a full recheck shows what the list would.
  _moveTo(target) {
    const from = this.step;
    let touched = [];
    let before = null; // the state left, when a snapshot is restored
    // The last snapshot at or before the target, if it is closer than where we are.
    const k = Math.min(Math.floor(target / SNAPSHOT_EVERY), this.snapshots.length - 1);
    const base = k * SNAPSHOT_EVERY;
    if (target - base < Math.abs(target - this.step)) {
      before = this.store.root; // never written again: restore() gives up owning it
      this.store.restore(this.snapshots[k]);
      this.step = base;
      touched = null;
    }
    while (this.step < target) {
      const changes = this.changes[this.step];
      this.store.apply(changes);
      this.step += 1;
      if (touched) touched.push(changes);
      if (this.step === this.snapshots.length * SNAPSHOT_EVERY) this.snapshots.push(this.store.snapshot());
    }
    while (this.step > target) {
      this.step -= 1;
      const changes = this.changes[this.step];
      this.store.undo(changes);
      if (touched) touched.push(changes);
    }
    if (before === null) return touched;
    if (Math.abs(this.changeCount[target] - this.changeCount[from]) > DIFF_LIMIT) return null;
    const diff = diffStates(before, this.store.root, DIFF_LIMIT);
    return diff ? [diff] : null;
  }
}

// The first index whose value is > x, in an ascending array.
export function upperBound(a, x) {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
