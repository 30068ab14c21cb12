"""The autograd graph of a trace as DOT, built with the ``graphviz`` package, in torchviz's style.

Note [DOT ids]
~~~~~~~~~~~~~~
The graph holds every node the run ever created, so one layout serves every step: a front end
renders it once and restyles elements per step with ``dot_classes(state)``. Each element has an
``id`` attribute, which Graphviz also uses as the id of the SVG element:

- ``n{node}``: an autograd node (``grad_fn``), grey; ``AccumulateGrad`` blue, like torchviz's leaves;
- ``t{tensor}``: a named output tensor (green), linked from its ``grad_fn``;
- ``s{node}_{slot}``: a tensor saved as is by a node (orange, torchviz's ``show_saved``);
- ``h{holder}``: a checkpoint ``_Holder`` saved instead of a tensor (dashed, amber), drawn inside
  its frame's cluster;
- ``f{frame}``: the cluster of a checkpoint frame (the nodes created while its hooks were on top);
- ``r{frame}_{gid}``: the cluster of the graph a recomputation of ``frame`` for ``gid`` built;
- ``m{i}``: the cluster of a module instance (``blocks.3``) in a group of repeated blocks (Note
  [Folded blocks]); drawn only for such groups;
- ``e{node}_{i}``: the edge of a node's ``i``-th next function; ``e{id}`` the edge to saved slot,
  holder or output tensor ``{id}``.

Edges point from a node's next functions to it (the data's direction, as torchviz draws them);
gradients flow against the arrows.
"""

from __future__ import annotations

import re
from typing import Any

import graphviz

from engine.trace.state import Event, Node, State, gid_key, gid_label, initial_state, step

_NODE_ATTR = {
    "style": "filled",
    "shape": "box",
    "align": "left",
    "fontsize": "10",
    "ranksep": "0.1",
    "height": "0.2",
    "fontname": "monospace",
}


def slot_id(node: Any, slot: Any) -> str:
    return f"s{node}_{re.sub(r'[^A-Za-z0-9_]', '_', str(slot))}"


def _shape(shape: Any) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]" if shape is not None else ""


class DotCollector:
    """What the DOT needs beyond the final state: tensors that were freed, and where frames and
    ``_NoopSaveInputs`` nodes were created. Fed every event with the state just before it, by
    ``to_dot``'s own replay or by whoever steps a state through the events already (the server
    annotating a run's events as they arrive: app/runs.py), which then needs no second replay."""

    def __init__(self) -> None:
        self.tensors: dict[str, dict[str, Any]] = {}
        self.frame_cluster: dict[str, str] = {}  # frame -> id of the cluster it sits in
        self.inputs_of: dict[str, str] = {}  # _NoopSaveInputs node -> frame
        self.accumulates: dict[str, Any] = {}  # AccumulateGrad node -> its tensor, when known
        self.recomputations: list[str] = []  # cluster ids, in order
        self.frame_label: dict[str, str] = {}  # frame -> its label without "#frame" ("Block")
        self.node_module: dict[str, int] = {}  # node -> id of the module whose forward made it
        self._noop: str | None = None

    def see(self, state: State, e: Event) -> None:
        """Take in ``e``; ``state`` is the state before it."""
        kind = e.get("kind")
        if kind == "tensor_new":
            self.tensors[str(e["tensor"])] = e
        elif kind == "frame_new":
            self.frame_label[str(e["frame"])] = str(e.get("label") or "")
            # A frame sits in the cluster of whatever hooks were on top when it was made: its
            # parent's checkpoint hooks, a recomputation's hooks (Rule 3), or none.
            hooks = state["hooks"]
            top = hooks[-1] if hooks else None
            if top is not None and top["hooks"] == "checkpoint" and top["frame"] is not None:
                self.frame_cluster[str(e["frame"])] = f"f{top['frame']}"
            elif top is not None and top["hooks"] == "recomputation" and state["recomputing"]:
                rtop = state["recomputing"][-1]
                self.frame_cluster[str(e["frame"])] = f"r{rtop['frame']}_{rtop['gid']}"
            elif e.get("parent") is not None:
                self.frame_cluster[str(e["frame"])] = f"f{e['parent']}"
            else:
                self.frame_cluster[str(e["frame"])] = ""
        elif kind == "node_new":
            if e.get("module") is not None:
                self.node_module[str(e["node"])] = e["module"]
            if "NoopSaveInputs" in str(e.get("name")):
                self._noop = str(e["node"])
            variable = e.get("variable", e.get("tensor"))
            if variable is not None:
                self.accumulates[str(e["node"])] = variable
        elif kind == "recompute_start":
            cid = f"r{e.get('frame')}_{gid_key(e)}"
            if cid not in self.recomputations:
                self.recomputations.append(cid)
        elif kind == "inputs_saved" and (e.get("node") is not None or self._noop is not None):
            self.inputs_of[str(e.get("node", self._noop))] = str(e.get("frame"))
            self._noop = None


