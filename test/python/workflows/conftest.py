"""Workflow tests run the synthesized state machines on the emulation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raidsnap_emulation.harness import Emulation, synthesize


@pytest.fixture(scope="session")
def template() -> Path:
    return synthesize()


@pytest.fixture
def emu(template: Path) -> Iterator[Emulation]:
    with Emulation(template) as emulation:
        yield emulation
