// The checkpoint frames, like Python Tutor's frames panel: the saved-tensor hooks stack and what
// is in progress on top, then one card per `_CheckpointFrame` (nested under the frame whose hooks
// were active when it was made) with its weak_holders, their handles per gid, recomputed[gid],
// recomp_counter, is_recomputed and early stops. Everything comes from the reducer's state;
// whatever the current event changed is marked.
//
// A step must stay cheap with hundreds of frames, so: a card is re-rendered only when a change
// touched its frame; its parts (summary, facts, each holder row, the gid table) are replaced only
// when their HTML differs; and with many frames only the "hot" ones (running, recomputing, named by
// the current event) are open, and a closed card's body is not rendered at all.

import { decorate } from "../glossary.js";
import { bytes, changedPaths, esc, frameName, gidLabel, nodeName, pyBool, shape, tensorName } from "../format.js";

const MANY = 12; // above this many frames, only hot frames are open
const FEW_PASSES = 8; // a gid table with at most this many rows shows them all (Note [Gid rows shown])
const LAST_PASSES = 4; // ... and with more, the current passes' rows and the last ones

let root = null;
let stackEl = null;
let listEl = null;
let countEl = null;
let cards = new Map(); // frame id -> card (see makeCard)
const gone = new Map(); // frame id -> the kept card of a frame not in the state (Note [Cards kept to put back])
let flagged = new Set(); // frames whose card shows "changed" marks, to clear at the next step
let hotLast = new Set();
let userOpen = new Map(); // frame id -> open or closed, as the user chose
const allPasses = new Map(); // frame id -> the user asked for every gid row ("show all"), while the page lives
let lastStack = "";
let last = { state: null, changed: null };
let currentLast = new Set(); // the gids of the passes in progress (currentGids)

export function mount(el) {
  root = el;
  root.classList.add("frames-view");
  root.innerHTML = `
    <div class="view-head"><h2>Checkpoint frames</h2><span class="frames-count"></span></div>
    <div class="frames-scroll">
      <div class="hooks-stack"></div>
      <div class="frame-list"></div>
    </div>`;
  stackEl = root.querySelector(".hooks-stack");
  listEl = root.querySelector(".frame-list");
  countEl = root.querySelector(".frames-count");
  listEl.addEventListener("click", onSummaryClick);
}

// Opening and closing is ours: a click on a summary records the user's choice and renders. So is
// the gid table's "show all" (Note [Gid rows shown]).
function onSummaryClick(e) {
  const toggle = e.target.closest(".gid-toggle");
  if (toggle) {
    const f = toggle.closest(".frame-card").dataset.frame;
    allPasses.set(f, toggle.getAttribute("aria-expanded") !== "true");
    if (cards.has(f) && last.state) renderCard(last.state, f, last.changed, hotLast, Object.keys(last.state.frames).length);
    return;
  }
  const summary = e.target.closest("summary");
  if (!summary) return;
  e.preventDefault();
  const f = summary.parentElement.dataset.frame;
  const card = cards.get(f);
  if (!card || !last.state) return;
  userOpen.set(f, !card.el.open);
  renderCard(last.state, f, last.changed, hotLast, Object.keys(last.state.frames).length);
}

// --- the hooks stack and what is in progress ---------------------------------------------------

