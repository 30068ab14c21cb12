// A small DOT reader and writer, enough to collapse clusters of the server's graph.dot.
//
// The server lays nothing out: it sends the DOT of the whole run (engine/trace/export_dot.py,
// Note [DOT ids]) and the browser renders it with Graphviz (viz-js). Collapsing a checkpoint frame
// or a recomputation means laying the graph out again with that cluster replaced by one node, so
// we parse the DOT into statements, rewrite them, and print them back. The grammar covered is what
// the Python `graphviz` package writes: attribute statements, `a = b`, node statements, edge
// chains and nested `subgraph name { ... }`, with quoted or bare ids. Ports and HTML labels are not
// used by the server and are not supported.

// --- reading ------------------------------------------------------------------------------------

function tokenize(text) {
  const tokens = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    if (c === " " || c === "\t" || c === "\n" || c === "\r") {
      i++;
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < n && text[i] !== "\n") i++;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      i = end < 0 ? n : end + 2;
    } else if (c === "#" && (i === 0 || text[i - 1] === "\n")) {
      while (i < n && text[i] !== "\n") i++;
    } else if (c === '"') {
      // Keep the text between the quotes as written (escapes included): it is printed back as is.
      let j = i + 1;
      while (j < n && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      tokens.push({ t: "id", v: text.slice(i + 1, j), quoted: true });
      i = j + 1;
    } else if (c === "-" && (text[i + 1] === ">" || text[i + 1] === "-")) {
      tokens.push({ t: "edgeop", v: text.slice(i, i + 2) });
      i += 2;
    } else if ("{}[]=;,".includes(c)) {
      tokens.push({ t: c });
      i++;
    } else {
      let j = i;
      while (j < n && /[A-Za-z0-9_.\-\u0080-\uffff]/.test(text[j])) {
        if (text[j] === "-" && (text[j + 1] === ">" || text[j + 1] === "-")) break;
        j++;
      }
      if (j === i) throw new Error(`DOT: unexpected character ${JSON.stringify(c)} at ${i}`);
      tokens.push({ t: "id", v: text.slice(i, j), quoted: false });
      i = j;
    }
  }
  return tokens;
}

export function parseDot(text) {
  const tokens = tokenize(text);
  let pos = 0;
  const peek = () => tokens[pos];
  const take = (t) => {
    const tok = tokens[pos];
    if (!tok || (t && tok.t !== t)) throw new Error(`DOT: expected ${t} at token ${pos}`);
    pos++;
    return tok;
  };
  const isKeyword = (tok, word) => tok && tok.t === "id" && !tok.quoted && tok.v.toLowerCase() === word;

  function attrList() {
    const attrs = [];
    while (peek() && peek().t === "[") {
      take("[");
      while (peek().t !== "]") {
        const key = take("id");
        let value = { v: "true", quoted: false };
        if (peek().t === "=") {
          take("=");
          value = take("id");
        }
        attrs.push([key.v, value]);
        if (peek().t === "," || peek().t === ";") pos++;
      }
      take("]");
    }
    return attrs;
  }

  function stmts() {
    const out = [];
    while (peek() && peek().t !== "}") {
      const tok = peek();
      if (tok.t === ";") {
        pos++;
      } else if (isKeyword(tok, "subgraph") || tok.t === "{") {
        let name = null;
        if (tok.t !== "{") {
          pos++;
          if (peek().t === "id") name = take("id").v;
        }
        take("{");
        const body = stmts();
        take("}");
        out.push({ type: "subgraph", name, body });
      } else if ((isKeyword(tok, "graph") || isKeyword(tok, "node") || isKeyword(tok, "edge")) &&
                 tokens[pos + 1] && tokens[pos + 1].t === "[") {
        pos++;
        out.push({ type: "attr", target: tok.v.toLowerCase(), attrs: attrList() });
      } else if (tok.t === "id" && tokens[pos + 1] && tokens[pos + 1].t === "=") {
        pos += 2;
        out.push({ type: "assign", key: tok.v, value: take("id") });
      } else if (tok.t === "id") {
        const ids = [take("id").v];
        while (peek() && peek().t === "edgeop") {
          pos++;
          ids.push(take("id").v);
        }
        const attrs = attrList();
        if (ids.length === 1) out.push({ type: "node", id: ids[0], attrs });
        else for (let k = 0; k + 1 < ids.length; k++) out.push({ type: "edge", from: ids[k], to: ids[k + 1], attrs });
      } else {
        throw new Error(`DOT: unexpected ${tok.t} at token ${pos}`);
      }
    }
    return out;
  }

  let strict = false;
  if (isKeyword(peek(), "strict")) {
    strict = true;
    pos++;
  }
  const kind = take("id").v.toLowerCase(); // digraph or graph
  const name = peek().t === "id" ? take("id").v : null;
  take("{");
  const body = stmts();
  take("}");
  return { strict, kind, name, body };
}

