"""The recorder of the torch backend: the engine's ``Recorder`` with torch objects.

Every handler of ``engine/trace/_kinds.py`` that only reads what torch and the engine share
(checkpoint frames, holders, ``recomp_counter``, hooks) is used as is; what reads the engine's
internals (``t._data``, ``node._next_edges``, ``GraphTask``) is replaced here.

Note [Torch nodes have no identity]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A C++ autograd node reaches Python through a wrapper object that is made when asked for and
dropped when unused, and that cannot be weakly referenced. So a node is known by a key that
stays the same for its whole life: its ``_sequence_nr()`` (unique per thread), or for an
``AccumulateGrad`` (whose number is UINT64_MAX) the ``id()`` of its leaf. The recorder keeps no
reference to a node: a strong one would keep the node, its saved variables and their checkpoint
holders alive, and change the very lifetimes the trace shows. The cost: ``node_free`` is never
recorded for torch, and a hook registered on a node holds only its trace id.
"""

from __future__ import annotations

from typing import Any

from engine.trace._core import NodeEntry, TensorEntry, live_entry
from engine.trace._kinds import UINT64_MAX, Recorder, scalar

ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"


def _dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


class TorchRecorder(Recorder):
    """Records torch objects into the engine's trace format."""

    def __init__(self, events: list[dict[str, Any]], files: dict[str, str], torch: Any) -> None:
        # pack events whose node is not known yet, by holder id, with the saved tensor's version
        # (Note [Which node a pack was for])
        self._pending_packs: dict[int, tuple[dict[str, Any], int]] = {}
        super().__init__(events, files)
        self.torch = torch
        self._Tensor = torch.Tensor
        self._Module = torch.nn.Module
        # Nodes by their lifelong key (Note [Torch nodes have no identity]).
        self._node_keys: dict[Any, NodeEntry] = {}
        self._node_by_nid: dict[int, NodeEntry] = {}
        # Node sequence numbers count from the recording's start: a throwaway node reads the
        # thread's counter (torch has no getter for it).
        probe = torch.ones(1, requires_grad=True).mul(1.0)
        self.seq_base = probe.grad_fn._sequence_nr() + 1
        del probe
        self.on_new_node: Any = None  # set by the instrumentation: registers the node's hooks
        # Backward calls in progress, innermost last: (trace gid, retain_graph).
        self.backwards: list[tuple[int, bool]] = []
        self._next_gid = 0

    # --- phase and graph tasks ------------------------------------------------------------------

    def phase(self) -> str:
        if self.recomputing:
            return "recompute"
        return "backward" if self.backwards else "forward"

    def gid(self) -> int | None:
        return self.backwards[-1][0] if self.backwards else None

    def new_task(self, retain_graph: bool) -> int:
        """A backward call starts: its gid, bound to torch's graph task id when a hook first
        sees it (torch numbers a task only once it runs)."""
        gid = self._next_gid
        self._next_gid += 1
        self.backwards.append((gid, retain_graph))
        return gid

    def bind_task(self, raw: int) -> None:
        """Called from node hooks: the graph task running is the innermost backward call."""
        if raw != -1 and raw not in self._task_gids and self.backwards:
            self._task_gids[raw] = self.backwards[-1][0]

    def task_gid(self, raw: int) -> int:
        gid = self._task_gids.get(raw)
        if gid is None:
            gid = self._task_gids[raw] = self._next_gid
            self._next_gid += 1
        return gid

    # --- tensors --------------------------------------------------------------------------------

    # A tensor first seen when an event names it was made inside torch (a gradient, the detached
    # copy a recomputation keeps), not before the recording: it gets a plain tensor_new.
    unseen_is_pre_existing = False

    def is_hidden(self, t: Any) -> bool:
        return not isinstance(t, self._Tensor)  # torch wraps no Python numbers as tensors

    def register(self, t: Any) -> None:
        """An op's output: its tensor_new comes before the next event (it may be known already:
        a saved output is seen by the pack hook while the op runs)."""
        if live_entry(self._tensors, t) is None:
            self._register_tensor(t)

    def storage_of(self, t: Any) -> tuple[int, int]:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        # Empty storages all have address 0: each counts on its own (0 bytes).
        return (ptr if ptr else id(storage)), int(storage.nbytes())

    def _tensor_new(self, t: Any, entry: TensorEntry, pre_existing: bool = False) -> None:
        node = self.nid(t.grad_fn)
        base = self.tid(t._base) if t._is_view() else None
        storage, storage_nbytes = self._number_tensor(t, entry)
        fields: dict[str, Any] = {
            "tensor": entry.tid,
            "shape": list(t.shape),
            "dtype": _dtype_name(t),
            "nbytes": t.numel() * t.element_size(),
            "requires_grad": bool(t.requires_grad),
            "is_leaf": t.grad_fn is None,
            "node": node,
            "output_nr": int(t.output_nr),
            "base": base,
            "storage": storage,
            "storage_nbytes": storage_nbytes,
            "version": int(t._version),
            "name": None,
        }
        self._append_tensor_new(entry, fields)

    def _shape_fields(self, t: Any) -> dict[str, Any]:
        return {"shape": list(t.shape), "dtype": _dtype_name(t), "nbytes": t.numel() * t.element_size()}

    # --- nodes ----------------------------------------------------------------------------------

    def node_key(self, node: Any) -> Any:
        if node.name() == ACCUMULATE_GRAD:
            return ("leaf", id(node.variable))
        return node._sequence_nr()

    def node_entry(self, node: Any) -> NodeEntry | None:
        return None if node is None else self._node_keys.get(self.node_key(node))

    def register_node(self, node: Any, pre_existing: bool = False) -> NodeEntry:
        # What it refers to first: their events come before, with smaller ids.
        next_edges = [[self.nid(n) if n is not None else None, int(nr)] for n, nr in node.next_functions]
        is_acc = node.name() == ACCUMULATE_GRAD
        variable = self.tid(node.variable) if is_acc else None
        entry = NodeEntry(self._n_nodes, 0)
        self._n_nodes += 1
        self._node_keys[self.node_key(node)] = entry
        self._node_by_nid[entry.nid] = entry
        seq_nr = node._sequence_nr()
        fields: dict[str, Any] = {
            "node": entry.nid,
            "name": node.name(),
            "seq_nr": seq_nr if seq_nr == UINT64_MAX else seq_nr - self.seq_base,
            "next": next_edges,
            "frame": self._frame_in_hooks(),
            "recompute": bool(self.recomputing),
        }
        if is_acc:
            fields["variable"] = variable
        if self.module_stack:
            fields["module"] = self.module_stack[-1]  # Note [Module paths]
        self.append("node_new", fields)
        if self.on_new_node is not None:
            self.on_new_node(node, entry.nid)
        return entry

    def edge(self, t: Any) -> list[Any]:
        """The gradient edge of a tensor: ``[node, output_nr]`` (a leaf's is its AccumulateGrad)."""
        edge = self.torch.autograd.graph.get_gradient_edge(t)  # a GradientEdge (node, output_nr)
        return [self.nid(edge.node), int(edge.output_nr)]

    # --- kinds with torch's fields --------------------------------------------------------------

    @property
    def pending_packs(self) -> bool:
        return bool(self._pending_packs)

    def _k_pack(self, f: dict[str, Any]) -> None:
        # Its node and slot are found after the op (Note [Which node a pack was for] in
        # _instrument.py); the version is the one the tensor had when it was saved.
        super()._k_pack(f)
        event = self.events[-1]
        self._pending_packs[event["holder"]] = (event, int(f["tensor"]._version))

    def _k_t_pack_node(self, f: dict[str, Any]) -> None:
        """The node a probe found for some pending packs: their ``saved`` events (as the engine
        emits them right after each pack), and the node and slot of the holders' later events."""
        nid: int = f["nid"]
        for slot, holder, frame in f["slots"]:
            h = self.holder_entry(holder, frame)
            pending = self._pending_packs.pop(h.hid, None)
            if pending is None:
                continue
            pack, version = pending
            h.nid, h.slot = nid, slot
            fields = {
                "node": nid,
                "slot": slot,
                "tensor": pack["tensor"],
                "packed": "holder",
                "hooks": "checkpoint",
                "holder": h.hid,
                "version": version,
                "nbytes": 0,
            }
            self.append("saved", fields)
            entry = self._node_by_nid.get(nid)
            if entry is not None:
                entry.was_saved = True  # its saved_release comes when backward frees it

    def _k_t_packs_done(self, f: dict[str, Any]) -> None:
        self._pending_packs.clear()

    def _k_t_saved(self, f: dict[str, Any]) -> None:
        """What a node made outside checkpoint hooks saved (read back from its ``_saved_*``)."""
        nid: int = f["nid"]
        entry = self._node_by_nid.get(nid)
        if entry is None:
            return
        entry.was_saved = True
        for slot, t in f["saved"]:
            nbytes = self._count_saved(entry, t) if t is not None else 0
            fields = {
                "node": nid,
                "slot": slot,
                "tensor": self.tid(t),
                "packed": "tensor",
                "hooks": None,
                "holder": None,
                "version": int(t._version) if t is not None else 0,
                "nbytes": nbytes,
            }
            self.append("saved", fields)

    def _k_t_backward_start(self, f: dict[str, Any]) -> None:
        fields = {
            "api": f["api"],
            "roots": [self.edge(t) for t in f["roots"]],
            "inputs": [self.edge(t) for t in f["inputs"]],
            "retain_graph": bool(f["retain_graph"]),
            "create_graph": bool(f["create_graph"]),
            "depth": len(self.backwards),
        }
        gid = self.new_task(bool(f["retain_graph"]))
        self.append("backward_start", fields, phase="recompute" if self.recomputing else "backward", gid=gid)

    def _k_t_backward_end(self, f: dict[str, Any]) -> None:
        gid = self.backwards[-1][0] if self.backwards else None
        self.append("backward_end", {"error": bool(f["error"])}, gid=gid)
        if self.backwards:
            self.backwards.pop()

    def _k_t_node_exec(self, f: dict[str, Any]) -> None:
        self.bind_task(f["task"])
        self.append("node_exec", {"node": f["nid"]})

    def _k_t_node_exec_end(self, f: dict[str, Any]) -> None:
        nid = f["nid"]
        grads = [self.tid(g) for g in f["grads"]]
        self.append("node_exec_end", {"node": nid, "grads": grads})
        v = f.get("variable")  # an AccumulateGrad's leaf (the hook passes None for other nodes)
        if v is not None:
            self.append("grad_accumulate", {"tensor": self.tid(v), "grad": self.tid(v.grad), "node": nid})
        if self.backwards and not self.backwards[-1][1]:
            self._release_saved(self._node_by_nid.get(nid))

    def _value(self, v: Any) -> Any:
        """An op argument: torch's ops take Python numbers as they are."""
        if isinstance(v, self._Tensor):
            return self.tid(v)
        return None if v is None else scalar(v)


__all__ = ["ACCUMULATE_GRAD", "TorchRecorder"]
