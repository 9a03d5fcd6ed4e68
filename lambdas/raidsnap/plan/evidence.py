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
