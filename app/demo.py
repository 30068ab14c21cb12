"""``make run`` until the web app exists: train a tiny MLP with the engine and print what happened.

It shows the engine working as PyTorch would: the graph's nodes, the gradients, and that they
match finite differences.
"""

from __future__ import annotations

import engine as torch
from engine import nn
from engine.autograd import gradcheck


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(16, 4)
    y = (x.sum(1, keepdim=True) > 0).to(torch.float32)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = nn.MSELoss()
    print("Autograd Lens engine demo: a 4-8-1 MLP trained with SGD on 16 points\n")
    for step in range(5):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        print(f"  step {step}: loss = {loss.item():.5f}")
    loss = loss_fn(model(x), y)
    print("\nThe backward graph of the loss (node, then where its gradients go):")
    seen: set[int] = set()
    stack = [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        nxt = [n.name() if n is not None else "None" for n, _ in fn.next_functions]
        seq_nr = fn._sequence_nr() if fn._sequence_nr() < 2**63 else "max"  # AccumulateGrad: UINT64_MAX
        print(f"  {fn.name():36s} seq_nr={seq_nr:>4} -> {nxt}")
        stack.extend(n for n, _ in fn.next_functions)
    w = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    ok = gradcheck(lambda a: (a.sin() * a).sum(), (w,))
    print(f"\ngradcheck of (w.sin() * w).sum() against finite differences: {ok}")


if __name__ == "__main__":
    main()
