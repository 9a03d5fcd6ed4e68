"""Review of issue 25: the double's EC2 request buckets are one per *category*, shared by every
action in it; EC2's are one per *API action*.

"Request throttling for the Amazon EC2 API" (EC2 Developer Guide,
https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html, the page limits.py
cites), "Request rate limiting": "each API is evaluated individually, and you are throttled
on the number of requests you make on a per-API basis. Each request that you make removes one
token from the API's bucket. For example, the token bucket size for DescribeHosts, a
non-mutating API action, is 100 tokens ... If you exceed 100 requests in a second, you are
throttled on that API and the remaining requests within that second fail, however, requests
for other API are not affected." The category gives an action's bucket size and refill rate,
not a bucket it shares.

In the double (RateLimits.allow keys the bucket by bucket_of's category name), 100
DescribeInstances calls empty the bucket of DescribeVolumes, DescribeSnapshots,
DescribeFastSnapshotRestores... as well, and 50 AttachVolume calls that of DetachVolume and
EnableFastSnapshotRestores. bench/fleet.py replays a fleet through these shared buckets, so
its throttling counts and the README's "EC2 throttles each account's Describe* calls at 100
at once and 20 a second" (the basis of when a fleet "needs" flexibleWindowMinutes) overstate
what EC2 does.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from raidsnap_emulation.double.limits import RateLimits

FILTERED = {"Filters": [{"Name": "tag:raidsnap:array", "Values": ["db1"]}]}


@pytest.mark.parametrize(
    ("drained", "other", "params"),
    [
        (
            "DescribeInstances",
            "DescribeSnapshots",
            FILTERED,
        ),  # non-mutating: 100, 20/s each
        ("DescribeVolumes", "DescribeFastSnapshotRestores", FILTERED),
        ("AttachVolume", "DetachVolume", {}),  # mutating: 50, 5/s each
    ],
)
def test_one_action_emptying_its_bucket_leaves_other_actions_of_its_category_alone(
    drained: str, other: str, params: dict[str, object]
) -> None:
    limits = RateLimits.documented()
    now = datetime(2026, 11, 27, tzinfo=UTC)
    while limits.allow("ec2", drained, params, now):
        pass  # the same instant: no refill
    assert not limits.allow("ec2", drained, params, now)
    assert limits.allow("ec2", other, params, now), (
        f"{other} throttled because {drained} emptied a bucket they share: EC2's buckets are "
        "per API action"
    )
