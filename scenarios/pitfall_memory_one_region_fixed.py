"""Pitfall 3c, fixed: one checkpoint per block, the backward recomputes one block at a time

The broken scenario's model with the checkpoint moved inside `model`, around each block. The
forward keeps each block's narrow input and small holders; the backward recomputes a block when
it reaches it, uses its activations, frees them and goes on to the next, so at most one block's
activations are alive again at once. The peak is lower (2776 bytes against 3544), and it is no
longer in a recomputation.

Group: Pitfalls
Pair: memory_one_region
Variant: fixed
Reports: https://github.com/pytorch/pytorch/issues/147449
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def make_block(width):
    return nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))


blocks = nn.ModuleList([make_block(4) for _ in range(4)])
x = torch.randn(16, 4, requires_grad=True)  # a batch of 16: the activations outweigh the weights


def model(h):
    for blk in blocks:
        h = checkpoint(blk, h, use_reentrant=False)  # one region per block
    return h


h = model(x)
loss = h.pow(2).mean()
loss.backward()
print("loss:", round(loss.item(), 4))
