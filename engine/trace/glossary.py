"""The glossary: every term the viewer shows, in two or three plain sentences, with the PyTorch
source it mirrors. The viewer turns each term it finds in a caption or a panel into a card shown
on hover and on keyboard focus; ``autograd-lens glossary`` prints them.

Note [Glossary terms]
~~~~~~~~~~~~~~~~~~~~~
Each term has ``code`` patterns, matched against the whole text of a code span (`` `recomputed[g0]` ``
in a caption, a label in the frames panel), and ``words`` patterns, matched in plain text (the
first match per caption is marked, so a sentence does not turn into a row of links). Patterns are
JavaScript-compatible regular expressions (no lookbehind, no named groups), since the browser
applies them; ``tests/trace/test_story.py`` compiles each with Python's ``re`` as a check that they
stay in the common subset, and checks that the terms the captions use have a card.
The texts are written for someone who has never heard of checkpointing: what the thing is, why
it exists, and where it lives in PyTorch.
"""

from __future__ import annotations

from typing import TypedDict

CHECKPOINT_PY = "torch/utils/checkpoint.py"


class Term(TypedDict):
    id: str
    title: str
    text: str
    source: str  # the PyTorch file (and name) it mirrors
    code: list[str]  # patterns for a whole code span
    words: list[str]  # patterns in plain text


def _t(id_: str, title: str, text: str, source: str, code: list[str], words: list[str] | None = None) -> Term:
    return {"id": id_, "title": title, "text": text, "source": source, "code": code, "words": words or []}


_RULES = {
    1: (
        "A tensor saved inside nested checkpoints is managed only by the innermost one: the outer "
        "checkpoint never sees it. Only the innermost saved-tensor hooks apply."
    ),
    2: (
        "The inputs of an inner checkpoint count as tensors saved to its parent: the parent packs them "
        "into its own holders. So to recompute an inner checkpoint, its parent may have to be "
        "recomputed first to get those inputs back."
    ),
    3: (
        "A recomputation starts as if no checkpoint were active. A checkpoint() call met while re-running "
        "the function makes a fresh frame, whose holders are thrown away when the recomputation ends."
    ),
    4: (
        "Recomputed tensors belong to one backward call and are dropped as soon as they are unpacked "
        "(the holder's handle is cleared), even with retain_graph=True. A second backward recomputes again."
    ),
    5: (
        "Early stop: the recomputation stops as soon as it has re-created every tensor the forward saved, "
        "so the rest of the function is not run again."
    ),
    6: (
        "Backward may run inside a checkpointed function. Then the recomputation also returns real "
        "tensors, so that backward can run through the recomputed graph, and holders already freed "
        "are skipped."
    ),
}

