"""The autograd tutorial (A Gentle Introduction to torch.autograd, Autograd mechanics): gradients,
vector-Jacobian products, graph inspection, no_grad and detach, in-place and retain_graph."""

import engine as torch

torch.manual_seed(0)
x = torch.ones(5)
y = torch.zeros(3)
w = torch.randn(5, 3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
print("grad_fn", type(z.grad_fn).__name__, type(loss.grad_fn).__name__)
loss.backward()
print("w.grad", w.grad.flatten().tolist())
print("b.grad", b.grad.tolist())

a = torch.tensor([2.0, 3.0], requires_grad=True)
q = torch.tensor([6.0, 4.0], requires_grad=True)
Q = 3 * a**3 - q**2
Q.backward(gradient=torch.tensor([1.0, 1.0]))
print("vjp", a.grad.tolist(), q.grad.tolist(), (9 * a**2 == a.grad).tolist())

inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
print("first", inp.grad.sum().item())
out.backward(torch.ones_like(out), retain_graph=True)
print("second", inp.grad.sum().item())
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
print("zeroed", inp.grad.sum().item())

with torch.no_grad():
    z2 = torch.matmul(x, w) + b
print("no_grad", z2.requires_grad, z.detach().requires_grad)
print("names", [type(n[0]).__name__ for n in z.grad_fn.next_functions])
