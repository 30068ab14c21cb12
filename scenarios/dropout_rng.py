"""Dropout and preserve_rng_state

Dropout draws a random mask. The recomputation must draw the same mask, or the gradients are
computed for a different function than the one the forward ran. With `preserve_rng_state=True`
(the default) the checkpoint saves the random number generator's state before the forward and
replays it in the recomputation (inside `fork_rng`, so the RNG outside is not disturbed). With
`preserve_rng_state=False` the recomputation draws a new mask: no error is raised, the gradients
are silently wrong.
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

drop = nn.Dropout(p=0.5)


def f(t):
    return drop(t.sin()).exp()


# The reference: the same computation without checkpoint.
torch.manual_seed(0)
x_ref = torch.randn(8, requires_grad=True)
f(x_ref).sum().backward()

for preserve in [True, False]:
    torch.manual_seed(0)
    x = torch.randn(8, requires_grad=True)
    out = checkpoint(f, x, use_reentrant=False, preserve_rng_state=preserve)
    out.sum().backward()
    same = (x.grad - x_ref.grad).abs().max().item() < 1e-6
    print("preserve_rng_state =", preserve, "-> gradients equal the reference:", same)
