"""The user tags a backup copies from a member onto its snapshot, and a restore from a snapshot
onto its volume, never take either past EC2's 50 tags per resource (a CreateTags or a
TagSpecification past it fails as a whole: TagLimitExceeded). raidsnap's own tags always stay;
the run's notes name the tags that were not copied."""

from __future__ import annotations

import boto3

from raidsnap import tags
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    launch_instance,
    make_array,
    make_old_set,
    name_in_config,
    restored_volumes,
    sets_of,
    tags_of,
    terminate,
)

SET_TAGS = {
    tags.ARRAY,
    tags.SET_ID,
    tags.MEMBER_INDEX,
    tags.MEMBER_COUNT,
    tags.SOURCE_VOLUME,
    tags.MD_UUID,
    tags.CONSISTENCY,
}
RESTORE_TAGS = {
    tags.ARRAY,
    tags.RESTORED_FROM,
    tags.RESTORED_MEMBER_INDEX,
    tags.RESTORE_EXECUTION,
    tags.RESTORE_RUN,
    tags.MD_UUID,
}


def _tag(resource_ids: list[str], count: int, prefix: str) -> None:
    boto3.client("ec2").create_tags(
        Resources=resource_ids,
        Tags=[{"Key": f"{prefix}-{i:02d}", "Value": "x"} for i in range(count)],
    )


def test_a_member_with_many_user_tags_is_backed_up_with_raidsnap_tags_first(
    emu: Emulation,
) -> None:
    # GIVEN members that carry 49 user tags each (their Name and 48 more)
    fx = make_array(emu.hosts, "db1", 2)
    _tag(fx.member_ids, 48, "cost")

    # WHEN a backup runs
    run = emu.run("backup", {"array": "db1"})

    # THEN it succeeds; each snapshot has 50 tags, every one of the set's own among them
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    for snap in sets_of("db1")[run.output["setId"]]:
        snap_tags = tags_of(snap)
        assert len(snap_tags) == 50
        assert set(snap_tags) >= SET_TAGS
        assert "cost-00" in snap_tags
    # AND the run's notes name the user tags that were not copied
    # (17 tags of raidsnap's own, Name among them, leave room for 33 of the 48 others)
    notes = " ".join(run.output["notes"])
    assert "tags cost-33, cost-34," in notes
    assert "cost-42 and 5 more of " in notes
    assert "were not copied onto their snapshots" in notes


def test_a_restore_from_a_snapshot_with_many_user_tags_keeps_its_own_and_room_to_replace(
    emu: Emulation,
) -> None:
    # GIVEN a set whose snapshots carry only the tags a set needs, and someone's own tags up to
    # EC2's 50
    fx = make_array(emu.hosts, "db1", 2)
    snapshot_ids = make_old_set(emu.hosts, fx, "db1-20260101T000000Z-00000001")
    have = len(
        tags_of(
            boto3.client("ec2").describe_snapshots(SnapshotIds=snapshot_ids[:1])["Snapshots"][0]
        )
    )
    _tag(snapshot_ids, 50 - have, "team")
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)

    # WHEN the set is restored onto a new instance
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})

    # THEN the volumes carry every tag of the restore's own, its md UUID included, and room for
    # the one a later replace adds (raidsnap:replaced-by)
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert run.output.get("warnings", []) == []
    for vol in restored_volumes(run.arn):
        vol_tags = tags_of(vol)
        assert set(vol_tags) >= RESTORE_TAGS
        assert len(vol_tags) == 49
    assert "were not copied onto the restored volumes" in " ".join(run.output["notes"])

    # AND a replace of the restored array can still mark them replaced-by
    again = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"
    old = restored_volumes(run.arn)
    assert all(tags_of(v).get(tags.REPLACED_BY) == again.arn for v in old)
