"""The changes an event makes to a state: the format, applying and undoing them, diffs, and a
cursor that steps through a trace's states with them.

Note [Changes]
~~~~~~~~~~~~~~
A change is ``[op, path, old, new]`` (a ``Change`` named tuple; JSON encodes it as that list).
``path`` is a list of keys from the root of the state: strings into dicts, integers into lists.

- ``"set"``: the key exists before and after; its value goes from ``old`` to ``new``.
- ``"add"``: the key does not exist before; after, it holds ``new`` (``old`` is ``None``). In a
  list the key is the list's length: an append.
- ``"remove"``: the key exists before and holds ``old``; after, it is gone (``new`` is ``None``).
  In a list the key is the last index: a pop.

The changes of one event apply in order. To step back, undo them in reverse order: ``set`` back
to ``old``, delete what ``add`` added, put back what ``remove`` removed. A browser can do both
without knowing what any event means; it must copy a value before inserting it, since later
changes mutate what they reach through a path (``apply_changes`` does the same).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

Key = str | int


class Change(NamedTuple):
    """One step of an event's effect on the state. See Note [Changes]."""

    op: Literal["set", "add", "remove"]
    path: tuple[Key, ...]
    old: Any
    new: Any


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """A fresh JSON-like copy of ``value`` (tuples become lists), safe to insert into a state."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, dict):
        return {(k if type(k) is str else str(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


# --- recording changes ---------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    # ``True == 1`` in Python, but a browser would show them differently: compare types too.
    return type(a) is type(b) and a == b


class Tx:
    """Mutates a state through paths; records each change (see Note [Changes]) when asked.

    Note [Copy on write]
    ~~~~~~~~~~~~~~~~~~~~
    With ``owned`` (the ``Cursor``'s mode) the state may share containers with snapshots. A
    container is written only once it is owned: the walk down a path replaces each container it has
    not made since the last snapshot by a shallow copy. A snapshot is then the root object itself,
    and restoring one costs nothing. ``owned`` maps ``id()`` to the object, which keeps it alive so
    that an id is never reused while listed. The root may change on the first write of an event;
    handlers read through ``tx.state`` after ``now`` is written, and read an entity before they
    write it (a local bound to an entity can be the pre-copy object).
    """

    def __init__(self, state: Any, owned: dict[int, Any] | None = None, record: bool = True) -> None:
        self.state = state
        self.owned = owned
        self.record = record
        self.changes: list[Change] = []

    def _own(self, obj: Any) -> Any:
        assert self.owned is not None
        if id(obj) not in self.owned:
            obj = dict(obj) if isinstance(obj, dict) else list(obj)
            self.owned[id(obj)] = obj
        return obj

    def _parent(self, path: Sequence[Key]) -> Any:
        if self.owned is None:
            obj = self.state
            for key in path[:-1]:
                obj = obj[key]
            return obj
        obj = self.state = self._own(self.state)
        for key in path[:-1]:
            child = self._own(obj[key])
            obj[key] = child
            obj = child
        return obj

    def _log(
        self,
        op: Literal["set", "add", "remove"],
        path: tuple[Key, ...],
        old: Any,
        new: Any,
        shared: bool = False,
    ) -> None:
        if self.record:
            # Under copy on write nothing inserted is ever mutated in place, so the change can
            # share the inserted value; otherwise later writes would reach it through the state,
            # unless it is never written into (``shared``: Note [Values replaced whole]).
            if not shared and self.owned is None:
                new = plain(new)
            self.changes.append(Change(op, path, old, new))

    def set(self, path: tuple[Key, ...], value: Any) -> None:
        parent: Any = self._parent(path)
        key: Any = path[-1]
        value = plain(value)
        if isinstance(parent, list) and key == len(parent):
            parent.append(value)
            self._log("add", path, None, value)
        elif isinstance(parent, list) or key in parent:
            old = parent[key]
            if _same(old, value):
                return
            parent[key] = value
            self._log("set", path, old, value)
        else:
            parent[key] = value
            self._log("add", path, None, value)

    def replace(self, key: str, value: Any) -> None:
        """``set((key,), value)`` for a key of the root whose value is only ever replaced whole,
        never written into: ``value``, plain and held by nobody else, is neither copied nor
        compared deeply beyond ``==`` (Note [Values replaced whole])."""
        parent: Any = self._parent((key,))
        op: Literal["set", "add"] = "add"
        old = None
        if key in parent:
            op, old = "set", parent[key]
            if _same(old, value):
                return
        parent[key] = value
        self._log(op, (key,), old, value, shared=True)

    def remove(self, path: tuple[Key, ...]) -> None:
        parent, key = self._parent(path), path[-1]
        if isinstance(parent, list):
            if key != len(parent) - 1:
                raise ValueError(f"can only remove the last item of a list, not {path}")
            old = parent.pop()
        elif key in parent:
            old = parent.pop(key)
        else:
            return
        self._log("remove", path, old, None)

    def append(self, path: tuple[Key, ...], value: Any) -> None:
        self.set((*path, len(self._parent((*path, 0)))), value)

    def pop(self, path: tuple[Key, ...]) -> None:
        items = self._parent((*path, 0))
        if items:
            self.remove((*path, len(items) - 1))

    def replay(self, changes: Sequence[Sequence[Any]], backward: bool = False) -> None:
        """Apply ``changes`` (or undo them, ``backward``) without knowing what they mean."""
        for op, path, old, new in reversed(changes) if backward else changes:
            if backward:
                op, old, new = {"set": "set", "add": "remove", "remove": "add"}[op], new, old
            parent, key = self._parent(path), path[-1]
            if op == "remove":
                if isinstance(parent, list) and key != len(parent) - 1:
                    raise ValueError(f"can only remove the last item of a list, not {list(path)}")
                del parent[key]
            else:
                if op == "add" and isinstance(parent, list) and key != len(parent):
                    raise ValueError(f"can only add at the end of a list, not at {list(path)}")
                # Values kept in changes must never be reached through the state and mutated.
                value = new if self.owned is not None else plain(new)
                if op == "add" and isinstance(parent, list):
                    parent.append(value)
                else:
                    parent[key] = value


def apply_changes(state: Any, changes: Sequence[Sequence[Any]]) -> Any:
    """Apply an event's changes to ``state`` in place (one step forward); returns ``state``."""
    Tx(state, record=False).replay(changes)
    return state


def revert_changes(state: Any, changes: Sequence[Sequence[Any]]) -> Any:
    """Undo an event's changes on ``state`` in place (one step back); returns ``state``."""
    Tx(state, record=False).replay(changes, backward=True)
    return state


def diff(before: Any, after: Any, path: tuple[Key, ...] = ()) -> list[Change]:
    """The changes that turn ``before`` into ``after`` (both JSON-like), in the format of ``step``."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[Change] = []
        for key in before:
            if key not in after:
                changes.append(Change("remove", (*path, key), plain(before[key]), None))
        for key, value in after.items():
            if key not in before:
                changes.append(Change("add", (*path, key), None, plain(value)))
            else:
                changes += diff(before[key], value, (*path, key))
        return changes
    if isinstance(before, list) and isinstance(after, list) and path:
        changes = []
        common = min(len(before), len(after))
        for i in range(common):
            changes += diff(before[i], after[i], (*path, i))
        for i in range(len(before) - 1, common - 1, -1):
            changes.append(Change("remove", (*path, i), plain(before[i]), None))
        for i in range(common, len(after)):
            changes.append(Change("add", (*path, i), None, plain(after[i])))
        return changes
    if _same(before, after):
        return []
    if not path:
        raise ValueError("the root of a state must be a dict")
    return [Change("set", path, plain(before), plain(after))]


class ChangeCursor:
    """Steps through the states of a list of events in both directions and jumps anywhere,
    without replaying it all. ``reduce(tx, event)`` applies one event through ``tx``.

    Note [Cursor]
    ~~~~~~~~~~~~~
    The changes of every event reached so far are kept, so ``forward()`` applies one event's
    changes and ``back()`` reverts them. Every ``snapshot_every`` events the state is kept as a
    snapshot, which costs nothing thanks to Note [Copy on write]: ``jump(n)`` restores the nearest
    snapshot at or before ``n`` and steps from there, or steps from where it is when that is
    closer. Events past the furthest point reached so far are reduced once, on first visit.

    ``cursor.state`` is the live state: read it, don't mutate it (``copy()`` gives a private one).
    """

    def __init__(
        self,
        events: Sequence[Any],
        initial: Any,
        reduce: Callable[[Tx, Any], None],
        snapshot_every: int = 512,
    ) -> None:
        self.events = events
        self.snapshot_every = snapshot_every
        self.position = -1
        self._reduce = reduce
        self._state: Any = initial
        self._owned: dict[int, Any] = {}
        self._changes: list[list[Change]] = []
        self._snapshots: dict[int, Any] = {-1: self._state}

    @property
    def state(self) -> Any:
        return self._state

    def __len__(self) -> int:
        return len(self.events)

    def changes(self, n: int) -> list[Change]:
        """The changes event ``n`` makes (reducing the trace up to ``n`` if needed)."""
        if n >= len(self._changes):
            here = self.position
            self.jump(n)
            self.jump(here)
        return self._changes[n]

    def copy(self) -> Any:
        return plain(self._state)

    def _tx(self, record: bool) -> Tx:
        return Tx(self._state, self._owned, record=record)

    def forward(self) -> Any:
        n = self.position + 1
        if n >= len(self.events):
            raise IndexError("already at the last event")
        if n < len(self._changes):
            tx = self._tx(record=False)
            tx.replay(self._changes[n])
        else:
            tx = self._tx(record=True)
            self._reduce(tx, self.events[n])
            self._changes.append(tx.changes)
        self._state = tx.state
        self.position = n
        if n % self.snapshot_every == self.snapshot_every - 1 and n not in self._snapshots:
            # From now on the snapshot shares every container with the live state.
            self._snapshots[n] = self._state
            self._owned = {}
        return self._state

    def back(self) -> Any:
        if self.position < 0:
            raise IndexError("already before the first event")
        tx = self._tx(record=False)
        tx.replay(self._changes[self.position], backward=True)
        self._state = tx.state
        self.position -= 1
        return self._state

    def jump(self, n: int) -> Any:
        if not -1 <= n < len(self.events):
            raise IndexError(f"step {n} is outside the trace (-1..{len(self.events) - 1})")
        base = max(s for s in self._snapshots if s <= n)
        if n - base < abs(n - self.position):
            self._state = self._snapshots[base]
            self._owned = {}
            self.position = base
        while self.position < n:
            self.forward()
        while self.position > n:
            self.back()
        return self._state
