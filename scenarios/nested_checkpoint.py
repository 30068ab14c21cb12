"""Nested checkpoints

The seed's `OuterBlock`/`SubBlock`: the outer block is checkpointed as a whole, and each of its two
sub-blocks is checkpointed again inside it. Rule 1: a saved tensor is managed by the innermost
checkpoint only. Rule 2: the inputs of an inner checkpoint are saved to its parent (the parent
packs them). So, to unpack a tensor of an inner checkpoint, the outer one must be recomputed first:
watch the outer recomputation start when the backward reads `sub2`'s inputs, create fresh frames
for the sub-blocks (Rule 3) and stop early before running `sub2` (Rule 5).
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


class SubBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin1 = nn.Linear(dim, dim)
        self.lin2 = nn.Linear(dim, dim)

    def forward(self, x):
        # The inner checkpoint.
        def inner(y):
            return torch.relu(self.lin2(torch.relu(self.lin1(y))))

        return checkpoint(inner, x, use_reentrant=False)


class OuterBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.sub1 = SubBlock(dim)
        self.sub2 = SubBlock(dim)

    def forward(self, x):
        # The outer checkpoint wraps both sub-blocks.
        def big(y):
            y = self.sub1(y)
            y = self.sub2(y)
            return y

        return checkpoint(big, x, use_reentrant=False)


x = torch.randn(2, 3, requires_grad=True)
block = OuterBlock(3)
out = block(x)
out.sum().backward()
print("x.grad:", x.grad)
