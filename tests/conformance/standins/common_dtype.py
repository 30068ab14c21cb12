"""Stand-in for ``torch.testing._internal.common_dtype``."""

from __future__ import annotations

import sys
from typing import Any


def floating_types_and(*dtypes: Any) -> tuple[Any, ...]:
    torch = sys.modules["torch"]
    return (torch.float32, torch.float64, *dtypes)
