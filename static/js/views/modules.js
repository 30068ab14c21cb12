// Memory by module: the `modules` rows of the server's memory report (GET /api/runs/{id}/memory;
// `module_breakdown` in engine/trace/memory.py, Note [Module paths] in engine/trace/_core.py) as
// a tree by path — `model` ▸ `transformer` ▸ `h` ▸ `3` ▸ `attn` ▸ `c_attn` — each node with the
// sums over its subtree: bytes kept as tensors for the backward, of those alive at the peak of
// what is held for the backward, bytes a checkpoint's holders stood in for, bytes recomputations
// made again. A module with saves of its own and submodules gets a child "(its own ops)", so a
// node's figures are always the sum of its children's. Nothing is computed but these sums.
//
// "Go" (or Enter) jumps to the module's first save (event seq `first` is at step first + 1; an
// inner node's is the earliest of its subtree): on a long trace, the way into one block's forward.
// The tree is an ARIA tree (arrow keys move, expand and collapse; Home / End); a step marks the
// modules whose nodes the step's events made or saved for. The memory panel's "Modules" tab holds
// it; `open()` shows it larger, in a dialog (Esc closes it; focus goes back where it was).

import { bytes, captionHTML, esc } from "../format.js";
import { mountModal } from "../modal.js";

// The figures of a node, in column order: the row's field, the column's title and what it means.
const FIGURES = [
  { key: "saved", head: "kept", short: "kept", help: "bytes its ops saved for the backward as tensors, kept as they are" },
  { key: "held_at_peak", head: "at peak", short: "peak", help: "of the kept bytes, those still held at the peak of what is held for the backward" },
  { key: "holders", head: "holders", short: "holders", help: "bytes a checkpoint's holders stood in for: not held in the forward, recomputed in the backward" },
  { key: "recomputed", head: "recomputed", short: "recomp.", help: "bytes the backward's recomputations made again (a tensor recomputed twice counts twice)" },
];
// A list longer than this is shown collapsed (the twelve blocks of a GPT's `h`).
const LONG_LIST = 6;
const OUTSIDE = "(outside any module)";

let root = null;
let body = null; // what moves into the dialog
let treeEl = null;
let onPick = null;
let roots = []; // the tree's top level
let byModule = new Map(); // module id (null: outside any module) -> its node
let moduleAtSeq = new Map(); // event seq -> module ids its ledger entries belong to
let active = null; // the node whose item takes the focus (roving tabindex)
let marked = [];
let dialog = null;
let dialogBody = null;
let dialogNow = null;
let returnTo = null;
let now = { step: 0, caption: "" }; // the step shown, for the dialog's "now at" line

export function mount(el, options) {
  root = el;
  onPick = options.onPick;
  root.classList.add("modules-view");
  root.innerHTML = `<div class="mod-body"><p class="empty">The memory by module is computed once the run has finished.</p></div>
    <p class="mod-away" hidden>The modules are open in a larger window. <button type="button" class="mod-back">Close it</button></p>`;
  body = root.querySelector(".mod-body");
  root.querySelector(".mod-back").addEventListener("click", close);
  body.addEventListener("click", onClick);
  body.addEventListener("keydown", onKey);
  mountDialog();
}

// --- the tree ------------------------------------------------------------------------------------

// `model.transformer.h.3` -> ["model", "transformer", "h", "3"]; `blocks[2].0` -> ["blocks", "[2]", "0"].
function splitPath(path) {
  return path.match(/\[[^\]]*\]|[^.[\]]+/g) || [path];
}

function joinPath(segs) {
  return segs.map((s, i) => (i === 0 || s.startsWith("[") ? s : `.${s}`)).join("");
}

function newNode(name, path, depth) {
  return { name, path, depth, row: null, own: false, children: [], parent: null, open: false, el: null, sums: null, first: Infinity };
}

function merged(a, b) {
  const out = { ...a, first: Math.min(a.first, b.first), type: a.type === b.type ? a.type : "" };
  for (const k of [...FIGURES.map((f) => f.key), "entries"]) out[k] = (a[k] || 0) + (b[k] || 0);
  return out;
}