def to_dot(trace: Any, *, show_saved: bool = True) -> graphviz.Digraph:
    """The autograd graph of the whole run, with checkpoint frames and recomputations as clusters."""
    from engine.trace.export import events_of

    c = DotCollector()
    state = initial_state()
    for e in events_of(trace):
        c.see(state, e)
        step(state, e)
    return dot_of(c, state, modules_of(trace), show_saved=show_saved)


def dot_of(
    c: DotCollector, state: State, modules: dict[str, dict[str, Any]], *, show_saved: bool = True
) -> graphviz.Digraph:
    """``to_dot`` from a ``DotCollector`` fed every event and the state after the last one;
    ``modules``: the trace's ``meta.modules`` (Note [Module paths]), or nothing."""
    clusters: dict[str, graphviz.Digraph] = {}
    parents: dict[str, str] = {}  # cluster id -> enclosing cluster id ("" for the root)
    has_content: set[str] = set()

    def cluster(cid: str) -> str:
        if cid in clusters or not cid:
            return cid
        if cid.startswith("f"):
            frame = state["frames"][cid[1:]]
            attrs = {"label": f"checkpoint {frame['name']}", "style": "rounded", "color": "blue"}
            parents[cid] = c.frame_cluster.get(cid[1:], "")
        else:
            f, gid = cid[1:].split("_", 1)
            name = state["frames"][f]["name"] if f in state["frames"] else f"frame {f}"
            attrs = {"label": f"recomputation of {name} for {gid_label(gid)}", "style": "dashed"}
            attrs["color"] = "darkorange"
            parents[cid] = ""
        attrs |= {"id": cid, "class": "frame" if cid.startswith("f") else "recompute", "fontsize": "10"}
        clusters[cid] = graphviz.Digraph(name=f"cluster_{cid}", graph_attr=attrs)
        cluster(parents[cid])
        return cid

    for f in state["frames"]:
        cluster(f"f{f}")
    for cid in c.recomputations:
        cluster(cid)

    dot = graphviz.Digraph(name="autograd", node_attr=_NODE_ATTR, graph_attr={"id": "graph", "rankdir": "TB"})

    def add(cid: str, nid: str, label: str, **attrs: str) -> None:
        target = clusters[cid] if cid else dot
        target.node(nid, label, id=nid, **attrs)
        if cid:
            has_content.add(cid)

    def node_cluster(node: Node) -> str:
        if node["frame"] is not None and str(node["frame"]) in state["frames"]:
            frame = state["frames"][str(node["frame"])]
            created_in = frame["created_in"]
            in_recompute = isinstance(created_in, dict) and created_in.get("recompute") is not None
            # A node made while a frame created by a recomputation was on top belongs to that frame;
            # any other node of a recomputation belongs to the recomputation itself.
            if node["recompute"] is None or in_recompute:
                return cluster(f"f{node['frame']}")
        if node["recompute"] is not None:
            return cluster(f"r{node['recompute'][0]}_{node['recompute'][1]}")
        return ""

    home = {key: node_cluster(node) for key, node in state["nodes"].items()}
    fold_with = _fold_blocks(c, state, clusters, parents, home, modules)

    for key, node in state["nodes"].items():
        nid, cid = f"n{key}", home[key]
        label, attrs = node["name"], {"class": "fn", "fillcolor": "lightgrey"}
        if key in c.accumulates and str(c.accumulates[key]) in c.tensors:
            t = c.tensors[str(c.accumulates[key])]
            name = t.get("name") or ("dummy" if t.get("shape") == [0] else f"tensor {t['tensor']}")
            label = f"{name}\n{_shape(t.get('shape'))}"
            attrs = {"class": "fn leaf", "fillcolor": "lightblue"}
        elif node["name"].endswith("AccumulateGrad"):
            attrs = {"class": "fn leaf", "fillcolor": "lightblue"}
        elif key in c.inputs_of:
            label = f"{node['name']}\n(inputs of {state['frames'][c.inputs_of[key]]['name']})"
            attrs = {"class": "fn inputs", "fillcolor": "white", "style": "filled,dashed"}
        if key in fold_with:
            attrs["foldwith"] = fold_with[key]
        add(cid, nid, label, **attrs)
        for i, (nxt, _input_nr) in enumerate(node["next"]):
            if nxt is not None and str(nxt) in state["nodes"]:
                dot.edge(f"n{nxt}", nid, id=f"e{key}_{i}")
        if not show_saved:
            continue
        for slot, saved in node["saved"].items():
            if saved["packed"] == "holder" and saved["holder"] is not None:
                continue  # drawn with its frame below
            sid = slot_id(key, slot)
            add(cid, sid, f"{slot}\n{_shape(saved['shape'])}", **{"class": "saved", "fillcolor": "orange"})
            dot.edge(nid, sid, id=f"e{sid}", dir="none")

    if show_saved:
        for f, frame in state["frames"].items():
            for holder in frame["holders"].values():
                hid = f"h{holder['holder']}"
                what = f"{holder['slot'] or ''} {_shape(holder['shape'])}"
                label = f"holder {frame['name']}[{holder['index']}]\n{what}"
                attrs = {"class": "holder", "fillcolor": "#fde68a", "style": "filled,dashed", "fontsize": "8"}
                add(cluster(f"f{f}"), hid, label, **attrs)
                if holder["node"] is not None and str(holder["node"]) in state["nodes"]:
                    dot.edge(f"n{holder['node']}", hid, id=f"e{hid}", dir="none", style="dashed")

    # Named tensors with a grad_fn: the variables a learner wrote, as torchviz draws its outputs,
    # beside their grad_fn, in its cluster (a block's own variables fold with the block).
    for key, t in c.tensors.items():
        if t.get("name") and t.get("node") is not None and str(t["node"]) in state["nodes"]:
            tid = f"t{key}"
            add(
                home[str(t["node"])],
                tid,
                f"{t['name']}\n{_shape(t.get('shape'))}",
                **{"class": "tensor", "fillcolor": "darkolivegreen1"},
            )
            dot.edge(f"n{t['node']}", tid, id=f"e{tid}", style="dotted")

    # Frames whose function never ran a saving op (e.g. stopped early before its body): say so.
    for cid in clusters:
        if (
            cid.startswith("f")
            and cid not in has_content
            and not any(p == cid and k in has_content for k, p in parents.items())
        ):
            add(
                cid,
                f"{cid}_empty",
                "(nothing saved)",
                **{"class": "empty", "shape": "plaintext", "style": ""},
            )

    # Attach clusters innermost first: graphviz copies a subgraph's body when it is attached.
    def depth(cid: str) -> int:
        return 0 if not cid else 1 + depth(parents.get(cid, ""))

    for cid in sorted(clusters, key=depth, reverse=True):
        (clusters[parents[cid]] if parents[cid] else dot).subgraph(clusters[cid])
    return dot


