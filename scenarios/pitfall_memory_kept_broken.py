"""Pitfall 3, broken: checkpointing did not reduce memory, a reference outside keeps the bytes

The MLP of the memory scenarios (`mlp_memory_none`, `mlp_memory_per_block`), one checkpoint per
block, plus a habit common in training scripts: each block stores its wide activations (before
and after `tanh`) in a dict, to draw histograms later. The checkpoint does its part: it saves a
small holder instead of each activation. But the dict still references the tensors, so they stay
alive until the backward: more bytes are alive when the backward starts than with no checkpoint
at all. The memory report names the cause ("a reference outside the checkpoint keeps it") and
lists, at the peak, the tensors alive and who holds them. Other ways to get "no reduction": the
checkpointed region holds little of what is saved, one region around the whole model (the peak
moves into its recomputation), or watching a figure checkpointing does not shrink (parameters,
gradients; in DeepSpeedExamples #332 the two figures compared were close and misread).

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
