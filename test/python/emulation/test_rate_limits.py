"""EC2's and Step Functions' documented request-rate limits in the double: a token bucket per
API action, sized by its category, on the virtual clock, off unless a test or the fleet bench
turns them on."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double import AwsDouble
from raidsnap_emulation.double.limits import RateLimits, bucket_of, category_of

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

NO_RETRY = Config(retries={"mode": "standard", "max_attempts": 1})


@pytest.mark.parametrize(
    ("operation", "params", "category"),
    [
        ("DescribeVolumes", {}, "unfiltered non-mutating"),
        ("DescribeVolumes", {"Filters": [{"Name": "tag:x", "Values": ["y"]}]}, "non-mutating"),
        ("DescribeSnapshots", {"MaxResults": 100}, "non-mutating"),
        ("DescribeFastSnapshotRestores", {}, "non-mutating"),
        ("CreateSnapshots", {}, "CreateSnapshots"),
        ("CreateTags", {}, "CreateTags"),
        ("CreateVolume", {}, "CreateVolume"),
        ("AttachVolume", {}, "mutating"),
        ("EnableFastSnapshotRestores", {}, "mutating"),
    ],
)
def test_each_ec2_action_is_sized_by_its_documented_category(
    operation: str, params: dict[str, object], category: str
) -> None:
    assert category_of("ec2", operation, params) == category


@pytest.mark.parametrize(
    ("operation", "params", "bucket"),
    [
        ("DescribeVolumes", {}, "DescribeVolumes unfiltered"),
        ("DescribeVolumes", {"MaxResults": 100}, "DescribeVolumes"),
        ("AttachVolume", {}, "AttachVolume"),
        ("CreateSnapshots", {}, "CreateSnapshots"),
    ],
)
def test_each_ec2_action_draws_on_a_bucket_of_its_own(
    operation: str, params: dict[str, object], bucket: str
) -> None:
    assert bucket_of("ec2", operation, params) == bucket


def test_the_buckets_have_the_documented_sizes_and_refill_rates() -> None:
    limits = RateLimits.documented()
    assert limits.shape("ec2", "non-mutating") == (100, 20)
    assert limits.shape("ec2", "unfiltered non-mutating") == (50, 10)
    assert limits.shape("ec2", "mutating") == (50, 5)
    assert limits.shape("ec2", "CreateSnapshots") == (100, 5)
    assert limits.shape("ec2", "CreateTags") == (100, 10)
    assert limits.shape("stepfunctions", "StartExecution") == (1300, 300)


def test_a_burst_past_the_bucket_is_throttled_until_the_clock_refills_it(
    double: AwsDouble, clock: VirtualClock
) -> None:
    double.rate_limits = RateLimits.documented()
    ec2: EC2Client = boto3.client("ec2", region_name="us-east-1", config=NO_RETRY)
    for _ in range(50):
        ec2.describe_volumes()
    with pytest.raises(ClientError) as throttled:
        ec2.describe_volumes()
    assert throttled.value.response["Error"]["Code"] == "RequestLimitExceeded"
    # Another bucket is not touched
    ec2.describe_volumes(Filters=[{"Name": "tag:raidsnap:array", "Values": ["db1"]}])
    clock.advance(1)  # 10 tokens a second come back
    for _ in range(10):
        ec2.describe_volumes()
    with pytest.raises(ClientError):
        ec2.describe_volumes()
    assert double.throttled[("ec2", "DescribeVolumes")] == 2


def test_without_limits_nothing_is_throttled(double: AwsDouble) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", config=NO_RETRY)
    for _ in range(120):
        ec2.describe_volumes()
