"""Rule 6: a backward inside the checkpointed function (retain_graph=True)

`fn` computes a gradient of its own intermediate result with `autograd.grad`. Because `cos`'s saved
tensor is only a holder, that inner `grad` call already needs a recomputation, during the forward.
The recomputation hook packs the real (detached) tensors too, so the inner backward runs on the
recomputed graph. With `retain_graph=True` the holders survive the inner backward, and the outer
`backward()` recomputes `fn` once more under its own graph task.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def fn(x):
    y = x.sin()
    z = y.cos()
    (gx,) = torch.autograd.grad(z.sum(), x, retain_graph=True)
    return gx, z


inp = torch.randn(3, requires_grad=True)
gx, z = checkpoint(fn, inp, use_reentrant=False)
print("inner gradient:", gx)
z.sum().backward()
print("inp.grad:", inp.grad)