function renderStack(state, changed) {
  const hooks = state.hooks || [];
  const items = [];
  for (let i = hooks.length - 1; i >= 0; i--) {
    const h = hooks[i];
    const of = h.frame !== null && h.frame !== undefined ? ` of <b>${esc(frameName(state, h.frame))}</b>` : "";
    const gid = h.hooks === "recomputation" && h.gid !== null && h.gid !== undefined ? ` for ${esc(gidLabel(h.gid))}` : "";
    const mark = changed.isChanged(`hooks/${i}`) ? " changed" : "";
    items.push(`<li class="hook hook-${esc(h.hooks)}${mark}">${esc(h.hooks)} hooks${of}${gid}</li>`);
  }
  const parts = [
    `<div class="stack-block"><h3>saved-tensor hooks <span class="hint">innermost on top</span></h3>` +
      (items.length ? `<ol class="hooks">${items.join("")}</ol>` : `<p class="empty">empty: saved tensors are kept as they are</p>`) +
      `</div>`,
  ];
  const progress = [];
  for (const b of state.backward || []) {
    progress.push(`<li class="prog prog-backward">${esc(b.api || "backward")}() running as ${esc(gidLabel(b.gid))}</li>`);
  }
  for (const r of state.recomputing || []) {
    const trig = r.trigger ? ` to unpack ${esc(frameName(state, r.trigger.frame))}[${esc(r.trigger.index)}]` : "";
    progress.push(`<li class="prog prog-recompute">recomputing <b>${esc(frameName(state, r.frame))}</b> for ${esc(gidLabel(r.gid))}${trig}</li>`);
  }
  for (const u of state.unpacking || []) {
    progress.push(`<li class="prog prog-unpack">unpacking <b>${esc(frameName(state, u.frame))}[${esc(u.index)}]</b> for ${esc(gidLabel(u.gid))}</li>`);
  }
  const ex = state.executing || [];
  if (ex.length) {
    progress.push(`<li class="prog prog-exec">running ${ex.map((n) => `<b>${esc(nodeName(state, n))}</b>`).join(" → ")}</li>`);
  }
  if (progress.length) parts.push(`<div class="stack-block"><h3>in progress</h3><ol class="progress">${progress.join("")}</ol></div>`);
  const html = parts.join("");
  if (html !== lastStack) {
    stackEl.innerHTML = html;
    lastStack = html;
  }
}

// --- one frame ---------------------------------------------------------------------------------

// "g0–g14" for runs of consecutive numeric gids.
function gidList(keys) {
  const nums = keys.filter((k) => /^\d+$/.test(k)).map(Number).sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < nums.length; i++) {
    let j = i;
    while (j + 1 < nums.length && nums[j + 1] === nums[j] + 1) j++;
    out.push(j > i + 1 ? `g${nums[i]}–g${nums[j]}` : j === i + 1 ? `g${nums[i]}, g${nums[j]}` : `g${nums[i]}`);
    i = j;
  }
  return [...out, ...keys.filter((k) => !/^\d+$/.test(k)).map(gidLabel)].join(", ");
}

function handlesHTML(handles) {
  const by = new Map();
  for (const [g, s] of Object.entries(handles || {})) {
    if (!by.has(s)) by.set(s, []);
    by.get(s).push(g);
  }
  if (!by.size) return '<span class="dim">–</span>';
  // "set" first: a handle still keying a tensor in recomputed[gid] is the news.
  return [...by.entries()]
    .sort(([a], [b]) => (a === "set" ? -1 : b === "set" ? 1 : a.localeCompare(b)))
    .map(([s, gids]) => `<span class="handle handle-${esc(s)}" title="holder.handles[gid]">${esc(gidList(gids))}: ${esc(s)}</span>`)
    .join(" ");
}

function holderRowHTML(state, f, h, changed) {
  const path = `frames/${f}/holders/${h.index}`;
  const what = h.slot ? `<code>${esc(h.slot)}</code> of ${esc(nodeName(state, h.node))}` : "–";
  const unpacking = (state.unpacking || []).some((u) => String(u.frame) === f && u.index === h.index);
  const cls =
    `holder-row ${h.alive ? "alive" : "dead"}${unpacking ? " unpacking" : ""}` + (changed.isChanged(path) ? " changed" : "");
  return (
    `<tr class="${cls}" data-holder="${esc(h.holder)}" data-index="${esc(h.index)}">` +
    `<td class="idx">[${esc(h.index)}]</td>` +
    `<td><span class="life">${h.alive ? "alive" : "dead"}</span></td>` +
    `<td>${what} <span class="dim">${esc(shape(h.shape))} ${esc(bytes(h.nbytes))}</span></td>` +
    `<td>${handlesHTML(h.handles)}</td></tr>`
  );
}

const HOLDERS_HEAD =
  `<colgroup><col class="c-idx"><col class="c-life"><col class="c-what"><col class="c-handles"></colgroup>` +
  `<thead><tr><th colspan="2" title="frame.weak_holders"><code class="th">weak_<wbr>holders</code></th><th>saved for</th><th><code class="th">handles</code></th></tr></thead>`;

