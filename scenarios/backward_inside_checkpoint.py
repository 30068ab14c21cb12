"""A .backward() call inside a checkpointed function

A checkpointed function that calls `.backward()` itself, to accumulate a gradient into a weight
(`inputs=[w]`). That inner backward needs `mul`'s saved tensors, which are holders, so it
recomputes the function while its forward is still running. Watch for side effects: the
recomputations run `f` again, but they stop early at the last save, before reaching the inner
`.backward()`, so `w.grad` is accumulated only once.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)


def f(t):
    h = (t * w).sin()
    h.sum().backward(inputs=[w], retain_graph=True)
    print("inner backward done, w.grad:", w.grad)
    return h


x = torch.randn(3, requires_grad=True)
out = checkpoint(f, x, use_reentrant=False)
out.sum().backward(inputs=[x])
print("x.grad:", x.grad)
print("w.grad:", w.grad)