TERMS: list[Term] = [
    _t(
        "frame",
        "_CheckpointFrame (a frame)",
        "One checkpoint() call makes one frame. It remembers how to re-run the function, keeps weak "
        "references to its holders (weak_holders) and, per backward call, what was recomputed. Frames "
        "are named label#id, e.g. big#0.",
        f"{CHECKPOINT_PY}: _CheckpointFrame",
        [r"^_CheckpointFrame$", r"^[A-Za-z_][\w.]*#\d+$"],
        [r"\bframes?\b"],
    ),
    _t(
        "holder",
        "_Holder (a holder)",
        "What checkpoint keeps instead of a saved tensor. When an op inside the checkpointed function "
        "saves a tensor for backward, the pack hook stores an empty holder in its place, so the tensor "
        "itself can be freed. In backward, unpacking the holder gets the tensor back by recomputation. "
        "big#0[2] is holder 2 of frame big#0.",
        f"{CHECKPOINT_PY}: _Holder",
        [r"^_Holder$", r"^weak_holders$", r"^[A-Za-z_][\w.]*#\d+\[\d+\]$"],
        [r"\bholders?\b"],
    ),
    _t(
        "handle",
        "_Handle (a handle)",
        "A small key object. When a recomputation re-creates a holder's tensor, the holder gets a handle "
        "for that backward (holder.handles[gid]) and the tensor is stored in recomputed[gid] under it. "
        "Clearing the handle after the first unpack frees the tensor (Rule 4).",
        f"{CHECKPOINT_PY}: _Handle",
        [r"^_Handle$", r"^handles?(\[.*\])?$"],
        [r"\bhandles?\b"],
    ),
    _t(
        "gid",
        "gid (graph task id)",
        "Each backward() or autograd.grad() call runs as one graph task with its own id, written g0, g1, "
        "... Checkpoint keys its per-backward dictionaries by this id, so two backward calls never share "
        "recomputed tensors.",
        "torch/csrc/autograd/graph_task.h: GraphTask; torch._C._current_graph_task_id()",
        [r"^gid$", r"^g\d+$"],
        [r"\bg\d+\b", r"\bgraph task\b"],
    ),
    _t(
        "recomputed",
        "recomputed[gid]",
        "frame.recomputed[gid]: the tensors a recomputation re-created for one backward call, waiting to "
        "be unpacked. Each is keyed by its holder's handle in a WeakKeyDictionary, so it is freed when "
        "the handle is cleared.",
        f"{CHECKPOINT_PY}: _CheckpointFrame.recomputed",
        [r"^recomputed(\[.*\])?$"],
    ),
    _t(
        "recomp_counter",
        "recomp_counter[gid]",
        "How many tensors the recomputation has re-saved so far in this backward call. When it reaches "
        "the number of holders the forward made, early stop fires (Rule 5).",
        f"{CHECKPOINT_PY}: _CheckpointFrame.recomp_counter",
        [r"^recomp_counter(\[.*\])?$"],
    ),
    _t(
        "is_recomputed",
        "is_recomputed[gid]",
        "Whether this frame was already recomputed in this backward call. False: the next unpack re-runs "
        "the function. True: unpacks take their tensors from recomputed[gid] (a cache hit).",
        f"{CHECKPOINT_PY}: _CheckpointFrame.is_recomputed",
        [r"^is_recomputed(\[.*\])?$"],
    ),
    _t(
        "early_stop",
        "early stop",
        "With early stop on (the default), a recomputation stops as soon as every tensor the forward "
        "saved is back: the last re-save raises _StopRecomputationError and the rest of the function "
        "is not run again (Rule 5). PyTorch 2.8 sets it with set_checkpoint_early_stop(); 2.9 adds "
        "checkpoint(..., early_stop=).",
        f"{CHECKPOINT_PY}: _StopRecomputationError, set_checkpoint_early_stop",
        [r"^early_stop$", r"^_StopRecomputationError$"],
        [r"\b[Ee]arly stop\b"],
    ),
    _t(
        "noop_save_inputs",
        "_NoopSaveInputs",
        "A do-nothing autograd Function that checkpoint applies to its inputs, so they are saved on a "
        "graph node (shown as _NoopSaveInputsBackward). Under a parent checkpoint, the parent packs "
        "them (Rule 2).",
        f"{CHECKPOINT_PY}: _NoopSaveInputs",
        [r"^_NoopSaveInputs(Backward)?$"],
    ),
    _t(
        "dummy",
        "the dummy tensor",
        "An empty tensor (shape [0]) with requires_grad=True that checkpoint passes to _NoopSaveInputs "
        "first, so its node is recorded even when no input requires grad. PyTorch 2.9 removed it.",
        f"{CHECKPOINT_PY}: _checkpoint_without_reentrant_generator",
        [],
        [r"\bdummy\b"],
    ),
    _t(
        "recomputation",
        "recomputation",
        "Running the checkpointed function again during backward, under the recomputation hooks, to "
        "re-create the tensors its forward did not keep. It starts when backward unpacks a holder whose "
        "frame is not yet recomputed for this backward call.",
        f"{CHECKPOINT_PY}: _recomputation_hook",
        [r"^_recomputation_hook$"],
        [r"\b[Rr]ecomput(ation|ing|es?|ed)\b"],
    ),
    _t(
        "hooks",
        "saved-tensor hooks",
        "A pack/unpack pair that autograd calls whenever an op saves a tensor for backward (pack) and "
        "when backward reads it (unpack). Pairs form a stack; only the top one applies. Checkpoint's "
        "pack stores a holder, its unpack recomputes.",
        "torch/autograd/graph.py: saved_tensors_hooks",
        [r"^saved_tensors_hooks$", r"^_checkpoint_hook$"],
        [r"\bhooks? stack\b", r"\bpack hook\b", r"\bunpack hook\b"],
    ),
    _t(
        "checkpoint_error",
        "CheckpointError",
        "Raised when a recomputation does not match the forward (other shapes, dtypes or number of saved "
        "tensors), or when a holder is unpacked twice in one backward call.",
        f"{CHECKPOINT_PY}: CheckpointError",
        [r"^CheckpointError$"],
    ),
    _t(
        "saved_variable",
        "saved tensor (SavedVariable)",
        "A tensor an op keeps for its backward formula (sin keeps its input to compute cos). Without "
        "checkpointing these activations are what fills memory; the node frees them after it runs, "
        "unless retain_graph=True.",
        "torch/csrc/autograd/saved_variable.h: SavedVariable",
        [r"^SavedVariable$", r"^saved_tensors(\[\d+\])?$"],
        [r"\bsaved tensors?\b"],
    ),
    _t(
        "retain_graph",
        "retain_graph",
        "With retain_graph=False (the default) each node frees its saved tensors after it runs in "
        "backward, and with them checkpoint's holders. With True the graph can be run again.",
        "torch/autograd/__init__.py: backward",
        [r"^retain_graph(=\w+)?$"],
        [r"\bretain_graph(=\w+)?"],
    ),
    _t(
        "accumulate_grad",
        "AccumulateGrad",
        "The node at each leaf tensor that requires grad: running it adds the incoming gradient into the "
        "leaf's .grad.",
        "torch/csrc/autograd/functions/accumulate_grad.h: AccumulateGrad",
        [r"AccumulateGrad$"],
    ),
    _t(
        "sequence_nr",
        "seq_nr",
        "Each node's creation number. When several nodes are ready, the engine runs the one created last "
        "first, which is why backward runs in reverse order of the forward.",
        "torch/csrc/autograd/function.h: sequence_nr",
        [r"^seq_nr$", r"^sequence_nr$"],
    ),
] + [
    _t(
        f"rule{n}",
        f"Rule {n} of nested checkpointing",
        text,
        f"{CHECKPOINT_PY}: NOTE [ Nestable Checkpoint ]",
        [],
        [rf"\bRule {n}\b"],
    )
    for n, text in _RULES.items()
]


def glossary() -> list[Term]:
    """Every term, in the order the viewer lists them."""
    return [dict(t) for t in TERMS]  # type: ignore[misc]
