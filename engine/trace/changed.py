"""What changed: the reducer's changes (Note [Changes] in delta.py) as a few short lines, such as
``holder inner#2[1]: recomputed[g0] ← tensor 41``, shown under the caption of a step.

``describe_changes(state, changes)`` reads the changes of one event, or of every event of a story
step, and the state *after* them (for names: frames, nodes and holders keep their names once made;
a tensor that is gone is named from the change's old value).

Note [What changed lines]
~~~~~~~~~~~~~~~~~~~~~~~~~
Only what a learner follows is described: checkpoint frames and their holders, handles,
``recomputed``, ``recomp_counter``, ``is_recomputed`` and early stops; the saved-tensor hooks
stack; nodes created, run, released and freed, and what they save; tensors created and freed;
gradients accumulated; the memory figures. The bookkeeping keys of the state (``now``, ``peak``,
``counts``, ``last_pack``, the stacks of unpacks and recomputations in progress) are left out,
as are repeats (a line already said for this step). At most ``MAX_LINES`` lines; the rest is
counted ("… and 12 more changes").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.trace.state import Change, State, gid_label

MAX_LINES = 8


def _frame(state: State, f: Any) -> str:
    info = state["frames"].get(str(f))
    return info["name"] if info else f"frame {f}"


def _node(state: State, n: Any) -> str:
    info = state["nodes"].get(str(n))
    return info["name"] if info else f"node {n}"


def _tensor(state: State, t: Any, old: Any = None) -> str:
    info = state["tensors"].get(str(t)) or (old if isinstance(old, dict) else None)
    if info and info.get("name"):
        return f"`{info['name']}`"
    return f"tensor {t}"


def _bytes(n: Any) -> str:
    n = int(n or 0)
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} KB"
    return f"{n} B"


def _hooks(state: State, entry: Any) -> str:
    if not isinstance(entry, dict):
        return "hooks"
    if entry.get("hooks") == "checkpoint":
        return f"checkpoint hooks of {_frame(state, entry.get('frame'))}"
    if entry.get("hooks") == "recomputation":
        return (
            f"recomputation hooks of {_frame(state, entry.get('frame'))} ({gid_label(str(entry.get('gid')))})"
        )
    return "user hooks"


def _frames_line(state: State, c: Change) -> str | None:
    op, path, old, new = c
    f = _frame(state, path[1])
    if len(path) == 2:
        return f"frame {new['name']} created" if op != "remove" and isinstance(new, dict) else None
    key = path[2]
    if key == "holders" and len(path) == 4 and isinstance(new, dict):
        what = (
            f"`{new.get('slot')}` of {_node(state, new.get('node'))}"
            if new.get("node") is not None
            else "a save"
        )
        return f"holder {f}[{path[3]}] ← {what} ({_bytes(new.get('nbytes'))} not kept)"
    if key == "holders" and len(path) == 5 and path[4] == "alive" and new is False:
        return f"holder {f}[{path[3]}] garbage-collected"
    if key == "holders" and len(path) == 6 and path[4] == "handles":
        gid = gid_label(str(path[5]))
        return f"holder {f}[{path[3]}]: handle for {gid} " + ("set" if new == "set" else "cleared")
    if key == "recomputed" and len(path) == 5:
        gid = gid_label(str(path[3]))
        if op == "remove":
            return f"holder {f}[{path[4]}]: recomputed[{gid}] → taken (tensor {old})"
        return f"holder {f}[{path[4]}]: recomputed[{gid}] ← tensor {new}"
    if key == "recomp_counter" and len(path) == 4:
        counter = f"{f}: recomp_counter[{gid_label(str(path[3]))}]"
        # A recomputation starts its counter at 0: a new entry, not a change of value.
        return f"{counter} = {new}" if op == "add" else f"{counter} {old} → {new}"
    if key == "is_recomputed" and len(path) == 4:
        return f"{f}: is_recomputed[{gid_label(str(path[3]))}] = {new}"
    if key == "early_stopped" and len(path) == 4 and isinstance(new, dict):
        return f"{f}: early stop after {new.get('count')}/{new.get('total')}"
    if key == "alive" and new is False:
        return f"frame {f} garbage-collected"
    if key == "running" and len(path) == 4:
        return f"{f}: {new} run starts" if op == "add" else f"{f}: {old} run ends"
    if key == "error" and isinstance(new, dict):
        return f"{f}: {new.get('type')}"
    return None


def _nodes_line(state: State, c: Change) -> str | None:
    path, new = c.path, c.new
    n = _node(state, path[1])
    if len(path) == 2:
        return f"node {n} created" if isinstance(new, dict) else None
    key = path[2]
    if key == "status" and new in ("executing", "executed"):
        return f"{n}: {'runs' if new == 'executing' else 'done'}"
    if key == "released" and new is True:
        return f"{n}: saved tensors released"
    if key == "freed" and new is True:
        return f"{n} freed"
    if key == "saved" and len(path) == 4 and isinstance(new, dict):
        if new.get("packed") == "holder":
            return f"{n} saves `{path[3]}` as a holder"
        return f"{n} saves `{path[3]}` ({_tensor(state, new.get('tensor'))})"
    return None


def _tensors_line(state: State, c: Change) -> str | None:
    op, path, old, new = c  # noqa: RUF059 - every line reader unpacks a change the same way
    if len(path) == 2:
        if op == "remove":
            return f"{_tensor(state, path[1], old)} freed"
        shape = "x".join(str(d) for d in new.get("shape") or []) or "scalar"
        return f"{_tensor(state, path[1], new)} [{shape}] created"
    if path[2] == "grads":
        return f"{_tensor(state, path[1])}.grad accumulated"
    if path[2] == "version":
        return f"{_tensor(state, path[1])} version {old} → {new}"
    return None


def _mem_line(state: State, c: Change) -> str | None:
    old, new = c.old, c.new
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    parts = [f"{k} {_bytes(old.get(k))} → {_bytes(new.get(k))}" for k in new if old.get(k) != new.get(k)]
    return "memory: " + ", ".join(parts) if parts else None


def _hooks_stack_line(state: State, c: Change) -> str | None:
    op, old, new = c.op, c.old, c.new
    if op == "add":
        return f"hooks stack: pushed {_hooks(state, new)}"
    if op == "remove":
        return f"hooks stack: popped {_hooks(state, old)}"
    return None


def _error_line(state: State, c: Change) -> str | None:
    new = c.new
    return f"error: {new.get('type')}" if isinstance(new, dict) else None


# Checkpoint state first: when a step changes many things, its lines are the ones to keep.
_PRIORITY = {"error": 0, "frames": 1, "hooks": 2, "nodes": 3, "tensors": 4}

_BY_ROOT: dict[str, Callable[[State, Change], str | None]] = {
    "frames": _frames_line,
    "nodes": _nodes_line,
    "tensors": _tensors_line,
    "mem": _mem_line,
    "hooks": _hooks_stack_line,
    "error": _error_line,
}


def describe_changes(state: State, changes: Sequence[Change | Sequence[Any]]) -> list[str]:
    """Short lines for what ``changes`` did (Note [What changed lines])."""
    found: list[tuple[int, int, str]] = []  # (priority, order, line)
    seen: set[str] = set()
    mem: list[Change] = []
    for raw in changes:
        c = raw if isinstance(raw, Change) else Change(*raw)
        if not c.path:
            continue
        root = c.path[0]
        if root == "mem":
            mem.append(c)  # the net change of the step, said once at the end
            continue
        describe = _BY_ROOT.get(str(root))
        line = describe(state, c) if describe else None
        if line is None or line in seen:
            continue
        seen.add(line)
        found.append((_PRIORITY.get(str(root), 5), len(found), line))
    if len(found) <= MAX_LINES:  # nothing to leave out: all of them, in event order
        lines = [line for _, _, line in found]
        extra = 0
    else:
        found.sort()
        lines = [line for _, _, line in found[:MAX_LINES]]
        extra = len(found) - len(lines)
        lines.sort(key=lambda line: next(i for _, i, x in found if x == line))  # back in event order
    if mem:
        net = Change("set", ("mem",), mem[0].old, mem[-1].new)
        if (line := _mem_line(state, net)) is not None:
            lines.append(line)
    if extra:
        lines.append(f"… and {extra} more change{'s' if extra > 1 else ''}")
    return lines