# Note [Folded blocks]
# ~~~~~~~~~~~~~~~~~~~~
# A model of N identical blocks draws N identical subgraphs, and a long run is mostly those. So
# ``to_dot`` finds runs of at least ``FOLD_MIN`` consecutive sibling blocks with the same structure
# and marks them as one fold group: each member cluster gets the attributes ``fold="g{k}"`` and
# ``foldlabel`` ("checkpoint Block x 12", with a multiplication sign), which a front end uses to draw
# the whole run as one box until the learner unfolds it (static/js/dot.js, ``collapseDot``). A block is
#
# - a checkpoint frame's cluster, among the frames of the same enclosing cluster, in creation order;
# - a recomputation's cluster, among the recomputations, in the order they ran;
# - outside any cluster, the nodes one instance of an indexed module made (``blocks.3``, the first
#   index in the module's path: ``transformer.h.3.attn`` belongs to ``transformer.h.3``), among the
#   instances of the same container, in the order they first made a node. Such an instance gets a
#   cluster ``m{i}`` of its own only when it is in a group, so other graphs are laid out as before.
#
# Two blocks have the same structure when their nodes, in creation order, have the same names,
# save slots of the same shapes, and point to each other the same way (an edge leaving the block
# counts as "outside", wherever it goes); a frame's holders and nested clusters count too. Names of
# tensors and frames' numbers do not: blocks.0 and blocks.11 of a transformer are the same block.

