"""A chain of checkpointed blocks

The seed's `Block`/`Model`: every block of the model is checkpointed, so the forward keeps only
each block's input. The backward walks the blocks from the last to the first; each block is
recomputed once, right when the backward reaches it, and its recomputed tensors are dropped as
soon as they are used. An `nn.Module` passed to `checkpoint` is called like a function.
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))

    def forward(self, x):
        return self.net(x)


class Model(nn.Module):
    def __init__(self, depth=3, dim=2):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

    def forward(self, x):
        for blk in self.blocks:
            # One checkpoint frame per block.
            x = checkpoint(blk, x, use_reentrant=False)
        return x


x = torch.randn(2, 2, requires_grad=True)
m = Model(depth=3, dim=2)
out = m(x)
loss = out.pow(2).mean()
loss.backward()
print("loss:", loss.item())
