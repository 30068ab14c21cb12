"""checkpoint_sequential with sqrt(n) segments

`checkpoint_sequential(model, segments, x)` splits a sequential model into `segments` chunks and
checkpoints every chunk but the last. With n layers and sqrt(n) segments, the forward keeps about
sqrt(n) chunk inputs and the backward recomputes one chunk of about sqrt(n) layers at a time:
memory in O(sqrt(n)) for about one extra forward. Here n = 9 layers, so 3 segments of 3 layers.
"""

import math

import engine as torch
from engine import nn
from engine.utils.checkpoint import checkpoint_sequential

torch.manual_seed(0)

layers = []
for _ in range(4):
    layers.append(nn.Linear(3, 3))
    layers.append(nn.Tanh())
layers.append(nn.Linear(3, 3))
model = nn.Sequential(*layers)

n = len(model)
segments = int(math.sqrt(n))
print("layers:", n, "segments:", segments)

x = torch.randn(2, 3, requires_grad=True)
out = checkpoint_sequential(model, segments, x, use_reentrant=False)
out.pow(2).sum().backward()
print("x.grad:", x.grad)
