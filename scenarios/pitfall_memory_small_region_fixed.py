"""Pitfall 3b, fixed: checkpoint the region that saves the wide activations

The broken scenario's model with each whole block checkpointed, `Linear`, `Tanh` and `Linear`:
the region that saves the wide activations (the `Tanh`'s output, the second `Linear`'s input).
The checkpoint keeps only the block's narrow input and small holders; the wide tensors die as
soon as the block returns and are made again, one block at a time, in the backward. The memory
report finds no region too small: the holders stand in for the bytes the blocks save.

Group: Pitfalls
Pair: memory_small_region
Variant: fixed
Reports: https://github.com/pytorch/pytorch/issues/147449
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def make_block(width):
    return nn.Sequential(nn.Linear(width, width * 4), nn.Tanh(), nn.Linear(width * 4, width))


blocks = nn.ModuleList([make_block(4) for _ in range(4)])
x = torch.randn(4, 4, requires_grad=True)

h = x
for blk in blocks:
    h = checkpoint(blk, h, use_reentrant=False)  # the whole block: Linear, Tanh, Linear
loss = h.pow(2).mean()
loss.backward()
print("loss:", round(loss.item(), 4))
