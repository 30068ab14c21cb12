"""Rule 6: a backward inside the checkpointed function (retain_graph=False)

The seed's second Rule 6 example. (1)(2): inside the checkpoint, `sin` and `cos` keep holders only.
(3): the inner `grad` triggers a recomputation; it runs without `retain_graph`, so the nodes it
executes release their holders. (4): `x.cos()` saves `x` again, into a fresh holder. (5): the outer
`backward()` recomputes `fn`; the holders of (1) and (2) are dead, so their re-saves are skipped
(`rpack` with outcome "skip"), and only the holder of (4) receives a tensor.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def fn(x):
    y = x.sin()  # (1)
    z = y.cos()  # (2)
    (gx,) = torch.autograd.grad(z.sum(), x)  # (3)
    return x.cos() * gx  # (4)


inp = torch.randn(3, requires_grad=True)
out = checkpoint(fn, inp, use_reentrant=False)
out.sum().backward()  # (5)
print("inp.grad:", inp.grad)
