"""A restored array gets an md identity of its own (assemble.sh, NewMdUuid).

Two things follow on the real md driver, each across the two ways a Linux host assembles arrays
at boot (``mdadm --assemble --scan`` as the initramfs runs it, and udev's incremental assembly by
64-md-raid-assembly.rules after a coldplug trigger):

- after a replace restore, the array's old members attached again (an operator salvaging them,
  a launch template that still names them) never rejoin it: md0 comes back from exactly the
  restored volumes, with a file written after the restore intact;
- a read-only copy of a set can be mounted next to the live array it was taken from, on the same
  instance, and both come back at the next boot each where it belongs, the live array unchanged
  by the copy's restore.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import assemble_params
from test_next_boot import MD_MEMBERS, as_md0, md_members
from vmlib import Boot, Commands, Disk, boot, copy_disk

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

NEW_UUID = "a1b2c3d4:0badf00d:12345678:9abcdef0"
COPY_UUID = "c0c0c0c0:11112222:33334444:55556666"

# One simulated boot: everything goes down as at shutdown, then comes back through the persisted
# mdadm.conf and fstab only. PHASE scan: mdadm --assemble --scan, then the by-id links udev's
# 63-md-raid-arrays.rules would make, then mount -a. PHASE udev: the real udevd with its coldplug
# trigger, then mount -a.
BOOTS = r"""
go_down() { # PHASE MOUNTPOINT...
  local p=$1; shift
  for m in "$@"; do umount "$m"; done
  mdadm --stop --scan >/work/$p.stop 2>&1
  rm -f /dev/disk/by-id/md-uuid-*
  echo 3 >/proc/sys/vm/drop_caches
  md_members >/work/$p.members.down
}
come_up() { # PHASE
  if [ "$1" = scan ]; then
    mdadm --assemble --scan >/work/scan.assemble 2>&1
    md_links
  else
    /usr/lib/systemd/systemd-udevd --daemon --resolve-names=never 2>/work/udev.udevd
    udevadm trigger --action=add --type=subsystems
    udevadm trigger --action=add --type=devices
    udevadm settle --timeout=60
  fi
  mount -a >/work/$1.mount-a 2>&1
  cat /proc/mdstat >/work/$1.mdstat
  md_members >/work/$1.members
  findmnt -rn -o TARGET,SOURCE,OPTIONS >/work/$1.mounts
}
"""


def mounts(b: Boot, name: str) -> dict[str, tuple[str, set[str]]]:
    out = {}
    for line in b.text(name).splitlines():
        target, source, options = line.split()
        out[target] = (source, set(options.split(",")))
    return out


def old_members(array: ArraySet, dest: Path) -> list[Disk]:
    """The set's own array: its member disks under their own volume ids."""
    dest.mkdir(parents=True, exist_ok=True)
    return [copy_disk(d, dest / f"old{i}.img", d.volume_id) for i, d in enumerate(array.disks)]


