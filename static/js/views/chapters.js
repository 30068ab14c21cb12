// The chapters of the run (Note [Chapters] in engine/trace/story.py): its phases as a nested
// list, "forward", "checkpoint big#0 forward", "backward g0", "recomputation of big#0 for holder
// 2 (g0)", "early stop after 4/4"... Click one to jump to its first story step; the chapters
// holding the current event are highlighted, the innermost most strongly.

import { esc } from "../format.js";

let root = null;
let list = null;
let onPick = null;
let story = null;
let itemOf = new Map(); // chapter id -> its <a>
let lit = []; // ids highlighted at the last render

export function mount(el, options) {
  root = el;
  onPick = options.onPick;
  root.classList.add("chapters-view");
  root.innerHTML = `
    <div class="view-head"><h2 id="chapters-title">Chapters</h2></div>
    <div class="chapters-body"><p class="chapters-note">The chapters appear when the run has finished.</p></div>`;
  list = root.querySelector(".chapters-body");
  list.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-chapter]");
    if (!a || !story) return;
    e.preventDefault();
    onPick(story.chapterPosition(story.chapters[Number(a.dataset.chapter)]));
  });
}

export function load(s) {
  story = s;
  itemOf = new Map();
  lit = [];
  if (!story.chapters.length) {
    list.innerHTML = `<p class="chapters-note">This run has no chapters.</p>`;
    return;
  }
  // Nested lists mirror the chapter tree; each entry is a link, so Tab and Enter work.
  const build = (parent) => {
    const ids = story.children.get(parent) || [];
    if (!ids.length) return "";
    const items = ids.map((id) => {
      const c = story.chapters[id];
      const span = c.start === c.end ? `event ${c.start}` : `events ${c.start}–${c.end}`;
      return (
        `<li class="chapter chapter-${esc(c.kind)}"><a href="#" data-chapter="${c.id}" title="${esc(span)}">` +
        `${esc(c.title)}</a>${build(c.id)}</li>`
      );
    });
    return `<ol>${items.join("")}</ol>`;
  };
  list.innerHTML = build(-1);
  list.setAttribute("aria-labelledby", "chapters-title");
  for (const a of list.querySelectorAll("a[data-chapter]")) itemOf.set(Number(a.dataset.chapter), a);
}

export function render(state, ctx) {
  if (!story) return;
  const seq = ctx.step > 0 ? ctx.step - 1 : 0;
  const now = story.chaptersAt(seq).map((c) => c.id);
  if (now.length === lit.length && now.every((id, i) => id === lit[i])) return;
  for (const id of lit) {
    const a = itemOf.get(id);
    if (a) {
      a.classList.remove("in", "current");
      a.removeAttribute("aria-current");
    }
  }
  now.forEach((id, i) => {
    const a = itemOf.get(id);
    if (!a) return;
    a.classList.add("in");
    if (i === now.length - 1) {
      a.classList.add("current");
      a.setAttribute("aria-current", "step");
    }
  });
  lit = now;
  const current = itemOf.get(now[now.length - 1]);
  if (current) ctx.defer("chapters", () => keepVisible(current));
}

function keepVisible(a) {
  const box = list.getBoundingClientRect();
  const r = a.getBoundingClientRect();
  if (r.top < box.top || r.bottom > box.bottom) list.scrollTop += r.top - box.top - box.height / 3;
}