FOLD_MIN = 3
TIMES = "\N{MULTIPLICATION SIGN}"


def modules_of(trace: Any) -> dict[str, dict[str, Any]]:
    """``meta.modules`` of a trace document (Note [Module paths]), or nothing."""
    meta = trace.get("meta") if isinstance(trace, dict) else getattr(trace, "meta", None)
    modules = meta.get("modules") if isinstance(meta, dict) else None
    return modules if isinstance(modules, dict) else {}


_INDEX = re.compile(r"\.(\d+)(?=\.|\[|$)|\[(\d+)\]")


def _unit_of(path: str) -> tuple[str, str] | None:
    """(container, instance) of a module path inside an indexed container:
    ``transformer.h.3.attn`` -> (``transformer.h``, ``transformer.h.3``)."""
    m = _INDEX.search(path)
    return (path[: m.start()], path[: m.end()]) if m else None


def _structure(state: State, keys: list[str]) -> tuple[Any, ...]:
    """What Note [Folded blocks] compares of a block's nodes."""
    index = {k: i for i, k in enumerate(keys)}
    out = []
    for k in keys:
        node = state["nodes"][k]
        saved = tuple((slot, _shape(s["shape"]), s["packed"]) for slot, s in node["saved"].items())
        nxt = tuple(None if n is None else index.get(str(n), -1) for n, _ in node["next"])
        out.append((node["name"], saved, nxt))
    return tuple(out)


def _runs(blocks: list[tuple[str, Any]]) -> list[list[str]]:
    """Maximal runs of at least FOLD_MIN consecutive blocks (id, structure) with equal structures."""
    runs: list[list[str]] = []
    i = 0
    while i < len(blocks):
        j = i
        while j + 1 < len(blocks) and blocks[j + 1][1] == blocks[i][1]:
            j += 1
        if j - i + 1 >= FOLD_MIN and blocks[i][1]:
            runs.append([cid for cid, _ in blocks[i : j + 1]])
        i = j + 1
    return runs


