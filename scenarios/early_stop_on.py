"""Early stop on (the default)

Rule 5: a recomputation stops as soon as every tensor the forward saved has been saved again.
Here `f` saves twice (`sin` saves its input, `cos` saves its input) and then runs two more ops
that save nothing. The recomputation raises `_StopRecomputationError` inside `cos`'s save, so
`cos`, `* 2` and `+ 1` never run again: compare the printed steps of the forward and of the
recomputation, and compare with the `early_stop_off` scenario.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def f(t):
    print("f: sin")
    a = t.sin()
    print("f: cos")
    b = a.cos()  # the last save: with early stop, the recomputation ends inside this line
    print("f: scale and shift")
    return b * 2.0 + 1.0


x = torch.randn(3, requires_grad=True)
out = checkpoint(f, x, use_reentrant=False)
print("backward")
out.sum().backward()
print("x.grad:", x.grad)
