"""Fixtures for the emulation suite: a clean fake AWS environment, moto, and the double on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws
from moto.core.config import DefaultConfig

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double import AwsDouble

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ssm import SSMClient

MOTO_CONFIG: DefaultConfig = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws(config=MOTO_CONFIG):
        yield


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def double(aws: None, clock: VirtualClock) -> Iterator[AwsDouble]:
    with AwsDouble(clock).install() as installed:
        yield installed


@pytest.fixture
def ec2(double: AwsDouble) -> EC2Client:
    return boto3.client("ec2", region_name="us-east-1")


@pytest.fixture
def ssm(double: AwsDouble) -> SSMClient:
    return boto3.client("ssm", region_name="us-east-1")
