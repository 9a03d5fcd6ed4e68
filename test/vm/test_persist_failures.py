"""assemble.sh's persist step on the real md driver, where it can go wrong:

- the replaced array's own fstab line spelled with a trailing slash ("/data/", which mount(8)
  and systemd read as /data) is that array's line, replaced, not another mount point's;
- a persist that is refused (PersistFailed) changes neither fstab nor mdadm.conf: the released
  array's ARRAY line stays, so the cause's way back (attach the old members, assemble, mount)
  brings the array back at the next boot too.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import assemble_params
from test_new_identity import BOOTS, mounts, old_members
from test_next_boot import MD_MEMBERS
from vmlib import Boot, Commands, boot

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

NEW_UUID = "a1b2c3d4:0badf00d:12345678:9abcdef0"


def _replace(
    array: ArraySet,
    tmp_path: Path,
    rng: random.Random,
    fstab_lines: list[str],
    name: str,
) -> Boot:
    disks = array.copies(tmp_path / "disks", rng)
    params = {**assemble_params(disks, array.uuid), "NewMdUuid": NEW_UUID}
    cmds = Commands()
    restore = cmds.ssm("restore", "assemble", None, **params)
    lines = "\n".join(f"echo '{ln}' >>/etc/fstab" for ln in fstab_lines)
    scenario = f"""
# The instance as it was before the replace: the array's own lines, as its operator wrote them.
echo 'ARRAY /dev/md0 metadata=1.2 UUID={array.uuid}' >>/etc/mdadm/mdadm.conf
{lines}
mkdir -p /data
keep /etc/mdadm/mdadm.conf mdadm.conf.before
{restore}
keep /etc/mdadm/mdadm.conf mdadm.conf
keep /etc/fstab fstab
cat /proc/mdstat >/work/mdstat
"""
    return record(
        f"persist: {name}",
        boot(tmp_path / "vm", scenario, disks, files={"sums": array.sums}, commands=cmds),
    )


def test_a_replace_whose_fstab_line_ends_in_a_slash_is_persisted(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    array = raid0_set
    b = _replace(
        array,
        tmp_path,
        rng,
        [f"UUID={array.fs_uuid} /data/ {array.fs_type} defaults,nofail 0 0"],
        "replace, fstab /data/",
    )
    assert b.rc_of("restore") == 0, (b.explain("restore"), b.text("mdadm.conf"))


def test_a_persist_that_fails_at_fstab_leaves_mdadm_conf_as_it_was(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    array = raid0_set
    # A second line naming the filesystem for another mount point where nothing is mounted:
    # the refusal assemble.sh means to make (PersistFailed).
    b = _replace(
        array,
        tmp_path,
        rng,
        [
            f"UUID={array.fs_uuid} /data {array.fs_type} defaults,nofail 0 0",
            f"UUID={array.fs_uuid} /mnt/old {array.fs_type} noauto 0 0",
        ],
        "replace, PersistFailed",
    )
    assert b.rc_of("restore") == 1 and b.json_of("restore")["error"] == "PersistFailed"
    assert "md0" not in b.text("mdstat"), b.text("mdstat")
    # The array was stopped again ("undone"); mdadm.conf must not name it instead of the one
    # the replace released.
    assert b.text("mdadm.conf") == b.text("mdadm.conf.before"), (
        b.json_of("restore")["message"],
        b.text("mdadm.conf"),
    )


def test_after_a_persist_failure_and_the_causes_way_back_the_array_returns_at_the_next_boot(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    """The replace fails PersistFailed after the workflow detached the old members; its cleanup
    deletes the new volumes, and the cause's way back is: attach the old members, mdadm
    --assemble /dev/md0 --uuid=<old>, mount /dev/md0 /data. At the next boot the array must
    come back at /data as it did before the replace (its fstab line names /dev/md0, as mdadm.conf
    did)."""
    array = raid0_set
    disks = array.copies(tmp_path / "disks", rng)
    old = old_members(array, tmp_path / "disks")
    params = {**assemble_params(disks, array.uuid), "NewMdUuid": NEW_UUID}
    cmds = Commands()
    restore = cmds.ssm("restore", "assemble", None, **params)
    old_serials = " ".join(d.serial for d in old)
    new_serials = " ".join(d.serial for d in disks)
    paths = " ".join(f"$(by_id {d.serial})" for d in old)
    scenario = f"""
{MD_MEMBERS}
{BOOTS}
echo 'ARRAY /dev/md0 metadata=1.2 UUID={array.uuid}' >>/etc/mdadm/mdadm.conf
echo '/dev/md0 /data {array.fs_type} defaults,nofail 0 0' >>/etc/fstab
echo 'UUID={array.fs_uuid} /mnt/old {array.fs_type} noauto 0 0' >>/etc/fstab
mkdir -p /data
detach {old_serials}
{restore}
# the workflow's cleanup: the new volumes are detached and deleted
detach {new_serials}
# the cause's way back
reattach
detach {new_serials}
mdadm --assemble /dev/md0 --uuid={array.uuid} {paths} >/work/wayback 2>&1
mount /dev/md0 /data
(cd /data && sha256sum -c --quiet /work/sums) >/work/wayback.verify 2>&1
echo $? >>/work/wayback.verify
keep /etc/mdadm/mdadm.conf mdadm.conf
for phase in scan udev; do
  go_down $phase /data
  come_up $phase
done
"""
    b = record(
        "persist refused, the way back, two next boots",
        boot(
            tmp_path / "vm",
            scenario,
            [*disks, *old],
            files={"sums": array.sums},
            commands=cmds,
        ),
    )
    assert b.json_of("restore")["error"] == "PersistFailed"
    assert b.text("wayback.verify").strip().endswith("0"), (
        b.text("wayback"),
        b.text("wayback.verify"),
    )
    for phase in ("scan", "udev"):
        seen = mounts(b, f"{phase}.mounts")
        assert "/data" in seen, (
            phase,
            b.text("mdadm.conf"),
            b.text(f"{phase}.mdstat"),
            b.text(f"{phase}.mount-a"),
        )
