// Applying and undoing the reducer's changes, generically.
//
// The server sends, with each event, the changes engine/trace/state.py derived for it: a list of
// [op, path, old, new] (Note [Changes] in engine/trace/delta.py). Forward applies them in order;
// back undoes them in reverse order. Nothing here knows what an event means.
//
// Copy on write (the same idea as Note [Copy on write] in delta.py): the live state may share
// containers with snapshots. A container is mutated only once this Store has made it since the
// last snapshot; walking down a path shallow-copies every container it does not own yet. A
// snapshot is then just the current root, and taking or restoring one costs nothing. Values taken
// from the change lists are inserted as they are, never copied: nothing the Store does not own is
// ever mutated, so the change lists stay intact too.

const copyOf = (obj) => (Array.isArray(obj) ? obj.slice() : Object.assign({}, obj));

export class Store {
  constructor(root) {
    this.root = root;
    this.owned = new WeakSet();
  }

  // Forget ownership: from now on `this.root` (and everything under it) is shared with whoever
  // kept a reference to it, and the next write copies what it touches.
  snapshot() {
    this.owned = new WeakSet();
    return this.root;
  }

  restore(root) {
    this.root = root;
    this.owned = new WeakSet();
  }

  _own(obj) {
    if (this.owned.has(obj)) return obj;
    const copy = copyOf(obj);
    this.owned.add(copy);
    return copy;
  }

  // The container holding the last key of `path`, owned (copied as needed) all the way down.
  _parent(path) {
    let obj = (this.root = this._own(this.root));
    for (let i = 0; i < path.length - 1; i++) {
      const key = path[i];
      const child = obj[key];
      if (child === null || typeof child !== "object") {
        throw new Error(`change path ${JSON.stringify(path)} goes through a non-container at ${key}`);
      }
      obj = obj[key] = this._own(child);
    }
    return obj;
  }

  _write(op, path, value) {
    const parent = this._parent(path);
    const key = path[path.length - 1];
    if (op === "remove") {
      if (Array.isArray(parent)) {
        if (key !== parent.length - 1) throw new Error(`can only pop the last item, not ${JSON.stringify(path)}`);
        parent.pop();
      } else {
        delete parent[key];
      }
    } else if (op === "add" && Array.isArray(parent)) {
      if (key !== parent.length) throw new Error(`can only append to a list, not at ${JSON.stringify(path)}`);
      parent.push(value);
    } else {
      parent[key] = value;
    }
  }

  apply(changes) {
    for (let i = 0; i < changes.length; i++) {
      const [op, path, , value] = changes[i];
      this._write(op, path, value);
    }
  }

  undo(changes) {
    for (let i = changes.length - 1; i >= 0; i--) {
      const [op, path, old] = changes[i];
      // set -> set back to old; add -> remove; remove -> add old back.
      this._write(op === "add" ? "remove" : op === "remove" ? "add" : "set", path, old);
    }
  }
}

// The value at `path` in `state`, or undefined.
export function getPath(state, path) {
  let obj = state;
  for (const key of path) {
    if (obj === null || typeof obj !== "object") return undefined;
    obj = obj[key];
  }
  return obj;
}

// Note [Jump diffs]
// ~~~~~~~~~~~~~~~~~
// A long jump restores a snapshot and replays from there, so the change lists it used say
// nothing about how the state it left differs from the state it reached, and views that restyle
// only what changed (the graph, the frames) had to recheck everything. `diffStates(before,
// after)` lists those differences as changes [op, path, old, new], as if one event had made them,
// so views treat a short jump (the next recomputation, a cause link, a breakpoint) like a step.
// It relies on copy on write (Note above): a container not written since the two states parted
// is the same object in both, so `===` skips it unvisited, and the walk costs what differs, not
// what the state holds. Objects are compared key by key down to their leaves; an array whose
// items differ is compared item by item, each differing item reported whole at its index (so
// [op, ["unpacking", i], old, new] names the entry, as the reducer's own changes do), and items
// past the shorter one are reported added or removed. The result is complete: every path whose
// value differs is at or under a reported path. Far jumps differ in thousands of places, where
// rechecking everything is as cheap: past `limit` differences the walk stops and returns null
// ("recheck everything"), which bounds its cost.
export function diffStates(before, after, limit = 3000) {
  const out = [];
  return diffInto(before, after, [], out, limit) ? out : null;
}

// Appends the differences under `path` to `out`; false once there are more than `limit`.
function diffInto(a, b, path, out, limit) {
  if (a === b) return true;
  const aObj = a !== null && typeof a === "object";
  const bObj = b !== null && typeof b === "object";
  if (!aObj || !bObj || Array.isArray(a) !== Array.isArray(b)) {
    out.push(["set", path, a, b]);
  } else if (Array.isArray(a)) {
    const common = Math.min(a.length, b.length);
    for (let i = 0; i < common; i++) if (!sameValue(a[i], b[i])) out.push(["set", [...path, i], a[i], b[i]]);
    for (let i = common; i < b.length; i++) out.push(["add", [...path, i], undefined, b[i]]);
    for (let i = a.length - 1; i >= common; i--) out.push(["remove", [...path, i], a[i], undefined]);
  } else {
    for (const key in a) {
      if (!(key in b)) out.push(["remove", [...path, key], a[key], undefined]);
      else if (a[key] !== b[key] && !diffInto(a[key], b[key], [...path, key], out, limit)) return false;
      if (out.length > limit) return false;
    }
    for (const key in b) if (!(key in a)) out.push(["add", [...path, key], undefined, b[key]]);
  }
  return out.length <= limit;
}

// Whether two values are equal (deeply), taking identical containers as equal at once.
function sameValue(a, b) {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => k in b && sameValue(a[k], b[k]));
}
