"""The month-long simulation runs the synthesized workflows on the emulation, as the workflow
tests do, in a clean fake AWS environment; it is a suite of its own (it takes many minutes):
``.venv/bin/python -m pytest test/sim -q -s -p no:cacheprovider``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from raidsnap_emulation.harness import Emulation, synthesize


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("AWS_", "MOTO_", "POWERTOOLS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")


@pytest.fixture(scope="session")
def template() -> Path:
    return synthesize()


@pytest.fixture
def emu(template: Path) -> Iterator[Emulation]:
    with Emulation(template) as emulation:
        yield emulation
