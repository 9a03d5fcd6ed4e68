"""Review of fix25a: the double's EC2 buckets, one per API action sized by its category, checked
against the tables of "Request throttling for the Amazon EC2 API" (EC2 Developer Guide,
https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html, "Request token bucket
sizes and refill rates"), for every EC2 action raidsnap's functions call.

Held: Describe*/Get* 100, 20/s (unfiltered DescribeInstances, DescribeSnapshots,
DescribeVolumes 50, 10/s); AttachVolume, DetachVolume, EnableFastSnapshotRestores,
DisableFastSnapshotRestores, CopySnapshot, LockSnapshot are mutating actions (50, 5/s);
CreateSnapshot(s), CreateVolume, DeleteVolume, DeleteSnapshot 100, 5/s; CreateTags, DeleteTags
100, 10/s. The page's resource-token buckets name only RunInstances, TerminateInstances,
StartInstances and StopInstances, none of which raidsnap calls.

Not held: ModifySnapshotAttribute, which the copy hand-over calls once per snapshot
(raidsnap.aws.handover, createVolumePermission), is in the page's table of uncategorized actions
with a bucket of 100 and a refill rate of 5 a second; the double sizes it as a mutating action
(50, 5/s), so a fleet's hand-overs are throttled after 50 calls instead of 100.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from raidsnap_emulation.double.limits import RateLimits, category_of

DOCUMENTED = {
    "ModifySnapshotAttribute": (100, 5),
    "AttachVolume": (50, 5),
    "DetachVolume": (50, 5),
    "EnableFastSnapshotRestores": (50, 5),
    "CreateSnapshots": (100, 5),
    "CreateVolume": (100, 5),
    "DeleteSnapshot": (100, 5),
    "CreateTags": (100, 10),
}


@pytest.mark.parametrize(("operation", "shape"), sorted(DOCUMENTED.items()))
def test_each_ec2_action_raidsnap_calls_has_its_documented_bucket(
    operation: str, shape: tuple[float, float]
) -> None:
    limits = RateLimits.documented()
    category = category_of("ec2", operation, {})
    assert category is not None
    assert limits.shape("ec2", category) == shape


def test_a_burst_of_modify_snapshot_attribute_draws_on_a_bucket_of_100() -> None:
    limits = RateLimits.documented()
    now = datetime(2026, 11, 27, tzinfo=UTC)
    allowed = sum(
        limits.allow("ec2", "ModifySnapshotAttribute", {"SnapshotId": f"snap-{i}"}, now)
        for i in range(100)
    )
    assert allowed == 100
