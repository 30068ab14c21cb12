"""Shared fixtures. ``torch_oracle`` is real PyTorch 2.8.0, the reference for every behaviour."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

ORACLE_VERSION = "2.8.0"


def load_torch() -> tuple[ModuleType | None, str]:
    try:
        import torch
    except ImportError:
        return None, (
            f"torch {ORACLE_VERSION} (the oracle) is not installed: `make test` installs it "
            "(scripts/setup.sh --oracle)"
        )
    if torch.__version__.split("+")[0] != ORACLE_VERSION:
        return None, f"torch {torch.__version__} is installed, but the oracle must be {ORACLE_VERSION}"
    return torch, ""


@pytest.fixture(scope="session")
def torch_oracle() -> ModuleType:
    """Real torch 2.8.0. Missing in CI is a failure, never a skip."""
    torch, why = load_torch()
    if torch is None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    torch.set_default_dtype(torch.float32)
    return torch
