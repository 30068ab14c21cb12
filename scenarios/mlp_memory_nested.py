"""Memory, part 3: the same MLP with nested checkpoints

The MLP of `mlp_memory_none`, checkpointed two ways at once: each pair of blocks is an outer
checkpoint, and each block inside a pair is an inner checkpoint. The forward keeps only the two
pairs' inputs (the inner checkpoints' inputs are saved to their outer frame as holders, Rule 2).
The backward pays for it: to recompute an inner block, its pair must be recomputed first, so the
blocks run up to three times. Compare `mem` and the number of `fn_start` events across the three
`mlp_memory_*` scenarios.
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


def pair(first, second):
    def run_pair(h):
        h = checkpoint(first, h, use_reentrant=False)
        return checkpoint(second, h, use_reentrant=False)

    return run_pair


h = x
for i in range(0, 4, 2):
    h = checkpoint(pair(blocks[i], blocks[i + 1]), h, use_reentrant=False)
loss = h.pow(2).mean()
loss.backward()
print("loss:", loss.item())
