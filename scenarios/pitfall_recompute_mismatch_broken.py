"""Pitfall 2, broken: a cache consulted in the forward, CheckpointError: metadata mismatch

An attention-like block keeps a key cache, as `use_cache=True` does in transformers: each call
appends its keys and attends over all cached keys. The checkpoint assumes that re-running the
block gives back what the forward saved, but the recomputation finds the cache already holding
the forward's keys, appends again and concatenates twice as many: the tensors it saves have
another shape. When the backward unpacks them, the checkpoint compares each recomputed tensor's
metadata with the forward's and raises `CheckpointError` ("Recomputed values for the following
tensors have different metadata than during the forward pass"). With `debug=True` the error also
lists every op the forward ran and every op the recomputation ran: they first differ at the `cat`
over the cache. The scenario meets the error twice, as most people do and then with
`debug=True`, catches it and prints it.

Group: Pitfalls
Pair: recompute_mismatch
Variant: broken
Symptom: torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed values for the
    following tensors have different metadata than during the forward pass.
Symptom: tensor at position 2: saved metadata: {'shape': torch.Size([4, 3]), 'dtype': torch.float32,
    'device': device(type='cpu')} recomputed metadata: {'shape': torch.Size([4, 6]),
    'dtype': torch.float32, 'device': device(type='cpu')}
Reports: https://github.com/huggingface/transformers/issues/28056
Reports: https://github.com/pytorch/pytorch/issues/141896
"""

import engine as torch
from engine import nn
from engine.utils.checkpoint import CheckpointError, checkpoint

torch.manual_seed(0)

to_key = nn.Linear(4, 4)
cache = []  # past keys, as use_cache=True keeps them


def attention(h, use_cache):
    k = to_key(h)
    if use_cache:
        cache.append(k)
        k = torch.cat(cache)  # all cached keys: one more block of rows each time the block runs
    scores = h @ k.t()  # saves h and k.t(): their shapes depend on how often the block ran
    return scores.softmax(-1) @ k


def op_log(message, header):
    """The ops of one section of debug=True's log, as "shape name" ("f32[6, 4] cat"), without the
    detach calls the log itself says to ignore."""
    section = message.split(header, 1)[1].split("\n\n", 2)[1]
    ops = []
    for line in section.splitlines():
        shape, call = line.split(" = ", 1)
        name = call.split("(", 1)[0].split(".")
        name = name[name.index("aten") + 1] if "aten" in name else name[-1]  # torch: aten.cat.default
        if name != "detach":
            ops.append(f"{shape.split(': ', 1)[1]} {name}")
    return ops


x = torch.randn(3, 4, requires_grad=True)

# First as most people meet it: the error names the tensors whose metadata changed.
out = checkpoint(attention, x, True, use_reentrant=False)
print("keys in the cache after the forward:", len(cache))
try:
    out.sum().backward()  # the recomputation appends to the cache again
except CheckpointError as e:
    print("keys in the cache after the recomputation:", len(cache))
    lines = str(e).splitlines()
    # Shapes only, and "Size" for torch.Size: the lines read the same on the engine and on torch.
    print("CheckpointError:", lines[0])
    for line in lines[1:4]:
        shapes = line.split("'dtype'")[0].replace("torch.Size", "Size").replace("engine.Size", "Size")
        print("   ", shapes + ("...}" if "'dtype'" in line else ""))

# Then with debug=True, which logs every op of the forward and of the recomputation.
cache.clear()
out = checkpoint(attention, x, True, use_reentrant=False, debug=True)
try:
    out.sum().backward()
except CheckpointError as e:
    # debug=True's log of ops, side by side up to the first one that differs.
    forward = op_log(str(e), "Operations executed during the original forward:")
    recomputed = op_log(str(e), "Operations executed during recomputation:")
    print(f"{'original forward':<22}| recomputation")
    for a, b in zip(forward, recomputed, strict=False):
        print(f"{a:<22}| {b}{'   <- first difference' if a != b else ''}")
        if a != b:
            break
