"""``torch.autograd._functions``: legacy custom Functions PyTorch still ships."""

from engine.autograd._functions.tensor import Resize

__all__ = ["Resize"]
