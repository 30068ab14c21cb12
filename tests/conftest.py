"""Shared fixtures. ``torch_oracle`` is real PyTorch 2.8.0, the reference for every behaviour."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
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


@pytest.fixture(autouse=True)
def _torch_logging_untouched() -> Iterator[None]:
    """Leave torch's "LoggingTensor" logger as each test found it.

    torch's ``capture_logs`` (checkpoint's debug mode) turns the logger's propagation off for good
    and adds a filter; pytest then attaches its capture handlers to it, which cannot format
    torch's log records, so the next test running debug mode in the same process would fail.
    """
    logger = logging.getLogger("LoggingTensor")
    saved = (list(logger.handlers), list(logger.filters), logger.propagate, logger.level)
    logger.handlers, logger.filters, logger.propagate = [], [], True
    try:
        yield
    finally:
        logger.handlers, logger.filters, logger.propagate, logger.level = saved
