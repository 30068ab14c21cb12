// The autograd graph of the whole run, laid out once by Graphviz (the vendored viz-js) from the
// server's graph.dot, then restyled at every step by setting CSS classes on its elements, found by
// the stable ids of Note [DOT ids] (engine/trace/export_dot.py): n{node}, s{node}_{slot},
// h{holder}, t{tensor}, f{frame} (checkpoint frames, as clusters), r{frame}_{gid} (the graph each
// recomputation built). An element that does not exist yet at this step is hidden ("absent").
//
// The classes follow `dot_classes(state)` of export_dot.py: they read the reducer's state only,
// plus the ids the current event names, which are highlighted ("focus"). A step recomputes the
// classes of the elements its changes touched, not of the whole graph, which keeps a step cheap
// on a 2,000-node graph. Clicking a cluster's title (or Enter on it) collapses it into one node (a
// new layout). A group of repeated identical blocks (Note [Folded blocks] in export_dot.py) can be
// folded into one box with its count, g{k}; clicking the box unfolds it. Big graphs open folded.
//
// Note [The whole graph in view]: the graph opens fitted to its panel, and stays fitted (on a
// resize, after a collapse) until the learner zooms. The layout is computed once per collapse
// state and elements only change class between steps, so nothing moves as the run goes on: what
// does not exist yet is hidden, not left out of the layout. Zoomed in, a minimap in the corner
// shows the whole graph and where the view is; click or drag in it to move there.

import { instance } from "../../vendor/viz-js/viz.js";
import { readConfig } from "../api.js";
import { clustersOf, collapseDot, foldsOf, parseDot } from "../dot.js";
import { esc, frameName, gidLabel, nodeName, shape, tensorName } from "../format.js";
import { perFrame } from "../frame.js";

let root = null;
let canvas = null;
let info = null;
let vizPromise = null;
let parsed = null;
let collapsed = new Set();
let clusterInfo = new Map(); // cluster id -> {label, nodes, nodeIds, fold}
let folded = new Set(); // ids of the groups of repeated blocks drawn as one box
let foldInfo = new Map(); // group id -> {label, members, nodes}
let swallowed = new Map(); // id of an element or cluster inside a box -> the box's id
let moduleOf = new Map(); // n{node} -> the m{i} cluster drawn around it
let svg = null;
let natural = { w: 0, h: 0 }; // the SVG's size at zoom 1, in px
let zoom = 1;
let fitted = true; // the zoom follows the panel's size until the learner zooms
let follow = true;
let ghosts = false;
const BIG_GRAPH = 1500; // statements in the DOT above which recomputations start collapsed

// Note [Graphs too big to lay out at once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Graphviz lays the graph out on the page's own thread, in one call nothing can interrupt, and
// its time grows faster than the graph: in Chromium on the 2-core machine, 0.4 s for a chain of
// 2,000 nodes, 1.1 s for 4,000, and 36 s for the 16,000 of a 99k-event run, with the page frozen
// all that time once the run was done. So a graph whose DOT, folded and collapsed as it opens,
// is longer than LAYOUT_LIMIT lines (about a node or an edge each) is not laid out on its own:
// the panel says how big it is and offers to draw it. Every other view works without it.
const LAYOUT_LIMIT = 12000;

// Per element id: {el, kind, base, cls, present, key...}; edges by endpoint id.
let els = new Map();
let edgesByEnd = new Map();
let savedOf = new Map(); // node key -> ids of its s{node}_* elements
let clustersOfFrame = new Map(); // frame key -> ids of r{frame}_* clusters and f{frame}_empty
let membersBy = new Map(); // id -> the blocks of folded groups whose classes it may change
let transient = new Set(); // ids styled by "in progress" state or the focus at the last render
let hovered = null; // the element under the mouse, described in the info box
let last = { state: null, ctx: null };
let minimap = null; // {root, canvas, view, boxes: [{id, x, y, w, h, cluster}] as fractions of the graph}

// --- setup -------------------------------------------------------------------------------------

export function mount(el) {
  root = el;
  root.classList.add("graph-view");
  root.innerHTML = `
    <div class="view-head">
      <h2>Autograd graph</h2>
      <div class="graph-tools">
        <button type="button" data-act="fit" title="Fit the whole graph">Fit</button>
        <button type="button" data-act="out" title="Zoom out (Ctrl+wheel)">−</button>
        <button type="button" data-act="in" title="Zoom in (Ctrl+wheel)">+</button>
        <label title="Scroll the graph to what the current event is about"><input type="checkbox" data-act="follow" checked> follow</label>
        <label title="Show elements that do not exist yet, faintly"><input type="checkbox" data-act="ghosts"> future</label>
        <button type="button" data-act="collapse" title="Collapse every checkpoint frame and recomputation into one box each">Collapse</button>
        <button type="button" data-act="expand" title="Expand every cluster and unfold every group of repeated blocks">Expand</button>
        <button type="button" data-act="fold" hidden title="Draw each run of identical blocks (a model's layers) as one box with its count">Fold</button>
        <button type="button" data-act="svg" title="Download the graph as it is at this step, as an SVG file">SVG</button>
      </div>
    </div>
    <details class="graph-legend">
      <summary title="What each colour and line style means (the same colours as everywhere in the viewer)">Legend</summary>
      <dl>
        <dt><span class="lg lg-created"></span>created</dt><dd>a backward node the forward made; backward has not run it yet</dd>
        <dt><span class="lg lg-running"></span>executing</dt><dd>backward is running this node right now</dd>
        <dt><span class="lg lg-executed"></span>executed</dt><dd>backward has run it and passed gradients on</dd>
        <dt><span class="lg lg-released"></span>saved released</dt><dd>it ran, and what it saved was freed (no <code>retain_graph</code>)</dd>
        <dt><span class="lg lg-freed"></span>freed</dt><dd>the node itself is gone: nothing refers to it any more</dd>
        <dt><span class="lg lg-leaf"></span>leaf</dt><dd>a tensor you made with <code>requires_grad=True</code>: its gradient lands in <code>.grad</code></dd>
        <dt><span class="lg lg-saved"></span>saved tensor</dt><dd>a tensor a node keeps for its backward, as it is</dd>
        <dt><span class="lg lg-holder"></span>holder</dt><dd>what a checkpoint saves instead of a tensor: an empty box, filled by recomputing</dd>
        <dt><span class="lg lg-frame"></span>checkpoint frame</dt><dd>the nodes made by one <code>checkpoint(fn, ...)</code> call</dd>
        <dt><span class="lg lg-recompute"></span>recomputation</dt><dd>the nodes made by re-running that function during backward</dd>
        <dt><span class="lg lg-focus"></span>this step</dt><dd>what the current step is about (thick black outline)</dd>
        <dt><span class="lg-line lg-arrow"></span>arrow</dt><dd>input → the node that used it; backward walks the arrows in reverse</dd>
        <dt><span class="lg-line lg-dashed"></span>dashed line</dt><dd>a node and the holder it saved</dd>
        <dt><span class="lg-line lg-dotted"></span>dotted line</dt><dd>a tensor you named and the node that made it (its <code>grad_fn</code>)</dd>
      </dl>
    </details>
    <div class="graph-canvas" tabindex="-1"><p class="graph-note">The graph is drawn when the run has finished.</p></div>
    <div class="graph-minimap" hidden title="The whole graph: the frame is what the panel shows. Click or drag to move.">
      <canvas aria-hidden="true"></canvas><div class="mm-view"></div>
    </div>
    <div class="graph-info" hidden></div>`;
  canvas = root.querySelector(".graph-canvas");
  info = root.querySelector(".graph-info");
  root.querySelector(".graph-tools").addEventListener("click", onTool);
  root.querySelector(".graph-tools").addEventListener("change", onTool);
  canvas.addEventListener("click", onCanvasClick);
  canvas.addEventListener("mousemove", onHover);
  canvas.addEventListener("mouseleave", hideInfo);
  canvas.addEventListener("wheel", onWheel, { passive: false });
  canvas.addEventListener("keydown", onCanvasKey);
  canvas.addEventListener("scroll", () => requestAnimationFrame(drawView), { passive: true });
  enableDragPan();
  mountMinimap(root.querySelector(".graph-minimap"));
  new ResizeObserver(() => {
    if (svg && fitted) zoomTo(fitZoom());
  }).observe(canvas);
  // Start loading Graphviz now: it takes a moment, and the DOT arrives when the run is done.
  vizPromise = instance();
}

