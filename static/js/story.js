// The story level of a run, as the server derived it (GET /api/runs/{id}/story, from
// engine/trace/story.py): story steps, chapters, cause links and predict-mode questions. This
// module only indexes that document for the viewer; what a step, a chapter or a cause *is* is
// decided in Python (Notes [Story events], [Story steps], [Chapters], [Cause links]).
//
// Positions are the player's steps (step s = the state after s events). A story step sits at
// `step` = its last event's seq + 1; position 0 (nothing has run) is the story's start. The
// player may also stand between story steps (after following a cause link to an event the story
// leaves out, or after stepping at the "every event" level): `indexAt` then names the story step
// before it.

import { upperBound } from "./player.js";

export class Story {
  constructor(doc) {
    this.steps = doc.steps || [];
    this.chapters = doc.chapters || [];
    this.links = doc.links || {};
    this.questions = doc.questions || [];
    this.positions = this.steps.map((s) => s.step); // ascending
    this.questionAt = new Map(this.questions.map((q) => [q.step, q])); // story index -> question
    this.children = new Map(); // chapter id -> ids of its child chapters
    for (const c of this.chapters) {
      const key = c.parent === null ? -1 : c.parent;
      if (!this.children.has(key)) this.children.set(key, []);
      this.children.get(key).push(c.id);
    }
  }

  get length() {
    return this.steps.length;
  }

  // The index of the last story step at or before player step `pos`; -1 before the first.
  indexAt(pos) {
    return upperBound(this.positions, pos) - 1;
  }

  // Whether `pos` is exactly a story step's position (or the start).
  isAt(pos) {
    const i = this.indexAt(pos);
    return pos === 0 || (i >= 0 && this.positions[i] === pos);
  }

  // The position of the next story step after `pos`, or null at the end of the story.
  next(pos) {
    const i = upperBound(this.positions, pos);
    return i < this.positions.length ? this.positions[i] : null;
  }

  // The position of the story step before `pos` (0, the start, before the first one).
  prev(pos) {
    const i = upperBound(this.positions, pos - 1) - 1;
    return i >= 0 ? this.positions[i] : pos > 0 ? 0 : null;
  }

  // The player position where the story step `index` is shown (index -1: the start).
  positionOf(index) {
    return index < 0 ? 0 : this.positions[Math.min(index, this.positions.length - 1)];
  }

  // The step a story step starts from: the previous story step's position. What changed "in this
  // step" is what the events between the two changed.
  startOf(index) {
    return index <= 0 ? 0 : this.positions[index - 1];
  }

  // The chapters holding event `seq`, outermost first.
  chaptersAt(seq) {
    const out = [];
    let level = this.children.get(-1) || [];
    for (;;) {
      const c = level.map((id) => this.chapters[id]).find((ch) => ch.start <= seq && seq <= ch.end);
      if (!c) return out;
      out.push(c);
      level = this.children.get(c.id) || [];
    }
  }

  // Where a click on a chapter goes: its first story step, else its first event.
  chapterPosition(chapter) {
    const i = upperBound(this.positions, chapter.start); // first story step whose last seq >= start
    const pos = i < this.positions.length ? this.positions[i] : null;
    return pos !== null && pos - 1 <= chapter.end ? pos : chapter.start + 1;
  }

  // The cause and effects of event `seq` ({cause, source, effects}, each with seq and text).
  linksOf(seq) {
    return this.links[String(seq)] || null;
  }
}
