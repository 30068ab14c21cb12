"""An MLP trained the way tutorials train: a TensorDataset in a DataLoader (in order, so both
libraries see the same batches), AdamW, a StepLR then OneCycleLR schedule, gradient clipping."""

import engine as torch
from engine import nn
from engine.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
X = torch.randn(64, 8)
Y = (X[:, :1] * 2 - X[:, 1:2]).tanh() + 0.1 * torch.randn(64, 1)
loader = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=False)
model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
for epoch in range(5):
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total += loss.item()
    scheduler.step()
    print(epoch, total / len(loader), norm.item(), scheduler.get_last_lr())

optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
cycle = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, total_steps=8)
for step, (xb, yb) in zip(range(8), loader):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(xb), yb).backward()
    optimizer.step()
    cycle.step()
    print("one cycle", step, cycle.get_last_lr())
