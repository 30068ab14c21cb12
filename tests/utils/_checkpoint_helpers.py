"""Helpers shared by the ``test_checkpoint_*.py`` files (``engine.utils.checkpoint``)."""

from __future__ import annotations

from typing import Any

import numpy as np

USE_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. In version 2.5 "
    "we will raise an exception if use_reentrant is not passed. use_reentrant=False is recommended, but "
    "if you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to "
    "docs for more details on the differences between the two variants."
)


def assert_equal(a: Any, b: Any) -> None:
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)
