"""Restore path: a copied ("snapshotted") member set under new volume ids, attached in shuffled
order, assembled by assemble.sh. Scenarios 1-3 of the issue."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from vmlib import Commands, Disk, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm


# The identity the restore gives the array (the workflow chooses one per run).
NEW_UUID = "feedf00d:0badcafe:13572468:24681357"


def assemble_params(
    disks: list[Disk],
    uuid: str,
    *,
    mount_point: str = "/data",
    read_only: str = "false",
    persist: str = "true",
) -> dict[str, str]:
    """What the restore's Assemble step sends (raidsnap.restore)."""
    return {
        "VolumeIds": ",".join(d.volume_id for d in disks),
        "MdUuid": uuid,
        "NewMdUuid": NEW_UUID,
        "MdDevice": "/dev/md0",
        "MountPoint": mount_point,
        "ReadOnly": read_only,
        "Persist": persist,
    }


# A set-user-ID copy of id(1) on the restored filesystem, run by an unprivileged user: under
# nosuid it runs with that user's own ids; the same copy on the root filesystem (suid honoured)
# is the control that shows the check can fail.
SUID_PROBE = """
chmod a+rx / /usr && chmod -R a+rX /usr/lib /usr/lib64  # readable by the unprivileged user
cp /usr/bin/id /data/suid-id && chmod 4755 /data/suid-id
cp /usr/bin/id /tmp/suid-id && chmod 4755 /tmp/suid-id
setpriv --reuid=65534 --regid=65534 --clear-groups /data/suid-id -u >/work/suid.data 2>&1
setpriv --reuid=65534 --regid=65534 --clear-groups /tmp/suid-id -u >/work/suid.control 2>&1
rm -f /data/suid-id
"""


def restore_scenario(
    cmds: Commands, params: dict[str, str], name: str, prelude: str = "", after: str = ""
) -> str:
    return f"""
{prelude}
cat /proc/mdstat >/work/mdstat.before
{cmds.ssm("first", "assemble", **params)}
(cd /data && sha256sum -c --quiet /work/sums) >/work/verify 2>&1; echo $? >/work/verify.rc
findmnt -rn -o OPTIONS --mountpoint /data >/work/mount.options
{after}
keep /etc/mdadm/mdadm.conf mdadm.conf.1
keep /etc/fstab fstab.1
{cmds.ssm("second", "assemble", **params)}
keep /etc/mdadm/mdadm.conf mdadm.conf.2
keep /etc/fstab fstab.2
{cmds.ssm("discover", "discover", ArrayName=name)}
cat /proc/mdstat >/work/mdstat.after
"""


def check_members(result: dict, disks: list[Disk]) -> None:
    got = {m["volumeId"]: m["slot"] for m in result["members"]}
    assert got == {d.volume_id: slot for slot, d in enumerate(disks)}
    assert all(m["device"].startswith("/dev/nvme") for m in result["members"])