// --- writing ------------------------------------------------------------------------------------

// A value we make ourselves, quoted for DOT.
export function quote(text) {
  return { v: String(text).replace(/\\/g, "\\\\").replace(/"/g, '\\"'), quoted: true };
}

const q = (tok) => (typeof tok === "string" ? `"${tok.replace(/"/g, '\\"')}"` : `"${tok.v}"`);
const attrs = (list) => (list.length ? ` [${list.map(([k, v]) => `${q(k)}=${q(v)}`).join(" ")}]` : "");

export function printDot(graph) {
  const lines = [];
  const arrow = graph.kind === "digraph" ? "->" : "--";
  const walk = (body, indent) => {
    for (const s of body) {
      if (s.type === "attr") lines.push(`${indent}${s.target}${attrs(s.attrs)}`);
      else if (s.type === "assign") lines.push(`${indent}${q(s.key)}=${q(s.value)}`);
      else if (s.type === "node") lines.push(`${indent}${q(s.id)}${attrs(s.attrs)}`);
      else if (s.type === "edge") lines.push(`${indent}${q(s.from)} ${arrow} ${q(s.to)}${attrs(s.attrs)}`);
      else {
        lines.push(`${indent}subgraph${s.name ? " " + q(s.name) : ""} {`);
        walk(s.body, indent + "\t");
        lines.push(`${indent}}`);
      }
    }
  };
  walk(graph.body, "\t");
  const head = `${graph.strict ? "strict " : ""}${graph.kind}${graph.name ? " " + q(graph.name) : ""}`;
  return `${head} {\n${lines.join("\n")}\n}\n`;
}

// --- clusters -----------------------------------------------------------------------------------

// The value of attribute `key` of a node statement, or null.
function attrOf(stmt, key) {
  for (const [k, v] of stmt.attrs) if (k === key) return v.v;
  return null;
}

// The `id` and label of a `subgraph cluster_*`, from its `graph [...]` or `a = b` statements.
function clusterAttrs(sub) {
  const found = {};
  for (const s of sub.body) {
    if (s.type === "attr" && s.target === "graph") for (const [k, v] of s.attrs) found[k] = v.v;
    if (s.type === "assign") found[s.key] = s.value.v;
  }
  return found;
}

// The clusters of a parsed graph: [{id, label, parent, nodes, nodeIds, fold, foldlabel}] with
// `nodes` the number of node statements inside (nested clusters included), `nodeIds` their ids,
// `id` the cluster's `id` attribute (f0, r0_1, m3), and `fold`/`foldlabel` its group of repeated
// blocks, if any (Note [Folded blocks] in engine/trace/export_dot.py).
export function clustersOf(graph) {
  const out = [];
  const walk = (body, parent) => {
    const ids = [];
    for (const s of body) {
      if (s.type === "node") ids.push(s.id);
      if (s.type !== "subgraph") continue;
      const isCluster = s.name && s.name.startsWith("cluster");
      const a = isCluster ? clusterAttrs(s) : {};
      const entry = isCluster
        ? { id: a.id || s.name, label: a.label || s.name, parent, nodes: 0, nodeIds: [], fold: a.fold || null, foldlabel: a.foldlabel || null }
        : null;
      if (entry) out.push(entry);
      const inner = walk(s.body, entry ? entry.id : parent);
      if (entry) {
        entry.nodeIds = inner;
        entry.nodes = inner.length;
      }
      ids.push(...inner);
    }
    return ids;
  };
  walk(graph.body, null);
  return out;
}

// The groups of repeated blocks among `clusters` (clustersOf's result): Map of group id (g0) to
// {id, label, members: cluster ids in order, nodes: node statements in all of them}.
export function foldsOf(clusters) {
  const folds = new Map();
  for (const c of clusters) {
    if (!c.fold) continue;
    if (!folds.has(c.fold)) folds.set(c.fold, { id: c.fold, label: c.foldlabel || c.fold, members: [], nodes: 0 });
    const f = folds.get(c.fold);
    f.members.push(c.id);
    f.nodes += c.nodes;
  }
  return folds;
}

// The DOT text of `graph` with every cluster whose id is in `collapsed` drawn as one node with
// that id, and every group of repeated blocks whose id is in `folded` drawn as one node with the
// group's id, where its first block was: their nodes are gone, and edges to or from them go to
// the new node (duplicates and edges inside dropped). A collapsed cluster's node keeps the
// cluster's `class`, plus `collapsed`, so it is restyled per step like the cluster was; a folded
// group's node has the classes `collapsed fold`. If `swallowed` (a Map) is given, it receives the
// id of every element and cluster now inside a new node -> that node's id.
export function collapseDot(graph, collapsed, folded = null, swallowed = null) {
  const noFolds = !folded || folded.size === 0;
  if ((!collapsed || collapsed.size === 0) && noFolds) return printDot(graph);
  collapsed = collapsed || new Set();
  const target = swallowed || new Map(); // element or cluster id -> id of the node that swallows it
  const hoisted = []; // edges written inside a swallowed cluster, moved to the top level
  const foldNodes = new Map(); // group id -> its node statement (label filled in at the end)
  const foldMembers = new Map(); // group id -> number of blocks
  const counts = new Map(); // id of a new node -> node statements it swallowed

  const rewrite = (body, swallowedBy) => {
    const out = [];
    for (const s of body) {
      if (s.type === "node") {
        // A node outside the blocks that folds with them (a checkpoint's inputs node): Note [Folded blocks].
        const withFold = folded && folded.size ? attrOf(s, "foldwith") : null;
        const into = swallowedBy || (withFold && folded.has(withFold) ? withFold : null);
        if (into) {
          target.set(s.id, into);
          counts.set(into, (counts.get(into) || 0) + 1);
        } else out.push(s);
      } else if (s.type === "subgraph") {
        const a = s.name && s.name.startsWith("cluster") ? clusterAttrs(s) : null;
        const cid = a && (a.id || s.name);
        const fold = a && a.fold && folded && folded.has(a.fold) ? a.fold : null;
        if (swallowedBy && cid) target.set(cid, swallowedBy);
        if (!swallowedBy && fold) {
          if (!foldNodes.has(fold)) {
            foldNodes.set(fold, { type: "node", id: fold, attrs: [], label: a.foldlabel || fold });
            out.push(foldNodes.get(fold));
          }
          foldMembers.set(fold, (foldMembers.get(fold) || 0) + 1);
          target.set(cid, fold);
          rewrite(s.body, fold);
        } else if (!swallowedBy && a && collapsed.has(cid)) {
          rewrite(s.body, cid);
          const count = counts.get(cid) || 0;
          const label = `▸ ${a.label || cid} · ${count} nodes\n— click to expand —`;
          out.push({
            type: "node",
            id: cid,
            attrs: [
              ["id", quote(cid)],
              ["class", quote(`collapsed ${a.class || ""}`.trim())],
              ["label", quote(label)],
              ["shape", quote("box")],
              ["style", quote("rounded,filled,bold")],
              ["fillcolor", quote(cid.startsWith("r") ? "#fbe9dc" : "#dcecf6")],
              ["color", quote(a.color || "blue")],
              ["fontsize", quote("10")],
            ],
          });
        } else {
          out.push({ ...s, body: rewrite(s.body, swallowedBy) });
        }
      } else if (s.type === "edge") {
        (swallowedBy ? hoisted : out).push(s); // rewritten below, once every swallowed node is known
      } else if (!swallowedBy) {
        out.push(s);
      }
    }
    return out;
  };
  const body = rewrite(graph.body, null);
  body.push(...hoisted);

  for (const [fold, node] of foldNodes) {
    const blocks = foldMembers.get(fold);
    const each = Math.round((counts.get(fold) || 0) / blocks);
    node.attrs = [
      ["id", quote(fold)],
      ["class", quote("collapsed fold")],
      ["label", quote(`▸ ${node.label}\n${blocks} identical blocks, ${each} nodes each\n— click to unfold —`)],
      ["shape", quote("box")],
      ["style", quote("rounded,filled,bold")],
      ["peripheries", quote("2")],
      ["fillcolor", quote("#eef2f7")],
      ["color", quote("#475569")],
      ["fontsize", quote("10")],
    ];
    delete node.label;
  }

  const seen = new Set();
  const fixEdges = (stmts) => {
    const out = [];
    for (const s of stmts) {
      if (s.type === "subgraph") {
        out.push({ ...s, body: fixEdges(s.body) });
        continue;
      }
      if (s.type !== "edge") {
        out.push(s);
        continue;
      }
      const from = target.get(s.from) || s.from;
      const to = target.get(s.to) || s.to;
      if (from === to) continue;
      const key = `${from}\u0000${to}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(from === s.from && to === s.to ? s : { ...s, from, to });
    }
    return out;
  };
  return printDot({ ...graph, body: fixEdges(body) });
}
