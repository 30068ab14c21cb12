"""A partial backward with autograd.grad

`f` returns two outputs, and `autograd.grad(u.sum(), x)` asks for the gradient of the first one
only. The backward reaches only `sin`'s node, so only one holder is unpacked. The recomputation
still runs until every tensor the forward saved is back (early stop counts saves, not what this
backward needs): the tensors this backward never unpacks stay in `recomputed[gid]` until their
holders die. A later full backward is a new graph task and recomputes again.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def f(a, b):
    return a.sin(), (b.cos() * a).exp()


x = torch.randn(3, requires_grad=True)
y = torch.randn(3, requires_grad=True)
u, v = checkpoint(f, x, y, use_reentrant=False)

(gx,) = torch.autograd.grad(u.sum(), x, retain_graph=True)
print("d(u.sum())/dx:", gx)

(u.sum() + v.sum()).backward()
print("x.grad:", x.grad)
print("y.grad:", y.grad)
