"""Every Python test runs against a clean, fake AWS environment: no real credentials or region
from the machine can leak in, and moto loads none of its public images."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("AWS_", "MOTO_", "POWERTOOLS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