export function note(text) {
  if (!svg) canvas.innerHTML = `<p class="graph-note">${esc(text)}</p>`;
}

// Returns "drawn", or "deferred" (Note [Graphs too big to lay out at once]): then `onDrawn` is
// called once the learner has asked for the graph and it is drawn.
export async function load(dotText, onDrawn = () => {}) {
  parsed = parseDot(dotText);
  useBrowserFonts(parsed);
  const clusters = clustersOf(parsed);
  clusterInfo = new Map(clusters.map((c) => [c.id, c]));
  foldInfo = foldsOf(clusters);
  root.querySelector('[data-act="fold"]').hidden = foldInfo.size === 0;
  // Big graphs start with their repeated blocks folded and their recomputations collapsed: each
  // repeats a structure already drawn, and every element drawn costs time at each step (the whole
  // SVG is repainted).
  const nodes = parsed.body.length + [...clusterInfo.values()].reduce((n, c) => n + c.nodes, 0);
  const big = nodes > BIG_GRAPH;
  folded = new Set(big ? foldInfo.keys() : []);
  collapsed = new Set(
    big ? [...clusterInfo.values()].filter((c) => c.id.startsWith("r") && c.parent === null && !c.fold).map((c) => c.id) : [],
  );
  fitted = true;
  const dot = collapsedDot();
  const lines = dot.split("\n").length;
  if (lines > LAYOUT_LIMIT) {
    offerLayout(lines, dot, onDrawn);
    return "deferred";
  }
  await layout(null, dot);
  return "drawn";
}

function offerLayout(lines, dot, onDrawn) {
  canvas.innerHTML = "";
  const box = document.createElement("div");
  box.className = "graph-note graph-offer";
  const text = document.createElement("p");
  text.textContent =
    `This run's graph has about ${lines.toLocaleString("en-US")} nodes and edges. Graphviz lays a graph ` +
    "out in one go, and one this big keeps the page from responding for a while (about half a " +
    "minute for 30,000). The other panels work without it.";
  const button = document.createElement("button");
  button.type = "button";
  button.dataset.act = "draw";
  button.textContent = "Draw the graph";
  button.addEventListener("click", async () => {
    button.disabled = true;
    button.textContent = "Laying out the graph…";
    // Let the browser paint the button's new state before the layout takes the thread.
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
    await layout(null, dot);
    onDrawn();
  });
  box.append(text, button);
  canvas.appendChild(box);
}

// Graphviz sizes each box from its estimate of the text's width. For a family it does not know
// ("monospace", the default "Times") that estimate is narrower than what the browser draws, and
// labels overflow their boxes. Courier's metrics (0.6 em a character) match any monospace font
// the browser picks, and Helvetica's are close to its sans-serif (cluster titles).
function useBrowserFonts(graph) {
  const walk = (body, top) => {
    for (const s of body) {
      if (s.type === "subgraph") walk(s.body, false);
      const attrs = s.attrs || [];
      for (const a of attrs) if (a[0] === "fontname" && /mono/i.test(a[1].v)) a[1] = { v: "Courier", quoted: true };
    }
    if (top) body.unshift({ type: "attr", target: "graph", attrs: [["fontname", { v: "Helvetica", quoted: true }]] });
  };
  walk(graph.body, true);
}

// `refocus`: the id of the cluster to give the keyboard focus back to (it was toggled from it).
// The DOT as it is drawn: `parsed` with the collapsed clusters and folded groups, each element
// inside a box recorded in `swallowed`.
function collapsedDot() {
  swallowed = new Map();
  return collapseDot(parsed, collapsed, folded, swallowed);
}

// `dot`: collapsedDot(), when the caller has just made it.
async function layout(refocus = null, dot = null) {
  const viz = await vizPromise;
  const el = viz.renderSVGElement(dot || collapsedDot());
  hideInfo();
  canvas.innerHTML = "";
  canvas.appendChild(el);
  svg = el;
  natural = {
    w: parseFloat(svg.getAttribute("width")) * (4 / 3), // Graphviz sizes in pt
    h: parseFloat(svg.getAttribute("height")) * (4 / 3),
  };
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  index();
  setZoom(fitted ? fitZoom() : zoom);
  measure();
  if (last.state) render(last.state, { ...last.ctx, full: true, single: false });
  drawMinimap();
  if (refocus) {
    const g = svg.querySelector(`[id="${CSS.escape(refocus)}"]`);
    if (g) g.focus({ preventScroll: false });
  }
}

