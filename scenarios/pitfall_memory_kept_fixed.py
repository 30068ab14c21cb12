"""Pitfall 3a, fixed: log a number, not the tensor, and checkpointing frees the activations

The broken scenario's model and checkpoints, with the log keeping what it needs, floats
(`hidden.abs().mean().item()`), instead of the tensor. Nothing outside the checkpoint references
the wide activations now, so each dies as soon as its block returns: before the backward only the
blocks' inputs and small holders are held, and the memory report finds no reference kept outside.
Each block still runs twice, the price of checkpointing.

Group: Pitfalls
Pair: memory_kept
Variant: fixed
Reports: https://github.com/deepspeedai/DeepSpeedExamples/issues/332
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def make_block(width):
    return nn.Sequential(nn.Linear(width, width * 4), nn.Tanh(), nn.Linear(width * 4, width))


blocks = nn.ModuleList([make_block(4) for _ in range(4)])
logged = {}  # block index -> statistics of its wide activations


def run_block(h, i):
    pre = blocks[i][0](h)
    hidden = blocks[i][1](pre)
    logged[i] = round(pre.abs().mean().item(), 4), round(hidden.abs().mean().item(), 4)  # floats
    return blocks[i][2](hidden)


x = torch.randn(4, 4, requires_grad=True)
h = x
for i in range(len(blocks)):
    h = checkpoint(run_block, h, i, use_reentrant=False)
loss = h.pow(2).mean()
print("logged statistics:", logged)
loss.backward()
print("loss:", round(loss.item(), 4))
