"""What two traces are compared on: each event's fields without ids, and a few words about it.

Part of the diff of two traces (``diff.py``, Note [Aligning two traces]). Ids of tensors, nodes,
holders and storages depend on what a backend sees, so no compared field holds one: ``_Names``
names tensors by variable or shape, nodes by class without the ``engine::``/``torch::`` namespace,
and frames by label and number (the same on both sides). ``_Names.compared`` gives the fields an
event's signature is built from; ``_Names.describe`` the words the diff shows for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from engine.trace.state import Event

# The checkpoint events: what the contract is about (Note [Aligning two traces] in diff.py).
CHECKPOINT_KINDS = frozenset(
    {
        "frame_new",
        "inputs_saved",
        "fn_start",
        "fn_end",
        "pack",
        "unpack",
        "recompute_start",
        "rpack",
        "early_stop",
        "recompute_end",
        "recomputed_take",
        "holder_gc",
        "frame_gc",
        "checkpoint_error",
        "hooks_push",
        "hooks_pop",
    }
)
# What identifies a checkpoint event. Never tensor, node or holder ids (they depend on how many
# tensors a backend sees), nor messages (they name the library).
CHECKPOINT_FIELDS = (
    "frame",
    "index",
    "shape",
    "dtype",
    "outcome",
    "count",
    "total",
    "rpacks",
    "reason",
    "label",
    "parent",
    "early_stop",
    "created_in",
    "mode",
    "hook_gid",
    "hooks",
    "trigger",
    "type",
    "error",
    "saved",  # inputs_saved: how many tensors (see _Names.compared)
    "saved_for",  # unpack: the node's name and slot (see _Names.compared)
)


_NAMESPACE = re.compile(r"^\w+::autograd::")


def _gid(value: Any) -> str:
    if value is None:
        return ""
    return f"g{value}" if isinstance(value, int) else str(value)


def _shape(value: Any) -> str:
    return "[" + ", ".join(str(v) for v in value) + "]" if isinstance(value, list) else "?"


class _Names:
    """Id-free names of one trace's tensors, nodes and frames, from their introducing events."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.tensors: dict[Any, str] = {}
        self.nodes: dict[Any, str] = {}
        self.frames: dict[Any, str] = {}
        for e in events:
            kind = e.get("kind")
            if kind == "tensor_new":
                name = e.get("name")
                self.tensors[e.get("tensor")] = (
                    name or f"{_shape(e.get('shape'))} {e.get('dtype', '')}".strip()
                )
            elif kind == "node_new":
                self.nodes[e.get("node")] = _NAMESPACE.sub("", str(e.get("name", "")))
            elif kind == "frame_new":
                self.frames[e.get("frame")] = f"{e.get('label', '?')}#{e.get('frame')}"

    def tensor(self, tid: Any) -> str:
        return self.tensors.get(tid, f"tensor {tid}")

    def node(self, nid: Any) -> str:
        return self.nodes.get(nid, f"node {nid}")

    def frame(self, fid: Any) -> str:
        return self.frames.get(fid, f"frame {fid}")

    def holder(self, e: Event) -> str:
        return f"{self.frame(e.get('frame'))}[{e.get('index')}]"

    def slot(self, e: Event) -> str:
        """``SinBackward0.self``: whose saved variable a holder is ('' when the trace does not say)."""
        if e.get("node") is None:
            return ""
        return f"{self.node(e.get('node'))}.{e.get('slot')}"

    def describe(self, e: Event) -> str:
        """A short line for a person: what the event is about, without its kind."""
        kind = e.get("kind", "")
        f = self.frame(e.get("frame")) if e.get("frame") is not None else ""
        g = _gid(e.get("hook_gid"))
        if kind == "frame_new":
            where = e.get("created_in")
            made = (
                f"in the recomputation of {self.frame(where.get('recompute'))}"
                if isinstance(where, dict)
                else "in the forward"
            )
            parent = f", under {self.frame(e['parent'])}" if e.get("parent") is not None else ""
            return f"{f} {made}{parent}"
        if kind == "inputs_saved":
            return f"{f}: {len(e.get('tensors') or [])} saved"
        if kind == "fn_start":
            return f"{f} ({e.get('mode')})"
        if kind == "fn_end":
            error = f" {e['error']}" if e.get("error") else ""
            return f"{f} {e.get('outcome')}{error}"
        if kind == "pack":
            slot = self.slot(e)
            return f"{self.holder(e)} {_shape(e.get('shape'))}" + (f" ← {slot}" if slot else "")
        if kind == "unpack":
            slot = self.slot(e)
            return f"{self.holder(e)} {g}" + (f" ({slot})" if slot else "")
        if kind == "recompute_start":
            trigger = e.get("trigger") or {}
            return f"{f} {g}, for [{trigger.get('index')}]"
        if kind == "rpack":
            return f"{self.holder(e)} {e.get('outcome')} {_shape(e.get('shape'))} {g}"
        if kind == "early_stop":
            return f"{f} {e.get('count')}/{e.get('total')} {g}"
        if kind == "recompute_end":
            return f"{f} {e.get('reason')} {e.get('rpacks')}/{e.get('total')} {g}"
        if kind in ("recomputed_take",):
            return f"{self.holder(e)} {g}"
        if kind == "holder_gc":
            return self.holder(e)
        if kind == "frame_gc":
            return f
        if kind == "checkpoint_error":
            return f"{f} {e.get('type')}: {str(e.get('message', ''))[:80]}"
        if kind in ("hooks_push", "hooks_pop"):
            return f"{e.get('hooks')} {f} {g}".strip()
        if kind == "tensor_new":
            name = e.get("name")
            return f"{name} {_shape(e.get('shape'))}" if name else self.tensor(e.get("tensor"))
        if kind in ("tensor_free", "grad_accumulate"):
            return self.tensor(e.get("tensor"))
        if kind == "version_bump":
            return f"{self.tensor(e.get('tensor'))} v{e.get('version')}"
        if kind == "op":
            outs = ", ".join(self.tensor(t) for t in e.get("outputs") or [])
            return f"{e.get('name')} → {outs}" if outs else str(e.get("name"))
        if kind == "node_new":
            return self.node(e.get("node"))
        if kind == "saved":
            return f"{self.node(e.get('node'))}.{e.get('slot')} as {e.get('packed')}"
        if kind in ("saved_release", "node_free", "node_exec", "node_exec_end"):
            return self.node(e.get("node"))
        if kind == "backward_start":
            return f"{e.get('api')} retain_graph={e.get('retain_graph')}"
        if kind == "backward_end":
            return "failed" if e.get("error") else ""
        if kind == "mark":
            return str(e.get("label", ""))[:80]
        if kind == "error":
            return f"{e.get('type')}: {str(e.get('message', ''))[:80]}"
        return ""

    def compared(self, e: Event) -> dict[str, Any]:
        """The fields an event is compared on (Note [Aligning two traces] in diff.py)."""
        kind = e.get("kind", "")
        if kind == "inputs_saved":
            # The tensors are ids; how many there are is what 2.8 (a dummy first) and 2.9+ differ in.
            return {"frame": e.get("frame"), "saved": len(e.get("tensors") or [])}
        if kind == "unpack":
            # Which node's saved variable a holder stands for, by the node's name (ids differ);
            # a torch trace knows it from the first unpack on (its packs come before the node).
            node = self.nodes.get(e.get("node"))
            saved_for = f"{node}.{e.get('slot')}" if node is not None else e.get("slot")
            return {**{k: e[k] for k in CHECKPOINT_FIELDS if k in e}, "saved_for": saved_for}
        if kind in CHECKPOINT_KINDS:
            return {k: e[k] for k in CHECKPOINT_FIELDS if k in e}
        if kind == "tensor_new":
            return {k: e.get(k) for k in ("shape", "dtype", "requires_grad", "is_leaf", "name") if k in e}
        if kind in ("tensor_free", "grad_accumulate"):
            return {"tensor": self.tensor(e.get("tensor"))}
        if kind == "version_bump":
            return {"tensor": self.tensor(e.get("tensor")), "version": e.get("version")}
        if kind == "op":
            return {"name": e.get("name")}
        if kind == "node_new":
            return {"name": self.node(e.get("node")), "recompute": e.get("recompute")}
        if kind == "saved":
            return {k: e.get(k) for k in ("slot", "packed", "hooks") if k in e}
        if kind in ("saved_release", "node_free", "node_exec", "node_exec_end"):
            return {"node": self.node(e.get("node"))}
        if kind == "backward_start":
            return {k: e.get(k) for k in ("api", "retain_graph", "create_graph", "depth") if k in e}
        if kind == "backward_end":
            return {"error": e.get("error")}
        if kind == "mark":
            return {"label": e.get("label")}
        if kind == "error":
            return {"type": e.get("type")}
        return {}
