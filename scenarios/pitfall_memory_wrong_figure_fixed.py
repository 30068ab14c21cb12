"""Pitfall 3d, fixed: measure what is held for the backward when it starts

The broken scenario's two training steps, measured at the right moment as well: the bytes the
autograd graph holds for the backward when `loss.backward()` starts. A pack hook
(`saved_tensors_hooks`) sees every tensor saved outside a checkpoint's own hook, so it counts
what the graph holds: each distinct storage once, the parameters left out (they are alive
anyway). Without checkpointing that is every block's input and wide activation; with one
checkpoint per block, only each block's input (what `_NoopSaveInputs` saves; the block's own
saves went to the checkpoint's holders). The scenario prints both figures: the one after the
backward does not move (2368 bytes), the one at its start does (704 bytes, then 192).

Group: Pitfalls
Pair: memory_wrong_figure
Variant: fixed
Reports: https://github.com/deepspeedai/DeepSpeedExamples/issues/332
"""

import engine as torch
from engine import nn
from engine.autograd.graph import saved_tensors_hooks
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def make_block(width):
    return nn.Sequential(nn.Linear(width, width * 4), nn.Tanh(), nn.Linear(width * 4, width))


blocks = nn.ModuleList([make_block(4) for _ in range(2)])
params = list(blocks.parameters())
param_storages = {p.data_ptr() for p in params}  # a weight's transpose, saved by Linear, too
x = torch.randn(4, 4)


def train_step(use_checkpoint):
    for p in params:
        p.grad = None
    held = {}  # storage -> bytes the graph holds for the backward

    def count(t):
        if t.numel() and t.data_ptr() not in param_storages:
            held[t.data_ptr()] = t.numel() * t.element_size()
        return t

    with saved_tensors_hooks(count, lambda t: t):
        h = x
        for blk in blocks:
            h = checkpoint(blk, h, use_reentrant=False) if use_checkpoint else blk(h)
        loss = h.pow(2).mean()
    at_start = sum(held.values())  # the right figure: what the backward is about to use
    loss.backward()
    after = sum(t.numel() * t.element_size() for p in params for t in (p, p.grad))
    return at_start, after


for use_checkpoint in (False, True):
    at_start, after = train_step(use_checkpoint)
    print(
        f"checkpoint={use_checkpoint}: held for the backward when it starts: {at_start} bytes; "
        f"memory after backward: {after} bytes"
    )