function build(rows) {
  const top = [];
  const index = new Map(); // path -> node
  byModule = new Map();
  for (const row of rows) {
    if (row.module === null || row.module === undefined) {
      const node = newNode(OUTSIDE, OUTSIDE, 0);
      node.row = row;
      node.outside = true;
      top.push(node);
      byModule.set(null, node);
      continue;
    }
    const segs = splitPath(row.path);
    let list = top;
    let parent = null;
    for (let i = 0; i < segs.length; i++) {
      const path = joinPath(segs.slice(0, i + 1));
      let node = index.get(path);
      if (!node) {
        node = newNode(segs[i], path, i);
        node.parent = parent;
        index.set(path, node);
        list.push(node);
      }
      parent = node;
      list = node.children;
    }
    // Two modules at one path (a module made again under the same name): one node, added up.
    parent.row = parent.row ? merged(parent.row, row) : row;
    byModule.set(row.module, parent);
  }
  // A module with saves of its own and submodules: its own saves are a child of their own, so
  // that a node's figures add up to its children's.
  const split = (node) => {
    node.children.forEach(split);
    if (node.row && node.children.length) {
      const own = newNode("(its own ops)", node.path, node.depth + 1);
      own.row = node.row;
      own.own = true;
      own.parent = node;
      node.children.push(own);
      for (const [id, n] of byModule) if (n === node) byModule.set(id, own);
      node.type = node.row.type;
      node.row = null;
    }
  };
  top.forEach(split);
  const sum = (node) => {
    node.children.forEach(sum);
    const parts = node.row ? [node.row] : node.children.map((c) => c.sums);
    node.sums = Object.fromEntries(
      [...FIGURES.map((f) => f.key), "entries"].map((k) => [k, parts.reduce((t, p) => t + (p[k] || 0), 0)]),
    );
    node.first = node.row ? node.row.first : Math.min(...node.children.map((c) => c.first));
    if (node.row && !node.own) node.type = node.row.type;
    // Children in the order the forward reached them.
    node.children.sort((a, b) => a.first - b.first || a.name.localeCompare(b.name, undefined, { numeric: true }));
  };
  top.forEach(sum);
  top.sort((a, b) => Number(Boolean(a.outside)) - Number(Boolean(b.outside)) || a.first - b.first);
  return top;
}

// Open by default: every top-level module with submodules, then, from each, while only one of
// the children has children of its own, that one (model ▸ transformer ▸ h: h's twelve blocks are
// shown, collapsed). A list longer than LONG_LIST is never opened by default.
function openDefault(top) {
  for (const node of top) {
    let at = top.length <= LONG_LIST && node.children.length ? node : null;
    while (at) {
      at.open = true;
      const inner = at.children.filter((c) => c.children.length);
      at = inner.length === 1 && at.children.length <= LONG_LIST ? inner[0] : null;
    }
  }
}

// Whether a checkpoint replaced all of a node's saves (or some of them) by holders.
function checkpointed(sums) {
  if (!sums.holders) return "";
  return sums.saved ? "partly" : "all";
}

function itemLabel(node) {
  const s = node.sums;
  const what = node.own ? `${node.path}, its own ops` : node.path;
  const cp = checkpointed(s);
  return (
    `${what}${node.type && !node.own ? ` (${node.type})` : ""}: kept ${bytes(s.saved)}, ${bytes(s.held_at_peak)} of it at the peak, ` +
    `holders stood in for ${bytes(s.holders)}, recomputed ${bytes(s.recomputed)}` +
    (cp === "all" ? "; checkpointed" : cp === "partly" ? "; partly checkpointed" : "")
  );
}

function itemHTML(node, i, siblings, widest) {
  const s = node.sums;
  const inner = node.children.length > 0;
  const cp = checkpointed(s);
  // Marked when a checkpoint replaced all its saves (partly: the bar shows both kinds).
  const chip =
    cp === "all"
      ? '<span class="mod-chip" title="all its saves were replaced by a checkpoint\'s holders: nothing kept in the forward, recomputed in the backward">checkpointed</span>'
      : "";
  const count = node.children.length > LONG_LIST ? `<span class="mod-count" title="${node.children.length} submodules">(${node.children.length})</span>` : "";
  const pct = (n) => (widest ? ((100 * n) / widest).toFixed(2) : "0");
  const bar =
    `<span class="mod-bar" aria-hidden="true" title="kept ${bytes(s.saved)} (${bytes(s.held_at_peak)} at the peak) · holders ${bytes(s.holders)}">` +
    `<i class="b-peak" style="width:${pct(s.held_at_peak)}%"></i><i class="b-kept" style="width:${pct(s.saved - s.held_at_peak)}%"></i>` +
    `<i class="b-holders" style="width:${pct(s.holders)}%"></i></span>`;
  const figures = FIGURES.map(
    (f) => `<span class="mod-num${s[f.key] ? "" : " zero"}" data-key="${f.key}">${s[f.key] ? figure(s[f.key]) : "–"}</span>`,
  ).join("");
  const title = node.own
    ? `saves made by ${node.path}'s own forward, not by one of its submodules`
    : `${node.path}${node.type ? ` (${node.type})` : ""}: ${s.entries} saves`;
  const step = node.first + 1;
  const go = Number.isFinite(node.first)
    ? `<button type="button" class="mod-go" tabindex="-1" data-go="${step}" title="go to step ${step}: the first save of ${esc(node.path)}"
        aria-label="Go to step ${step}, the first save of ${esc(node.path)}">Go</button>`
    : "";
  return `
    <li role="treeitem" class="mod-item${node.own ? " own" : ""}${node.outside ? " outside" : ""}" tabindex="-1"
      aria-level="${node.depth + 1}" aria-setsize="${siblings}" aria-posinset="${i + 1}"${inner ? ` aria-expanded="${node.open}"` : ""}
      aria-label="${esc(itemLabel(node))}" data-path="${esc(node.path)}"${node.own ? ' data-own="1"' : ""}
      data-saved="${s.saved}" data-held="${s.held_at_peak}" data-holders="${s.holders}" data-recomputed="${s.recomputed}" data-first="${node.first}">
      <div class="mod-row" title="${esc(title)}">
        <span class="mod-name" style="--depth:${node.depth}"><span class="mod-caret" aria-hidden="true">${inner ? "▸" : ""}</span><span class="mod-seg">${esc(node.name)}</span>${
          node.type && !node.own ? `<span class="mod-type">${esc(node.type)}</span>` : ""
        }${count}${chip}</span>
        ${bar}${figures}${go}
      </div>
      ${inner ? `<ul role="group"${node.open ? "" : " hidden"}>${listHTML(node.children)}</ul>` : ""}
    </li>`;
}

