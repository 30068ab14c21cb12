"""Learning PyTorch with Examples: the same fit with nn.Sequential, MSELoss(reduction='sum') and
optim.RMSprop, then optim.SGD with momentum."""

import math

import engine as torch

x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
loss_fn = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
for t in range(500):
    loss = loss_fn(model(xx), y)
    if t % 100 == 99:
        print("rmsprop", t, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

optimizer = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9)
for t in range(300):
    loss = loss_fn(model(xx), y)
    if t % 100 == 99:
        print("sgd", t, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

linear_layer = model[0]
print(linear_layer.bias.item(), *linear_layer.weight[:, 0:3].flatten().tolist())
