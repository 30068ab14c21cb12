"""The layer classes of ``engine.nn`` (PyTorch's ``torch/nn/modules``)."""

from engine.nn.modules.activation import (
    ELU,
    GELU,
    LeakyReLU,
    LogSoftmax,
    Mish,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from engine.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, InstanceNorm1d, InstanceNorm2d
from engine.nn.modules.container import ModuleDict, ModuleList, Sequential
from engine.nn.modules.conv import Conv1d, Conv2d
from engine.nn.modules.dropout import Dropout
from engine.nn.modules.flatten import Flatten, Unflatten
from engine.nn.modules.linear import Identity, Linear
from engine.nn.modules.loss import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, MSELoss, NLLLoss
from engine.nn.modules.module import Module
from engine.nn.modules.normalization import GroupNorm, LayerNorm
from engine.nn.modules.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from engine.nn.modules.sparse import Embedding

__all__ = [
    "ELU",
    "GELU",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "GroupNorm",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool2d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
    "Unflatten",
]
