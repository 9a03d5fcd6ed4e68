"""The sweeper goes by the run, not the execution ARN: execution names are unique for 90 days
only, so a failed execution may share its ARN with an earlier run whose volumes are the user's
restored array."""

from __future__ import annotations

import boto3
from test_after_assembly import before_step, is_poll_of
from test_sweeper import sweep

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import backed_up, launch_instance, make_array, restored_volumes


def test_the_sweeper_never_deletes_a_succeeded_run_of_a_name_a_later_run_failed_with(
    emu: Emulation,
) -> None:
    # GIVEN a restore called "nightly" that succeeded: its volumes are the user's array, which
    # the operator later detached (to move it, say); 90 days later the name is free again
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    first = emu.run(
        "restore", {"array": "db1", "mode": "replace", "initialization": "none"}, name="nightly"
    )
    assert first.status == "SUCCEEDED", f"{first.error}: {first.cause}"
    theirs = first.output["volumeIds"]
    ec2 = boto3.client("ec2")
    for vid in theirs:
        ec2.detach_volume(VolumeId=vid)
    emu.expire_execution(first.arn)
    # AND a new execution of that name, which fails in Prepare and creates nothing
    again = emu.run("restore", {"array": "db1", "mode": "sideways"}, name="nightly")
    assert (again.arn, again.status) == (first.arn, "FAILED")
    mark = len(emu.double.calls)
    # WHEN the sweeper runs
    found = sweep(emu)
    # THEN it deleted none of the earlier run's volumes: they are not the failed run's
    deleted = [
        c.params.get("VolumeId")
        for c in emu.double.calls[mark:]
        if c.applied and c.operation == "DeleteVolume"
    ]
    assert deleted == [], found
    views = ec2.describe_volumes(VolumeIds=theirs)["Volumes"]
    assert {v["State"] for v in views} == {"available"}


def test_the_sweeper_never_deletes_an_array_the_failure_path_kept_as_the_users(
    emu: Emulation,
) -> None:
    # GIVEN a restore whose assemble document assembled and mounted the array, but the look at
    # the document failed: the run failed, and its cleanup kept the mounted array as the user's
    fx = make_array(emu.hosts, "db1", 3)
    backed_up(emu.hosts, emu.run, fx)
    target = launch_instance("db1-copy", fx.availability_zone)
    before_step(
        emu,
        is_poll_of("assemble"),
        lambda: emu.double.fail("ssm", "GetCommandInvocation", times=1, code="InternalServerError"),
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    assert run.status == "FAILED"
    kept = [v["VolumeId"] for v in restored_volumes(run.arn)]
    assert len(kept) == 3 and "assembled and mounted at" in (run.cause or ""), run.cause
    # AND the user, told to keep it, moves the array: its volumes are detached for a while
    ec2 = boto3.client("ec2")
    for vid in kept:
        ec2.detach_volume(VolumeId=vid)
    mark = len(emu.double.calls)
    # WHEN the sweeper runs meanwhile
    found = sweep(emu)
    # THEN the array the failure path left as the user's is not deleted
    deleted = [
        c.params.get("VolumeId")
        for c in emu.double.calls[mark:]
        if c.applied and c.operation == "DeleteVolume"
    ]
    assert deleted == [], found