def test_raid0_restores_from_copies_and_persists(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    b = record(
        "restore raid0 (no udev)",
        boot(
            tmp_path / "vm",
            restore_scenario(cmds, assemble_params(disks, raid0_set.uuid), "db1", after=SUID_PROBE),
            disks,
            files={"sums": raid0_set.sums},
            commands=cmds,
        ),
    )

    assert b.rc_of("first") == 0, b.explain("first")
    first = b.json_of("first")
    assert first["ok"] is True and first["changed"] is True
    assert first["mdDevice"] == "/dev/md0" and (first["uuid"], first["setMdUuid"]) == (
        NEW_UUID,
        raid0_set.uuid,
    )
    assert first["level"] == "raid0" and first["filesystem"] == {
        "type": "xfs",
        "uuid": raid0_set.fs_uuid,
    }
    check_members(first, disks)
    assert first["persisted"]["mdadmConf"] == "added"
    assert first["persisted"]["fstab"] == "added"
    # No update-initramfs or dracut in the test VM: reported, not failed.
    assert first["persisted"]["initramfs"] == "skipped-no-tool"
    assert b.text("verify.rc").strip() == "0", b.text("verify")
    # A set-user-ID root binary on the restored array does not elevate (nosuid); on the root
    # filesystem the same copy does
    assert "nosuid" in b.text("mount.options").split(",")
    assert (b.text("suid.data").strip(), b.text("suid.control").strip()) == ("65534", "0")

    array_lines = [line for line in b.text("mdadm.conf.1").splitlines() if line.startswith("ARRAY")]
    assert array_lines == [f"ARRAY /dev/md0 metadata=1.2 UUID={NEW_UUID}"]
    fstab = [line for line in b.text("fstab.1").splitlines() if line.strip()]
    assert fstab == [
        f"/dev/disk/by-id/md-uuid-{NEW_UUID} /data xfs "
        "rw,nosuid,nodev,nofail,x-systemd.device-timeout=30s 0 0"
    ]

    assert b.rc_of("second") == 0, b.explain("second")
    second = b.json_of("second")
    assert (
        second["ok"] is True and second["changed"] is False and second["alreadyAssembled"] is True
    )
    assert second["persisted"] == {
        "mdadmConf": "unchanged",
        "mdadmConfPath": "/etc/mdadm/mdadm.conf",
        "initramfs": "unchanged",
        "fstab": "unchanged",
    }
    assert b.text("mdadm.conf.2") == b.text("mdadm.conf.1")
    assert b.text("fstab.2") == b.text("fstab.1")

    # The restored array is what discovery now reports, with the NEW volume ids.
    arrays = b.json_of("discover")["arrays"]
    assert len(arrays) == 1 and arrays[0]["uuid"] == NEW_UUID and arrays[0]["mountPoint"] == "/data"
    assert [m["volumeId"] for m in arrays[0]["members"]] == [d.volume_id for d in disks]
    assert "md127" not in b.text("mdstat.after")


def test_raid10_restore_replaces_old_config_lines_read_only(
    raid10_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid10_set.copies(tmp_path / "disks", rng)
    other = "11111111:22222222:33333333:44444444"
    # Left over from the array this restore replaces: same md UUID (continuation line form),
    # another array claiming /dev/md0, an fstab entry for the same mount point.
    prelude = f"""
{{ echo 'HOMEHOST <system>'
  echo 'ARRAY /dev/md/logs metadata=1.2 name=oldhost:logs'
  echo '   UUID={raid10_set.uuid}'
  echo 'ARRAY /dev/md0 metadata=1.2 UUID={other}'; }} >/etc/mdadm/mdadm.conf
{{ echo '# static file systems'
  echo '/dev/md0 /data ext4 defaults 0 2'
  echo 'proc /proc proc defaults 0 0'; }} >/etc/fstab
"""
    params = assemble_params(disks, raid10_set.uuid, read_only="true")
    cmds = Commands()
    b = record(
        "restore raid10 ro, replace config",
        boot(
            tmp_path / "vm",
            restore_scenario(cmds, params, "logs", prelude),
            disks,
            shuffle_seed=3,
            files={"sums": raid10_set.sums},
            commands=cmds,
        ),
    )

    assert b.rc_of("first") == 0, b.explain("first")
    first = b.json_of("first")
    assert first["level"] == "raid10" and first["readOnly"] is True
    check_members(first, disks)
    assert (
        first["persisted"]["mdadmConf"] == "replaced" and first["persisted"]["fstab"] == "replaced"
    )
    assert b.text("verify.rc").strip() == "0", b.text("verify")
    assert "ro" in b.text("mount.options").strip().split(",")

    conf = b.text("mdadm.conf.1").splitlines()
    assert [line for line in conf if line.startswith("ARRAY")] == [
        f"ARRAY /dev/md0 metadata=1.2 UUID={NEW_UUID}"
    ]
    assert f"   UUID={raid10_set.uuid}" not in conf
    assert any(line.startswith("# raidsnap:") and other in line for line in conf)
    assert b.text("fstab.1").splitlines() == [
        "# static file systems",
        f"/dev/disk/by-id/md-uuid-{NEW_UUID} /data ext4 "
        "ro,nosuid,nodev,noexec,nofail,x-systemd.device-timeout=30s 0 2",
        "proc /proc proc defaults 0 0",
    ]
    second = b.json_of("second")
    assert b.rc_of("second") == 0 and second["changed"] is False
    assert b.text("mdadm.conf.2") == b.text("mdadm.conf.1") and b.text("fstab.2") == b.text(
        "fstab.1"
    )


def test_udev_incremental_assembly_is_stopped_and_replaced(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    b = record(
        "restore raid0 with udevd",
        boot(
            tmp_path / "vm",
            restore_scenario(cmds, assemble_params(disks, raid0_set.uuid), "db1"),
            disks,
            udev=True,
            shuffle_seed=11,
            files={"sums": raid0_set.sums},
            commands=cmds,
        ),
    )

    # udev's 64-md-raid-assembly.rules got there first, as on a booting instance.
    before = b.text("mdstat.before")
    assert re.search(r"^md127 : active raid0", before, re.M), before
    assert b.rc_of("first") == 0, b.explain("first")
    first = b.json_of("first")
    assert first["stoppedArrays"] == ["/dev/md127"]
    check_members(first, disks)
    assert b.text("verify.rc").strip() == "0", b.text("verify")
    assert b.json_of("second")["changed"] is False
    after = b.text("mdstat.after")
    assert "md127" not in after and re.search(r"^md0 : active raid0", after, re.M), after
