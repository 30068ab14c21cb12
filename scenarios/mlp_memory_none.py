"""Memory, part 1: a small MLP without checkpointing

The baseline of the three `mlp_memory_*` scenarios: the same 4-block MLP (each block a `Linear`
and a `Tanh`, width 8, batch 4) with the same seed and data. Without checkpointing every block
keeps what its ops save (the `Linear`'s input and the `Tanh`'s output) until the backward uses it:
watch `mem.saved` grow block after block during the forward and peak before the backward starts.
"""

import engine as torch
from engine import nn

torch.manual_seed(0)


def make_block(width):
    return nn.Sequential(nn.Linear(width, width), nn.Tanh())


blocks = nn.ModuleList([make_block(8) for _ in range(4)])
x = torch.randn(4, 8, requires_grad=True)

h = x
for blk in blocks:
    h = blk(h)
loss = h.pow(2).mean()
loss.backward()
print("loss:", loss.item())
