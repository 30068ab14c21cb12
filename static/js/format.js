// How views write values: bytes, gids, names of tensors and nodes. Presentation only: every fact
// shown comes from the reducer's state or the event's own fields.

export function esc(text) {
  return String(text)
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

// Captions mark code with backticks (`outer#0`, `recomputed[g0]`): show those as code.
export function captionHTML(text) {
  if (!text) return "";
  return esc(text).replace(/`([^`]+)`/g, "<code>$1</code>");
}

export function captionText(text) {
  return text ? text.replace(/`/g, "") : "";
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}

// The reducer keys checkpoint dictionaries by gid as a string ("0", "tmp0", "group0", "none");
// captions write graph task 0 as g0 (engine/trace/state.py gid_label).
export function gidLabel(key) {
  return /^-?\d+$/.test(String(key)) ? `g${key}` : String(key);
}

export function shape(s) {
  return Array.isArray(s) ? `[${s.join(", ")}]` : "";
}

export function tensorName(state, id) {
  if (id === null || id === undefined) return "–";
  const t = state.tensors ? state.tensors[id] : null;
  if (t && t.name) return t.name;
  return t ? `tensor ${id}` : `tensor ${id} (freed)`;
}

export function nodeName(state, id) {
  if (id === null || id === undefined) return "–";
  const n = state.nodes ? state.nodes[id] : null;
  return n ? n.name.replace(/^engine::autograd::/, "") : `node ${id}`;
}

export function frameName(state, id) {
  const f = state.frames ? state.frames[id] : null;
  return f ? f.name : `frame ${id}`;
}

export function pyBool(v) {
  return v ? "True" : "False";
}

// Which paths the current event's changes touched, to mark what changed in this step (the
// "highlight what changed" Python Tutor never had). isChanged("frames/0/holders/2") is true when a
// change is at, under or above that path; isReplaced only when it is at or above.
export function changedPaths(changes) {
  const under = new Set();
  const at = new Set();
  for (const [, path] of changes || []) {
    let p = "";
    for (let i = 0; i < path.length; i++) {
      p = i ? `${p}/${path[i]}` : String(path[i]);
      under.add(p);
    }
    at.add(p);
  }
  // A change at `path` or above it: the whole value there is new.
  const isReplaced = (path) => {
    if (at.has(path)) return true;
    let p = path;
    for (let i = p.lastIndexOf("/"); i > 0; i = p.lastIndexOf("/")) {
      p = p.slice(0, i);
      if (at.has(p)) return true;
    }
    return false;
  };
  return {
    isChanged: (path) => under.has(path) || isReplaced(path),
    isReplaced,
    isAtOrUnder: (path) => under.has(path), // a change at or under `path` (not above it)
    any: at.size > 0,
  };
}
