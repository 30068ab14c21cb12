"""``engine.backends``: ``mps`` and ``cudnn`` report that they are not there (the engine runs
NumPy on the CPU). ``cudnn``'s flags can be set, as tutorials do for determinism; they change
nothing."""

from engine.backends import cudnn, mps

__all__ = ["cudnn", "mps"]
