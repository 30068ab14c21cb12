"""Pitfall 3b, broken: checkpointing a cheap layer, the wide activations are saved anyway

The MLP of the memory scenarios (`mlp_memory_none`, `mlp_memory_per_block`), with only each
block's `Tanh` checkpointed: a cheap elementwise op, a tempting choice ("activations are what
checkpointing saves"). The checkpoint drops the `Tanh`'s saved output, but the `Linear` after it,
left outside, saves the same tensor as its input: the wide activation is held as before. And the
checkpoint keeps its own input, the first `Linear`'s wide output, to run the `Tanh` again, which
nothing kept before. The wide activations stay saved, and 1 KB more is alive when the backward
starts than with no checkpoint at all (4744 bytes against `mlp_memory_none`'s 3720; checkpointing
whole blocks, 2696). The memory report says "the checkpointed regions hold 1.0 KB of the 5.3 KB
saved for the backward: the rest is saved outside them", and its split of the bytes alive at the
backward's start shows the checkpoints' inputs.

Group: Pitfalls
Pair: memory_small_region
Variant: broken
Symptom: checkpointing an activation function (GELU, Tanh) did not save memory
Reports: https://github.com/pytorch/pytorch/issues/78731
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
    pre = blk[0](h)
    hidden = checkpoint(blk[1], pre, use_reentrant=False)  # only the cheap Tanh is checkpointed
    h = blk[2](hidden)  # ...and this Linear saves its wide input, `hidden`, anyway
loss = h.pow(2).mean()
loss.backward()
print("loss:", round(loss.item(), 4))
