"""Stand-in for ``torch.testing._internal.logging_tensor``: tensor subclasses are not applicable
(scripts/conformance.py's rules), so ``LoggingTensor`` only has to exist."""

from __future__ import annotations

from typing import Any


class LoggingTensor:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("LoggingTensor (a __torch_dispatch__ subclass) is not part of the harness")


def capture_logs(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("capture_logs is not part of the harness")
