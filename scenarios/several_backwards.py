"""Several backwards through one checkpoint

Each `backward()` is a new graph task with its own id (`gid`), and a checkpoint frame recomputes
once per graph task: `recomputed[gid]`, `recomp_counter[gid]` and `is_recomputed[gid]` are kept
per gid. Rule 4: recomputed tensors belong to one backward and are dropped as soon as they are
unpacked, even with `retain_graph=True`, so the second and third backward recompute again. The
last backward has no `retain_graph`: the graph's nodes release their holders after running.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def f(t):
    return t.sin().exp().cos()


x = torch.randn(3, requires_grad=True)
out = checkpoint(f, x, use_reentrant=False)
for i, retain in enumerate([True, True, False]):
    out.sum().backward(retain_graph=retain)
    print("backward", i + 1, "x.grad:", x.grad)
