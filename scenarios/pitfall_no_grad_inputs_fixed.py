"""Pitfall 1, fixed: the adapter behind a frozen embedding gets its gradient

The model of the broken scenario, fixed two ways. First `use_reentrant=False`: the non-reentrant
checkpoint records the block's graph like an uncheckpointed call (with holders instead of saved
tensors), so the adapter's parameters are in the graph whatever the inputs require. Second, what
transformers' `enable_input_require_grads()` does for the reentrant variant: make the block's
input require grad (`hidden.requires_grad_()`), so the reentrant Function has an input that needs
a gradient and builds its backward. No warning either way, and `adapter.weight.grad` is filled.

Group: Pitfalls
Pair: no_grad_inputs
Variant: fixed
Reports: https://github.com/huggingface/transformers/issues/26221
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)

embedding = nn.Embedding(6, 4)
embedding.weight.requires_grad_(False)
adapter = nn.Linear(4, 4)
head = nn.Linear(4, 1)


def block(h):
    return torch.tanh(adapter(h)) + h


tokens = torch.tensor([1, 3, 5])

# Fix 1: the non-reentrant checkpoint.
hidden = embedding(tokens)
out = checkpoint(block, hidden, use_reentrant=False)
print("use_reentrant=False, out.requires_grad:", out.requires_grad)
head(out).sum().backward()
print("adapter.weight.grad is None:", adapter.weight.grad is None)

# Fix 2: keep use_reentrant=True, but give the block an input that requires grad.
adapter.weight.grad = None
hidden = embedding(tokens).requires_grad_()  # what enable_input_require_grads() does
out = checkpoint(block, hidden, use_reentrant=True)
print("use_reentrant=True with hidden.requires_grad_(), out.requires_grad:", out.requires_grad)
head(out).sum().backward()
print("adapter.weight.grad is None:", adapter.weight.grad is None)
