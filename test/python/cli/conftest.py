"""CLI tests run the command in this process with typer's runner."""

from __future__ import annotations

from pathlib import Path

import pytest

# The functions' logger binds its stream when first imported. Import it now, under pytest's
# capture, rather than inside a command whose captured stdout is closed when the runner returns.
import raidsnap.observability  # noqa: F401
from raidsnap_emulation.harness import synthesize


@pytest.fixture(scope="session")
def template() -> Path:
    return synthesize()
