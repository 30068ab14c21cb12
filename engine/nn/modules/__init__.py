"""The layer classes of ``engine.nn`` (PyTorch's ``torch/nn/modules``)."""

from engine.nn.modules.activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from engine.nn.modules.container import ModuleDict, ModuleList, Sequential
from engine.nn.modules.dropout import Dropout
from engine.nn.modules.linear import Identity, Linear
from engine.nn.modules.loss import CrossEntropyLoss, MSELoss, NLLLoss
from engine.nn.modules.module import Module
from engine.nn.modules.normalization import LayerNorm
from engine.nn.modules.sparse import Embedding

__all__ = [
    "GELU",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Identity",
    "LayerNorm",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
]