function listHTML(nodes) {
  const widest = Math.max(0, ...nodes.map((n) => n.sums.saved + n.sums.holders));
  return nodes.map((n, i) => itemHTML(n, i, nodes.length, widest)).join("");
}

// Bytes in a narrow column: the number and its unit kept together by a narrow no-break space.
const figure = (n) => bytes(n).replace(" ", "\u202f");

function headHTML() {
  const cols = FIGURES.map(
    (f) => `<span class="mod-num mod-col-${f.key}" title="${esc(f.help)}"><span class="long">${f.head}</span><span class="short">${f.short}</span></span>`,
  ).join("");
  return `<div class="mod-row mod-head" aria-hidden="true"><span class="mod-name">module</span><span class="mod-bar-head">bytes</span>${cols}<span class="mod-go-head"></span></div>`;
}

// The server's memory report (null, with a message, when it could not be loaded).
export function load(doc, problem) {
  marked = [];
  active = null;
  roots = [];
  moduleAtSeq = new Map();
  if (!doc) {
    body.innerHTML = `<p class="empty">The memory by module could not be loaded${problem ? ` (${esc(problem)})` : ""}.</p>`;
    return;
  }
  const rows = doc.modules || [];
  if (!rows.some((r) => r.module !== null && r.module !== undefined)) {
    const outside = rows.find((r) => r.module === null || r.module === undefined);
    body.innerHTML =
      '<p class="empty mod-none">No <code>nn.Module</code> ran in this run, so there is nothing to show by module' +
      (outside ? `: all ${outside.entries} saves were made outside any module (the "Saved tensors" tab lists them).` : ".") +
      "</p>";
    return;
  }
  for (const entry of doc.ledger || []) {
    if (entry.module === null || entry.module === undefined) continue;
    if (!moduleAtSeq.has(entry.seq)) moduleAtSeq.set(entry.seq, new Set());
    moduleAtSeq.get(entry.seq).add(entry.module);
  }
  roots = build(rows);
  openDefault(roots);
  body.innerHTML = `
    <p class="mod-intro">Each module's saved tensors: <i class="swatch s-saved"></i>kept as they are
      (<i class="swatch s-held_at_peak"></i>still held at the peak), or replaced by <i class="swatch s-holders"></i>a checkpoint's
      holders and recomputed in the backward.<span class="mod-hint"> Each row adds up its submodules; Go (or Enter) jumps
      to the module's first save, in its forward.</span></p>
    <div class="mod-table">${headHTML()}<ul class="mod-tree" role="tree" aria-label="Saved tensors by module">${listHTML(roots)}</ul></div>`;
  treeEl = body.querySelector(".mod-tree");
  const items = treeEl.querySelectorAll("[role=treeitem]");
  let k = 0;
  const attach = (nodes) => {
    for (const node of nodes) {
      node.el = items[k++];
      attach(node.children);
    }
  };
  attach(roots);
  setActive(roots[0], false);
}

// --- moving around: the mouse and the keys --------------------------------------------------------

function nodeOf(el) {
  const item = el && el.closest("[role=treeitem]");
  if (!item || !treeEl || !treeEl.contains(item)) return null;
  return findNode(roots, item);
}