// One <tr> per holder, each replaced only when its HTML changed.
function renderHolders(card, state, f, frame, changed) {
  const holders = Object.values(frame.holders || {}).sort((a, b) => a.index - b.index);
  if (!holders.length) {
    const why = frame.alive ? "no holders yet: nothing saved under this checkpoint" : "no holders: nothing was saved under this checkpoint";
    setHTML(card, "holders", card.holders, `<p class="empty">${why}</p>`);
    card.rows = null;
    return;
  }
  if (!card.rows) {
    card.holders.innerHTML = `<table class="holders">${HOLDERS_HEAD}<tbody></tbody></table>`;
    decorate(card.holders.querySelector("thead"));
    card.cache.holders = null;
    card.rows = { body: card.holders.querySelector("tbody"), html: [] };
  }
  const { body, html } = card.rows;
  const trs = body.rows;
  for (let i = 0; i < holders.length; i++) {
    const row = holderRowHTML(state, f, holders[i], changed);
    if (html[i] === row) continue;
    html[i] = row;
    const tmp = document.createElement("tbody");
    tmp.innerHTML = row;
    if (i < trs.length) trs[i].replaceWith(tmp.firstChild);
    else body.appendChild(tmp.firstChild);
  }
  while (trs.length > holders.length) trs[trs.length - 1].remove();
  html.length = holders.length;
}

// The gids of the passes in progress: the current event's (its hook_gid, else its gid, as the
// reducer keys the dictionaries: engine/trace/state.py) and those of the backward calls,
// recomputations and unpacks running.
function currentGids(state, event) {
  const cur = new Set();
  const g = event ? (event.hook_gid ?? event.gid) : null;
  if (g !== null && g !== undefined) cur.add(String(g));
  for (const list of [state.backward, state.recomputing, state.unpacking]) {
    for (const x of list || []) if (x.gid !== null && x.gid !== undefined) cur.add(String(x.gid));
  }
  return cur;
}

