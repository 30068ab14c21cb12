"""Memory, part 1: a small MLP without checkpointing

The baseline of the three `mlp_memory_*` scenarios: the same 4-block MLP (each block `Linear`,
`Tanh`, `Linear`, widths 4 -> 16 -> 4, batch 4) with the same seed and data. Without checkpointing
every block keeps what its ops save until the backward uses it, including its wide hidden
activation (the `Tanh`'s output, saved by the `Tanh` and by the second `Linear`): watch `mem.live`
and `mem.saved` grow block after block during the forward and peak before the backward starts.
"""

import engine as torch
from engine import nn

torch.manual_seed(0)


def make_block(width):
    # Widen, squash, narrow: the wide hidden activation is what checkpointing avoids keeping.
    return nn.Sequential(nn.Linear(width, width * 4), nn.Tanh(), nn.Linear(width * 4, width))


blocks = nn.ModuleList([make_block(4) for _ in range(4)])
x = torch.randn(4, 4, requires_grad=True)

h = x
for blk in blocks:
    h = blk(h)
loss = h.pow(2).mean()
loss.backward()
print("loss:", loss.item())
