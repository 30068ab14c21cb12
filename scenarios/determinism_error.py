"""A determinism CheckpointError

Checkpointing assumes the function does the same thing when recomputed. This `f` looks at a
global counter and skips `exp` the second time it runs, so the recomputation saves one tensor
where the forward saved two. The checkpoint notices when it compares the recomputation with the
forward and raises `CheckpointError`. The scenario does not catch it: the run ends with the error,
and the trace's last events show where it came from.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)

calls = [0]


def f(t):
    calls[0] += 1
    y = t.sin()
    if calls[0] == 1:
        return y.exp()  # the forward: sin and exp save a tensor each
    return y  # the recomputation: only sin saves


x = torch.randn(2, requires_grad=True)
out = checkpoint(f, x, use_reentrant=False)
out.sum().backward()  # raises CheckpointError
