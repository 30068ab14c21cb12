"""``engine.amp``: ``autocast`` (accepted; no lower-precision compute, see ``autocast_mode``)."""

from engine.amp.autocast_mode import autocast, is_autocast_available

__all__ = ["autocast", "is_autocast_available"]
