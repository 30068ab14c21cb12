"""Early stop off

The same function as `early_stop_on`, with early stop disabled by
`set_checkpoint_early_stop(False)` around the forward (the setting is read when the checkpoint
frame is created). The recomputation now runs `f` to the end, including the two ops after the last
save, whose results are thrown away. The gradients are the same; only the work differs.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint, set_checkpoint_early_stop

torch.manual_seed(0)


def f(t):
    print("f: sin")
    a = t.sin()
    print("f: cos")
    b = a.cos()
    print("f: scale and shift")  # runs again in the recomputation: nothing stops it
    return b * 2.0 + 1.0


x = torch.randn(3, requires_grad=True)
with set_checkpoint_early_stop(False):
    out = checkpoint(f, x, use_reentrant=False)
print("backward")
out.sum().backward()
print("x.grad:", x.grad)
