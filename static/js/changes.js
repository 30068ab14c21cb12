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
