"""Memory, part 2: the same MLP with one checkpoint per block

The MLP of `mlp_memory_none`, with every block checkpointed. The forward now keeps only each
block's input (saved by `_NoopSaveInputs`) and small holders; the wide hidden activations die as
soon as each block returns: `mem.live` and `mem.saved` stay lower. The backward recomputes one
block at a time, so `mem.recomputed` holds at most one block's tensors at any step. The price:
every block runs twice.
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def make_block(width):
    # Widen, squash, narrow: the wide hidden activation is what checkpointing avoids keeping.
    return nn.Sequential(nn.Linear(width, width * 4), nn.Tanh(), nn.Linear(width * 4, width))


blocks = nn.ModuleList([make_block(4) for _ in range(4)])
x = torch.randn(4, 4, requires_grad=True)

h = x
for blk in blocks:
    h = checkpoint(blk, h, use_reentrant=False)
loss = h.pow(2).mean()
loss.backward()
print("loss:", loss.item())