// The frame's dictionaries keyed by gid, one row per gid shown (Note [Gid rows shown]): the rows'
// HTML, with a row standing for each run of rows not shown, and how many are not; null when it has
// none.
//
// Note [Gid rows cached]
// ~~~~~~~~~~~~~~~~~~~~~~
// A long run's frame has a row per backward pass (160 at 1M events), and a card being rendered
// rebuilt every row's HTML at each step, although a step changes one row or two. A row's HTML is
// a function of its four values, the number of holders and which of its cells are marked, and,
// when recomputed[gid] holds tensors, of their names (the state's tensors): so a row naming no
// tensor is kept in `cache` (gid -> those inputs and the HTML) and rebuilt only when one of them
// differs (early_stopped[gid], an object, is compared by identity: copy on write gives a changed
// value a new object, so at worst an equal one rebuilds the row). A row naming tensors is always
// rebuilt.
//
// Note [Gid rows shown]
// ~~~~~~~~~~~~~~~~~~~~~
// At the end of a 1M-event run, frame 0's card opens and closes as consecutive events name it,
// and laying out its 160 gid rows each time was most of those steps (about 15 ms). What a learner
// follows is the pass running now and the ones just before, so a table of more than FEW_PASSES
// rows shows the rows of the current passes (currentGids), the last LAST_PASSES rows, and any row
// the current event changed (a change is never hidden), in the table's order; a row "⋯ g4–g155:
// 152 passes hidden" stands for each run of rows left out, and a line under the table says how
// many are hidden, with a button to show them all (remembered per frame id while the page
// lives, `allPasses`). A table of FEW_PASSES rows or fewer is shown whole, as it always was.
// Since the rows shown depend on the passes in progress, an open card with a long table is
// rendered again when those change, even if nothing of its frame did (render).
function gidRows(state, f, frame, changed, cache, current, all) {
  const gids = [
    ...new Set([
      ...Object.keys(frame.recomputed || {}),
      ...Object.keys(frame.recomp_counter || {}),
      ...Object.keys(frame.is_recomputed || {}),
      ...Object.keys(frame.early_stopped || {}),
    ]),
  ];
  if (!gids.length) return null;
  const total = Object.keys(frame.holders || {}).length;
  const here = changed.isChanged(`frames/${f}`); // no cell is marked when nothing under the frame changed
  // A cell is marked when a change is at or under its path, or at or above its dictionary
  // (isChanged, with the part above the cell looked up once per dictionary, and the cells of a
  // dictionary nothing under which changed not looked up at all).
  const DICTS = ["recomputed", "recomp_counter", "is_recomputed", "early_stopped"];
  const whole = DICTS.map((d) => here && changed.isReplaced(`frames/${f}/${d}`));
  const under = DICTS.map((d) => here && changed.isAtOrUnder(`frames/${f}/${d}`));
  const own = (d, g) => under[d] && changed.isAtOrUnder(`frames/${f}/${DICTS[d]}/${g}`);
  const marked = (d, g) => whole[d] || own(d, g);
  const cell = (mark, text) => `<td${mark ? ' class="changed"' : ""}>${text}</td>`;
  const rowHTML = (g) => {
    const rec = (frame.recomputed || {})[g];
    const cnt = (frame.recomp_counter || {})[g];
    const isr = (frame.is_recomputed || {})[g];
    const es = (frame.early_stopped || {})[g];
    const marks = (marked(0, g) ? 1 : 0) | (marked(1, g) ? 2 : 0) | (marked(2, g) ? 4 : 0) | (marked(3, g) ? 8 : 0);
    // What recomputed[gid] shows without naming a tensor: nothing ("u") or an empty dict ("e").
    const recKey = rec === undefined ? "u" : Object.keys(rec).length === 0 ? "e" : null;
    const kept = cache.get(g);
    if (recKey !== null && kept && kept.recKey === recKey && kept.cnt === cnt && kept.isr === isr && kept.es === es && kept.total === total && kept.marks === marks) {
      return kept.html;
    }
    const recText =
      rec === undefined ? '<span class="dim">–</span>' : `{${Object.entries(rec).map(([i, t]) => `${esc(i)}: ${esc(tensorName(state, t))}`).join(", ")}}`;
    const html =
      `<tr><td class="gid">${esc(gidLabel(g))}</td>` +
      cell(marks & 1, recText) +
      cell(marks & 2, cnt === undefined ? "–" : `${esc(cnt)}<span class="dim">/${total}</span>`) +
      cell(marks & 4, isr === undefined ? "–" : pyBool(isr)) +
      cell(marks & 8, es ? `<span class="early" title="early stop fired after ${esc(es.count)} of ${esc(es.total)} holders were refilled">after ${esc(es.count)}/${esc(es.total)}</span>` : "–") +
      `</tr>`;
    if (recKey !== null) cache.set(g, { recKey, cnt, isr, es, total, marks, html });
    else cache.delete(g);
    return html;
  };
  if (all || gids.length <= FEW_PASSES) return { rows: gids.map(rowHTML), n: gids.length, hidden: 0 };
  const shown = (g, i) => i >= gids.length - LAST_PASSES || current.has(g) || [0, 1, 2, 3].some((d) => own(d, g));
  const rows = [];
  let hidden = 0;
  for (let i = 0; i < gids.length; i++) {
    if (shown(gids[i], i)) {
      rows.push(rowHTML(gids[i]));
      continue;
    }
    let j = i;
    while (j + 1 < gids.length && !shown(gids[j + 1], j + 1)) j++;
    const which = j > i ? `${gidLabel(gids[i])}–${gidLabel(gids[j])}` : gidLabel(gids[i]);
    const count = j - i + 1;
    rows.push(`<tr class="gid-gap"><td colspan="5">⋯ ${esc(which)}: ${count} ${count === 1 ? "pass" : "passes"} hidden</td></tr>`);
    hidden += count;
    i = j;
  }
  return { rows, n: gids.length, hidden };
}

// Headers are code spans, so each explains itself (glossary.js).
const GIDS_HEAD =
  `<table class="gids"><thead><tr><th><code class="th">gid</code></th><th><code class="th">recomputed<wbr>[gid]</code></th>` +
  `<th title="recomp_counter[gid] / len(weak_holders)"><code class="th">recomp_<wbr>counter</code></th>` +
  `<th><code class="th">is_<wbr>recomputed</code></th><th>early stop</th></tr></thead><tbody>`;