function findNode(nodes, item) {
  for (const node of nodes) {
    if (node.el === item) return node;
    if (node.el.contains(item)) return findNode(node.children, item);
  }
  return null;
}

function setActive(node, focus = true) {
  if (!node) return;
  if (active && active.el) active.el.tabIndex = -1;
  active = node;
  node.el.tabIndex = 0;
  if (focus) node.el.focus();
}

function setOpen(node, open) {
  if (!node.children.length || node.open === open) return;
  node.open = open;
  node.el.setAttribute("aria-expanded", String(open));
  node.el.querySelector(":scope > [role=group]").hidden = !open;
}

function visible() {
  const out = [];
  const walk = (nodes) => {
    for (const n of nodes) {
      out.push(n);
      if (n.open) walk(n.children);
    }
  };
  walk(roots);
  return out;
}

function go(node) {
  if (Number.isFinite(node.first)) onPick(node.first + 1);
}

function onClick(e) {
  const node = nodeOf(e.target);
  if (!node) return;
  if (e.target.closest(".mod-go")) {
    setActive(node);
    go(node);
    return;
  }
  if (e.target.closest(".mod-row")) {
    setActive(node);
    setOpen(node, !node.open);
  }
}

function onKey(e) {
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  const node = nodeOf(e.target);
  if (!node || e.target !== node.el) return;
  const shown = visible();
  const at = shown.indexOf(node);
  let handled = true;
  if (e.key === "ArrowDown") setActive(shown[at + 1]);
  else if (e.key === "ArrowUp") setActive(shown[at - 1]);
  else if (e.key === "Home") setActive(shown[0]);
  else if (e.key === "End") setActive(shown[shown.length - 1]);
  else if (e.key === "ArrowRight") {
    if (node.children.length && !node.open) setOpen(node, true);
    else if (node.open) setActive(node.children[0]);
  } else if (e.key === "ArrowLeft") {
    if (node.open) setOpen(node, false);
    else if (node.parent) setActive(node.parent);
  } else if (e.key === "Enter") go(node);
  else handled = false;
  if (handled) {
    // The page's keys (← → step, Home / End) wait while the tree has them.
    e.preventDefault();
    e.stopPropagation();
  }
}

// --- each step: the modules the step's events concern ---------------------------------------------

export function render(state, ctx) {
  now = { step: ctx.step, caption: ctx.caption || "" };
  if (isOpen()) showNow();
  if (!roots.length) return;
  for (const el of marked) el.classList.remove("now", "now-in");
  marked = [];
  const ids = new Set();
  for (let seq = ctx.stepStart; seq < ctx.step; seq++) {
    const ev = ctx.eventAt ? ctx.eventAt(seq) : null;
    if (ev && ev.module !== undefined && ev.module !== null) ids.add(ev.module);
    for (const m of moduleAtSeq.get(seq) || []) ids.add(m);
  }
  for (const id of ids) {
    let node = byModule.get(id);
    if (!node) continue;
    node.el.classList.add("now");
    marked.push(node.el);
    for (node = node.parent; node; node = node.parent) {
      node.el.classList.add("now-in");
      marked.push(node.el);
    }
  }
}

// --- the larger window ------------------------------------------------------------------------------

function mountDialog() {
  ({ dialog, body: dialogBody, now: dialogNow } = mountModal({
    kind: "modules",
    title: "Memory by module",
    boxClass: "ledger-box modules-box",
    bodyClass: "ledger-box-body modules-box-body",
    onClose: close,
    onTab: (e) => {
      // Keep focus inside the dialog: its close button and the tree.
      const focusable = [dialog.querySelector(".modal-close"), active && active.el].filter((x) => x && x.offsetParent);
      if (focusable.length < 2) return;
      e.preventDefault();
      focusable[focusable[0] === document.activeElement ? 1 : 0].focus();
    },
  }));
}

export function open() {
  if (isOpen()) return;
  returnTo = document.activeElement;
  dialogBody.append(body);
  root.querySelector(".mod-away").hidden = false;
  dialog.hidden = false;
  showNow();
  dialog.querySelector(".modal-close").focus();
}

function showNow() {
  dialogNow.innerHTML = now.step ? `Now at step ${now.step}: ${captionHTML(now.caption)}` : "Now at the start of the run.";
}

export function close() {
  if (!isOpen()) return;
  dialog.hidden = true;
  root.querySelector(".mod-away").hidden = true;
  root.prepend(body);
  if (returnTo && returnTo.focus && document.contains(returnTo)) returnTo.focus();
  returnTo = null;
}

export function isOpen() {
  return Boolean(dialog && !dialog.hidden);
}
