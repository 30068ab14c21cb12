"""A single checkpoint

`checkpoint(f, x, use_reentrant=False)` runs `f` without keeping what its ops save for backward.
Each saved tensor is replaced by a small `_Holder` (a `pack` event). In the backward, the first
unpack of a holder re-runs `f` under the recomputation hook (`recompute_start`), which hands every
re-saved tensor to its holder (`rpack`), and stops as soon as all of them are back (`early_stop`).
Only the inputs of `f` stay in memory between the forward and the backward.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def f(t):
    # sin saves its input, exp saves its result: two holders in the checkpoint frame.
    return t.sin().exp()


x = torch.randn(3, requires_grad=True)
out = checkpoint(f, x, use_reentrant=False)
loss = out.sum()
loss.backward()
print("x.grad:", x.grad)