// Note [Gid rows kept]
// ~~~~~~~~~~~~~~~~~~~~
// A frame has one gid row per backward pass that recomputed it, so a long run's open card has
// hundreds of them, and a step changes one cell or two (recomp_counter[gid] counting up).
// Rebuilding the table, and looking for glossary terms in all of its text, then cost what the
// run had done so far, at every such step. So only the rows whose HTML changed are replaced, as
// for the holder rows. The table looks exactly as if rebuilt, glossary terms included: a term
// is marked at its first occurrence in the table (decorate in glossary.js), and the header holds
// the terms every table has; a replaced row is decorated on its own first, and if that finds a
// term (a tensor named like one, say), or a row already holds one, the table is rebuilt and
// decorated whole instead, as before.
function renderGids(card, state, f, frame, changed, current) {
  const all = allPasses.get(f) === true;
  const got = gidRows(state, f, frame, changed, card.gidCache, current, all);
  renderMore(card, got ? got.n : 0, got ? got.hidden : 0, all);
  if (got === null) {
    setHTML(card, "gids", card.gids, `<p class="empty">not recomputed yet</p>`);
    card.gidRows = null;
    return;
  }
  const rows = got.rows;
  const html = `${GIDS_HEAD}${rows.join("")}</tbody></table>`;
  if (card.cache.gids === html) return;
  const kept = card.gidRows;
  if (kept && kept.html.length <= rows.length && !kept.body.querySelector(".term")) {
    const trs = kept.body.rows;
    let plain = true;
    for (let i = 0; i < rows.length && plain; i++) {
      if (kept.html[i] === rows[i]) continue;
      const tmp = document.createElement("tbody");
      tmp.innerHTML = rows[i];
      decorate(tmp);
      plain = !tmp.querySelector(".term");
      if (i < trs.length) trs[i].replaceWith(tmp.firstChild);
      else kept.body.appendChild(tmp.firstChild);
      kept.html[i] = rows[i];
    }
    if (plain) {
      card.cache.gids = html;
      return;
    }
  }
  setHTML(card, "gids", card.gids, html);
  card.gidRows = { body: card.gids.querySelector("tbody"), html: rows.slice() };
}

// The line under a long gid table: how many rows are hidden, and the button that shows them all
// or hides them again (Note [Gid rows shown]). Its elements are made once per card, so the button
// keeps the keyboard focus when pressed; only what differs is written.
function renderMore(card, n, hidden, all) {
  // Hidden, it is emptied: a card looks the same however it was reached (tests/e2e/test_step_cost.py).
  const many = n > FEW_PASSES;
  if (card.more.hidden === many) card.more.hidden = !many;
  const text = !many ? "" : all ? `all ${n} passes shown` : `${hidden} of ${n} passes hidden`;
  const label = !many ? "" : all ? `Show only the current and last ${LAST_PASSES} passes` : `Show all ${n} passes`;
  if (card.moreText.textContent !== text) card.moreText.textContent = text;
  if (card.moreButton.textContent !== label) card.moreButton.textContent = label;
  const expanded = String(many && all);
  if (card.moreButton.getAttribute("aria-expanded") !== expanded) card.moreButton.setAttribute("aria-expanded", expanded);
}

function frameFacts(state, frame) {
  const runs = frame.runs || {};
  const createdIn =
    frame.created_in && typeof frame.created_in === "object"
      ? `the recomputation of ${esc(frameName(state, frame.created_in.recompute))}`
      : esc(frame.created_in || "forward");
  const inputs = (frame.inputs || []).map((t) => esc(tensorName(state, t))).join(", ") || "–";
  const error = frame.error ? `<div class="frame-error"><b>${esc(frame.error.type)}</b>: ${esc(frame.error.message)}</div>` : "";
  return (
    `<div class="fmeta"><span>created in ${createdIn}</span><span>early_stop=${pyBool(frame.early_stop)}</span>` +
    `<span>runs: forward ${esc(runs.forward || 0)}, recompute ${esc(runs.recompute || 0)}</span>` +
    (frame.outcome ? `<span>last run: ${esc(frame.outcome)}</span>` : "") +
    `</div><div class="fmeta"><span>inputs: ${inputs}</span></div>${error}`
  );
}

function summaryHTML(state, frame) {
  const running = frame.running || [];
  const parent = frame.parent !== null && frame.parent !== undefined ? `in ${esc(frameName(state, frame.parent))}` : "";
  const nh = Object.keys(frame.holders || {}).length;
  return (
    `<span class="ftitle">checkpoint <b>${esc(frame.name)}</b></span><span class="fparent">${parent}</span>` +
    `<span class="badge ${frame.alive ? "alive" : "dead"}">${frame.alive ? "alive" : "garbage-collected"}</span>` +
    (running.length ? `<span class="badge running-${esc(running[running.length - 1])}">running: ${esc(running.join(" › "))}</span>` : "") +
    `<span class="fcount">${nh} holder${nh === 1 ? "" : "s"}</span>`
  );
}