// Read every element the DOT gave an id, once per layout.
function index() {
  els = new Map();
  edgesByEnd = new Map();
  savedOf = new Map();
  clustersOfFrame = new Map();
  moduleOf = new Map();
  membersBy = new Map();
  transient = new Set();
  for (const el of svg.querySelectorAll("g.node, g.cluster, g.edge")) {
    const id = el.id;
    if (!id || id === "graph") continue;
    const base = el.getAttribute("class") || "";
    const item = { el, id, base, cls: null, present: null };
    // Graphviz writes each element's name as a <title>; hover info replaces the browser tooltip.
    const title = el.querySelector(":scope > title");
    const titleText = title ? title.textContent : "";
    if (title) title.remove();
    let m;
    if (base.split(" ")[0] === "edge") {
      const [from, to] = titleText.split(/->|--/);
      Object.assign(item, { kind: "edge", from, to });
      for (const end of [from, to]) {
        if (!edgesByEnd.has(end)) edgesByEnd.set(end, []);
        edgesByEnd.get(end).push(item);
      }
    } else if ((m = /^n(\d+)$/.exec(id))) {
      Object.assign(item, { kind: "node", key: m[1] });
    } else if ((m = /^s(\d+)_(.*)$/.exec(id))) {
      Object.assign(item, { kind: "saved", key: m[1], slot: m[2] });
      if (!savedOf.has(m[1])) savedOf.set(m[1], []);
      savedOf.get(m[1]).push(id);
    } else if ((m = /^h(\d+)$/.exec(id))) {
      Object.assign(item, { kind: "holder", key: m[1] });
    } else if ((m = /^f(\d+)$/.exec(id))) {
      Object.assign(item, { kind: "frame", key: m[1] });
    } else if ((m = /^f(\d+)_empty$/.exec(id))) {
      Object.assign(item, { kind: "empty", key: m[1] });
      addFrameCluster(m[1], id);
    } else if ((m = /^r(\d+)_(.+)$/.exec(id))) {
      Object.assign(item, { kind: "rcluster", key: m[1], gid: m[2] });
      addFrameCluster(m[1], id);
    } else if ((m = /^t(\d+)$/.exec(id))) {
      Object.assign(item, { kind: "tensor", key: m[1] });
    } else if (/^m\d+$/.test(id)) {
      Object.assign(item, { kind: "module", nodes: nodeKeysIn(clusterInfo.get(id)) });
      for (const k of item.nodes) moduleOf.set(`n${k}`, id);
    } else if (foldInfo.has(id)) {
      Object.assign(item, { kind: "fold", members: foldInfo.get(id).members.map(memberItem), made: 0, busy: new Map() });
      for (const member of item.members) indexMember(item, member);
      makeToggle(item, titleText);
    } else {
      item.kind = "other";
    }
    if (item.kind === "frame" || item.kind === "rcluster") {
      item.clusterNode = base.split(" ")[0] === "node"; // a collapsed cluster, drawn as a node
      makeToggle(item, titleText);
    }
    els.set(id, item);
  }
}

// The autograd nodes (keys) drawn inside a cluster.
function nodeKeysIn(cluster) {
  return cluster ? cluster.nodeIds.filter((id) => /^n\d+$/.test(id)).map((id) => id.slice(1)) : [];
}

// A block of a folded group, not drawn: an item for classesOf with no element.
function memberItem(id) {
  let m;
  if ((m = /^f(\d+)$/.exec(id))) return { id, kind: "frame", key: m[1] };
  if ((m = /^r(\d+)_(.+)$/.exec(id))) return { id, kind: "rcluster", key: m[1], gid: m[2] };
  return { id, kind: "module", nodes: nodeKeysIn(clusterInfo.get(id)) };
}

// Note [Folded boxes counted]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A folded group's box shows whether any of its blocks exists and which "busy" classes any of
// them has (FOLD_BUSY). Recomputing that from every block whenever the box is restyled cost the
// number of blocks per step: the recomputations of a long run fold into one group of thousands
// of blocks (8,320 at 1M events), and the box is restyled at nearly every step of a backward
// pass (a node inside it runs), so a step cost ~30 ms. Instead each block keeps what it gave
// the box (`made`, `busyKeys`) and the box keeps the counts (`made`: blocks that exist, `busy`:
// class -> blocks that have it); a step recounts only the blocks whose classes it may have
// changed, found from the ids it restyles (`membersBy`, built per layout), exactly as the drawn
// elements are: a block's classes (classesOf) read its frame (changes under frames/{k} name f{k}),
// its nodes (nodes/{k} names n{k}, and a running node is a hot id n{k}), and the hot ids
// (f{k} recomputing, r{k}_{gid} being recomputed, its own id in focus), all of which are in the
// step's targets, or in `transient` at the step after. A full restyle recounts every block.
// `audit()` checks the result against a count from scratch (tests/e2e/test_graph_view.py).
function indexMember(fold, member) {
  Object.assign(member, { fold, made: false, busyKeys: [] });
  const by = (id) => {
    if (!membersBy.has(id)) membersBy.set(id, []);
    membersBy.get(id).push(member);
  };
  by(member.id);
  if (member.kind === "rcluster") by(`f${member.key}`);
  if (member.kind === "module") for (const k of member.nodes) by(`n${k}`);
}

// Recount one block of a folded group into its box's counts; true if they changed.
function recount(member, state, hot) {
  const cls = classesOf(member, state, hot);
  const made = cls !== null;
  const busy = made ? [...new Set(cls.filter((k) => FOLD_BUSY.has(k)))] : [];
  const was = member.busyKeys;
  if (member.made === made && busy.length === was.length && busy.every((k, i) => k === was[i])) return false;
  const fold = member.fold;
  fold.made += (made ? 1 : 0) - (member.made ? 1 : 0);
  for (const k of was) fold.busy.set(k, fold.busy.get(k) - 1);
  for (const k of busy) fold.busy.set(k, (fold.busy.get(k) || 0) + 1);
  member.made = made;
  member.busyKeys = busy;
  return true;
}

