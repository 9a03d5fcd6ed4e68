"""plan.volumes: each member's volume spec, the md UUID and the mount point of a restore."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any

import pytest

from raidsnap.errors import IncompleteSnapshotSetError, InvalidInputError
from raidsnap.models import RestoreInput
from raidsnap.plan import volumes as plan
from raidsnap.plan.volumes import Attachment, VolumeSpec, VolumeView
from raidsnap.sets import Manifest, SetMember, SnapshotSet

T0 = datetime(2026, 11, 1, tzinfo=UTC)
UUID = "0a1b2c3d:4e5f6071:8293a4b5:c6d7e8f9"


def a_set(
    count: int = 2, size: int = 100, recorded: dict[str, str] | None = None, **tags: str
) -> SnapshotSet:
    members = tuple(
        SetMember(
            snapshot_id=f"snap-{i}",
            volume_id=f"vol-{i}",
            index=i,
            state="completed",
            progress=100,
            start_time=T0,
            size_gib=size,
            encrypted=False,
            kms_key_id=None,
            state_message="",
            tags={"raidsnap:array": "db1", "raidsnap:set-id": "s1", "Name": "x"} | tags,
        )
        for i in reversed(range(count))
    )
    manifest = None
    if recorded is not None:
        # What the backup wrote in the set's manifest (its md facts).
        manifest = Manifest("db1", "s1", "arn", "taken", count, {}, md=recorded)
    return SnapshotSet("s1", "db1", count, members, manifest)


def request(**fields: Any) -> RestoreInput:
    return RestoreInput(array="db1", **fields)


def specs(r: RestoreInput, s: SnapshotSet) -> tuple[list[dict[str, Any]], list[str]]:
    notes: list[str] = []
    return plan.member_specs(r, s, notes), notes


def test_recorded_type_and_performance_are_kept_with_the_users_own_tags() -> None:
    s = a_set(**{"raidsnap:volume-type": "gp3", "raidsnap:iops": "4000",
                 "raidsnap:throughput": "250", "team": "db", "aws:backup": "x"})  # fmt: skip
    got, notes = specs(request(), s)
    assert [g["index"] for g in got] == [0, 1]
    assert got[0] == {
        "index": 0,
        "snapshotId": "snap-0",
        "volumeType": "gp3",
        "iops": 4000,
        "throughput": 250,
        "sizeGib": 100,
        "tags": {"team": "db"},
    }
    assert notes == []
    assert VolumeSpec.from_dict(got[0]) == VolumeSpec(0, "snap-0", "gp3", 4000, 250)


def test_another_type_drops_the_recorded_performance() -> None:
    s = a_set(**{"raidsnap:volume-type": "gp3", "raidsnap:iops": "4000"})
    got, _ = specs(request(volumeType="st1"), s)
    assert (got[0]["volumeType"], got[0]["iops"], got[0]["throughput"]) == ("st1", None, None)


def test_an_unknown_recorded_type_becomes_gp3_with_a_note() -> None:
    got, notes = specs(request(), a_set(1, **{"raidsnap:volume-type": "magnetic-2"}))
    assert got[0]["volumeType"] == "gp3"
    assert notes == ["member 0: recorded volume type 'magnetic-2' unknown; gp3"]


def test_a_garbled_iops_tag_is_ignored_and_io_volumes_get_a_floor() -> None:
    got, notes = specs(request(), a_set(1, **{"raidsnap:volume-type": "io2", "raidsnap:iops": "x"}))
    assert got[0]["iops"] == 3000
    assert notes == ["member 0: no IOPS recorded for io2; 3000 used"]
    assert VolumeSpec.from_dict(got[0] | {"iops": None}).iops is None


def test_iops_on_a_type_that_takes_none_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="iops: the volumes are st1, which takes no iops"):
        specs(request(iops=3000), a_set(**{"raidsnap:volume-type": "st1"}))


def test_iops_outside_the_recorded_types_range_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"iops: 90000 is outside 100\.\.64000 for io1"):
        specs(request(iops=90000), a_set(**{"raidsnap:volume-type": "io1"}))


def test_throughput_on_a_type_other_than_gp3_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="throughput: the volumes are io2; only gp3"):
        specs(request(throughput=200, iops=4000), a_set(**{"raidsnap:volume-type": "io2"}))


def test_performance_ec2_would_refuse_for_the_size_names_the_member() -> None:
    with pytest.raises(InvalidInputError, match="iops: member 0: 6000 IOPS on a 10 GiB io1"):
        specs(request(volumeType="io1", iops=6000), a_set(1, size=10))


def test_more_members_than_assemble_takes_is_refused() -> None:
    with pytest.raises(IncompleteSnapshotSetError, match="has 41 members; raidsnap assembles"):
        specs(request(), a_set(41))


def test_md_uuid_from_the_input_or_the_set() -> None:
    assert plan.md_uuid(request(mdUuid=UUID), a_set()) == UUID
    assert plan.md_uuid(request(), a_set(**{"raidsnap:md-uuid": UUID})) == UUID
    with pytest.raises(InvalidInputError, match="mdUuid: set s1 records no md UUID"):
        plan.md_uuid(request(), a_set())
    with pytest.raises(InvalidInputError):
        plan.md_uuid(request(), a_set(**{"raidsnap:md-uuid": UUID.upper()}))


def test_mount_point_from_the_input_the_set_or_the_default() -> None:
    notes: list[str] = []
    assert plan.mount_point(request(mountPoint="/data"), a_set(), notes) == ("/data", False)
    tagged = a_set(recorded={"mountPoint": "/srv/db"}, **{"raidsnap:mount-point": "/srv/db"})
    assert plan.mount_point(request(), tagged, notes) == ("/srv/db", False)
    assert plan.mount_point(request(mode="replace"), tagged, notes) == ("/srv/db", True)
    # A set recorded before the manifest kept md facts: its tag, as then
    only_tag = a_set(**{"raidsnap:mount-point": "/srv/db"})
    assert plan.mount_point(request(mode="replace"), only_tag, notes) == ("/srv/db", True)
    # One whose record names no mount point (the array was mounted nowhere): the tag is where to
    # mount, never the array's own
    unmounted = a_set(recorded={"device": "/dev/md0"}, **{"raidsnap:mount-point": "/srv/db"})
    assert plan.mount_point(request(mode="replace"), unmounted, notes) == ("/srv/db", False)
    assert notes == []
    assert plan.mount_point(request(), a_set(), notes) == ("/mnt/db1", False)
    garbled = a_set(**{"raidsnap:mount-point": "data dir"})
    assert plan.mount_point(request(), garbled, notes) == ("/mnt/db1", False)
    assert notes == [
        "the set records no mount point; mounted at /mnt/db1",
        "the set's mount point 'data dir' is not usable; mounted at /mnt/db1",
    ]


def test_a_set_tagged_with_a_system_directory_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="system directory /etc; a restore never mounts"):
        plan.mount_point(request(), a_set(**{"raidsnap:mount-point": "//etc/"}), [])
    with pytest.raises(InvalidInputError, match="system directory /etc; a restore never mounts"):
        plan.mount_point(request(mode="replace"), a_set(**{"raidsnap:mount-point": "/etc"}), [])


def test_a_system_directory_itself_is_the_array_own_mount_point_only_in_a_replace() -> None:
    srv = a_set(recorded={"mountPoint": "/srv"}, **{"raidsnap:mount-point": "/srv"})
    assert plan.mount_point(request(mode="replace"), srv, []) == ("/srv", True)
    assert plan.mount_point(request(mode="replace", mountPoint="/srv"), srv, []) == ("/srv", True)
    with pytest.raises(InvalidInputError, match="but this is an attach restore"):
        plan.mount_point(request(), srv, [])
    with pytest.raises(InvalidInputError, match="'/home' is the system directory /home"):
        plan.mount_point(request(mode="replace", mountPoint="/home"), srv, [])


SECRET = b"the deployment's secret"


def test_run_nonce_is_the_same_for_every_spelling_of_the_start() -> None:
    arn = "arn:aws:states:us-east-1:1:execution:restore:r1"
    as_text = plan.run_nonce(arn, "2026-11-01T00:00:00.123Z", SECRET)
    when = datetime(2026, 11, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert plan.run_nonce(arn, when, SECRET) == as_text
    assert plan.run_nonce(arn, 1_793_491_200_123, SECRET) == as_text
    assert plan.run_nonce(arn, "2026-11-01T00:00:00.124Z", SECRET) != as_text
    assert len(as_text) == 16


def test_run_nonce_cannot_be_computed_from_the_arn_and_start_alone() -> None:
    # GIVEN what anyone allowed DescribeExecution sees of a run: its ARN and start time
    arn, start = "arn:aws:states:us-east-1:1:execution:restore:r1", 1_793_491_200_123
    nonce = plan.run_nonce(arn, start, SECRET)
    # THEN the nonce is none of the digests those alone give, and another deployment's secret
    # gives another nonce
    public = f"{arn}@{start}".encode()
    assert nonce not in (
        hashlib.sha256(public).hexdigest()[:16],
        hmac.new(b"", public, hashlib.sha256).hexdigest()[:16],
    )
    assert plan.run_nonce(arn, start, b"another deployment") != nonce
    with pytest.raises(ValueError, match="secret"):
        plan.run_nonce(arn, start, b"")


def test_client_token_per_run_and_member_within_ec2s_limit() -> None:
    token = plan.client_token("arn:" + "x" * 300, "run1", 0)
    assert len(token) <= 64 and token.startswith("raidsnap-")
    assert token == plan.client_token("arn:" + "x" * 300, "run1", 0)
    assert token != plan.client_token("arn:" + "x" * 300, "run2", 0)
    assert token != plan.client_token("arn:" + "x" * 300, "run1", 1)


def test_owned_by_needs_both_tags_and_a_run() -> None:
    tags = {"raidsnap:restore-execution": "arn:1", "raidsnap:restore-run": "r1"}
    view = VolumeView(
        "vol-1", "available", (Attachment("i-1", "/dev/sdf", "attached"),), False, tags
    )
    assert plan.owned_by(view, "arn:1", "r1")
    assert not plan.owned_by(view, "arn:1", "r2")
    assert not plan.owned_by(view, "arn:2", "r1")
    assert not plan.owned_by(view, "arn:1", "")


def test_the_manifest_record_wins_over_a_changed_tag_and_says_so() -> None:
    notes: list[str] = []
    changed = a_set(recorded={"mountPoint": "/data"}, **{"raidsnap:mount-point": "/var"})
    assert plan.mount_point(request(mode="replace"), changed, notes) == ("/data", True)
    assert notes == [
        "the set's raidsnap:mount-point tag says '/var', but its record says '/data': the "
        "record is used"
    ]
    # and a system directory the record does not name is never the array's own
    retagged = a_set(recorded={"device": "/dev/md0"}, **{"raidsnap:mount-point": "/var"})
    with pytest.raises(InvalidInputError, match="system directory /var"):
        plan.mount_point(request(mode="replace"), retagged, [])
