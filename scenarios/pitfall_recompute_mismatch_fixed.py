"""Pitfall 2, fixed: no cache in a checkpointed forward, the recomputation matches

The block of the broken scenario, run the way transformers runs it under gradient checkpointing
("`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`"): the
forward no longer reads or writes state that outlives it, so the recomputation runs exactly the
ops the forward ran, saves tensors of the same shapes, and the backward goes through. The rule it
follows: a checkpointed function must compute the same thing when it runs again (the same for
autocast, whose state the checkpoint records and restores for the recomputation).

Group: Pitfalls
Pair: recompute_mismatch
Variant: fixed
Reports: https://github.com/huggingface/transformers/issues/28056
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)

to_key = nn.Linear(4, 4)
cache = []


def attention(h, use_cache):
    k = to_key(h)
    if use_cache:
        cache.append(k)
        k = torch.cat(cache)
    scores = h @ k.t()
    return scores.softmax(-1) @ k


x = torch.randn(3, 4, requires_grad=True)
out = checkpoint(attention, x, False, use_reentrant=False, debug=True)  # use_cache=False
out.sum().backward()
print("keys in the cache:", len(cache))
print("x.grad shape:", tuple(x.grad.shape))