function setHTML(card, key, el, html) {
  if (card.cache[key] === html) return;
  card.cache[key] = html;
  el.innerHTML = html;
  decorate(el); // terms (recomputed[g0], is_recomputed, ...) explain themselves; only on a rebuild
}

// Note [Cards kept to put back]
// A jump back into the first steps of a run drops the frames made after it from the state (52 of
// them at 100k events), and the jump forward again brings them back. Their cards are taken out of
// the document as before, each on its own (a card nested in another is not carried along with
// it), but kept, and put back when their frame returns: a frame id names the same frame at every
// step (same name, same parent), and renderCard then brings the card up to date through the caches
// of its parts as for any step, instead of parsing and decorating its HTML again (the frames view's
// JavaScript on a jump out of the first 4,000 steps at 100k: p50 2.5 -> 1.3 ms, p95 4.6 -> 2.4).
// Hiding the cards (`hidden`) instead of taking them out made the style pass of the jump back
// slower (p50 8.7 -> 12.0 ms). A card goes back before the first sibling of a higher frame id, so
// the cards stay in frame order, as when they were made.
function putBack(state, f) {
  const card = gone.get(f);
  gone.delete(f);
  cards.set(f, card);
  place(state, f, card.wrap);
  return card;
}

function drop(f) {
  const card = cards.get(f);
  cards.delete(f);
  card.wrap.remove();
  gone.set(f, card);
}

function place(state, f, wrap) {
  const frame = state.frames[f];
  const parent = frame.parent !== null && frame.parent !== undefined ? cards.get(String(frame.parent)) : null;
  const container = parent ? parent.children : listEl;
  const idOf = (child) => Number(child.firstElementChild.dataset.frame);
  let next = null;
  const lastChild = container.lastElementChild;
  if (lastChild && idOf(lastChild) > Number(f)) {
    for (const child of container.children) {
      if (idOf(child) > Number(f)) {
        next = child;
        break;
      }
    }
  }
  container.insertBefore(wrap, next);
}

function makeCard(state, f) {
  if (gone.has(f)) return putBack(state, f);
  const frame = state.frames[f];
  const wrap = document.createElement("div");
  wrap.className = "frame-node";
  wrap.innerHTML =
    `<details class="frame-card" data-frame="${esc(f)}"><summary></summary>` +
    `<div class="frame-body"><div class="frame-facts"></div><div class="frame-holders"></div>` +
    `<div class="frame-gids" id="frame-gids-${esc(f)}"></div>` +
    `<div class="gid-more" hidden><span class="gid-more-text"></span>` +
    `<button type="button" class="gid-toggle" aria-expanded="false" aria-controls="frame-gids-${esc(f)}"></button></div></div>` +
    `</details><div class="frame-children"></div>`;
  const part = (sel) => wrap.querySelector(sel);
  const card = {
    wrap,
    el: part("details"),
    summary: part("summary"),
    facts: part(".frame-facts"),
    holders: part(".frame-holders"),
    gids: part(".frame-gids"),
    more: part(".gid-more"),
    moreText: part(".gid-more-text"),
    moreButton: part(".gid-toggle"),
    children: part(".frame-children"),
    cache: {},
    rows: null,
    gidRows: null,
    gidCache: new Map(), // Note [Gid rows cached]
    cls: "",
    stale: true,
  };
  cards.set(f, card);
  place(state, f, wrap);
  return card;
}

function renderCard(state, f, changed, hot, nFrames) {
  const frame = state.frames[f];
  const card = cards.get(f) || makeCard(state, f);
  const running = frame.running || [];
  // The card as a whole is marked when the frame is new; otherwise the parts that changed are.
  const isChanged = changed.isReplaced(`frames/${f}`);
  const cls =
    `frame-card ${frame.alive ? "alive" : "dead"}` +
    (running.length ? ` running running-${running[running.length - 1]}` : "") +
    (hot.has(f) ? " hot" : "") +
    (isChanged ? " changed" : "");
  if (card.cls !== cls) card.el.className = card.cls = cls;
  const summaryChanged = !isChanged && ["alive", "running"].some((k) => changed.isChanged(`frames/${f}/${k}`));
  card.summary.classList.toggle("changed", summaryChanged);
  setHTML(card, "summary", card.summary, summaryHTML(state, frame));
  const auto = nFrames <= MANY ? frame.alive || nFrames <= 6 || hot.has(f) : hot.has(f);
  const open = userOpen.has(f) ? userOpen.get(f) : auto;
  if (card.el.open !== open) card.el.open = open;
  if (open) {
    setHTML(card, "facts", card.facts, frameFacts(state, frame));
    renderHolders(card, state, f, frame, changed);
    renderGids(card, state, f, frame, changed, currentLast);
    card.stale = false;
  } else {
    card.stale = true; // rendered when opened
  }
  return isChanged || summaryChanged || (open && card.el.querySelector(".changed") !== null);
}

