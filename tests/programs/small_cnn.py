"""The 60-minute blitz's network (LeNet-style: two convolutions with max pooling, three linear
layers) on one random batch: forward, cross entropy, three SGD steps with momentum."""

import engine as torch
import engine.nn as nn
import engine.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, input):
        c1 = F.relu(self.conv1(input))
        s2 = F.max_pool2d(c1, (2, 2))
        c3 = F.relu(self.conv2(s2))
        s4 = F.max_pool2d(c3, 2)
        s4 = torch.flatten(s4, 1)
        f5 = F.relu(self.fc1(s4))
        f6 = F.relu(self.fc2(f5))
        return self.fc3(f6)


net = Net()
print(net)
print("params", [tuple(p.shape) for p in net.parameters()])
input = torch.randn(4, 1, 32, 32)
target = torch.tensor([1, 0, 4, 9])
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
for step in range(3):
    optimizer.zero_grad()
    output = net(input)
    loss = criterion(output, target)
    loss.backward()
    print(step, loss.item(), net.conv1.bias.grad.tolist())
    optimizer.step()
