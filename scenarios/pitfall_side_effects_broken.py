"""Pitfall 6, broken: side effects in a checkpointed function run again, RNG draws anew

A checkpointed function is run twice: in the forward, and again when the backward recomputes
it. Whatever it does besides computing tensors happens again: this one counts its calls (as a
step counter or a running statistic would) and prints, so the counter says 2 after one training
step and "block starts" is printed twice. The print at its end is printed once: the recomputation
stops early, as soon as the last tensor the backward needs is saved again (`exp`'s result), and
never reaches it. Early stop spares what comes after the last saved tensor, nothing before. The
dropout inside draws its mask from the random number generator; with `preserve_rng_state=False`
the recomputation draws a different mask, and the gradients no longer match the forward that ran:
no error, just wrong gradients.

Group: Pitfalls
Pair: side_effects
Variant: broken
Symptom: checkpointed function runs twice: print / counter / logging executed twice during backward
Symptom: preserve_rng_state=False dropout gradients differ (wrong gradients, no error)
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

drop = nn.Dropout(p=0.5)
calls = [0]


def block(t):
    calls[0] += 1  # a side effect: runs again in the recomputation
    print("block starts, call", calls[0])
    y = drop(t.sin()).exp()  # exp saves its result: the last tensor the backward needs
    print("block ends")  # after the last save: early stop spares it in the recomputation
    return y


# The reference: the same computation without checkpoint.
torch.manual_seed(0)
x_ref = torch.randn(8, requires_grad=True)
drop(x_ref.sin()).exp().sum().backward()

torch.manual_seed(0)
x = torch.randn(8, requires_grad=True)
out = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
out.sum().backward()
print("calls counted in one step:", calls[0])
same = (x.grad - x_ref.grad).abs().max().item() < 1e-6
print("gradients equal the reference:", same)
