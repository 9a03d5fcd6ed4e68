"""A restore whose record of a volume it created is throttled (DynamoDB's
ProvisionedThroughputExceededException, on on-demand tables too) retries the step instead of
failing with the volume unrecorded: an unrecorded volume is never deleted by anyone."""

from __future__ import annotations

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, make_array, restored_volumes


def test_a_throttled_record_is_retried_and_nothing_is_left_unrecorded(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 2)
    backed_up(emu.hosts, emu.run, fx)
    # The first UpdateItems of the restore write the record of its volumes.
    emu.double.fail(
        "dynamodb",
        "UpdateItem",
        times=3,
        code="ProvisionedThroughputExceededException",
        message="The level of configured provisioned throughput for the table was exceeded.",
    )
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert sorted(v["VolumeId"] for v in restored_volumes(run.arn)) == sorted(
        run.output["volumeIds"]
    )
