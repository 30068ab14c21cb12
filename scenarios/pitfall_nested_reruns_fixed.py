"""Pitfall 4, fixed: one level of checkpoints, the inner function runs twice

The block of the broken scenario, checkpointed at one level only: the layer keeps its
checkpoint and the block around it does not. The inner function runs once in the forward and
once when the backward recomputes it: two runs, the price of any checkpoint, instead of three.
The outer block's own ops run once; what they save (the layer's output) is kept as a tensor, so
the memory held is one activation more, in exchange for a whole run less.

Group: Pitfalls
Pair: nested_reruns
Variant: fixed
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)

layer = nn.Linear(4, 4)
runs = {"inner": 0, "outer": 0}


def inner(h):
    runs["inner"] += 1
    print("inner runs, time", runs["inner"])
    return torch.tanh(layer(h))


def outer(h):
    runs["outer"] += 1
    h = checkpoint(inner, h, use_reentrant=False)  # the layer's own checkpoint, the only one
    return h.sin() * h


x = torch.randn(2, 4, requires_grad=True)
out = outer(x)  # not checkpointed again
out.sum().backward()
print("runs:", runs)
