"""``engine.optim``: optimizers that update parameters in place from their ``.grad``."""

from engine.optim.adam import Adam, AdamW
from engine.optim.optimizer import Optimizer
from engine.optim.sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]