@pytest.mark.parametrize("level", ["raid0", "raid10"])
def test_old_members_attached_again_after_a_replace_never_rejoin_the_restored_array(
    level: str, raid0_set: ArraySet, raid10_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    array = raid0_set if level == "raid0" else raid10_set
    disks = array.copies(tmp_path / "disks", rng)
    old = old_members(array, tmp_path / "disks")
    params = {**assemble_params(disks, array.uuid), "NewMdUuid": NEW_UUID}
    cmds = Commands()
    restore = cmds.ssm("restore", "assemble", None, **params)
    serials = " ".join(d.serial for d in old)
    scenario = f"""
{MD_MEMBERS}
{BOOTS}
# The instance as it was before the replace: the array's own lines, as its operator wrote them.
echo 'ARRAY /dev/md0 metadata=1.2 UUID={array.uuid}' >>/etc/mdadm/mdadm.conf
echo 'UUID={array.fs_uuid} /data {array.fs_type} defaults,nofail 0 0' >>/etc/fstab
# The replace released the array and detached its members (kept, tagged replaced-by).
detach {serials}
{restore}
(cd /data && sha256sum -c --quiet /work/sums) >/work/verify.restore 2>&1
echo $? >>/work/verify.restore
head -c 1500000 /dev/urandom >/data/written-after-restore
(cd /data && sha256sum written-after-restore) >/work/sums.after
sync
keep /etc/mdadm/mdadm.conf mdadm.conf
keep /etc/fstab fstab
# Every old member is attached again.
reattach
for phase in scan udev; do
  go_down $phase /data
  come_up $phase
  {{ (cd /data && sha256sum -c --quiet /work/sums) &&
    (cd /data && sha256sum -c --quiet /work/sums.after); }} >/work/$phase.verify 2>&1
  echo $? >>/work/$phase.verify
done
"""
    b = record(
        f"replace {level}, old members attached again, two next boots",
        boot(
            tmp_path / "vm",
            scenario,
            [*disks, *old],
            shuffle_seed=5,
            files={"sums": array.sums},
            commands=cmds,
        ),
    )

    assert b.rc_of("restore") == 0, b.explain("restore")
    out = b.json_of("restore")
    assert (out["uuid"], out["setMdUuid"]) == (NEW_UUID, array.uuid)
    assert b.text("verify.restore").strip() == "0", b.text("verify.restore")
    conf = [ln for ln in b.text("mdadm.conf").splitlines() if ln.startswith("ARRAY")]
    assert conf == [f"ARRAY /dev/md0 metadata=1.2 UUID={NEW_UUID}"], b.text("mdadm.conf")
    fstab = [ln for ln in b.text("fstab").splitlines() if ln.strip() and not ln.startswith("#")]
    passno = 2 if array.fs_type == "ext4" else 0
    assert fstab == [
        f"/dev/disk/by-id/md-uuid-{NEW_UUID} /data {array.fs_type} "
        f"rw,nosuid,nodev,nofail,x-systemd.device-timeout=30s 0 {passno}"
    ]
    old_serials = {d.serial for d in old}
    for phase in ("scan", "udev"):
        found = md_members(b, f"{phase}.members")
        md0 = {m for m in found if m[0] == "md0"}
        # Exactly the restored volumes as md0; the old ones, wherever md put them, not in it.
        assert md0 == as_md0(disks), (phase, found, b.text(f"{phase}.mdstat"))
        assert not {m[2] for m in md0} & old_serials
        assert mounts(b, f"{phase}.mounts")["/data"][0] == "/dev/md0", b.text(f"{phase}.mount-a")
        assert b.text(f"{phase}.verify").strip().endswith("0"), (phase, b.text(f"{phase}.verify"))


@pytest.mark.parametrize("level", ["raid0", "raid10"])
def test_a_read_only_copy_mounts_next_to_the_live_array_and_both_survive_a_reboot(
    level: str, raid0_set: ArraySet, raid10_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    array = raid0_set if level == "raid0" else raid10_set
    disks = array.copies(tmp_path / "disks", rng)
    live = old_members(array, tmp_path / "disks")
    params = {
        **assemble_params(disks, array.uuid, mount_point="/mnt/db1-copy", read_only="true"),
        "MdDevice": "/dev/md10",
        "NewMdUuid": COPY_UUID,
    }
    cmds = Commands()
    copy = cmds.ssm("copy", "assemble", None, **params)
    again = cmds.ssm("again", "assemble", None, **params)
    members = " ".join(f"$(by_id {d.serial})" for d in live)
    scenario = f"""
{MD_MEMBERS}
{BOOTS}
# The live array on its own instance, mounted from its own persisted lines.
mdadm --assemble /dev/md0 --uuid={array.uuid} {members} >/work/live.assemble 2>&1
mkdir -p /data && mount /dev/md0 /data
echo 'ARRAY /dev/md0 metadata=1.2 UUID={array.uuid}' >>/etc/mdadm/mdadm.conf
echo 'UUID={array.fs_uuid} /data {array.fs_type} defaults,nofail 0 0' >>/etc/fstab
# Held still while the copy is restored, so that any change to its blocks would be the copy's.
sync; fsfreeze -f /data
sha256sum /dev/md0 >/work/live.before
{copy}
sha256sum /dev/md0 >/work/live.after
fsfreeze -u /data
(cd /mnt/db1-copy && sha256sum -c --quiet /work/sums) >/work/copy.verify 2>&1
echo $? >>/work/copy.verify
{again}
# The live array keeps being written.
head -c 1500000 /dev/urandom >/data/written-after-copy
(cd /data && sha256sum written-after-copy) >/work/sums.after
sync
keep /etc/mdadm/mdadm.conf mdadm.conf
keep /etc/fstab fstab
findmnt -rn -o TARGET,SOURCE,OPTIONS >/work/restored.mounts
for phase in scan udev; do
  go_down $phase /mnt/db1-copy /data
  come_up $phase
  {{ (cd /data && sha256sum -c --quiet /work/sums) &&
    (cd /data && sha256sum -c --quiet /work/sums.after) &&
    (cd /mnt/db1-copy && sha256sum -c --quiet /work/sums); }} >/work/$phase.verify 2>&1
  echo $? >>/work/$phase.verify
  test -e /mnt/db1-copy/written-after-copy; echo $? >/work/$phase.copy-has-later-write
done
"""
    b = record(
        f"read-only copy of {level} next to the live array, two next boots",
        boot(
            tmp_path / "vm",
            scenario,
            [*live, *disks],
            shuffle_seed=8,
            files={"sums": array.sums},
            commands=cmds,
        ),
    )

    assert b.rc_of("copy") == 0, b.explain("copy")
    out = b.json_of("copy")
    assert (out["uuid"], out["mdDevice"], out["readOnly"]) == (COPY_UUID, "/dev/md10", True)
    # The live array's blocks are exactly as they were before the copy's restore.
    assert b.text("live.after").split()[0] == b.text("live.before").split()[0]
    assert b.text("copy.verify").strip().endswith("0"), b.text("copy.verify")
    again = b.json_of("again")
    assert b.rc_of("again") == 0 and again["alreadyAssembled"] is True and again["changed"] is False
    # Restored data grants nothing: no set-user-ID, no device nodes, no programs on a copy.
    source, options = mounts(b, "restored.mounts")["/mnt/db1-copy"]
    assert source == "/dev/md10" and {"ro", "nosuid", "nodev", "noexec"} <= options, options
    # Both arrays' lines, each by an identity only that array has; the live one's line no longer
    # names the filesystem UUID the copy shares.
    conf = [ln for ln in b.text("mdadm.conf").splitlines() if ln.startswith("ARRAY")]
    assert conf == [
        f"ARRAY /dev/md0 metadata=1.2 UUID={array.uuid}",
        f"ARRAY /dev/md10 metadata=1.2 UUID={COPY_UUID}",
    ]
    fstab = b.text("fstab")
    assert f"UUID={array.fs_uuid}" not in fstab, fstab
    assert f"/dev/disk/by-id/md-uuid-{array.uuid} /data " in fstab, fstab
    assert f"/dev/disk/by-id/md-uuid-{COPY_UUID} /mnt/db1-copy " in fstab, fstab
    live_serials = {d.serial for d in live}
    for phase in ("scan", "udev"):
        found = md_members(b, f"{phase}.members")
        assert {m for m in found if m[0] == "md0"} == as_md0(live), (phase, found)
        assert {m for m in found if m[0] == "md10"} == {
            ("md10", str(i), d.serial) for i, d in enumerate(disks)
        }, (phase, found)
        assert not {m[2] for m in found if m[0] == "md10"} & live_serials
        seen = mounts(b, f"{phase}.mounts")
        assert seen["/data"][0] == "/dev/md0" and "rw" in seen["/data"][1], (phase, seen)
        assert seen["/mnt/db1-copy"][0] == "/dev/md10" and "ro" in seen["/mnt/db1-copy"][1]
        assert b.text(f"{phase}.verify").strip().endswith("0"), (phase, b.text(f"{phase}.verify"))
        assert b.text(f"{phase}.copy-has-later-write").strip() == "1"
