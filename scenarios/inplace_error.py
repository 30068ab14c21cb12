"""An in-place change of a checkpoint's input

The checkpoint saves its inputs (through `_NoopSaveInputs`) to recompute from them later. Changing
an input in place after the checkpoint bumps its version counter, and the backward detects it
when it reads the saved inputs to recompute: a `RuntimeError` ("one of the variables needed for
gradient computation has been modified by an inplace operation"). The scenario catches and prints
it, then shows the fix: modify a copy instead.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def f(t):
    return t.sin()


x = torch.randn(4, requires_grad=True)
h = x * 2.0
out = checkpoint(f, h, use_reentrant=False)
h.add_(1.0)  # in place: version 0 -> 1 of a tensor the checkpoint saved
try:
    out.sum().backward()
except RuntimeError as e:
    print("RuntimeError:", e)

# The fix: leave the checkpoint's input alone and change a copy.
h = x * 2.0
out = checkpoint(f, h, use_reentrant=False)
h2 = h.clone()
h2.add_(1.0)
out.sum().backward()
print("x.grad:", x.grad)
