"""One handler per event kind: turns what a call site passed to ``emit.emit`` into the event's
JSON fields (docs/trace.md lists them). Handlers run after ``RecorderCore.flush``, so every
tensor an event names already has its ``tensor_new``.
"""

from __future__ import annotations

import math
from typing import Any

from engine.trace._core import FrameEntry, HolderEntry, NodeEntry, RecorderCore, TensorEntry, live_entry

# AccumulateGrad's sequence number is UINT64_MAX; JSON keeps it exact (a JavaScript number would
# not: viewers should treat any seq_nr >= 2**53 as "runs as soon as ready").
UINT64_MAX = 2**64 - 1


def scalar(x: Any) -> dict[str, Any]:
    """A Python number as an op argument: ``{"scalar": x}``, ``repr`` for what JSON cannot hold
    (inf, nan, complex)."""
    plain = isinstance(x, bool | int) or (isinstance(x, float) and math.isfinite(x))
    return {"scalar": x if plain else repr(x)}


class Recorder(RecorderCore):
    def __init__(self, events: list[dict[str, Any]], files: dict[str, str]) -> None:
        super().__init__(events, files)
        from engine.autograd import _Identity
        from engine.autograd.graph import AccumulateGrad

        self._AccumulateGrad = AccumulateGrad
        self._Identity = _Identity
        # The node and slot of the save whose pack hook runs now (set by ``_saving``).
        self._save_ctx: tuple[int | None, str | None] = (None, None)
        self._last_frame: int | None = None  # the frame_new whose function has not started yet
        self._fns: list[int | None] = []  # checkpointed functions running (their frames)
        self._last_unpack: dict[int | None, int | None] = {}  # frame -> index of its last unpack

    # --- helpers --------------------------------------------------------------------------------

    def _frame_in_hooks(self) -> int | None:
        """The innermost frame whose checkpoint or recomputation hooks are on the stack."""
        if not self.hooks:
            return None
        for entry in reversed(self.hooks):
            if entry["frame"] is not None:
                return int(entry["frame"])
        return None

    def _edge(self, edge: Any) -> list[Any]:
        node, nr = edge
        if node is None or isinstance(node, self._Identity):
            return [None, nr]
        return [self.nid(node), nr]

    def _shape_fields(self, t: Any) -> dict[str, Any]:
        return {"shape": list(t._data.shape), "dtype": t._dtype.name, "nbytes": int(t._data.nbytes)}

    def _value(self, v: Any) -> Any:
        """An op argument: a tensor's id, ``{"scalar": x}`` for a wrapped Python number."""
        if v is None:
            return None
        if v._wrapped_number:
            return scalar(v._data.item())
        return self.tid(v)

    # --- autograd kinds -------------------------------------------------------------------------

    def register_node(self, node: Any, pre_existing: bool = False) -> NodeEntry:
        # The nodes and leaf it refers to first: their events come before, with smaller ids.
        next_edges = [self._edge(e) for e in node._next_edges]
        variable = self.tid(node.variable) if isinstance(node, self._AccumulateGrad) else None
        entry = self.new_node_entry(node)
        fields: dict[str, Any] = {
            "node": entry.nid,
            "name": node.name(),
            "seq_nr": node._seq_nr if node._seq_nr == UINT64_MAX else node._seq_nr - self.seq_base,
            "next": next_edges,
            "frame": self._frame_in_hooks(),
            "recompute": bool(self.recomputing),
        }
        if isinstance(node, self._AccumulateGrad):
            fields["variable"] = variable
        if pre_existing:
            fields["pre_existing"] = True
        elif self.module_stack:
            fields["module"] = self.module_stack[-1]  # Note [Module paths]
        self.append("node_new", fields)
        return entry

    def _k_node_new(self, f: dict[str, Any]) -> None:
        if self.node_entry(f["node"]) is None:
            self.register_node(f["node"])

    def _k_node_free(self, f: dict[str, Any]) -> None:
        entry: NodeEntry = f["entry"]
        self.forget(self._nodes, entry)
        self._drop_saved(entry)
        self.append("node_free", {"node": entry.nid})

    def _count_saved(self, entry: NodeEntry, stored: Any) -> int:
        """``stored`` is kept by ``entry``'s saved variables: its storage counts as saved memory
        until they are released. Returns its bytes."""
        skey, nbytes = self.storage_of(stored)
        self.saved.add(skey, nbytes)
        entry.saved.append(skey)
        return nbytes

    def _drop_saved(self, entry: NodeEntry) -> None:
        for skey in entry.saved:
            self.saved.remove(skey)
        entry.saved = []

    def _release_saved(self, entry: NodeEntry | None) -> None:
        # Only nodes that saved something have anything to release.
        if entry is not None and entry.was_saved:
            self._drop_saved(entry)
            self.append("saved_release", {"node": entry.nid})

    def _k_tensor_free(self, f: dict[str, Any]) -> None:
        entry: TensorEntry = f["entry"]
        if self.tensor_freed(entry):
            self.append("tensor_free", {"tensor": entry.tid})

    def _k__saving(self, f: dict[str, Any]) -> None:
        self._save_ctx = (self.nid(f["node"]), f["slot"])

    def _k_saved(self, f: dict[str, Any]) -> None:
        self._save_ctx = (None, None)
        sv, t, node = f["sv"], f["tensor"], f["node"]
        nid = self.nid(node)
        entry = self.node_entry(node)
        assert entry is not None
        entry.was_saved = True
        hooks = None
        holder = None
        stored: Any = sv._data
        packed = "tensor"
        if sv._hooks is not None:
            hooks = self.hooks[-1]["hooks"] if self.hooks else "user"
            stored = sv._packed
            h = live_entry(self._holders, stored)
            if h is not None:
                packed, holder, stored = "holder", h.hid, None
            elif not isinstance(stored, self._Tensor):
                packed, stored = "other", None
        nbytes = 0
        if stored is not None and not stored._wrapped_number:
            nbytes = self._count_saved(entry, stored)
        fields: dict[str, Any] = {
            "node": nid,
            "slot": f["slot"],
            "tensor": self.tid(t),
            "packed": packed,
            "hooks": hooks,
            "holder": holder,
            "version": sv._saved_version,
            "nbytes": nbytes,
        }
        self.append("saved", fields)

    def _k_saved_release(self, f: dict[str, Any]) -> None:
        self._release_saved(self.node_entry(f["node"]))

    def _k_backward_start(self, f: dict[str, Any]) -> None:
        task = f["task"]
        gid = self.task_gid(task.id)
        self.tasks.append(task.id)
        fields = {
            "api": "backward" if f["accumulate_grad"] else "grad",
            "roots": [self._edge(e) for e in f["roots"]],
            "inputs": [self._edge(e) for e in f["inputs"]],
            "retain_graph": bool(task.keep_graph),
            "create_graph": bool(task.create_graph),
            "depth": task.reentrant_depth,
        }
        self.append("backward_start", fields, phase="recompute" if self.recomputing else "backward", gid=gid)

    def _k_backward_end(self, f: dict[str, Any]) -> None:
        task = f["task"]
        gid = self.task_gid(task.id)
        self.append("backward_end", {"error": bool(task.has_error)}, gid=gid)
        if task.id in self.tasks:
            # Normally the top; a failed inner backward unwinds in order too.
            del self.tasks[len(self.tasks) - 1 - self.tasks[::-1].index(task.id)]

    def _k_node_exec(self, f: dict[str, Any]) -> None:
        self.append("node_exec", {"node": self.nid(f["node"])})

    def _k_node_exec_end(self, f: dict[str, Any]) -> None:
        grads = [self.tid(g) for g in f["grads"]]
        self.append("node_exec_end", {"node": self.nid(f["node"]), "grads": grads})

    def _k_grad_accumulate(self, f: dict[str, Any]) -> None:
        fields = {"tensor": self.tid(f["tensor"]), "grad": self.tid(f["grad"]), "node": self.nid(f["node"])}
        self.append("grad_accumulate", fields)

    def _k_version_bump(self, f: dict[str, Any]) -> None:
        t = f["tensor"]
        self.append("version_bump", {"tensor": self.tid(t), "version": int(t._version)})

    def _k_op(self, f: dict[str, Any]) -> None:
        fields = {
            "name": f["name"],
            "inputs": [self._value(v) for v in f["inputs"]],
            "outputs": [self.tid(t) for t in f["outputs"]],
            "node": self.nid(f["node"]),
        }
        self.append("op", fields)

    def _k_hooks_push(self, f: dict[str, Any]) -> None:
        hooks = f["hooks"]
        kind = getattr(hooks, "_trace_kind", "user")
        frame_ref = getattr(hooks, "_trace_frame", None)
        entry: dict[str, Any] = {"hooks": kind, "frame": self.fid(frame_ref() if frame_ref else None)}
        if kind == "recomputation":
            entry["hook_gid"] = self.hook_gid(getattr(hooks, "_trace_gid", None))
        self.hooks.append(entry)
        self.append("hooks_push", dict(entry))

    def _k_hooks_pop(self, f: dict[str, Any]) -> None:
        # The engine pops the top of the stack, whichever pair that is (Note [Saved-tensor
        # hooks stack]); so does the mirror.
        entry = self.hooks.pop() if self.hooks else {"hooks": "user", "frame": None}
        self.append("hooks_pop", dict(entry))

    def _k_mark(self, f: dict[str, Any]) -> None:
        self.append("mark", f)

    # --- checkpoint kinds -----------------------------------------------------------------------

    def register_frame(self, frame: Any, label: str, pre_existing: bool = False) -> FrameEntry:
        entry = self.new_frame_entry(frame, label)
        created_in: Any = {"recompute": self.recomputing[-1][0]} if self.recomputing else "forward"
        fields: dict[str, Any] = {
            "frame": entry.fid,
            "label": label,
            "parent": self._frame_in_hooks(),
            "early_stop": bool(frame.early_stop),
            "created_in": created_in,
        }
        if pre_existing:
            fields["pre_existing"] = True
        self.append("frame_new", fields)
        return entry

    def _k_frame_new(self, f: dict[str, Any]) -> None:
        self._last_frame = self.register_frame(f["frame"], f["label"]).fid

    def _k_frame_gc(self, f: dict[str, Any]) -> None:
        entry: FrameEntry = f["entry"]
        self.forget(self._frames, entry)
        self.append("frame_gc", {"frame": entry.fid})

    def _k_inputs_saved(self, f: dict[str, Any]) -> None:
        fields = {
            "frame": self.fid(f["frame"]),
            "tensors": [self.tid(t) for t in f["tensors"]],
            "node": self.nid(f["node"]),
        }
        self.append("inputs_saved", fields)

    def _k_fn_start(self, f: dict[str, Any]) -> None:
        # The call sites cannot name the frame (see _traced_call in
        # engine/utils/_checkpoint_trace.py): a forward run belongs to the frame just created, a
        # recomputation to the frame being recomputed.
        mode = f["mode"]
        if mode == "forward":
            fid, self._last_frame = self._last_frame, None
        else:
            fid = self.recomputing[-1][0] if self.recomputing else None
        self._fns.append(fid)
        self.append("fn_start", {"frame": fid, "mode": mode})

    def _k_fn_end(self, f: dict[str, Any]) -> None:
        fid = self._fns.pop() if self._fns else None
        fields = {"frame": fid, "outcome": f["outcome"]}
        if "error" in f:
            fields["error"] = f["error"]
        self.append("fn_end", fields)

    def _holder_fields(self, h: HolderEntry) -> dict[str, Any]:
        return {"frame": h.fid, "index": h.index, "holder": h.hid}

    def _k_pack(self, f: dict[str, Any]) -> None:
        fid = self.fid(f["frame"])
        h = self.new_holder_entry(f["holder"], fid, f["index"])
        h.nid, h.slot = self._save_ctx
        x = f["tensor"]
        fields = {**self._holder_fields(h), "tensor": self.tid(x), **self._shape_fields(x)}
        fields.update(node=h.nid, slot=h.slot)
        self.append("pack", fields)

    def _k_unpack(self, f: dict[str, Any]) -> None:
        h = self.holder_entry(f["holder"], f["frame"])
        self._last_unpack[h.fid] = h.index
        fields = {
            **self._holder_fields(h),
            "node": h.nid,
            "slot": h.slot,
            "hook_gid": self.hook_gid(f["gid"]),
        }
        self.append("unpack", fields)

    def _k_recompute_start(self, f: dict[str, Any]) -> None:
        fid = self.fid(f["frame"])
        hook_gid = self.hook_gid(f["gid"])
        trigger = {"frame": fid, "index": self._last_unpack.get(fid)} if fid in self._last_unpack else None
        self.recomputing.append((fid, hook_gid))
        self.append("recompute_start", {"frame": fid, "trigger": trigger, "hook_gid": hook_gid})

    def _k_rpack(self, f: dict[str, Any]) -> None:
        x = f["tensor"]
        hook_gid = self.hook_gid(f["gid"])
        holder = None
        if f["outcome"] == "keep":
            h = self.holder_entry(f["holder"], f["frame"])
            holder = h.hid
            skey, nbytes = self.storage_of(x)
            if h.recomputed.get(hook_gid) is None:
                h.recomputed[hook_gid] = skey
                self.recomputed.add(skey, nbytes)
        node, slot = self._save_ctx
        fields = {
            "frame": self.fid(f["frame"]),
            "index": f["index"],
            "outcome": f["outcome"],
            "holder": holder,
            "tensor": self.tid(x),
            "shape": self._shape_fields(x)["shape"],
            "node": node,
            "slot": slot,
            "hook_gid": hook_gid,
        }
        self.append("rpack", fields)

    def _k_early_stop(self, f: dict[str, Any]) -> None:
        fields = {"frame": self.fid(f["frame"]), "count": f["count"], "total": f["total"]}
        self.append("early_stop", {**fields, "hook_gid": self.hook_gid(f["gid"])})

    def _k_recompute_end(self, f: dict[str, Any]) -> None:
        frame, gid = f["frame"], f["gid"]
        fields = {
            "frame": self.fid(frame),
            "reason": f["reason"],
            # .get: reading a defaultdict would insert the key
            "rpacks": frame.recomp_counter.get(gid, 0),
            "total": len(frame.weak_holders),
            "hook_gid": self.hook_gid(gid),
        }
        self.append("recompute_end", fields)
        if self.recomputing:
            self.recomputing.pop()

    def _k_recomputed_take(self, f: dict[str, Any]) -> None:
        h = self.holder_entry(f["holder"], f["frame"])
        hook_gid = self.hook_gid(f["gid"])
        skey = h.recomputed.pop(hook_gid, None)
        if skey is not None:
            self.recomputed.remove(skey)
        fields = {**self._holder_fields(h), "tensor": self.tid(f["tensor"]), "hook_gid": hook_gid}
        self.append("recomputed_take", fields)

    def _k_holder_gc(self, f: dict[str, Any]) -> None:
        h: HolderEntry = f["entry"]
        self.forget(self._holders, h)
        # Its handles die with it, and the WeakKeyDictionary entries they keyed (Rule 4).
        for skey in h.recomputed.values():
            self.recomputed.remove(skey)
        h.recomputed.clear()
        self.append("holder_gc", self._holder_fields(h))

    def _k_checkpoint_error(self, f: dict[str, Any]) -> None:
        error = f["error"]
        # An error escaping nested frames' unpack hooks is reported once, by the innermost.
        if getattr(error, "_autograd_lens_reported", False):
            return
        error._autograd_lens_reported = True
        fields = {"frame": self.fid(f["frame"]), "type": type(error).__name__, "message": str(error)}
        self.append("checkpoint_error", fields)
