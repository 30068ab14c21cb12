"""Selective checkpointing

Selective activation checkpointing (SAC) decides op by op what the recomputation may skip. The
`context_fn` returns two dispatch modes: in the forward, the first one caches the outputs of the
ops the policy wants saved (`MUST_SAVE`); in the recomputation, the second one hands out the
cached outputs instead of running those ops again. Packing, unpacking and early stop do not
change; only the kernels the recomputation really runs do. Here both matrix products come from
the cache, `tanh` runs again, and `sin` is never reached (early stop).
"""

import engine as torch
from engine.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

torch.manual_seed(0)

# The ops to keep, by PyTorch's names. `func` is the op itself: it prints as `engine.ops.mm` in
# the engine (`aten.mm.default` in PyTorch), and it is `torch.ops.aten.mm.default` in both.
SAVE = {torch.ops.aten.mm.default}


def policy(ctx, func, *args, **kwargs):
    decision = CheckpointPolicy.MUST_SAVE if func in SAVE else CheckpointPolicy.PREFER_RECOMPUTE
    print("policy:", func, "recompute" if ctx.is_recompute else "forward", "->", decision.name)
    return decision


def f(a, w):
    return ((a @ w).tanh() @ w).sin()


x = torch.randn(2, 3, requires_grad=True)
w = torch.randn(3, 3, requires_grad=True)
out = checkpoint(
    f, x, w, use_reentrant=False, context_fn=lambda: create_selective_checkpoint_contexts(policy)
)
out.sum().backward()
print("x.grad:", x.grad)
print("w.grad:", w.grad)
