"""Pitfall 1, broken: reentrant checkpoint over frozen inputs, the adapter gets no gradient

A LoRA-style fine-tune: the embedding is frozen, so the hidden states entering the checkpointed
block do not require grad; only the block's small adapter is trained. With `use_reentrant=True`
the checkpoint is a custom autograd Function whose only inputs are tensors: none of them requires
grad, so torch warns "None of the inputs have requires_grad=True. Gradients will be None", runs
the block under `no_grad` and returns an output with no `grad_fn`. The backward never reaches the
block: `adapter.weight.grad` stays `None` and the adapter silently stops learning, while the loss
still goes down through the head. The fixed scenario shows the two ways out.

Group: Pitfalls
Pair: no_grad_inputs
Variant: broken
Symptom: UserWarning: None of the inputs have requires_grad=True. Gradients will be None
Symptom: adapter.weight.grad is None after backward (LoRA + gradient checkpointing)
Reports: https://github.com/huggingface/transformers/issues/26221
Reports: https://github.com/pytorch/pytorch/issues/7617
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)

embedding = nn.Embedding(6, 4)
embedding.weight.requires_grad_(False)  # frozen, as in LoRA: only the adapter and head train
adapter = nn.Linear(4, 4)  # the trainable block inside the checkpoint
head = nn.Linear(4, 1)  # trainable, outside the checkpoint


def block(h):
    return torch.tanh(adapter(h)) + h


tokens = torch.tensor([1, 3, 5])
hidden = embedding(tokens)  # requires_grad=False: the embedding is frozen
out = checkpoint(block, hidden, use_reentrant=True)  # warns: no input requires grad
print("out.requires_grad:", out.requires_grad)  # False: the block left no graph behind
loss = head(out).sum()
loss.backward()  # reaches the head only
print("adapter.weight.grad:", adapter.weight.grad)  # None: the adapter learns nothing
print("head.weight.grad is None:", head.weight.grad is None)
