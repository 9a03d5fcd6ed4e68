"""The boot after an attach-mode restore. assemble.sh persists an ARRAY line by the array's own
new md UUID and an fstab line by /dev/disk/by-id/md-uuid-<that UUID>; what the user relies on
is that the next boot, through either path a Linux host takes (``mdadm --assemble --scan`` from
the initramfs, or udev's incremental assembly by 64-md-raid-assembly.rules), brings back exactly
the restored volumes as the device the restore named, mounted where the restore mounted it,
with the data and every write made since. And that assemble refuses, changing nothing, where
other disks already carry the identity it gives, since those could be mixed with it at a
boot."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from test_assemble import NEW_UUID, assemble_params
from vmlib import Boot, Commands, Disk, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

# Every md array the guest has, one line per member: array, slot, the member's NVMe serial
# (the EBS volume id without its dash).
MD_MEMBERS = r"""
md_members() {
  local md rd
  for md in /sys/block/md*; do
    [ -d "$md/md" ] || continue
    for rd in "$md"/md/dev-*; do
      [ -e "$rd" ] || continue
      echo "${md##*/} $(cat "$rd/slot") $(ebs-serial "${rd##*/dev-}")"
    done
  done
}
"""


def md_members(b: Boot, name: str) -> set[tuple[str, str, str]]:
    rows = (line.split() for line in b.text(name).splitlines() if line.strip())
    return {(md, slot, serial) for md, slot, serial in rows}


def as_md0(disks: list[Disk]) -> set[tuple[str, str, str]]:
    return {("md0", str(slot), d.serial) for slot, d in enumerate(disks)}


def test_next_boot_brings_back_exactly_the_restored_members_as_md0_mounted_from_fstab(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    cmds = Commands()
    restore = cmds.ssm("restore", "assemble", None, **assemble_params(disks, raid0_set.uuid))
    discover = {
        phase: cmds.ssm(f"discover-{phase}", "discover", ArrayName="db1")
        for phase in ("scan", "udev")
    }
    # Each phase is one simulated boot: the array and its mount go away as at shutdown, then
    # come back only through the persisted mdadm.conf and fstab. The first uses mdadm's scan
    # (what the initramfs runs), the second the real udevd, started here as at boot with its
    # coldplug trigger, whose mdadm rules assemble incrementally; nothing else runs mdadm.
    scenario = f"""
{MD_MEMBERS}
{restore}
(cd /data && sha256sum -c --quiet /work/sums) >/work/verify.restore 2>&1
echo $? >/work/verify.restore.rc
# A write to the restored array after the restore: the next boot must bring it back too.
head -c 1500000 /dev/urandom >/data/written-after-restore
(cd /data && sha256sum written-after-restore) >/work/sums.after
sync
keep /etc/mdadm/mdadm.conf mdadm.conf
keep /etc/fstab fstab

go_down() {{ # PHASE
  umount /data; echo $? >/work/$1.umount.rc
  # Every array stops, whatever it is called: each boot starts from the disks alone.
  mdadm --stop --scan >/work/$1.stop 2>&1; echo $? >>/work/$1.stop
  rm -f /dev/disk/by-id/md-uuid-*
  echo 3 >/proc/sys/vm/drop_caches
  md_members >/work/$1.members.down
}}
observe() {{ # PHASE
  cat /proc/mdstat >/work/$1.mdstat
  md_members >/work/$1.members
  findmnt -rn -o SOURCE,FSTYPE --mountpoint /data >/work/$1.mount
  {{ (cd /data && sha256sum -c --quiet /work/sums) &&
    (cd /data && sha256sum -c --quiet /work/sums.after); }} >/work/$1.verify 2>&1
  echo $? >/work/$1.verify.rc
}}

go_down scan
mdadm --assemble --scan >/work/scan.assemble 2>&1; echo $? >>/work/scan.assemble
# The by-id links udev's 63-md-raid-arrays.rules makes at every real boot (fstab names them).
md_links
mount -a >/work/scan.mount-a 2>&1; echo $? >>/work/scan.mount-a
observe scan
{discover["scan"]}

go_down udev
/usr/lib/systemd/systemd-udevd --daemon --resolve-names=never 2>/work/udev.udevd
udevadm trigger --action=add --type=subsystems
udevadm trigger --action=add --type=devices
udevadm settle --timeout=60; echo $? >/work/udev.settle.rc
for d in /sys/class/nvme/nvme*; do
  s=$(tr -d ' \\n' <"$d/serial")
  udevadm info --query=property --name="$(by_id "$s")" | sed -n "s/^MD_/$s MD_/p"
done >/work/udev.props
mount -a >/work/udev.mount-a 2>&1; echo $? >>/work/udev.mount-a
observe udev
{discover["udev"]}
"""
    b = record(
        "restore raid0, then two next boots",
        boot(
            tmp_path / "vm",
            scenario,
            disks,
            shuffle_seed=3,
            files={"sums": raid0_set.sums},
            commands=cmds,
        ),
    )

    assert b.rc_of("restore") == 0, b.explain("restore")
    assert b.text("verify.restore.rc").strip() == "0", b.text("verify.restore")

    # Both boots at once, so that a failure shows which of the two paths went wrong.
    expected = {
        phase: {
            # After the shutdown nothing is left: what follows is the boot's own doing.
            "down": {"umount": "0", "stop": "0", "arrays": set()},
            # mdadm --assemble --scan, or udevadm settle after the coldplug trigger.
            "assembler": "0",
            # Exactly the restored volumes, each in its slot, as md0 (no md127, nothing else).
            "members": as_md0(disks),
            # Mounted from the fstab line, with the restored data and the later write.
            "mount": ["/dev/md0", "xfs"],
            "checksums": "0",
            # What the next backup's discovery sees: one array of this UUID, the new volume ids.
            "discover": ("/dev/md0", NEW_UUID, "/data", [d.volume_id for d in disks]),
            # udev's incremental assembly (64-md-raid-assembly.rules) claimed each member.
            "udev": {d.serial: "md0" for d in disks} if phase == "udev" else None,
        }
        for phase in ("scan", "udev")
    }
    observed = {phase: next_boot(b, phase) for phase in ("scan", "udev")}
    assert observed == expected, {
        p: "".join(b.text(f"{p}.{f}") for f in ("stop", "mdstat", "mount-a"))
        + b.text(f"{p}.verify")[-400:]
        for p in ("scan", "udev")
    }


def last_line(b: Boot, name: str) -> str:
    lines = b.text(name).strip().splitlines()
    return lines[-1] if lines else ""


def next_boot(b: Boot, phase: str) -> dict[str, Any]:
    """What one simulated boot left, in the terms of the expectation above."""
    claimed: dict[str, str] | None = None
    if phase == "udev":
        claimed = {}
        for line in b.text("udev.props").splitlines():
            serial, _, prop = line.partition(" ")
            if prop.startswith("MD_DEVICE="):
                claimed[serial] = prop.removeprefix("MD_DEVICE=")
    result = b.json_of(f"discover-{phase}")
    found: object = result
    if len(result.get("arrays", [])) == 1:
        (a,) = result["arrays"]
        found = (a["device"], a["uuid"], a["mountPoint"], [m["volumeId"] for m in a["members"]])
    return {
        "down": {
            "umount": b.text(f"{phase}.umount.rc").strip(),
            "stop": last_line(b, f"{phase}.stop"),
            "arrays": md_members(b, f"{phase}.members.down"),
        },
        "assembler": last_line(b, "scan.assemble" if phase == "scan" else "udev.settle.rc"),
        "members": md_members(b, f"{phase}.members"),
        "mount": b.text(f"{phase}.mount").split(),
        "checksums": b.text(f"{phase}.verify.rc").strip(),
        "discover": found,
        "udev": claimed,
    }


def test_assemble_refuses_where_other_disks_already_carry_the_new_identity(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    """Old members of the set's array keep its identity and are only reported
    (test_new_identity.py). What stays refused is a second set of disks under the identity the
    restore gives: at a boot, mdadm could mix the two."""
    first = raid0_set.copies(tmp_path / "a", rng)
    second = raid0_set.copies(tmp_path / "b", rng)
    cmds = Commands()
    made = cmds.ssm("made", "assemble", None, **assemble_params(first, raid0_set.uuid))
    params = assemble_params(second, raid0_set.uuid, mount_point="/mnt/b")
    params["MdDevice"] = "/dev/md1"
    again = cmds.ssm("again", "assemble", {"RAIDSNAP_DEVICE_WAIT_SECONDS": "10"}, **params)
    scenario = f"""
{MD_MEMBERS}
{made}
umount /data && mdadm --stop /dev/md0 >/work/stop.log 2>&1
cp /etc/mdadm/mdadm.conf /work/conf.before; cp /etc/fstab /work/fstab.before
findmnt -rn -o SOURCE,TARGET >/work/mounts.before
{again}
cp /etc/mdadm/mdadm.conf /work/conf.after; cp /etc/fstab /work/fstab.after
findmnt -rn -o SOURCE,TARGET >/work/mounts.after
md_members >/work/members.after
"""
    before = {d.path: d.sha256() for d in second}
    b = record(
        "refuse a second set of disks under one identity",
        boot(tmp_path / "vm", scenario, [*first, *second], shuffle_seed=9, commands=cmds),
    )

    assert b.rc_of("made") == 0, b.explain("made")
    assert b.rc_of("again") == 1, b.explain("again")
    out = b.json_of("again")
    assert (out["ok"], out["error"]) == (False, "CopyAttached"), out
    # It names the disks that carry the identity already, so the operator knows what to detach.
    assert all(d.volume_id in out["message"] for d in first), out["message"]
    assert not any(d.volume_id in out["message"] for d in second), out["message"]
    # Nothing changed: no array, the same mounts, mdadm.conf and fstab, no member written.
    assert md_members(b, "members.after") == set()
    assert b.text("mounts.after") == b.text("mounts.before")
    assert b.text("conf.after") == b.text("conf.before")
    assert b.text("fstab.after") == b.text("fstab.before")
    assert {d.path: d.sha256() for d in second} == before
