"""Shared fixtures. ``torch_oracle`` is real PyTorch 2.8.0, the reference for every behaviour;
``torch213_python`` is an interpreter with PyTorch 2.13.0, the other version the torch backend
supports (it runs in a subprocess: two torch versions cannot share a process)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

ORACLE_VERSION = "2.8.0"
TORCH213_VERSION = "2.13.0"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# scripts/setup.sh --oracle writes the 2.13 venv's interpreter here; the environment variable, when
# set, wins (an interpreter of your own, with torch 2.13.0 and numpy).
TORCH213_POINTER = PROJECT_ROOT / ".venv" / "autograd_lens_torch213"
TORCH213_ENV = "AUTOGRAD_LENS_TORCH213"


def unavailable(why: str) -> NoReturn:
    """Something a test needs is missing: a skip on a developer's machine, a failure in CI (``CI``
    set), where everything must be installed."""
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


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
        unavailable(why)
    torch.set_default_dtype(torch.float32)
    return torch


def find_torch213() -> tuple[Path | None, str]:
    """The interpreter with torch 2.13.0, checked by importing torch and numpy in it."""
    setup = "`make test` installs it (scripts/setup.sh --oracle)"
    given = os.environ.get(TORCH213_ENV)
    if given:
        python, origin = Path(given), f"${TORCH213_ENV}"
    elif TORCH213_POINTER.is_file():
        python, origin = Path(TORCH213_POINTER.read_text().strip()), str(TORCH213_POINTER)
    else:
        return None, f"no interpreter with torch {TORCH213_VERSION}: {setup}"
    try:
        done = subprocess.run(
            [python, "-c", "import numpy, torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
            timeout=120,
            # Only the interpreter's own site-packages: a PYTHONPATH meant for .venv must not leak in.
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{python} (from {origin}) does not run: {e}; {setup}"
    version = done.stdout.strip()
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no error message"])[-1]
        return None, f"{python} (from {origin}) cannot import torch and numpy: {last}; {setup}"
    if version.split("+")[0] != TORCH213_VERSION:
        return None, f"{python} (from {origin}) has torch {version}, not {TORCH213_VERSION}"
    return python, ""


@pytest.fixture(scope="session")
def torch213_python() -> Path:
    """An interpreter with torch 2.13.0 and numpy (run it with PYTHONPATH set to the project to
    import engine). Missing in CI is a failure, never a skip."""
    python, why = find_torch213()
    if python is None:
        unavailable(why)
    return python


@pytest.fixture(scope="session")
def graphviz_dot() -> str:
    """Graphviz's ``dot`` binary. Missing in CI is a failure, never a skip."""
    dot = shutil.which("dot")
    if dot is None:
        unavailable("Graphviz's dot is not installed: run scripts/setup.sh")
    return dot


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
