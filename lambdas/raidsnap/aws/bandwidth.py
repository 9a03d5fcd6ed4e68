"""An instance type's EBS bandwidth, as EC2 describes it (DescribeInstanceTypes)."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from raidsnap import clients
from raidsnap.aws import THROTTLE_CODES, error_code
from raidsnap.plan.restore_time import Bandwidth


def ebs_bandwidth(instance_type: str) -> tuple[Bandwidth | None, str]:
    """The type's baseline and maximum EBS throughput (EbsInfo.EbsOptimizedInfo, MB/s), or None
    and why not: the restore then weighs a prewarm without the instance's limit, and says so."""
    if not instance_type:
        return None, "the target's instance type is not known"
    try:
        # The type as EC2 named it on the instance (DescribeInstances InstanceType).
        found = clients.ec2().describe_instance_types(
            InstanceTypes=[instance_type]  # type: ignore[list-item]
        )
    except ClientError as err:
        if error_code(err) in THROTTLE_CODES:
            raise  # the step is retried: a throttle must not change the choice
        return None, f"DescribeInstanceTypes failed for {instance_type}: {error_code(err)}"
    except BotoCoreError as err:
        return None, f"DescribeInstanceTypes failed for {instance_type}: {err}"
    for item in found.get("InstanceTypes", []):
        info = (item.get("EbsInfo") or {}).get("EbsOptimizedInfo") or {}
        baseline, maximum = (
            info.get("BaselineThroughputInMBps"),
            info.get("MaximumThroughputInMBps"),
        )
        if baseline and maximum:
            return Bandwidth.from_mb(float(baseline), float(maximum), instance_type), ""
    return None, f"EC2 gives no EBS-optimized throughput for {instance_type}"
