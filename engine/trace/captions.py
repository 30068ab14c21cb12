"""One plain-English sentence per trace event, for a learner stepping through a run.

``caption(state, event)`` reads the state *before* the event (``engine.trace.state``) and the event,
and names what the learner sees on screen: frames as ``label#id`` (``outer#0``), holders by their
position in the frame (``holder 2 of frame `outer#0```, the ``outer#0[2]`` of docs/checkpoint.md),
graph tasks as ``g1``, tensors by their scenario variable name when the trace knows it, nodes by
their class name (``MulBackward0``). The rule numbers are those of ``Note [Nestable checkpoint]``
in engine/utils/checkpoint.py.

``captions(events)`` gives the caption of every event of a trace in one pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.trace.state import Event, Holder, State, gid_key, gid_label, initial_state, saved_holder, step

_Captioner = Callable[[State, Event], str]
_CAPTIONS: dict[str, _Captioner] = {}


def _on(kind: str) -> Callable[[_Captioner], _Captioner]:
    def register(fn: _Captioner) -> _Captioner:
        _CAPTIONS[kind] = fn
        return fn

    return register


def caption(state: State, event: Event) -> str:
    """The caption of ``event``, given the state just before it."""
    captioner = _CAPTIONS.get(event.get("kind", ""))
    if captioner is None:
        return f"Event `{event.get('kind')}`."
    text = captioner(state, event)
    return text[:1].upper() + text[1:]


def captions(events: Sequence[Event]) -> list[str]:
    """The caption of every event, computed in one pass of the reducer."""
    state = initial_state()
    out = []
    for event in events:
        out.append(caption(state, event))
        step(state, event)
    return out


# --- naming things -------------------------------------------------------------------------------


def _frame(state: State, frame: Any) -> str:
    info = state["frames"].get(str(frame))
    return f"`{info['name']}`" if info else f"frame {frame}"


def _label(state: State, frame: Any) -> str:
    info = state["frames"].get(str(frame))
    return f"`{info['label']}`" if info else f"the function of frame {frame}"


def _holder(state: State, e: Event) -> str:
    return f"holder {e.get('index')} of frame {_frame(state, e.get('frame'))}"


def _shape(shape: Any) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]" if shape is not None else "[?]"


def _tensor(state: State, tensor: Any, with_shape: bool = True) -> str:
    info = state["tensors"].get(str(tensor))
    if info is None:
        return f"tensor {tensor}"
    if info["name"]:
        name = f"`{info['name']}`"
    elif info["shape"] == [0] and info["is_leaf"] and info["requires_grad"]:
        return f"the dummy tensor {tensor}"  # checkpoint's ``engine.empty((0,), requires_grad=True)``
    else:
        name = f"tensor {tensor}"
    return f"{name} {_shape(info['shape'])}" if with_shape else name


def _node(state: State, node: Any) -> str:
    info = state["nodes"].get(str(node))
    if info is None:
        return f"node {node}"
    if info["name"].endswith("AccumulateGrad") and info["variable"] is not None:
        # ``engine::autograd::AccumulateGrad`` is long; the leaf it feeds says more.
        return f"`AccumulateGrad` of {_tensor(state, info['variable'], with_shape=False)}"
    return f"`{info['name']}`"


def _bytes(n: Any) -> str:
    return "1 byte" if n == 1 else f"{n} bytes"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _first_line(message: Any) -> str:
    lines = str(message or "").strip().splitlines()
    return lines[0] if lines else ""


def _names(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _holder_info(state: State, e: Event) -> Holder | None:
    frame = state["frames"].get(str(e.get("frame")))
    return frame["holders"].get(str(e.get("index"))) if frame else None


def _what_holder_holds(state: State, e: Event) -> str:
    """`` (`other` of `MulBackward0`)`` for a holder whose node and slot are known."""
    holder = _holder_info(state, e)
    if holder is None or holder["node"] is None:
        return ""
    return f" (`{holder['slot']}` of {_node(state, holder['node'])})"


def _is_noop_save_inputs(state: State, node: Any) -> bool:
    info = state["nodes"].get(str(node))
    return info is not None and "NoopSaveInputs" in info["name"]


# --- checkpoint kinds ----------------------------------------------------------------------------


@_on("frame_new")
def _frame_new(state: State, e: Event) -> str:
    name = f"`{e['label']}#{e['frame']}`"
    stop = "on" if e.get("early_stop", True) else "off"
    created_in = e.get("created_in", "forward")
    if isinstance(created_in, dict) and "recompute" in created_in:
        return (
            f"Re-running {_frame(state, created_in['recompute'])} meets `checkpoint({e['label']})` again, "
            f"which creates a new frame {name} (Rule 3: a fresh forward whose holders are garbage once "
            "the recomputation ends)."
        )
    if e.get("parent") is not None:
        return (
            f"`checkpoint({e['label']})` creates frame {name}, nested in {_frame(state, e['parent'])}: its "
            f"inputs are saved to {_frame(state, e['parent'])} (Rule 2); early stop is {stop}."
        )
    return f"`checkpoint({e['label']})` creates frame {name}; early stop is {stop}."


@_on("fn_start")
def _fn_start(state: State, e: Event) -> str:
    frame, label = _frame(state, e.get("frame")), _label(state, e.get("frame"))
    if e.get("mode") == "recompute":
        return f"{label} runs again to recompute {frame}: what its ops save goes to the recomputation hook."
    return f"{label} runs under the checkpoint hook of {frame}: every tensor its ops save becomes a holder."


@_on("fn_end")
def _fn_end(state: State, e: Event) -> str:
    frame, label = _frame(state, e.get("frame")), _label(state, e.get("frame"))
    info = state["frames"].get(str(e.get("frame")))
    mode = info["running"][-1] if info and info["running"] else "forward"
    outcome = e.get("outcome")
    if outcome == "early_stop":
        return f"{label} is cut short by `_StopRecomputationError`: the recomputation of {frame} is done."
    if outcome == "raised":
        return f"{label} raises an exception, which leaves the {mode} run of {frame}."
    if mode == "recompute":
        return f"{label} returns: the recomputation of {frame} ran the whole function."
    n = len(info["holders"]) if info else 0
    return f"{label} returns; {frame} kept {_plural(n, 'holder')} instead of the tensors its ops saved."


@_on("inputs_saved")
def _inputs_saved(state: State, e: Event) -> str:
    tensors = [_tensor(state, t, with_shape=False) for t in e.get("tensors") or []]
    frame = _frame(state, e.get("frame"))
    what = f"The inputs of {frame} ({_names(tensors)})" if tensors else f"The inputs of {frame}"
    info = state["frames"].get(str(e.get("frame")))
    parent = info["parent"] if info else None
    if parent is not None:
        return (
            f"{what} are saved on its `_NoopSaveInputs` node before its hooks are pushed, so the hook of "
            f"{_frame(state, parent)} packs them (Rule 2)."
        )
    return (
        f"{what} are saved on its `_NoopSaveInputs` node, as ordinary saved tensors (no hook is active yet)."
    )


def _hooks_name(state: State, entry: dict[str, Any]) -> str:
    if entry["hooks"] == "checkpoint":
        return f"the checkpoint hooks of {_frame(state, entry['frame'])}"
    if entry["hooks"] == "recomputation":
        gid = entry.get("gid")
        which = f" for {gid_label(str(gid))}" if gid is not None else ""
        return f"the recomputation hooks of {_frame(state, entry['frame'])}{which}"
    return "a user `saved_tensors_hooks` pair"


@_on("hooks_push")
def _hooks_push(state: State, e: Event) -> str:
    entry = {"hooks": e.get("hooks"), "frame": e.get("frame"), "gid": e.get("hook_gid", e.get("gid"))}
    name = _hooks_name(state, entry)
    depth = len(state["hooks"]) + 1
    if e.get("hooks") == "checkpoint":
        why = "tensors saved from now on are replaced by holders"
    elif e.get("hooks") == "recomputation":
        why = "recomputation starts as if no checkpoint were active (Rule 3)"
    else:
        why = "it packs what is saved from now on"
    verb = "goes" if e.get("hooks") == "user" else "go"
    return f"{name} {verb} on the saved-tensor hooks stack (depth {depth}): {why}."


@_on("hooks_pop")
def _hooks_pop(state: State, e: Event) -> str:
    stack = state["hooks"]
    if not stack:
        return "A saved-tensor hooks pair leaves the stack."
    name = _hooks_name(state, stack[-1])
    name += " leaves" if stack[-1]["hooks"] == "user" else " leave"
    if len(stack) == 1:
        return f"{name} the stack: it is empty, so saved tensors are stored as is."
    again = "applies" if stack[-2]["hooks"] == "user" else "apply"
    return f"{name} the stack: {_hooks_name(state, stack[-2])} {again} again."


@_on("pack")
def _pack(state: State, e: Event) -> str:
    frame, index = _frame(state, e.get("frame")), e.get("index")
    size = f"{_shape(e.get('shape'))}, {_bytes(e.get('nbytes', 0))}"
    if _is_noop_save_inputs(state, e.get("node")):
        what = "the empty dummy" if e.get("shape") == [0] else f"input {_tensor(state, e.get('tensor'))}"
        return (
            f"A nested checkpoint saves {what} through the hook of its parent {frame}, "
            f"which stores holder {index} instead (Rule 2)."
        )
    saver = (
        f"{_node(state, e.get('node'))} saves `{e.get('slot')}`" if e.get("node") is not None else "A save"
    )
    return f"{saver} ({size}) through the checkpoint hook of {frame}: holder {index} is kept, not the tensor."


@_on("unpack")
def _unpack(state: State, e: Event) -> str:
    gid = gid_key(e)
    holder = _holder(state, e) + _what_holder_holds(state, e)
    info = state["frames"].get(str(e.get("frame")))
    label = _label(state, e.get("frame"))
    if info is None:
        return f"Unpacking {holder}."
    if gid == "none" or gid.startswith("tmp"):
        # The unpack hook makes up a temporary gid (a uuid) for every unpack outside backward.
        which = "a fresh id" if gid == "none" else f"a fresh id ({gid})"
        return (
            f"Unpacking {holder} outside any backward: the hook uses {which}, so {label} runs again "
            "under the recomputation hook."
        )
    if not info["is_recomputed"].get(gid, False):
        return (
            f"Unpacking {holder} needs a recomputation: `is_recomputed[{gid_label(gid)}]` is False, "
            f"so {label} runs again under the recomputation hook."
        )
    slot = _holder_info(state, e)
    if slot is not None and slot["handles"].get(gid) == "cleared":
        return (
            f"Unpacking {holder} a second time in {gid_label(gid)}: its handle was cleared by the first "
            "unpack (Rule 4), so this is a CheckpointError."
        )
    return (
        f"Unpacking {holder}: {_frame(state, e.get('frame'))} is already recomputed for {gid_label(gid)}, "
        f"so the tensor is taken from `recomputed[{gid_label(gid)}]`."
    )


@_on("recompute_start")
def _recompute_start(state: State, e: Event) -> str:
    frame, gid = _frame(state, e.get("frame")), gid_label(gid_key(e))
    info = state["frames"].get(str(e.get("frame")))
    total = len(info["holders"]) if info else 0
    if info is not None and info["early_stop"]:
        goal = (
            "it stops as soon as the 1 saved tensor is back (Rule 5)"
            if total == 1
            else f"it stops as soon as all {total} saved tensors are back (Rule 5)"
        )
    else:
        goal = "early stop is off, so it runs the whole function"
    trigger = e.get("trigger") or {}
    if trigger.get("frame") is not None and trigger.get("frame") != e.get("frame"):
        return (
            f"Recomputing {frame} for {gid} first: holder {trigger.get('index')} of "
            f"{_frame(state, trigger['frame'])} needs inputs that {frame} saved (Rule 2); {goal}."
        )
    return f"Recomputing {frame} for {gid}; {goal}."


@_on("rpack")
def _rpack(state: State, e: Event) -> str:
    gid = gid_key(e)
    info = state["frames"].get(str(e.get("frame")))
    frame, index = _frame(state, e.get("frame")), e.get("index")
    before = info["recomp_counter"].get(gid, 0) if info else 0
    counter = f"`recomp_counter[{gid_label(gid)}]` {before} → {before + 1}"
    if e.get("node") is not None and e.get("slot") is not None:
        counter = f"`{e['slot']}` of {_node(state, e['node'])}; {counter}"
    outcome = e.get("outcome")
    if outcome == "skip":
        return (
            f"The recomputation of {frame} repeats save {index} ({counter}), but holder {index} is dead "
            "(its node already ran without retain_graph), so it is skipped (Rule 6)."
        )
    if outcome == "extra":
        total = len(info["holders"]) if info else 0
        return (
            f"The recomputation of {frame} saves one more tensor ({counter}) than the {total} the forward "
            "saved: there is no holder for it."
        )
    return (
        f"The recomputation of {frame} repeats save {index} ({counter}): holder {index} gets a handle "
        f"and the tensor goes into `recomputed[{gid_label(gid)}]`."
    )


@_on("early_stop")
def _early_stop(state: State, e: Event) -> str:
    frame, total = _frame(state, e.get("frame")), e.get("total")
    if total == 1:
        return (
            f"Early stop: the 1 tensor saved in the forward of {frame} is back, so the recomputation "
            "stops inside its pack."
        )
    return (
        f"Early stop: all {total} tensors saved in the forward of {frame} are back, so the recomputation "
        "stops inside the pack of the last one."
    )


@_on("recompute_end")
def _recompute_end(state: State, e: Event) -> str:
    frame, gid = _frame(state, e.get("frame")), gid_label(gid_key(e))
    rpacks, total = e.get("rpacks") or 0, e.get("total") or 0
    counts = f"{rpacks} of {total} tensors re-saved"
    if rpacks > total:
        counts = f"{_plural(rpacks, 'tensor')} re-saved, {rpacks - total} more than the forward's {total}"
    reason = e.get("reason")
    if reason == "error":
        return f"The recomputation of {frame} for {gid} fails ({counts}); `is_recomputed[{gid}]` stays False."
    how = "stops early" if reason == "early_stop" else "ran to the end"
    return f"The recomputation of {frame} for {gid} {how} ({counts}); `is_recomputed[{gid}]` is now True."


@_on("recomputed_take")
def _recomputed_take(state: State, e: Event) -> str:
    gid = gid_label(gid_key(e))
    return (
        f"{_holder(state, e)} hands over its tensor from "
        f"`recomputed[{gid}]` and its handle is cleared, so the recomputed copy is freed after use (Rule 4)."
    )


@_on("holder_gc")
def _holder_gc(state: State, e: Event) -> str:
    holder = _holder_info(state, e)
    text = f"{_holder(state, e)} is garbage-collected"
    if holder is not None and holder["node"] is not None:
        node = state["nodes"].get(str(holder["node"]))
        if node is not None and node["released"]:
            text += f": {_node(state, holder['node'])} released its saved tensors"
        else:
            text += f": nothing references {_node(state, holder['node'])}'s saved `{holder['slot']}` any more"
    frame = state["frames"].get(str(e.get("frame")))
    recomputed = frame["recomputed"] if frame else {}
    gone = [g for g, entries in recomputed.items() if str(e.get("index")) in entries]
    if gone:
        text += f", and its recomputed tensor in {_names([gid_label(g) for g in gone])} goes with it"
    return text + "."


@_on("frame_gc")
def _frame_gc(state: State, e: Event) -> str:
    return f"Frame {_frame(state, e.get('frame'))} is garbage-collected: no graph references it any more."


# A checkpoint error's message is PyTorch's; these say what it means, in plain words, after it.
_CHECKPOINT_ERROR_CAUSES = (
    (
        "different metadata than during the forward pass",
        "the recomputation saved a tensor of another shape, dtype or device than the forward did: the "
        "function did not compute the same thing when it ran again (state it reads, a cache, a counter).",
    ),
    (
        "A different number of tensors was saved",
        "the recomputation saved more or fewer tensors than the forward: the function took another path "
        "when it ran again.",
    ),
    (
        "Log of operators in the original forward and recomputation",
        "with `debug=True` the message goes on with the ops the forward ran and those the recomputation "
        "ran: where the two lists first differ is where the function behaved differently.",
    ),
)


@_on("checkpoint_error")
def _checkpoint_error(state: State, e: Event) -> str:
    message = str(e.get("message") or "")
    why = " ".join(text for key, text in _CHECKPOINT_ERROR_CAUSES if key in message)
    head = f"`{e.get('type')}` in frame {_frame(state, e.get('frame'))}: {_first_line(message).strip()}"
    if not why:
        return head
    return f"{head}{'' if head.endswith('.') else '.'} In plain words: {why}"


# --- autograd kinds ------------------------------------------------------------------------------


@_on("tensor_new")
def _tensor_new(state: State, e: Event) -> str:
    name = f"`{e['name']}`" if e.get("name") else str(e.get("tensor"))
    size = f"{_shape(e.get('shape'))} {e.get('dtype', '')}".rstrip() + f" ({_bytes(e.get('nbytes', 0))})"
    if e.get("base") is not None:
        return f"New view {name} {size} of {_tensor(state, e['base'], with_shape=False)}, sharing its memory."
    if e.get("node") is not None:
        return f"New tensor {name} {size}, made by {_node(state, e['node'])}."
    if e.get("shape") == [0] and e.get("requires_grad") and state["now"]["kind"] == "frame_new":
        frame = _frame(state, _last_frame(state))
        return (
            f"New empty tensor {name} with requires_grad=True: {frame}'s dummy, which makes sure "
            "its inputs node is recorded even if no input requires grad."
        )
    if e.get("requires_grad"):
        return f"New leaf tensor {name} {size} that requires grad: backward will accumulate into its `.grad`."
    return f"New tensor {name} {size}."


def _last_frame(state: State) -> int | None:
    frames = state["frames"]
    return max((f["frame"] for f in frames.values()), default=None)


@_on("tensor_free")
def _tensor_free(state: State, e: Event) -> str:
    info = state["tensors"].get(str(e.get("tensor")))
    size = f", releasing {_bytes(info['nbytes'])}" if info else ""
    return f"{_tensor(state, e.get('tensor'))} is freed{size}."


@_on("node_new")
def _node_new(state: State, e: Event) -> str:
    nexts = [_node(state, n) for n, _ in e.get("next") or [] if n is not None]
    to = f", linked to {_names(nexts)}" if nexts else ""
    where = ""
    if state["recomputing"]:
        where = f" in the recomputation of {_frame(state, state['recomputing'][-1]['frame'])}"
    elif e.get("frame") is not None:
        where = f" inside frame {_frame(state, e['frame'])}"
    return f"Node `{e.get('name')}` is created{where} (seq_nr {e.get('seq_nr')}){to}."


@_on("saved")
def _saved(state: State, e: Event) -> str:
    node, slot = _node(state, e.get("node")), e.get("slot")
    packed = e.get("packed")
    if packed == "holder":
        where = state["holders"].get(str(saved_holder(state, e)))
        of = f" of frame {_frame(state, where[0])}" if where else ""
        return f"{node} saves `{slot}` (a holder{of}, not the tensor)."
    if packed == "other":
        return f"{node} saves `{slot}` as whatever a user pack hook returned."
    if e.get("hooks") == "recomputation":
        return (
            f"{node} saves `{slot}` ({_tensor(state, e.get('tensor'))}) through the recomputation hook, "
            "which returns the tensor itself so the recomputed graph can be differentiated (Rule 6)."
        )
    return f"{node} saves `{slot}` ({_tensor(state, e.get('tensor'))}) as is, at version {e.get('version')}."


@_on("saved_release")
def _saved_release(state: State, e: Event) -> str:
    node = state["nodes"].get(str(e.get("node")))
    holders = [s for s in (node["saved"].values() if node else []) if s["packed"] == "holder"]
    extra = ", and with them its holders" if holders else ""
    return f"{_node(state, e.get('node'))} ran without retain_graph, so it frees its saved tensors{extra}."


@_on("node_free")
def _node_free(state: State, e: Event) -> str:
    return f"{_node(state, e.get('node'))} is freed: no tensor or node references it any more."


@_on("backward_start")
def _backward_start(state: State, e: Event) -> str:
    # Roots are gradient edges ``[node, input_nr]`` (the recorder's form) or tensor ids.
    roots = [
        _node(state, r[0]) if isinstance(r, list) else _tensor(state, r, with_shape=False)
        for r in e.get("roots") or []
        if not isinstance(r, list) or r[0] is not None
    ]
    call = "`autograd.grad`" if e.get("api") == "grad" else "`backward`"
    of = f" from {_names(roots)}" if roots else ""
    gid = f" (graph task g{e['gid']})" if e.get("gid") is not None else ""
    options = f"retain_graph={e.get('retain_graph')}"
    inside = [_frame(state, f["frame"]) for f in state["frames"].values() if f["running"]]
    where = f", inside {_names(inside)} (Rule 6)" if inside else ""
    return f"{call}{of} starts{gid} with {options}{where}."


@_on("backward_end")
def _backward_end(state: State, e: Event) -> str:
    calls = state["backward"]
    gid = calls[-1].get("gid") if calls else e.get("gid")
    return f"The backward pass{f' g{gid}' if gid is not None else ''} is over."


@_on("node_exec")
def _node_exec(state: State, e: Event) -> str:
    where = " (in a recomputation)" if e.get("phase") == "recompute" else ""
    info = state["nodes"].get(str(e.get("node")))
    if info is not None and info["name"].endswith("AccumulateGrad"):
        return (
            f"The engine runs {_node(state, e.get('node'))}{where}: it adds the incoming gradient to `.grad`."
        )
    if info is not None and info["name"].startswith("CheckpointFunction"):
        # use_reentrant=True: the whole recomputation happens inside this node's backward.
        return (
            f"The engine runs {_node(state, e.get('node'))}{where}: the reentrant checkpoint re-runs its "
            "function with grad enabled, then runs a backward of its own through the result (a nested "
            "graph task)."
        )
    return f"The engine runs {_node(state, e.get('node'))}{where}: it computes gradients for its inputs."


@_on("node_exec_end")
def _node_exec_end(state: State, e: Event) -> str:
    info = state["nodes"].get(str(e.get("node")))
    nexts = [_node(state, n) for n, _ in (info["next"] if info else []) if n is not None]
    to = f" and passes gradients to {_names(nexts)}" if nexts else ""
    return f"{_node(state, e.get('node'))} finishes{to}."


@_on("grad_accumulate")
def _grad_accumulate(state: State, e: Event) -> str:
    info = state["tensors"].get(str(e.get("tensor")))
    name = f"`{info['name']}.grad`" if info and info["name"] else f"the `.grad` of tensor {e.get('tensor')}"
    again = " (adding to what is there)" if info and info["grads"] else ""
    return f"The gradient is accumulated into {name}{again}."


@_on("version_bump")
def _version_bump(state: State, e: Event) -> str:
    return (
        f"An in-place op modifies {_tensor(state, e.get('tensor'), with_shape=False)}: its version is now "
        f"{e.get('version')}, so saved copies of an older version can no longer be used."
    )


@_on("error")
def _error(state: State, e: Event) -> str:
    return f"`{e.get('type')}`: {_first_line(e.get('message'))}"


def _value(state: State, value: Any) -> str:
    if isinstance(value, dict) and "scalar" in value:
        return str(value["scalar"])
    return "None" if value is None else _tensor(state, value, with_shape=False)


@_on("op")
def _op(state: State, e: Event) -> str:
    args = [_value(state, v) for v in e.get("inputs") or [] if v is not None]
    outs = [_tensor(state, t) for t in e.get("outputs") or []]
    made = f" gives {_names(outs)}" if outs else " runs"
    where = "Recomputing: " if e.get("phase") == "recompute" else ""
    node = f", recorded by {_node(state, e['node'])}" if e.get("node") is not None else ""
    return f"{where}`{e.get('name')}`({', '.join(args)}){made}{node}."


@_on("mark")
def _mark(state: State, e: Event) -> str:
    if e.get("stream") == "stderr":  # a warning the run printed (app/runner.py records them)
        return f"A warning is printed: {e.get('label')}."
    return f"Mark: {e.get('label')}."
