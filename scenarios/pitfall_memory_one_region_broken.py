"""Pitfall 3c, broken: one checkpoint around the whole model, the peak moves into its recomputation

An MLP of four blocks (`Linear`, `Tanh`, `Linear`, width 4; a batch of 16, so the activations
outweigh the weights) with a single checkpoint around all of them. The forward keeps almost
nothing: the model's input and a few holders. But the backward's first unpack recomputes the
whole model at once, and every activation the forward dropped is alive again together, next to
the gradients the backward has made so far. The peak moves into that
recomputation and is almost as high as without any checkpoint (3544 bytes against 3720). The
memory report says where: "the peak is reached while what the recomputation of `model#0` made
waits for the backward (1.8 KB of it recomputed)".

Group: Pitfalls
Pair: memory_one_region
Variant: broken
Symptom: checkpointing the whole model in one checkpoint did not lower peak memory
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
        h = blk(h)
    return h


h = checkpoint(model, x, use_reentrant=False)  # one region: the backward recomputes all of it
loss = h.pow(2).mean()
loss.backward()
print("loss:", round(loss.item(), 4))
