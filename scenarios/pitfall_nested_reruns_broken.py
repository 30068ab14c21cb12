"""Pitfall 4, broken: nested checkpoints run the inner function three times

A layer is checkpointed, and so is the block around it (a wrapper applied at two levels, as
happens when a model checkpoints its layers and a training framework checkpoints the whole model
again). Count the runs of the inner function: once in the forward; once more when the backward
recomputes the outer block (its recomputation runs the inner checkpoint's forward again, with a
fresh inner frame, Rule 3); and a third time when the backward needs the inner function's own
saved tensors and recomputes that inner frame. Each level of nesting adds a run of everything
inside it. Early stop does not help here: the outer recomputation needs the inner checkpoint's
inputs, and the inner function's output is what the outer block's later ops save.

Group: Pitfalls
Pair: nested_reruns
Variant: broken
Symptom: nested checkpoint recomputes the inner function three times (forward runs 3x)
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
    h = checkpoint(inner, h, use_reentrant=False)  # the layer's own checkpoint
    return h.sin() * h  # saves the inner function's output


x = torch.randn(2, 4, requires_grad=True)
out = checkpoint(outer, x, use_reentrant=False)  # ...and the whole block's
out.sum().backward()
print("runs:", runs)
