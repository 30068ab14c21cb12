"""A real PyTorch training step with one checkpointed block

Traced on real PyTorch, then opened in the viewer of a running web app (make run):

    autograd-lens trace docs/examples/torch_train_step.py --backend torch -o step.json
    autograd-lens open step.json

Plain PyTorch: nothing here knows about Autograd Lens.
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block1 = Block(dim)
        self.block2 = Block(dim)
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        # The middle of the model is checkpointed: its activations are recomputed in backward.
        h = checkpoint(self.block1, x, use_reentrant=False)
        h = self.block2(h)
        return self.head(h)


model = Model(8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
target = torch.randn(4, 1)

loss = nn.functional.mse_loss(model(x), target)
loss.backward()
opt.step()
print("loss:", loss.item())