// --- render ------------------------------------------------------------------------------------

// The frames whose card may have changed, from the change lists applied or undone; null when every
// card must be checked.
function dirtyFrames(touched) {
  if (!touched) return null;
  const dirty = new Set();
  let n = 0;
  for (const changes of touched) {
    n += changes.length;
    if (n > 4000) return null;
    for (const [, path, old, neu] of changes) {
      if (path[0] === "frames") dirty.add(String(path[1]));
      else if (path[0] === "tensors" || path[0] === "nodes") dirty.add("*names");
      else if (path[0] === "unpacking") {
        // A holder starts or stops being unpacked: its frame shows it.
        const entry = path.length === 2 ? old || neu : null;
        if (!entry) return null;
        dirty.add(String(entry.frame));
      }
    }
  }
  return dirty;
}

// Frames a learner wants open now: running, recomputing or being unpacked, named by the event.
function hotFrames(state, event) {
  const hot = new Set();
  const frames = state.frames || {};
  for (const [f, fr] of Object.entries(frames)) if ((fr.running || []).length) hot.add(f);
  for (const r of state.recomputing || []) hot.add(String(r.frame));
  for (const u of state.unpacking || []) hot.add(String(u.frame));
  if (event && event.frame !== undefined && event.frame !== null) hot.add(String(event.frame));
  return hot;
}

export function render(state, ctx) {
  const frames = state.frames || {};
  const changed = changedPaths(ctx.eventChanges);
  last = { state, changed };
  renderStack(state, changed);
  const ids = Object.keys(frames).sort((a, b) => Number(a) - Number(b));
  const alive = ids.filter((f) => frames[f].alive).length;
  countEl.textContent = ids.length ? `${alive} alive of ${ids.length}` : "";
  if (!ids.length) {
    for (const f of [...cards.keys()]) drop(f);
    flagged = new Set();
    listEl.innerHTML = `<p class="empty">No checkpoint frame yet. A frame appears when a function runs under
      <code>checkpoint(fn, ..., use_reentrant=False)</code>.</p>`;
    return;
  }
  if (!cards.size) listEl.innerHTML = "";

  const hot = hotFrames(state, ctx.event);
  const current = currentGids(state, ctx.event);
  // A card whose gid table picks its rows by the current passes must be rendered when they change.
  const passesMoved = [...current].join() !== [...currentLast].join();
  currentLast = current;
  let dirty = ctx.full ? null : dirtyFrames(ctx.touched);
  // Cards show tensor and node names: refresh them all when those changed, unless there are many
  // (a name going from "tensor 3" to "x" is not worth a slow step).
  if (dirty && dirty.has("*names")) {
    dirty.delete("*names");
    if (cards.size <= MANY) dirty = null;
  }
  for (const f of [...cards.keys()]) {
    if (!(f in frames)) drop(f); // Note [Cards kept to put back]
  }
  const marked = new Set();
  for (const f of ids) {
    const card = cards.get(f);
    const need =
      !card ||
      dirty === null ||
      dirty.has(f) ||
      flagged.has(f) ||
      hot.has(f) !== hotLast.has(f) ||
      (passesMoved && card.el.open && !card.more.hidden && allPasses.get(f) !== true);
    if (need && renderCard(state, f, changed, hot, ids.length)) marked.add(f);
  }
  flagged = marked;
  hotLast = hot;
  // Bring what the current event changed into view (after the frame is laid out).
  if (!ctx.playing || ctx.single) {
    const f = marked.values().next().value;
    const card = f !== undefined ? cards.get(f) : null;
    if (card) ctx.defer("frames", () => keepVisible(card.el.querySelector(".changed") || card.el));
  }
}

function keepVisible(el) {
  const box = root.querySelector(".frames-scroll");
  const r = el.getBoundingClientRect();
  const b = box.getBoundingClientRect();
  if (r.top < b.top || r.top > b.bottom - 24) box.scrollTop += r.top - b.top - 40;
}
