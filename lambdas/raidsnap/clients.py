"""Every boto3 client raidsnap uses is made here, with one retry policy.

A client is made once per Region (a function's own Region is the one Lambda gives it in
AWS_REGION): the copy steps talk to EC2 and Step Functions of other Regions as well. A client
acting in another account is made from the credentials of a role assumed there, afresh for each
step: they expire, and a warm function must not keep them."""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any, cast

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
# For a call that creates something and takes no ClientToken (CopySnapshot): an SDK retry after
# a lost answer would create it twice; the step's own retry first looks for what it made.
_ONCE = Config(retries={"mode": "standard", "max_attempts": 1}, user_agent_extra="raidsnap")


def _own_region() -> str | None:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


@cache
def _client(service: str, region: str | None, once: bool = False) -> Any:
    config = _ONCE if once else _CONFIG
    return boto3.client(service, region_name=region, config=config)  # type: ignore[call-overload]


def _made(service: str, region: str | None, once: bool = False) -> Any:
    return _client(service, region or _own_region(), once)


def ec2(region: str | None = None, *, once: bool = False) -> EC2Client:
    """EC2 of ``region`` (default: the function's own); ``once``: without the SDK's retries."""
    return cast("EC2Client", _made("ec2", region, once))


def ssm() -> SSMClient:
    return cast("SSMClient", _made("ssm", None))


def dynamodb() -> Any:  # no mypy_boto3_dynamodb stubs are pinned; calls are checked by tests
    return _made("dynamodb", None)


def stepfunctions(region: str | None = None) -> SFNClient:
    return cast("SFNClient", _made("stepfunctions", region))


def autoscaling() -> AutoScalingClient:
    return cast("AutoScalingClient", _made("autoscaling", None))


def cloudwatch() -> CloudWatchClient:
    return cast("CloudWatchClient", _made("cloudwatch", None))


def sns() -> SNSClient:
    return cast("SNSClient", _made("sns", None))


def servicequotas() -> Any:  # no mypy_boto3_service_quotas stubs are pinned; tests check calls
    return _made("service-quotas", None)


def secretsmanager() -> Any:  # no mypy_boto3_secretsmanager stubs are pinned; tests check calls
    return _made("secretsmanager", None)


def sts() -> Any:  # no mypy_boto3_sts stubs are pinned; tests check calls
    return _made("sts", None)


def in_account(service: str, region: str, role_arn: str, session: str) -> Any:
    """A client of ``service`` in ``region`` acting as ``role_arn`` (a role of another account,
    assumed now: sts:AssumeRole; its credentials last an hour, longer than any step)."""
    credentials = sts().assume_role(RoleArn=role_arn, RoleSessionName=session[:64])["Credentials"]
    return boto3.client(  # type: ignore[call-overload]
        service,
        region_name=region,
        config=_CONFIG,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )


def reset() -> None:
    """Forget cached clients (tests switch regions and mocks between cases)."""
    _client.cache_clear()
