"""``engine.optim``: optimizers that update parameters in place from their ``.grad``, and
``engine.optim.lr_scheduler``."""

from engine.optim import lr_scheduler
from engine.optim.adagrad import Adagrad
from engine.optim.adam import Adam, AdamW
from engine.optim.optimizer import Optimizer
from engine.optim.rmsprop import RMSprop
from engine.optim.sgd import SGD

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
