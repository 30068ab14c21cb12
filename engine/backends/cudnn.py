"""``engine.backends.cudnn``: no cuDNN here. ``enabled``, ``deterministic`` and ``benchmark`` are
plain module attributes with torch's defaults: setting them is accepted and has no effect (the
engine's NumPy kernels are deterministic)."""

__all__ = ["benchmark", "deterministic", "enabled", "is_available", "version"]

enabled = True
deterministic = False
benchmark = False


def is_available() -> bool:
    return False


def version() -> None:
    return None