// A folded group's classes from all its blocks, counted from scratch (the definition).
function foldClassesFromScratch(item, state, hot) {
  const busy = new Set();
  let any = false;
  for (const member of item.members) {
    const c = classesOf(member, state, hot);
    if (c === null) continue;
    any = true;
    for (const k of c) if (FOLD_BUSY.has(k)) busy.add(k);
  }
  if (!any) return null;
  const cls = [...FOLD_BUSY].filter((k) => busy.has(k));
  if (hot.inBox.has(item.id)) cls.push("running");
  if (hot.focus.has(item.id)) cls.push("focus");
  return cls;
}

// A cluster (or the box it collapsed into) is a button: Tab reaches it, Enter or Space toggles it.
function makeToggle(item, titleText) {
  if (item.kind === "fold") {
    const f = foldInfo.get(item.id);
    item.el.setAttribute("tabindex", "0");
    item.el.setAttribute("role", "button");
    item.el.setAttribute("aria-expanded", "false");
    item.el.setAttribute("aria-label", `${f.label}: ${f.members.length} identical blocks folded into one box, ${f.nodes} nodes: unfold`);
    return;
  }
  const c = clusterInfo.get(item.id);
  const label = (c && c.label) || titleText;
  const nodes = c ? ` (${c.nodes} nodes)` : "";
  item.el.setAttribute("tabindex", "0");
  item.el.setAttribute("role", "button");
  item.el.setAttribute("aria-expanded", String(!collapsed.has(item.id)));
  item.el.setAttribute("aria-label", collapsed.has(item.id) ? `${label}${nodes}, collapsed: expand` : `${label}: collapse into one box${nodes}`);
}

function toggle(id) {
  if (folded.has(id)) {
    // Unfolding: the keyboard focus goes to the first block, where the box was.
    folded.delete(id);
    layout(foldInfo.get(id).members[0]);
    return;
  }
  if (collapsed.has(id)) collapsed.delete(id);
  else collapsed.add(id);
  layout(id);
}

function addFrameCluster(frame, id) {
  if (!clustersOfFrame.has(frame)) clustersOfFrame.set(frame, []);
  clustersOfFrame.get(frame).push(id);
}

// --- classes: what each element is at this step ------------------------------------------------

const slotId = (slot) => String(slot).replace(/[^A-Za-z0-9_]/g, "_");

// The classes of element `item` in `state`, or null if it does not exist at this step.
function classesOf(item, state, hot) {
  const nodes = state.nodes || {};
  const frames = state.frames || {};
  let cls;
  switch (item.kind) {
    case "node": {
      const n = nodes[item.key];
      if (!n) return null;
      cls = [n.status];
      if (hot.running.has(Number(item.key))) cls.push("running");
      if (n.released) cls.push("released");
      if (n.freed) cls.push("freed");
      if (n.phase === "recompute") cls.push("recomputed");
      break;
    }
    case "saved": {
      const n = nodes[item.key];
      if (!n) return null;
      let found = false;
      for (const [slot, s] of Object.entries(n.saved || {})) {
        if (slotId(slot) === item.slot && !(s.packed === "holder" && s.holder !== null && s.holder !== undefined)) found = true;
      }
      if (!found) return null;
      cls = [n.released ? "released" : "saved"];
      break;
    }
    case "holder": {
      const at = (state.holders || {})[item.key];
      const h = at && frames[at[0]] ? frames[at[0]].holders[at[1]] : null;
      if (!h) return null;
      cls = [h.alive ? "alive" : "dead"];
      for (const s of new Set(Object.values(h.handles || {}))) cls.push(`handle-${s}`);
      if (hot.unpacking.has(Number(item.key))) cls.push("unpacking");
      break;
    }
    case "frame": {
      const f = frames[item.key];
      if (!f) return null;
      cls = [f.alive ? "alive" : "dead"];
      const running = f.running || [];
      if (running.length) cls.push(`running-${running[running.length - 1]}`);
      if (hot.recomputing.has(Number(item.key))) cls.push("recomputing");
      break;
    }
    case "empty":
      return frames[item.key] ? [] : null;
    case "rcluster": {
      const f = frames[item.key];
      if (!f || !(item.gid in (f.recomp_counter || {}))) return null;
      cls = [hot.recomputingIds.has(item.id) ? "active" : "done"];
      break;
    }
    case "module": {
      if (!item.nodes.some((k) => nodes[k])) return null;
      cls = item.nodes.some((k) => hot.running.has(Number(k))) ? ["running"] : [];
      break;
    }
    case "fold": {
      // Present when one of its blocks is; busy when one of them is: from the counts its blocks
      // keep (Note [Folded boxes counted]), in FOLD_BUSY's order.
      if (!item.made) return null;
      cls = [];
      for (const k of FOLD_BUSY) if (item.busy.get(k) > 0) cls.push(k);
      if (hot.inBox.has(item.id)) cls.push("running");
      break;
    }
    case "tensor": {
      const t = (state.tensors || {})[item.key];
      if (!t || !t.name || t.node === null || t.node === undefined) return null;
      cls = ["alive"];
      break;
    }
    case "edge": {
      const a = els.get(item.from);
      const b = els.get(item.to);
      if (!a || !b || !a.present || !b.present) return null;
      cls = [];
      break;
    }
    default:
      return [];
  }
  if (hot.focus.has(item.id)) cls.push("focus");
  return cls;
}

// The classes of a folded group's blocks that its box shows.
const FOLD_BUSY = new Set(["running", "running-forward", "running-recompute", "recomputing", "active", "focus"]);

