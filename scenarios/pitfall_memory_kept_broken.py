"""Pitfall 3a, broken: checkpointing did not reduce memory, a reference outside keeps the bytes

The MLP of the memory scenarios (`mlp_memory_none`, `mlp_memory_per_block`), one checkpoint per
block, plus a habit common in training scripts: each block stores its wide activations (before
and after `tanh`) in a dict, to draw histograms later. The checkpoint does its part: it saves a
small holder instead of each activation. But the dict still references the tensors, so they stay
alive until the backward: more bytes are alive when the backward starts than with no checkpoint
at all. The memory report names the cause ("a reference outside the checkpoint keeps it") and
lists, at the peak, the tensors alive and who holds them. The other ways to get "no reduction"
are pitfalls 3b to 3d: a checkpointed region that holds little of what is saved
(`pitfall_memory_small_region_*`), one region around the whole model, whose recomputation the
peak moves into (`pitfall_memory_one_region_*`), and a figure checkpointing does not shrink, the
memory after the backward: parameters and gradients (`pitfall_memory_wrong_figure_*`).

Group: Pitfalls
Pair: memory_kept
Variant: broken
Symptom: gradient checkpointing did not reduce memory (peak unchanged, no effect)
Reports: https://github.com/deepspeedai/DeepSpeedExamples/issues/332
Reports: https://github.com/pytorch/pytorch/issues/147449
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def make_block(width):
    return nn.Sequential(nn.Linear(width, width * 4), nn.Tanh(), nn.Linear(width * 4, width))


blocks = nn.ModuleList([make_block(4) for _ in range(4)])
logged = {}  # block index -> its wide activations, kept "for histograms"


def run_block(h, i):
    pre = blocks[i][0](h)  # the wide activations checkpointing should drop...
    hidden = blocks[i][1](pre)
    logged[i] = (pre, hidden)  # ...but these references outside the checkpoint keep them alive
    return blocks[i][2](hidden)


x = torch.randn(4, 4, requires_grad=True)
h = x
for i in range(len(blocks)):
    h = checkpoint(run_block, h, i, use_reentrant=False)
loss = h.pow(2).mean()
kept = sum(t.numel() * t.element_size() for pair in logged.values() for t in pair)
print("bytes the logging dict keeps alive:", kept)
loss.backward()
print("loss:", round(loss.item(), 4))
