"""Pitfall 5, broken: save_on_cpu around a checkpoint offloads almost nothing

Offloading saved tensors to the CPU (`save_on_cpu`, or your own `saved_tensors_hooks`) and
checkpointing are both built on saved-tensor hooks, and only the innermost pair of hooks sees a
saved tensor. Here an offload hook (save_on_cpu's pack and unpack, with a log) is wrapped around a
model of two checkpointed blocks, expecting every activation to be offloaded. Inside each
checkpointed function the checkpoint's own hook is the innermost one: it packs a holder for
every saved tensor, and the offload hook never sees them. What the offload hook does see: each
checkpoint's inputs, saved outside the checkpoint's hook so the block can run again. In the
backward the recomputed tensors go to the holders, never through the offload hook; it only
unpacks the inputs it packed. The printed log lists every tensor the offload hook packed: per
checkpoint, its empty `(0,)` dummy and its input (what `_NoopSaveInputs` saves), then the input of
the loss's `pow`, outside both checkpoints.

Group: Pitfalls
Pair: ambient_hooks
Variant: broken
Symptom: save_on_cpu / saved_tensors_hooks pack_hook not called for tensors inside checkpoint
    (activations not offloaded)
Reports: https://github.com/pytorch/pytorch/issues/147565
Reports: https://github.com/pytorch/pytorch/pull/84907
"""

import engine as torch
from engine import nn
from engine.autograd.graph import saved_tensors_hooks
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)

blocks = nn.ModuleList([nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4)) for _ in range(2)])
log = []


def offload(t):  # save_on_cpu's pack hook, with a log
    log.append(f"pack   #{len(log)} shape {tuple(t.shape)}")
    return (t.device, t.cpu())


def reload(packed):  # save_on_cpu's unpack hook
    device, t = packed
    log.append(f"unpack shape {tuple(t.shape)}")
    return t.to(device)


x = torch.randn(2, 4, requires_grad=True)
with saved_tensors_hooks(offload, reload):  # meant to offload every activation
    h = x
    for blk in blocks:
        h = checkpoint(blk, h, use_reentrant=False)
    loss = h.pow(2).sum()
loss.backward()
print("\n".join(log))
print("tensors the offload hook packed:", sum(line.startswith("pack") for line in log))
