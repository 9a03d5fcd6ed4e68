"""Is a member of the array impaired? What counts as evidence, from EC2's volume status checks
and from what the instance reports of its md arrays (discover).

StatusCheckFailed_AttachedEBS covers every EBS volume attached to the instance (the boot volume
and scratch volumes included) and names none, so its ALARM says only that something attached is
failing. The evidence is about the array's own members; without any, a recovery replaces nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# md array states of a working array, as /sys/block/mdX/md/array_state reports them.
HEALTHY_STATES = ("clean", "active", "active-idle", "read-auto", "readonly", "write-pending")


def volume_status_evidence(statuses: Iterable[dict[str, Any]]) -> list[str]:
    """What DescribeVolumeStatus's VolumeStatuses say is wrong (nothing: an empty list). A
    warning (degraded performance of a provisioned-IOPS volume) or insufficient data is not an
    impaired member."""
    out = []
    for st in statuses:
        vid = st["VolumeId"]
        status = st.get("VolumeStatus", {})
        details = {d.get("Name"): d.get("Status") for d in status.get("Details", [])}
        events = [e.get("EventType") for e in st.get("Events", [])]
        if status.get("Status") == "impaired":
            out.append(f"member {vid}: EBS status check impaired")
        if details.get("io-enabled") == "failed":
            out.append(f"member {vid}: I/O disabled (io-enabled failed)")
        if "potential-data-inconsistency" in events:
            out.append(f"member {vid}: event potential-data-inconsistency")
    return out


def arrays_of_set(
    report: dict[str, Any], md_uuid: str | None, checked: set[str]
) -> list[dict[str, Any]]:
    """The md arrays discover reports that are this array: its md UUID, or a checked member."""
    return [
        md
        for md in report.get("arrays") or []
        if (md_uuid and md.get("uuid") == md_uuid)
        or checked & {str(m.get("volumeId")) for m in md.get("members") or []}
    ]


def md_evidence(md: dict[str, Any]) -> list[str]:
    """What is wrong with one md array as discover reports it."""
    out = []
    state = str(md.get("state") or "")
    members = md.get("members") or []
    if state not in HEALTHY_STATES:
        out.append(f"{md.get('device')} is {state or 'in an unknown state'}")
    if md.get("raidDevices") and len(members) < int(md["raidDevices"]):
        out.append(f"{md.get('device')} has {len(members)} of {md['raidDevices']} members")
    return out


def unchecked_members(md: dict[str, Any], checked: set[str]) -> list[str]:
    """Members of a reported array whose EC2 status was not looked at yet."""
    found = {str(m.get("volumeId")) for m in md.get("members") or [] if m.get("volumeId")}
    return sorted(found - checked)


# Levels md keeps serving with a member gone (mdadm(8), "--level"; md(4), "RAID1" ... "RAID10":
# each stores redundant data and runs degraded).
REDUNDANT_LEVELS = ("raid1", "raid4", "raid5", "raid6", "raid10")


def redundant(level: str | None) -> bool:
    normal = str(level or "").lower()
    if normal.isdigit():
        normal = f"raid{normal}"
    return normal in REDUNDANT_LEVELS


def serving_degraded(md: dict[str, Any]) -> bool:
    """md still serves this redundant array: a working state, though members are missing or
    faulty (a RAID 10 runs on with one of each mirror pair)."""
    return redundant(md.get("level")) and str(md.get("state") or "") in HEALTHY_STATES


def by_id_path(volume_id: str) -> str:
    """The stable device path of an EBS volume on a Nitro instance (its NVMe serial is the
    volume id without its dash), the one the commands we print use: kernel names change."""
    return f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{volume_id.replace('-', '')}"


def failed_members(md: dict[str, Any], impaired: list[str]) -> list[dict[str, Any]]:
    """The members md no longer uses (faulty, or removed: a slot no working member fills) and
    those EC2 reports impaired, each with its slot where it can be told."""
    members = md.get("members") or []
    working = [m for m in members if m.get("state") not in ("faulty", "spare")]
    filled = {m.get("slot") for m in working if m.get("slot") is not None}
    empty = [s for s in range(int(md.get("raidDevices") or 0)) if s not in filled]
    out: dict[str, dict[str, Any]] = {}
    for m in members:
        if m.get("state") == "faulty" and m.get("volumeId"):
            out[str(m["volumeId"])] = {
                "volumeId": m["volumeId"],
                "device": m.get("device"),
                "slot": None,
                "listed": True,
            }
    listed = {str(m.get("volumeId")) for m in members}
    for vid in impaired:
        if vid not in out:
            out[vid] = {"volumeId": vid, "device": None, "slot": None, "listed": vid in listed}
    failed = sorted(out.values(), key=lambda f: str(f["volumeId"]))
    if len(empty) == len(failed) == 1:
        failed[0]["slot"] = empty[0]
    return failed


def replace_commands(md_device: str, failed: list[dict[str, Any]]) -> list[str]:
    """The md commands that swap each failed member for a new volume while md serves the
    array (mdadm(8): Manage mode --fail, --remove, --add; md rebuilds onto the added device)."""
    lines = []
    for f in failed:
        path = by_id_path(str(f["volumeId"]))
        if f.get("listed", True):
            lines.append(f"mdadm {md_device} --fail {path} --remove {path}")
    lines.append(
        "create and attach a new volume of the same size, type and performance in the "
        "instance's Availability Zone for each failed member"
    )
    lines.append(
        f"mdadm {md_device} --add /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_<new "
        "volume id without its dash>"
    )
    lines.append("watch the rebuild in /proc/mdstat until the array is no longer degraded")
    return lines
