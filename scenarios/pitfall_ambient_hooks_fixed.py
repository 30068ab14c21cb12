"""Pitfall 5, fixed: decide per block, offload or checkpoint, and the hook sees what it should

The model of the broken scenario, with the choice made explicit: the first block is
checkpointed (its activations are recomputed, so there is nothing to offload; only its input
goes through the offload hook), and the second block is not, so each tensor its ops save goes
through the offload hook, which is the innermost pair for them. The log shows the offload hook
packing all of the second block's saved tensors, and unpacking each in the backward. This is how
the two compose in PyTorch's own wrappers: offload around checkpointed blocks offloads their
inputs (the boundaries), and the activations inside are recomputed.

Group: Pitfalls
Pair: ambient_hooks
Variant: fixed
Reports: https://github.com/pytorch/pytorch/pull/84907
"""

import engine as torch
from engine import nn
from engine.autograd.graph import saved_tensors_hooks
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)

blocks = nn.ModuleList([nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4)) for _ in range(2)])
log = []


def offload(t):
    log.append(f"pack   #{len(log)} shape {tuple(t.shape)}")
    return (t.device, t.cpu())


def reload(packed):
    device, t = packed
    log.append(f"unpack shape {tuple(t.shape)}")
    return t.to(device)


x = torch.randn(2, 4, requires_grad=True)
with saved_tensors_hooks(offload, reload):
    h = checkpoint(blocks[0], x, use_reentrant=False)  # recomputed: only its input is offloaded
    h = blocks[1](h)  # offloaded: every tensor it saves goes through the hook
    loss = h.pow(2).sum()
loss.backward()
print("\n".join(log))
print("tensors the offload hook packed:", sum(line.startswith("pack") for line in log))