// What is in progress, and the ids the current event names: each step may restyle these.
function hotOf(state, event) {
  const running = new Set(state.executing || []);
  const unpacking = new Set((state.unpacking || []).map((u) => u.holder));
  const recomputing = new Set((state.recomputing || []).map((r) => r.frame));
  // Note [Recomputation clusters by id]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // The recomputation clusters being built, by their element ids r{frame}_{gid} (Note [DOT ids]):
  // classesOf looks a cluster up by its own id, a string made once per layout, instead of a key
  // made at every look-up. A far jump at 1M events restyles all 8,320 clusters of a folded group,
  // and making and hashing those keys was most of its JavaScript (classesOf: ~8 -> ~1.3 ms a jump,
  // V8 profile). It relies on the id and the state naming a gid the same way, as the key did.
  const recomputingIds = new Set((state.recomputing || []).map((r) => `r${r.frame}_${r.gid}`));
  const focus = new Set();
  if (event) {
    if (event.node !== undefined && event.node !== null) focus.add(`n${event.node}`);
    if (event.holder !== undefined && event.holder !== null) focus.add(`h${event.holder}`);
    if (event.tensor !== undefined && event.tensor !== null && typeof event.tensor !== "object") focus.add(`t${event.tensor}`);
    if (event.frame !== undefined && event.frame !== null && !("holder" in event) && !("node" in event)) focus.add(`f${event.frame}`);
    if (event.slot !== undefined && event.node !== undefined) focus.add(`s${event.node}_${slotId(event.slot)}`);
    // An unpack's recomputation is about the holder being unpacked.
    const trig = event.trigger;
    if (trig && state.frames && state.frames[trig.frame]) {
      const h = (state.frames[trig.frame].holders || {})[trig.index];
      if (h) focus.add(`h${h.holder}`);
    }
    // A frame's event during its recomputation is about the graph being rebuilt.
    if (event.frame !== undefined && event.frame !== null && event.phase === "recompute") {
      const g = event.hook_gid ?? event.gid;
      if (event.kind.startsWith("recompute") || recomputing.has(event.frame)) focus.add(`r${event.frame}_${g}`);
    }
  }
  // What is inside a collapsed cluster or a folded group is shown by its box.
  const inBox = new Set();
  for (const n of running) if (swallowed.has(`n${n}`)) inBox.add(swallowed.get(`n${n}`));
  if (swallowed.size) for (const id of [...focus]) if (swallowed.has(id)) focus.add(swallowed.get(id));
  const ids = new Set(focus);
  for (const id of inBox) ids.add(id);
  for (const n of running) ids.add(`n${n}`);
  for (const h of unpacking) ids.add(`h${h}`);
  for (const f of recomputing) ids.add(`f${f}`);
  for (const id of recomputingIds) ids.add(id);
  return { running, unpacking, recomputing, recomputingIds, focus, ids, inBox };
}

// Element ids a change may have restyled.
function idsOfChange(change, state, out) {
  const [, path, old, neu] = change;
  const top = path[0];
  if (top === "nodes") {
    const k = String(path[1]);
    out.add(`n${k}`);
    for (const id of savedOf.get(k) || []) out.add(id);
  } else if (top === "frames") {
    const f = String(path[1]);
    out.add(`f${f}`);
    for (const id of clustersOfFrame.get(f) || []) out.add(id);
    const holdersIn = (v) => {
      for (const h of Object.values((v && v.holders) || {})) if (h) out.add(`h${h.holder}`);
    };
    if (path.length === 2) {
      holdersIn(old);
      holdersIn(neu);
    } else if (path[2] === "holders") {
      if (path.length === 3) {
        holdersIn({ holders: old });
        holdersIn({ holders: neu });
      } else {
        const h = path.length === 4 ? old || neu : ((state.frames || {})[f] || { holders: {} }).holders[path[3]];
        if (h) out.add(`h${h.holder}`);
      }
    }
  } else if (top === "holders") {
    out.add(`h${path[1]}`);
  } else if (top === "tensors") {
    out.add(`t${path[1]}`);
  }
}

function restyle(item, state, hot) {
  const cls = classesOf(item, state, hot);
  const present = cls !== null;
  const text = present ? `${item.base} ${cls.join(" ")}` : `${item.base} absent`;
  const flipped = present !== item.present;
  item.present = present;
  if (text !== item.cls) {
    item.el.setAttribute("class", text);
    item.cls = text;
  }
  return flipped;
}

export function render(state, ctx) {
  last = { state, ctx };
  if (!svg) return;
  const hot = hotOf(state, ctx.event);
  // A story step of several events ("4 holders packed") is about all of them.
  if (ctx.storyStep && ctx.eventAt) {
    for (const seq of ctx.storyStep.seqs) {
      const e = ctx.eventAt(seq);
      if (e && e !== ctx.event) for (const id of hotOf(state, e).focus) hot.focus.add(id);
    }
    for (const id of hot.focus) hot.ids.add(id);
  }
  let targets = null; // null: every element
  if (!ctx.full && ctx.touched) {
    targets = new Set();
    let n = 0;
    for (const changes of ctx.touched) {
      n += changes.length;
      if (n > 3000) {
        targets = null;
        break;
      }
      for (const c of changes) idsOfChange(c, state, targets);
    }
  }
  if (targets === null) {
    // Edges last: their presence depends on their ends'.
    for (const item of els.values()) {
      if (item.kind === "fold") for (const member of item.members) recount(member, state, hot);
      if (item.kind !== "edge") restyle(item, state, hot);
    }
    for (const item of els.values()) if (item.kind === "edge") restyle(item, state, hot);
  } else {
    for (const id of transient) targets.add(id);
    for (const id of hot.ids) targets.add(id);
    // The blocks of folded groups these ids may restyle: Note [Folded boxes counted].
    if (membersBy.size) {
      const boxes = [];
      for (const id of targets) {
        const members = membersBy.get(id);
        if (members) for (const m of members) if (recount(m, state, hot)) boxes.push(m.fold.id);
      }
      for (const id of boxes) targets.add(id);
    }
    // What restyles an element restyles the box it is drawn in (a collapsed cluster, a folded
    // group) and its module instance's cluster; nothing to look up when there are none.
    if (swallowed.size || moduleOf.size) {
      for (const id of [...targets]) {
        if (swallowed.has(id)) targets.add(swallowed.get(id));
        if (moduleOf.has(id)) targets.add(moduleOf.get(id));
      }
    }
    const edges = new Set();
    for (const id of targets) {
      const item = els.get(id);
      if (!item) continue;
      if (restyle(item, state, hot)) for (const e of edgesByEnd.get(id) || []) edges.add(e);
    }
    for (const e of edges) restyle(e, state, hot);
  }
  transient = hot.ids;
  // The minimap is redrawn once a frame, not once a step: drawing it reads the layout (its view
  // frame), which would force a style and layout pass in the middle of the step's rendering.
  if (minimap && !minimap.root.hidden) drawMinimapSoon();
  if (hovered) describeHovered(); // stepping with the mouse on an element keeps its box current
  if (follow && (!ctx.playing || ctx.single) && ctx.defer) {
    const smooth = ctx.single && !ctx.playing;
    ctx.defer("graph", () => reveal(hot, smooth));
  }
}

