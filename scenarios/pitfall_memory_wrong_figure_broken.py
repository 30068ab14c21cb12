"""Pitfall 3d, broken: judging checkpointing by the memory after the backward

A training step of a two-block MLP like the memory scenarios', run twice, without and with one
checkpoint per block, judged by the figure many people print: the memory in use once
`loss.backward()` has returned (`torch.cuda.memory_allocated()` after the step; on the CPU, the
bytes of the parameters and their gradients). It is the same both times, 2368 bytes, so
"checkpointing did nothing". But by then the backward has used and freed every activation: what
remains is parameters and gradients, which checkpointing never touches. What checkpointing
shrinks is what is held for the backward while it waits, largest when the backward starts: look
at the memory on the two `backward_start` steps (the fixed scenario prints it). The memory
report says so too: the peak is parameters and gradients, "checkpointing does not shrink those".

Group: Pitfalls
Pair: memory_wrong_figure
Variant: broken
Symptom: memory_allocated after loss.backward() is the same with and without gradient checkpointing
Reports: https://github.com/deepspeedai/DeepSpeedExamples/issues/332
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def make_block(width):
    return nn.Sequential(nn.Linear(width, width * 4), nn.Tanh(), nn.Linear(width * 4, width))


blocks = nn.ModuleList([make_block(4) for _ in range(2)])
params = list(blocks.parameters())
x = torch.randn(4, 4)


def train_step(use_checkpoint):
    for p in params:
        p.grad = None
    h = x
    for blk in blocks:
        h = checkpoint(blk, h, use_reentrant=False) if use_checkpoint else blk(h)
    loss = h.pow(2).mean()
    loss.backward()
    # The figure watched: what is in use after the step (parameters and their gradients).
    return sum(t.numel() * t.element_size() for p in params for t in (p, p.grad))


for use_checkpoint in (False, True):
    print(f"checkpoint={use_checkpoint}: memory after backward: {train_step(use_checkpoint)} bytes")
