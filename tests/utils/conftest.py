"""Fixtures of the ``engine.utils.checkpoint`` tests."""

from __future__ import annotations

import pytest

import engine


@pytest.fixture
def engine_seed() -> None:
    """The engine's RNG seeded with 0, as PyTorch's test cases seed torch's (``pytestmark`` of the
    ``test_checkpoint_*.py`` files)."""
    engine.manual_seed(0)