// --- following the current event ----------------------------------------------------------------

function reveal(hot, smooth) {
  // What the event names, a node or holder first; else what is in progress (the innermost
  // running node, the holder being unpacked, the frame being recomputed).
  const rank = { node: 0, holder: 1, saved: 2, tensor: 3, rcluster: 4, frame: 5 };
  let target = null;
  for (const id of hot.focus) {
    const item = els.get(id);
    if (item && item.present && (!target || (rank[item.kind] ?? 9) < (rank[target.kind] ?? 9))) target = item;
  }
  if (!target) {
    const busy = [...[...hot.running].map((n) => `n${n}`).reverse(), ...[...hot.unpacking].map((h) => `h${h}`)];
    busy.push(...[...hot.recomputing].map((f) => `f${f}`));
    target = busy.map((id) => els.get(id)).find((item) => item && item.present) || null;
  }
  if (!target) return;
  const r = target.el.getBoundingClientRect();
  const c = canvas.getBoundingClientRect();
  const margin = 24;
  const wide = r.width > c.width - 2 * margin;
  const tall = r.height > c.height - 2 * margin;
  const inside = r.left >= c.left + margin && r.right <= c.right - margin && r.top >= c.top + margin && r.bottom <= c.bottom - margin;
  if (inside) return;
  // Centre it; a cluster bigger than the view shows its title corner instead.
  const dx = wide ? r.left - c.left - margin : r.left + r.width / 2 - (c.left + c.width / 2);
  const dy = tall ? r.top - c.top - margin : r.top + r.height / 2 - (c.top + c.height / 2);
  if (Math.abs(dx) < 4 && Math.abs(dy) < 4) return;
  canvas.scrollTo({ left: canvas.scrollLeft + dx, top: canvas.scrollTop + dy, behavior: smooth ? "smooth" : "instant" });
}

// --- zoom, pan, collapse, hover ----------------------------------------------------------------

// The zoom at which the whole graph fits the panel (never above 1: a small graph is not blown up).
function fitZoom() {
  if (!natural.w) return 1;
  return Math.min(1, (canvas.clientWidth - 8) / natural.w, (canvas.clientHeight - 8) / natural.h);
}

function setZoom(z) {
  zoom = Math.max(0.02, Math.min(3, z));
  if (!svg) return;
  svg.style.width = `${natural.w * zoom}px`;
  svg.style.height = `${natural.h * zoom}px`;
  // The minimap is for when part of the graph is out of view.
  const cut = natural.w * zoom > canvas.clientWidth + 2 || natural.h * zoom > canvas.clientHeight + 2;
  if (minimap && minimap.root.hidden === cut) {
    minimap.root.hidden = !cut;
    if (cut) drawMinimap();
  }
  drawView();
}

function zoomTo(z) {
  const cx = (canvas.scrollLeft + canvas.clientWidth / 2) / Math.max(1, natural.w * zoom);
  const cy = (canvas.scrollTop + canvas.clientHeight / 2) / Math.max(1, natural.h * zoom);
  setZoom(z);
  canvas.scrollLeft = cx * natural.w * zoom - canvas.clientWidth / 2;
  canvas.scrollTop = cy * natural.h * zoom - canvas.clientHeight / 2;
}

function onTool(e) {
  const act = e.target.dataset && e.target.dataset.act;
  if (!act) return;
  // Collapse, Expand and Fold lay the graph out again: only once it is drawn (a graph waiting to
  // be asked for is drawn by its own button: Note [Graphs too big to lay out at once]).
  if (e.type === "click" && act === "fit") {
    fitted = true;
    zoomTo(fitZoom());
  } else if (e.type === "click" && act === "in") zoomBy(1.25);
  else if (e.type === "click" && act === "out") zoomBy(1 / 1.25);
  else if (e.type === "change" && act === "follow") follow = e.target.checked;
  else if (e.type === "change" && act === "ghosts") {
    ghosts = e.target.checked;
    root.classList.toggle("show-ghosts", ghosts);
  } else if (e.type === "click" && act === "collapse" && svg) {
    // Outermost clusters only: collapsing one hides the clusters inside it.
    collapsed = new Set([...clusterInfo.values()].filter((c) => c.parent === null).map((c) => c.id));
    layout();
  } else if (e.type === "click" && act === "expand" && svg) {
    collapsed = new Set();
    folded = new Set();
    layout();
  } else if (e.type === "click" && act === "fold" && svg) {
    folded = new Set(foldInfo.keys());
    layout();
  } else if (e.type === "click" && act === "svg" && svg) {
    const step = last.ctx ? last.ctx.step : 0;
    download(svgText(), `run-${readConfig().run_id || "graph"}-step-${step}.svg`);
  }
}

// --- SVG export ----------------------------------------------------------------------------------

// The graph as drawn at this step, as a standalone SVG file: a copy of the SVG at its natural size
// with this stylesheet's graph rules, and the custom properties they use, inlined in a <style>.
export function svgText() {
  if (!svg) return null;
  const copy = svg.cloneNode(true);
  copy.removeAttribute("style");
  copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  copy.setAttribute("width", `${Math.ceil(natural.w)}px`);
  copy.setAttribute("height", `${Math.ceil(natural.h)}px`);
  const style = document.createElementNS("http://www.w3.org/2000/svg", "style");
  style.textContent = graphCSS();
  copy.insertBefore(style, copy.firstChild);
  return new XMLSerializer().serializeToString(copy);
}

function graphCSS() {
  const rules = [];
  for (const sheet of document.styleSheets) {
    for (const rule of sheet.cssRules) {
      if (!(rule instanceof CSSStyleRule)) continue;
      const sels = rule.selectorText
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s.startsWith(".graph-view svg"))
        .map((s) => s.replace(".graph-view svg", "svg"));
      if (sels.length) rules.push(`${sels.join(", ")} { ${rule.style.cssText} }`);
    }
  }
  const text = rules.join("\n");
  const computed = getComputedStyle(root);
  const vars = [...new Set(text.match(/--[\w-]+/g) || [])];
  return `svg { ${vars.map((v) => `${v}: ${computed.getPropertyValue(v).trim()};`).join(" ")} }\n${text}\n`;
}

