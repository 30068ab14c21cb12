"""Reentrant vs non-reentrant checkpoint

The same block, checkpointed both ways. Reentrant (`use_reentrant=True`, the old variant) is a
custom autograd Function: its forward runs the block under `no_grad` (no graph, no holders) and
saves only the block's tensor inputs; its backward re-runs the whole block with grad on and calls
backward on that new graph from inside the running backward. Non-reentrant (`use_reentrant=False`)
records the graph with holders and recomputes through saved-tensor hooks. Both give the same
gradients, but only the non-reentrant one supports `autograd.grad`.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)


def block(t):
    return (t * w).sin().exp()


for reentrant in [True, False]:
    x = torch.randn(3, requires_grad=True)
    w.grad = None
    out = checkpoint(block, x, use_reentrant=reentrant)
    out.sum().backward()
    print("use_reentrant =", reentrant, "x.grad:", x.grad, "w.grad:", w.grad)

# autograd.grad works with use_reentrant=False only.
x = torch.randn(3, requires_grad=True)
out = checkpoint(block, x, use_reentrant=True)
try:
    torch.autograd.grad(out.sum(), x)
except RuntimeError as e:
    print("RuntimeError:", e)
