"""Pitfall 6, fixed: side effects outside the checkpoint, RNG state preserved

The broken scenario's step with the side effects moved out of the checkpointed function: the
counter and the prints run once per step, in the caller, whatever the backward recomputes. The
function left inside computes tensors only, and with `preserve_rng_state=True` (the default) the
checkpoint saves the random number generator's state before the forward and replays it for the
recomputation, so dropout draws the same mask and the gradients equal those of the uncheckpointed
reference.

Group: Pitfalls
Pair: side_effects
Variant: fixed
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

drop = nn.Dropout(p=0.5)
calls = [0]


def block(t):
    return drop(t.sin()).exp()  # tensors only: running it twice changes nothing outside


torch.manual_seed(0)
x_ref = torch.randn(8, requires_grad=True)
block(x_ref).sum().backward()

torch.manual_seed(0)
x = torch.randn(8, requires_grad=True)
calls[0] += 1  # the side effects, once per step, outside the checkpoint
print("block starts, call", calls[0])
out = checkpoint(block, x, use_reentrant=False, preserve_rng_state=True)
print("block ends")
out.sum().backward()
print("calls counted in one step:", calls[0])
same = (x.grad - x_ref.grad).abs().max().item() < 1e-6
print("gradients equal the reference:", same)
