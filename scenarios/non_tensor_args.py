"""Non-tensor arguments and keyword arguments

`checkpoint(fn, *args, use_reentrant=False, **kwargs)` passes anything to `fn`: numbers, strings,
`None`, keyword arguments. `_NoopSaveInputs` saves only the tensors among them (its `inputs_saved`
event), and keeps the rest, including the `kwargs` dict, as plain Python values on its node. The
recomputation rebuilds the same call from both. Only the reentrant variant refuses kwargs.
"""

import engine as torch
from engine.utils.checkpoint import checkpoint

torch.manual_seed(0)


def scale_shift(x, w, factor, *, shift=None, activation="tanh"):
    h = x * w * factor
    if shift is not None:
        h = h + shift
    if activation == "tanh":
        return h.tanh()
    return h.sigmoid()


x = torch.randn(3, requires_grad=True)
w = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
out = checkpoint(scale_shift, x, w, 2.0, shift=b, activation="sigmoid", use_reentrant=False)
out.sum().backward()
print("x.grad:", x.grad)
print("w.grad:", w.grad)
print("b.grad:", b.grad)