function download(text, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function zoomBy(factor) {
  fitted = false;
  zoomTo(zoom * factor);
}

function onWheel(e) {
  if (!e.ctrlKey) return;
  e.preventDefault();
  zoomBy(e.deltaY < 0 ? 1.1 : 1 / 1.1);
}

function onCanvasKey(e) {
  if (e.key !== "Enter" && e.key !== " ") return;
  const item = e.target.closest && els.get(e.target.closest("g.cluster, g.node")?.id);
  if (!item || (item.kind !== "frame" && item.kind !== "rcluster" && item.kind !== "fold") || !parsed) return;
  e.preventDefault();
  e.stopPropagation(); // Space and Enter also mean "step" to the page
  toggle(item.id);
}

function enableDragPan() {
  let drag = null;
  canvas.addEventListener("mousedown", (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, left: canvas.scrollLeft, top: canvas.scrollTop, moved: false };
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    canvas.scrollLeft = drag.left - dx;
    canvas.scrollTop = drag.top - dy;
  });
  window.addEventListener("mouseup", () => {
    if (drag && drag.moved) canvas.dataset.dragged = "1";
    drag = null;
  });
}

function onCanvasClick(e) {
  if (canvas.dataset.dragged) {
    delete canvas.dataset.dragged;
    return;
  }
  const g = e.target.closest && e.target.closest("g.cluster, g.node");
  if (!g || !parsed) return;
  const item = els.get(g.id);
  if (!item || (item.kind !== "frame" && item.kind !== "rcluster" && item.kind !== "fold")) return;
  // A cluster's title (or a collapsed cluster's node, or a folded group's box) toggles it.
  if (item.kind !== "fold" && !item.clusterNode && e.target.tagName.toLowerCase() !== "text") return;
  toggle(g.id);
}

// --- minimap ------------------------------------------------------------------------------------

function mountMinimap(el) {
  minimap = { root: el, canvas: el.querySelector("canvas"), view: el.querySelector(".mm-view"), boxes: [] };
  let dragging = false;
  const moveTo = (e) => {
    const r = minimap.canvas.getBoundingClientRect();
    const fx = (e.clientX - r.left) / r.width;
    const fy = (e.clientY - r.top) / r.height;
    canvas.scrollLeft = fx * natural.w * zoom - canvas.clientWidth / 2;
    canvas.scrollTop = fy * natural.h * zoom - canvas.clientHeight / 2;
  };
  el.addEventListener("mousedown", (e) => {
    dragging = true;
    moveTo(e);
    e.preventDefault();
  });
  window.addEventListener("mousemove", (e) => dragging && moveTo(e));
  window.addEventListener("mouseup", () => (dragging = false));
}

// Where every node and cluster is, as fractions of the graph's size: measured once per layout
// (absent elements are laid out too: Note [Absent elements hidden, not undisplayed] in app.css),
// drawn at each step from what is present.
function measure() {
  if (!minimap) return;
  const whole = svg.getBoundingClientRect();
  minimap.boxes = [];
  for (const item of els.values()) {
    if (item.kind === "edge" || item.kind === "other") continue;
    const r = item.el.getBoundingClientRect();
    if (!r.width || !whole.width) continue;
    minimap.boxes.push({
      item,
      x: (r.left - whole.left) / whole.width,
      y: (r.top - whole.top) / whole.height,
      w: r.width / whole.width,
      h: r.height / whole.height,
      cluster: !item.clusterNode && (item.kind === "frame" || item.kind === "rcluster"),
    });
  }
}

const drawMinimapSoon = perFrame(() => drawMinimap());

function drawMinimap() {
  if (!minimap || minimap.root.hidden || !natural.w) return;
  const maxW = 160;
  const maxH = 110;
  const scale = Math.min(maxW / natural.w, maxH / natural.h);
  const w = Math.max(20, Math.round(natural.w * scale));
  const h = Math.max(20, Math.round(natural.h * scale));
  const c = minimap.canvas;
  const ratio = window.devicePixelRatio || 1;
  if (c.width !== w * ratio || c.height !== h * ratio) {
    c.width = w * ratio;
    c.height = h * ratio;
    c.style.width = `${w}px`;
    c.style.height = `${h}px`;
  }
  const g = c.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, w, h);
  for (const b of minimap.boxes) {
    const present = b.item.present;
    if (b.cluster) {
      g.strokeStyle = b.item.kind === "frame" ? "#0072b2" : "#d55e00";
      g.globalAlpha = present ? 1 : 0.25;
      g.strokeRect(b.x * w + 0.5, b.y * h + 0.5, b.w * w, b.h * h);
    } else {
      g.fillStyle = b.item.cls && b.item.cls.includes(" focus") ? "#000" : "#64748b";
      g.globalAlpha = present ? 0.9 : 0.15;
      g.fillRect(b.x * w, b.y * h, Math.max(1.5, b.w * w), Math.max(1.5, b.h * h));
    }
  }
  g.globalAlpha = 1;
  drawView();
}

// The frame of what the panel shows.
function drawView() {
  if (!minimap || minimap.root.hidden || !natural.w) return;
  const c = minimap.canvas;
  const w = parseFloat(c.style.width) || 0;
  const h = parseFloat(c.style.height) || 0;
  const gw = natural.w * zoom;
  const gh = natural.h * zoom;
  const v = minimap.view.style;
  v.left = `${c.offsetLeft + (canvas.scrollLeft / gw) * w}px`;
  v.top = `${c.offsetTop + (canvas.scrollTop / gh) * h}px`;
  v.width = `${Math.min(1, canvas.clientWidth / gw) * w}px`;
  v.height = `${Math.min(1, canvas.clientHeight / gh) * h}px`;
}

function hideInfo() {
  hovered = null;
  info.hidden = true;
}

function onHover(e) {
  const g = e.target.closest && e.target.closest("g.node, g.cluster");
  hovered = g ? els.get(g.id) : null;
  if (!describeHovered()) return;
  const box = root.getBoundingClientRect();
  info.style.left = `${Math.min(e.clientX - box.left + 14, box.width - 280)}px`;
  info.style.top = `${e.clientY - box.top + 14}px`;
}

