"""Hand-written traces that follow ../shared/spec/trace_events.md, field by field.

They mirror what the engine does for small scenarios (docs/checkpoint.md) so the reducer, captions
and exports can be tested without the recorder. ``Builder`` keeps the bookkeeping a real run would
have (ids, phase, gid, memory) so each scenario reads like the run it describes.
"""

from __future__ import annotations

import math
from typing import Any

F64 = 8


class Builder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.phase = "forward"
        self.gid: int | None = None
        self.n_tensors = self.n_nodes = self.n_frames = self.n_holders = 0
        self.nbytes: dict[int, int] = {}
        self.saved_bytes: dict[int, int] = {}  # node -> bytes saved as plain tensors
        self.recomputed: dict[tuple[int, int, int], int] = {}  # (frame, gid, index) -> bytes
        self.holders: dict[tuple[int, int], tuple[int, int]] = {}  # (frame, index) -> (holder, bytes)
        self.n_packs: dict[int, int] = {}
        self.counter: dict[tuple[int, int], int] = {}
        self.line = 1

    # --- raw events --------------------------------------------------------------------------------

    def ev(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {
            "seq": len(self.events),
            "kind": kind,
            "t_ns": 1000 * len(self.events) + 7,
            "phase": self.phase,
            "gid": self.gid,
            "src": {"file": "scenario.py", "line": self.line},
            "mem": {
                "live": sum(self.nbytes.values()),
                "saved": sum(self.saved_bytes.values()),
                "recomputed": sum(self.recomputed.values()),
            },
        }
        event |= fields
        self.events.append(event)
        return event

    def tensor(
        self,
        shape: list[int],
        name: str | None = None,
        node: int | None = None,
        requires_grad: bool = False,
        base: int | None = None,
    ) -> int:
        t = self.n_tensors
        self.n_tensors += 1
        nbytes = F64 * math.prod(shape)
        if base is None:
            self.nbytes[t] = nbytes
        self.ev(
            "tensor_new",
            tensor=t,
            shape=shape,
            dtype="float64",
            nbytes=nbytes,
            requires_grad=requires_grad or node is not None,
            is_leaf=node is None,
            node=node,
            base=base,
            name=name,
        )
        return t

    def free(self, t: int) -> None:
        self.nbytes.pop(t, None)
        self.ev("tensor_free", tensor=t)

    def node(self, name: str, nexts: list[list[Any]], frame: int | None = None) -> int:
        n = self.n_nodes
        self.n_nodes += 1
        self.ev("node_new", node=n, name=name, seq_nr=n, next=nexts, frame=frame)
        return n

    def save(self, node: int, slot: str, tensor: int, packed: str = "tensor") -> None:
        if packed == "tensor":
            self.saved_bytes[node] = self.saved_bytes.get(node, 0) + self.nbytes.get(tensor, 0)
        self.ev("saved", node=node, slot=slot, tensor=tensor, packed=packed, version=0)

    def release(self, node: int) -> None:
        self.saved_bytes.pop(node, None)
        self.ev("saved_release", node=node)

    # --- checkpoint --------------------------------------------------------------------------------

    def frame(
        self, label: str, parent: int | None = None, early_stop: bool = True, created_in: Any = "forward"
    ) -> int:
        f = self.n_frames
        self.n_frames += 1
        self.n_packs[f] = 0
        self.ev(
            "frame_new", frame=f, label=label, parent=parent, early_stop=early_stop, created_in=created_in
        )
        return f

    def pack(self, frame: int, node: int, slot: str, tensor: int, shape: list[int]) -> int:
        index = self.n_packs[frame]
        self.n_packs[frame] += 1
        h = self.n_holders
        self.n_holders += 1
        self.holders[(frame, index)] = (h, F64 * math.prod(shape))
        self.ev(
            "pack",
            frame=frame,
            index=index,
            holder=h,
            tensor=tensor,
            shape=shape,
            dtype="float64",
            nbytes=F64 * math.prod(shape),
            node=node,
            slot=slot,
        )
        self.save(node, slot, tensor, packed="holder")
        return index

    def unpack(self, frame: int, index: int) -> None:
        self.ev("unpack", frame=frame, index=index, holder=self.holders[(frame, index)][0])

    def take(self, frame: int, index: int) -> None:
        self.recomputed.pop((frame, self.gid or -1, index), None)
        self.ev("recomputed_take", frame=frame, index=index, holder=self.holders[(frame, index)][0])

    def holder_gc(self, frame: int, index: int) -> None:
        for key in [k for k in self.recomputed if k[0] == frame and k[2] == index]:
            del self.recomputed[key]
        self.ev("holder_gc", frame=frame, index=index, holder=self.holders[(frame, index)][0])

    def rpack(self, frame: int, tensor: int, alive: bool = True) -> int:
        gid = self.gid if self.gid is not None else -1
        index = self.counter.get((frame, gid), 0)
        self.counter[(frame, gid)] = index + 1
        if index >= self.n_packs[frame]:
            self.ev("rpack", frame=frame, index=index, outcome="extra", tensor=tensor)
        elif alive:
            self.recomputed[(frame, gid, index)] = self.holders[(frame, index)][1]
            self.ev("rpack", frame=frame, index=index, outcome="keep", tensor=tensor)
        else:
            self.ev("rpack", frame=frame, index=index, outcome="skip", tensor=tensor)
        return index

    def recompute_begin(self, frame: int, trigger: tuple[int, int]) -> None:
        self.ev("hooks_push", hooks="recomputation", frame=frame, gid=self.gid)
        self.ev("recompute_start", frame=frame, trigger={"frame": trigger[0], "index": trigger[1]})
        self.phase = "recompute"
        self.ev("fn_start", frame=frame, mode="recompute")

    def recompute_finish(self, frame: int, stopped: bool, outer_phase: str = "backward") -> None:
        gid = self.gid if self.gid is not None else -1
        total = self.n_packs[frame]
        if stopped:
            self.ev("early_stop", frame=frame, count=total, total=total)
        self.ev("fn_end", frame=frame, outcome="early_stop" if stopped else "returned")
        self.ev("hooks_pop", hooks="recomputation", frame=frame, gid=self.gid)
        self.phase = outer_phase
        reason = "early_stop" if stopped else "completed"
        self.ev("recompute_end", frame=frame, reason=reason, rpacks=self.counter[(frame, gid)], total=total)

    def checkpoint_begin(
        self, label: str, args: list[int], parent: int | None = None, rparent: int | None = None, **kw: Any
    ) -> int:
        """Frame, dummy, _NoopSaveInputs (packed by the parent's hook when nested, by the
        recomputation hook of ``rparent`` when met while recomputing it), hooks, body start."""
        f = self.frame(label, parent=parent, **kw)
        dummy = self.tensor([0], requires_grad=True)
        noop = self.node("_NoopSaveInputsBackward", [[None, 0]] + [[None, 0] for _ in args], frame=parent)
        for i, t in enumerate([dummy, *args]):
            shape = [0] if i == 0 else self.shape_of(t)
            if parent is not None:
                self.pack(parent, noop, f"saved_tensors[{i}]", t, shape)
            elif rparent is not None:
                self.rpack(rparent, t)
                self.save(noop, f"saved_tensors[{i}]", t, packed="tensor")
            else:
                self.save(noop, f"saved_tensors[{i}]", t)
        self.ev("inputs_saved", frame=f, tensors=[dummy, *args])
        self.ev("hooks_push", hooks="checkpoint", frame=f, gid=self.gid)
        self.ev("fn_start", frame=f, mode="forward")
        return f

    def checkpoint_end(self, f: int) -> None:
        self.ev("fn_end", frame=f, outcome="returned")
        self.ev("hooks_pop", hooks="checkpoint", frame=f, gid=self.gid)

    def shape_of(self, t: int) -> list[int]:
        for e in self.events:
            if e["kind"] == "tensor_new" and e["tensor"] == t:
                return list(e["shape"])
        raise KeyError(t)

    # --- backward ----------------------------------------------------------------------------------

    def backward_begin(
        self, gid: int, roots: list[int], retain_graph: bool = False, api: str = "backward"
    ) -> str:
        before = self.phase
        self.gid = gid
        self.phase = "backward" if before != "recompute" else "recompute"
        self.ev(
            "backward_start", api=api, roots=roots, inputs=[], retain_graph=retain_graph, create_graph=False
        )
        return before

    def backward_finish(self, before: str, gid: int | None = None) -> None:
        self.ev("backward_end")
        self.phase = before
        self.gid = gid


# --- scenarios ------------------------------------------------------------------------------------


def single(early_stop: bool = True, retain_twice: bool = False) -> list[dict[str, Any]]:
    """``out = checkpoint(f, x)`` with ``f(t) = t.sin().exp()``, then ``out.sum().backward()``;
    with ``retain_twice`` a first ``backward(retain_graph=True)`` and a second backward (Rule 4)."""
    b = Builder()
    x = b.tensor([2, 3], name="x", requires_grad=True)
    acc = b.node("AccumulateGrad", [])
    f = b.checkpoint_begin("f", [x], early_stop=early_stop)
    b.line = 2
    sin = b.node("SinBackward0", [[acc, 0]], frame=f)
    b.pack(f, sin, "self", x, [2, 3])
    y = b.tensor([2, 3], node=sin)
    exp = b.node("ExpBackward0", [[sin, 0]], frame=f)
    z = b.tensor([2, 3], node=exp)
    b.pack(f, exp, "result", z, [2, 3])
    b.free(y)
    b.checkpoint_end(f)
    b.line = 3
    total = b.node("SumBackward0", [[exp, 0]])
    loss = b.tensor([], name="loss", node=total)
    runs = [(1, True), (2, False)] if retain_twice else [(1, False)]
    for gid, retain in runs:
        b.line += 1
        before = b.backward_begin(gid, [loss], retain_graph=retain)
        b.ev("node_exec", node=total)
        b.ev("node_exec_end", node=total)
        b.ev("node_exec", node=exp)
        b.unpack(f, 1)
        b.recompute_begin(f, (f, 1))
        sin2 = b.node("SinBackward0", [[None, 0]])
        b.rpack(f, x)
        y2 = b.tensor([2, 3], node=sin2)
        exp2 = b.node("ExpBackward0", [[sin2, 0]])
        z2 = b.tensor([2, 3], node=exp2)
        b.rpack(f, z2)
        b.recompute_finish(f, stopped=early_stop)
        b.take(f, 1)
        for t in (y2, z2):
            b.free(t)
        b.ev("node_exec_end", node=exp)
        if not retain:
            b.release(exp)
            b.holder_gc(f, 1)
        b.ev("node_exec", node=sin)
        b.unpack(f, 0)
        b.take(f, 0)
        b.ev("node_exec_end", node=sin)
        if not retain:
            b.release(sin)
            b.holder_gc(f, 0)
        b.ev("node_exec", node=acc)
        b.ev("grad_accumulate", tensor=x)
        b.ev("node_exec_end", node=acc)
        b.backward_finish(before)
    b.ev("frame_gc", frame=f)
    return b.events


def nested() -> list[dict[str, Any]]:
    """``outer(x) = sub2(sub1(x))``, all three checkpointed, early stop on (docs/checkpoint.md)."""
    b = Builder()
    x = b.tensor([2, 3], name="x", requires_grad=True)
    acc = b.node("AccumulateGrad", [])
    outer = b.checkpoint_begin("outer", [x])
    sub1 = b.checkpoint_begin("sub1", [x], parent=outer)
    sin = b.node("SinBackward0", [[acc, 0]], frame=sub1)
    b.pack(sub1, sin, "self", x, [2, 3])
    h1 = b.tensor([2, 3], name="h1", node=sin)
    b.checkpoint_end(sub1)
    sub2 = b.checkpoint_begin("sub2", [h1], parent=outer)
    exp = b.node("ExpBackward0", [[sin, 0]], frame=sub2)
    h2 = b.tensor([2, 3], name="h2", node=exp)
    b.pack(sub2, exp, "result", h2, [2, 3])
    b.checkpoint_end(sub2)
    b.checkpoint_end(outer)
    total = b.node("SumBackward0", [[exp, 0]])
    loss = b.tensor([], name="loss", node=total)

    before = b.backward_begin(1, [loss])
    b.ev("node_exec", node=total)
    b.ev("node_exec_end", node=total)
    b.release(total)
    b.ev("node_exec", node=exp)
    b.unpack(sub2, 0)
    # sub2's inputs are holders of outer: unpacking the dummy recomputes outer (Rule 2).
    b.unpack(outer, 2)
    b.recompute_begin(outer, (outer, 2))
    sub1b = b.checkpoint_begin("sub1", [x], rparent=outer, created_in={"recompute": outer})
    sin_b = b.node("SinBackward0", [[None, 0]], frame=sub1b)
    b.pack(sub1b, sin_b, "self", x, [2, 3])
    h1b = b.tensor([2, 3], node=sin_b)
    b.checkpoint_end(sub1b)
    b.frame("sub2", created_in={"recompute": outer})
    dummy = b.tensor([0], requires_grad=True)
    noop = b.node("_NoopSaveInputsBackward", [[None, 0], [None, 0]])
    b.rpack(outer, dummy)
    b.save(noop, "saved_tensors[0]", dummy)
    b.rpack(outer, h1b)  # the fourth of four: early stop fires inside this pack, sub2 never runs
    b.recompute_finish(outer, stopped=True)
    b.take(outer, 2)
    b.unpack(outer, 3)
    b.take(outer, 3)
    b.recompute_begin(sub2, (sub2, 0))
    exp_b = b.node("ExpBackward0", [[None, 0]], frame=None)
    h2b = b.tensor([2, 3], node=exp_b)
    b.rpack(sub2, h2b)
    b.recompute_finish(sub2, stopped=True)
    b.take(sub2, 0)
    b.ev("node_exec_end", node=exp)
    b.release(exp)
    b.holder_gc(sub2, 0)
    b.ev("node_exec", node=sin)
    b.unpack(sub1, 0)
    b.unpack(outer, 0)
    b.take(outer, 0)
    b.unpack(outer, 1)
    b.take(outer, 1)
    b.recompute_begin(sub1, (sub1, 0))
    sin_c = b.node("SinBackward0", [[None, 0]])
    b.rpack(sub1, x)
    b.recompute_finish(sub1, stopped=True)
    b.take(sub1, 0)
    b.ev("node_exec_end", node=sin)
    b.release(sin)
    b.holder_gc(sub1, 0)
    for index in range(4):
        b.holder_gc(outer, index)
    b.ev("node_exec", node=acc)
    b.ev("grad_accumulate", tensor=x)
    b.ev("node_exec_end", node=acc)
    b.backward_finish(before)
    for t in (h1b, h2b, h2, h1):
        b.free(t)
    b.ev("node_free", node=sin_c)
    for f in (sub1, sub2, outer):
        b.ev("frame_gc", frame=f)
    b.ev("mark", label="done", note="end of scenario")
    return b.events


def rule6_skip() -> list[dict[str, Any]]:
    """Rule 6 with retain_graph=False and early stop off: a grad() inside the function frees the
    holders of its first two saves; the final backward skips them and recomputes the rest."""
    b = Builder()
    x = b.tensor([3], name="x", requires_grad=True)
    acc = b.node("AccumulateGrad", [])
    f = b.checkpoint_begin("fn", [x], early_stop=False)
    sin = b.node("SinBackward0", [[acc, 0]], frame=f)
    b.pack(f, sin, "self", x, [3])
    y = b.tensor([3], name="y", node=sin)
    cos = b.node("CosBackward0", [[sin, 0]], frame=f)
    b.pack(f, cos, "self", y, [3])
    z = b.tensor([3], name="z", node=cos)
    before = b.backward_begin(1, [z], api="grad")
    b.ev("node_exec", node=cos)
    b.unpack(f, 1)
    b.recompute_begin(f, (f, 1))
    b.rpack(f, x)
    b.rpack(f, y)
    b.rpack(f, z, alive=True)  # early stop is off and the forward is not over: an extra save
    b.recompute_finish(f, stopped=False, outer_phase="forward")
    b.phase = "backward"
    b.take(f, 1)
    b.ev("node_exec_end", node=cos)
    b.release(cos)
    b.holder_gc(f, 1)
    b.ev("node_exec", node=sin)
    b.unpack(f, 0)
    b.take(f, 0)
    b.ev("node_exec_end", node=sin)
    b.release(sin)
    b.holder_gc(f, 0)
    b.backward_finish(before)
    gx = b.tensor([3], name="gx")
    cos2 = b.node("CosBackward0", [[acc, 0]], frame=f)
    b.pack(f, cos2, "self", x, [3])
    b.checkpoint_end(f)
    out = b.tensor([3], name="out", node=cos2)
    b.ev("version_bump", tensor=gx, version=1)
    before = b.backward_begin(2, [out])
    b.ev("node_exec", node=cos2)
    b.unpack(f, 2)
    b.recompute_begin(f, (f, 2))
    b.rpack(f, x, alive=False)
    b.rpack(f, y, alive=False)
    b.rpack(f, x)
    b.recompute_finish(f, stopped=False)
    b.take(f, 2)
    b.unpack(f, 2)
    b.ev(
        "checkpoint_error",
        frame=f,
        type="CheckpointError",
        message="torch.utils.checkpoint: Unpack is being "
        "triggered for a tensor that was already unpacked once.\nmore",
    )
    b.ev(
        "error",
        type="CheckpointError",
        message="Unpack is being triggered for a tensor that was already unpacked once.",
    )
    return b.events


SCENARIOS = {
    "single": single,
    "single_no_early_stop": lambda: single(early_stop=False),
    "retain_twice": lambda: single(retain_twice=True),
    "nested": nested,
    "rule6_skip": rule6_skip,
}