def _fold_blocks(
    c: DotCollector,
    state: State,
    clusters: dict[str, graphviz.Digraph],
    parents: dict[str, str],
    home: dict[str, str],
    modules: dict[str, dict[str, Any]],
) -> dict[str, str]:
    """Mark groups of repeated blocks (Note [Folded blocks]); adds ``m{i}`` clusters to
    ``clusters`` and moves their nodes there in ``home`` (node -> cluster id). Returns the nodes
    outside the blocks that fold with them (node -> group id): each checkpoint's
    ``_NoopSaveInputsBackward`` and its dummy leaf, made just before the frame."""
    groups: list[tuple[list[str], str]] = []  # (member cluster ids, label)

    # Instances of indexed modules, outside every checkpoint cluster.
    instances: dict[str, list[str]] = {}  # instance path -> its nodes, in creation order
    container_of: dict[str, str] = {}
    for key in state["nodes"]:
        module = modules.get(str(c.node_module.get(key)))
        unit = _unit_of(str(module["path"])) if home[key] == "" and module else None
        if unit is not None:
            container_of[unit[1]] = unit[0]
            instances.setdefault(unit[1], []).append(key)
    type_of = {str(m["path"]): str(m.get("type", "")) for m in modules.values()}
    by_container: dict[str, list[tuple[str, Any]]] = {}
    for path, keys in instances.items():  # in the order each first made a node
        by_container.setdefault(container_of[path], []).append(
            (path, (type_of.get(path), _structure(state, keys)))
        )
    for blocks in by_container.values():
        for run in _runs(blocks):
            ids = []
            for path in run:
                cid = f"m{len(clusters)}"
                attrs = {
                    "label": path,
                    "id": cid,
                    "class": "module",
                    "style": "rounded,dotted",
                    "color": "grey40",
                }
                clusters[cid] = graphviz.Digraph(name=f"cluster_{cid}", graph_attr=attrs | {"fontsize": "10"})
                parents[cid] = ""
                for key in instances[path]:
                    home[key] = cid
                ids.append(cid)
            groups.append((ids, f"{type_of.get(run[0]) or run[0]} {TIMES} {len(run)} ({run[0]} … {run[-1]})"))

    # Checkpoint frames and recomputations.
    members: dict[str, list[str]] = {}
    for key, cid in home.items():
        members.setdefault(cid, []).append(key)
    children: dict[str, list[str]] = {}
    for cid, parent in parents.items():
        children.setdefault(parent, []).append(cid)

    def label_of(cid: str) -> str:
        return c.frame_label.get(cid[1:].split("_")[0], "")

    def structure(cid: str) -> tuple[Any, ...]:
        holders: tuple[Any, ...] = ()
        if cid.startswith("f"):
            frame = state["frames"][cid[1:]]
            holders = tuple((h["slot"], _shape(h["shape"])) for h in frame["holders"].values())
        inner = tuple(structure(k) for k in children.get(cid, []))
        return (cid[0], label_of(cid), _structure(state, members.get(cid, [])), holders, inner)

    def number(cid: str) -> int:
        return int(cid[1:].split("_")[0])

    for parent, kids in children.items():
        frames = sorted((k for k in kids if k.startswith("f")), key=number)
        for run in _runs([(k, structure(k)) for k in frames]):
            groups.append((run, f"checkpoint {label_of(run[0])} {TIMES} {len(run)}"))
        if parent == "":
            recomputations = [k for k in c.recomputations if k in clusters]
            for run in _runs([(k, structure(k)) for k in recomputations]):
                groups.append((run, f"recomputation of {label_of(run[0])} {TIMES} {len(run)}"))

    fold_with: dict[str, str] = {}
    noop_of = {frame: node for node, frame in c.inputs_of.items()}
    for g, (ids, label) in enumerate(groups):
        for cid in ids:
            clusters[cid].graph_attr.update(fold=f"g{g}", foldlabel=label)
            noop = noop_of.get(cid[1:]) if cid.startswith("f") else None
            if noop is None or noop not in state["nodes"] or home[noop] != parents[cid]:
                continue
            fold_with[noop] = f"g{g}"
            for nxt, _ in state["nodes"][noop]["next"]:
                leaf = str(nxt)
                tensor = c.tensors.get(str(c.accumulates.get(leaf)), {})
                if leaf in state["nodes"] and tensor.get("shape") == [0]:  # the dummy
                    fold_with[leaf] = f"g{g}"
    return fold_with


def dot_classes(state: State) -> dict[str, list[str]]:
    """The state classes of every DOT element that exists at this step (see Note [DOT ids]).

    Elements missing from the result do not exist yet: a front end hides them.
    """
    out: dict[str, list[str]] = {}
    executing = set(state["executing"])
    for key, node in state["nodes"].items():
        classes = [node["status"]]
        if node["node"] in executing:
            classes.append("running")
        if node["released"]:
            classes.append("released")
        if node["freed"]:
            classes.append("freed")
        if node["phase"] == "recompute":
            classes.append("recomputed")
        out[f"n{key}"] = classes
        for slot, saved in node["saved"].items():
            if saved["packed"] != "holder" or saved["holder"] is None:
                out[slot_id(key, slot)] = ["released"] if node["released"] else ["saved"]
    active = {(r["frame"], r["gid"]) for r in state["recomputing"]}
    for f, frame in state["frames"].items():
        classes = ["alive" if frame["alive"] else "dead"]
        if frame["running"]:
            classes.append(f"running-{frame['running'][-1]}")
        out[f"f{f}"] = classes
        for gid in frame["recomp_counter"]:
            out[f"r{f}_{gid}"] = ["active"] if (frame["frame"], gid) in active else ["done"]
        for holder in frame["holders"].values():
            classes = ["alive" if holder["alive"] else "dead"]
            classes += [f"handle-{status}" for status in sorted(set(holder["handles"].values()))]
            out[f"h{holder['holder']}"] = classes
    for key, tensor in state["tensors"].items():
        if tensor["name"] and tensor["node"] is not None:  # the tensors to_dot draws
            out[f"t{key}"] = ["alive"]
    return out
