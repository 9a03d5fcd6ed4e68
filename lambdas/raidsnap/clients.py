"""Every boto3 client raidsnap uses is made here, with one retry policy."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_autoscaling import AutoScalingClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_ssm import SSMClient
    from mypy_boto3_stepfunctions import SFNClient

# Standard mode retries throttling with backoff inside the SDK; what still fails after that
# reaches the workflow, whose Retry waits longer than a Lambda invocation should.
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, user_agent_extra="raidsnap")


@cache
def ec2() -> EC2Client:
    return boto3.client("ec2", config=_CONFIG)


@cache
def ssm() -> SSMClient:
    return boto3.client("ssm", config=_CONFIG)


@cache
def dynamodb() -> Any:  # no mypy_boto3_dynamodb stubs are pinned; calls are checked by tests
    return boto3.client("dynamodb", config=_CONFIG)


@cache
def stepfunctions() -> SFNClient:
    return boto3.client("stepfunctions", config=_CONFIG)


@cache
def autoscaling() -> AutoScalingClient:
    return boto3.client("autoscaling", config=_CONFIG)


@cache
def cloudwatch() -> CloudWatchClient:
    return boto3.client("cloudwatch", config=_CONFIG)


@cache
def sns() -> SNSClient:
    return boto3.client("sns", config=_CONFIG)


@cache
def servicequotas() -> Any:  # no mypy_boto3_service_quotas stubs are pinned; tests check calls
    return boto3.client("service-quotas", config=_CONFIG)


@cache
def secretsmanager() -> Any:  # no mypy_boto3_secretsmanager stubs are pinned; tests check calls
    return boto3.client("secretsmanager", config=_CONFIG)


@cache
def sts() -> Any:  # the caller's own account and identity only (GetCallerIdentity)
    return boto3.client("sts", config=_CONFIG)


def reset() -> None:
    """Forget cached clients (tests switch regions and mocks between cases)."""
    ec2.cache_clear()
    ssm.cache_clear()
    dynamodb.cache_clear()
    stepfunctions.cache_clear()
    autoscaling.cache_clear()
    sns.cache_clear()
    cloudwatch.cache_clear()
    servicequotas.cache_clear()
    secretsmanager.cache_clear()
    sts.cache_clear()