// Fill the info box for the hovered element at the current step; false (and hidden) if none.
function describeHovered() {
  const html = hovered && hovered.present && last.state ? describe(hovered, last.state) : "";
  info.hidden = !html;
  if (html) info.innerHTML = html;
  return Boolean(html);
}

// A few facts about an element at this step, from the state.
function describe(item, state) {
  const frames = state.frames || {};
  if (item.kind === "node") {
    const n = state.nodes[item.key];
    const saved = Object.entries(n.saved || {}).map(
      ([slot, s]) => `<li><code>${esc(slot)}</code>: ${s.packed === "holder" ? `holder h${esc(s.holder)}` : esc(tensorName(state, s.tensor))} ${esc(shape(s.shape))}</li>`,
    );
    return (
      `<b>${esc(nodeName(state, item.key))}</b> <span class="dim">n${esc(item.key)}</span><br>` +
      `status: ${esc(n.status)}${n.released ? ", saved released" : ""}${n.freed ? ", freed" : ""}; ran ${esc(n.runs)}×` +
      (n.frame !== null && n.frame !== undefined ? `<br>made under ${esc(frameName(state, n.frame))}` : "") +
      (n.recompute ? `<br>made by the recomputation of ${esc(frameName(state, n.recompute[0]))} for ${esc(gidLabel(n.recompute[1]))}` : "") +
      (saved.length ? `<ul>${saved.join("")}</ul>` : "")
    );
  }
  if (item.kind === "holder") {
    const at = state.holders[item.key];
    const h = frames[at[0]].holders[at[1]];
    const handles = Object.entries(h.handles || {}).map(([g, s]) => `${esc(gidLabel(g))}: ${esc(s)}`).join(", ");
    return (
      `<b>holder ${esc(frameName(state, at[0]))}[${esc(at[1])}]</b> <span class="dim">h${esc(item.key)}</span><br>` +
      `${h.alive ? "alive" : "dead"}; saved for <code>${esc(h.slot || "")}</code> of ${esc(nodeName(state, h.node))} ${esc(shape(h.shape))}` +
      `<br>handles: ${handles || "none"}`
    );
  }
  if (item.kind === "frame") {
    const f = frames[item.key];
    const c = clusterInfo.get(item.id);
    return (
      `<b>checkpoint ${esc(f.name)}</b><br>${f.alive ? "alive" : "garbage-collected"}` +
      `${(f.running || []).length ? `, running (${esc(f.running.join(", "))})` : ""}` +
      `<br>${Object.keys(f.holders || {}).length} holders` +
      `<br><span class="dim">click its title to ${collapsed.has(item.id) ? "expand" : `collapse${c ? ` (${c.nodes} nodes)` : ""}`}</span>`
    );
  }
  if (item.kind === "rcluster") {
    return `<b>recomputation of ${esc(frameName(state, item.key))} for ${esc(gidLabel(item.gid))}</b><br><span class="dim">click its title to ${collapsed.has(item.id) ? "expand" : "collapse"}</span>`;
  }
  if (item.kind === "tensor") {
    const t = state.tensors[item.key];
    return `<b>${esc(t.name)}</b> ${esc(shape(t.shape))} ${esc(t.dtype)}<br>version ${esc(t.version)}, grad_fn ${esc(nodeName(state, t.node))}`;
  }
  if (item.kind === "saved") {
    return `<b>saved tensor</b> <code>${esc(item.slot)}</code> of ${esc(nodeName(state, item.key))}`;
  }
  if (item.kind === "fold") {
    const f = foldInfo.get(item.id);
    const made = item.made; // Note [Folded boxes counted]
    return (
      `<b>${esc(f.label)}</b><br>${f.members.length} blocks with the same structure (the same ops, saving the same shapes), drawn as one box; ${made} of them exist at this step` +
      `<br><span class="dim">click to unfold them (${f.nodes} nodes)</span>`
    );
  }
  if (item.kind === "module") {
    const c = clusterInfo.get(item.id);
    return `<b>module ${esc(c ? c.label : item.id)}</b><br>the nodes its forward made: one of a run of identical blocks; <span class="dim">Fold repeats draws the run as one box</span>`;
  }
  return "";
}

// For tests: the elements whose classes differ from what a full restyle from scratch gives at
// this step (folded boxes counted from every block), as [id, shown, expected]; [] when none.
export function audit() {
  if (!svg || !last.state) return [];
  const { state, ctx } = last;
  const hot = hotOf(state, ctx.event);
  if (ctx.storyStep && ctx.eventAt) {
    for (const seq of ctx.storyStep.seqs) {
      const e = ctx.eventAt(seq);
      if (e && e !== ctx.event) for (const id of hotOf(state, e).focus) hot.focus.add(id);
    }
  }
  const expected = new Map();
  const text = (item, cls) => (cls === null ? `${item.base} absent` : `${item.base} ${cls.join(" ")}`);
  for (const item of els.values()) {
    if (item.kind === "edge") continue;
    const cls = item.kind === "fold" ? foldClassesFromScratch(item, state, hot) : classesOf(item, state, hot);
    expected.set(item.id, { cls, text: text(item, cls) });
  }
  const sorted = (t) => (t || "").split(" ").filter(Boolean).sort().join(" ");
  const out = [];
  for (const item of els.values()) {
    let want;
    if (item.kind === "edge") {
      const a = expected.get(item.from);
      const b = expected.get(item.to);
      const present = Boolean(a && b && a.cls !== null && b.cls !== null);
      const cls = present ? (hot.focus.has(item.id) ? ["focus"] : []) : null;
      want = text(item, cls);
    } else {
      want = expected.get(item.id).text;
    }
    if (sorted(item.cls) !== sorted(want)) out.push([item.id, item.cls, want]);
  }
  return out;
}

// For tests and the bench: the classes of an element id now, or null.
export function classesFor(id) {
  const item = els.get(id);
  return item ? item.cls : null;
}

export function isLoaded() {
  return Boolean(svg);
}

// For tests: the zoom, whether it follows the panel's size, and whether the minimap shows.
export function view() {
  return { zoom, fitted, fit: fitZoom(), minimap: Boolean(minimap && !minimap.root.hidden) };
}
