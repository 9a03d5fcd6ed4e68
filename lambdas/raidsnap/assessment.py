"""Is a member of the array impaired? The evidence an alarm-started recovery needs before it
replaces an array.

StatusCheckFailed_AttachedEBS covers every EBS volume attached to the instance (the boot volume
and scratch volumes included) and names none, so its ALARM says only that something attached is
failing. The evidence is about the array's own members: their EBS status checks
(DescribeVolumeStatus: impaired, I/O disabled, a potential-data-inconsistency event), members
that are no longer attached, and what the instance reports of the array (discover: the md
device missing, not clean, short of members). Without any, a recovery replaces nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from raidsnap import clients, snapshot_sets, tags
from raidsnap.aws import commands, error_code, volumes
from raidsnap.aws import instances as arrays

# md array states of a working array, as /sys/block/mdX/md/array_state reports them.
HEALTHY_STATES = ("clean", "active", "active-idle", "read-auto", "readonly", "write-pending")
DISCOVER_TIMEOUT_SECONDS = 120
POLL_SECONDS = 5


@dataclass(frozen=True)
class SetFacts:
    """The set a recovery restores, and what its age means for the data."""

    set_id: str
    taken_at: datetime
    age_minutes: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "setId": self.set_id,
            "takenAt": _iso(self.taken_at),
            "ageMinutes": round(self.age_minutes, 1),
        }

    def sentence(self, array: str) -> str:
        return (
            f"the newest complete set of {array} is {self.set_id}, taken {_iso(self.taken_at)} "
            f"({age_text(self.age_minutes)} old); writes made after that time to {array} are not "
            "in it"
        )


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def age_text(minutes: float) -> str:
    if minutes < 90:
        return f"{round(minutes)} min"
    if minutes < 48 * 60:
        return f"{round(minutes / 60)} h"
    return f"{round(minutes / 1440)} days"


def latest_set(array: str, reference: datetime) -> SetFacts | None:
    found = snapshot_sets.latest_complete(array)
    if found is None:
        return None
    taken = found.start_time
    return SetFacts(found.set_id, taken, max(0.0, (reference - taken).total_seconds() / 60))


def volume_evidence(volume_ids: list[str]) -> list[str]:
    """What EC2's status checks say is wrong with these volumes (nothing: an empty list).
    A warning (degraded performance of a provisioned-IOPS volume) or insufficient data is not
    an impaired member."""
    if not volume_ids:
        return []
    found = clients.ec2().describe_volume_status(VolumeIds=volume_ids)["VolumeStatuses"]
    out = []
    for st in found:
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


def _tags(volume_ids: list[str]) -> dict[str, dict[str, str]]:
    """Tags of these volumes; a deleted one has none (it is missing, not replaced)."""
    try:
        return arrays.volume_tags(volume_ids)
    except ClientError as err:
        if error_code(err) != "InvalidVolume.NotFound":
            raise
    out: dict[str, dict[str, str]] = {}
    for vid in volume_ids:
        try:
            out.update(arrays.volume_tags([vid]))
        except ClientError as err:
            if error_code(err) != "InvalidVolume.NotFound":
                raise
    return out


def start(array: str, instance_id: str, discover_document: str) -> dict[str, Any]:
    """First look: EC2's view of the members; then discovery on the instance, if it answers."""
    facts = snapshot_sets.latest_complete(array)
    members = sorted({m.volume_id for m in facts.members}) if facts else []
    instance = arrays.describe_instance(instance_id)
    attached = {a.volume_id for a in instance.attachments}
    # A restore since the set was taken replaced its members (tagged replaced-by) with volumes
    # restored from a set of this array: those are the members now, the old ones are not missing.
    attached_tags = _tags(sorted(attached))
    old_tags = _tags([v for v in members if v not in attached])
    own_set = re.compile(rf"^{re.escape(array)}-\d{{8}}T\d{{6}}Z-")
    restored = {
        v for v, t in attached_tags.items() if own_set.match(str(t.get(tags.RESTORED_FROM, "")))
    }
    # A member attached to another instance belongs to another copy of the array (the one it
    # left when a recovery moved it here, or a drill's): not a member missing from this one.
    elsewhere = {
        vid
        for vid, view in volumes.describe([v for v in members if v not in attached]).items()
        if any(i != instance_id and st != "detached" for i, _d, st in view.attachments)
    }
    evidence = [
        f"member {vid} of set {facts.set_id if facts else '?'} is no longer attached to "
        f"{instance_id}"
        for vid in members
        if vid not in attached
        and vid not in elsewhere
        and tags.REPLACED_BY not in old_tags.get(vid, {})
    ]
    checked = sorted((set(members) & attached) | restored)
    evidence += volume_evidence(checked)
    look: dict[str, Any] = {
        "instanceId": instance_id,
        "checked": checked,
        "evidence": evidence,
        "mdUuid": facts.tag_values.get(tags.MD_UUID) if facts else None,
    }
    if not arrays.agent_online(instance_id):
        look["discovery"] = "the SSM agent is not online"
        return decide(look)
    look["commandId"] = commands.send(
        discover_document,
        instance_id,
        {"ArrayName": array},
        comment=f"raidsnap recovery assessment {array}",
        timeout=DISCOVER_TIMEOUT_SECONDS,
    )
    look["status"] = "pending"
    look["waitSeconds"] = POLL_SECONDS
    look["budgetSeconds"] = DISCOVER_TIMEOUT_SECONDS + 30
    return look


def poll(look: dict[str, Any]) -> dict[str, Any]:
    """Later looks: what discovery reports of the array."""
    look = dict(look)
    result = commands.fetch(look["commandId"], look["instanceId"])
    if result.status == "pending":
        look["budgetSeconds"] = int(look["budgetSeconds"]) - int(look["waitSeconds"])
        if look["budgetSeconds"] > 0:
            return look
        look["discovery"] = "discovery did not answer in time"
        return decide(look)
    report = result.result or {}
    if result.status == "failed" or not report.get("ok"):
        look["discovery"] = f"discovery failed ({result.detail})"
        return decide(look)
    look["discovery"] = "done"
    look["evidence"] = list(look["evidence"]) + discovery_evidence(look, report)
    return decide(look)


def discovery_evidence(look: dict[str, Any], report: dict[str, Any]) -> list[str]:
    md_uuid = look.get("mdUuid")
    checked = set(look.get("checked") or [])
    found = [
        md
        for md in report.get("arrays") or []
        if (md_uuid and md.get("uuid") == md_uuid)
        or checked & {str(m.get("volumeId")) for m in md.get("members") or []}
    ]
    if not found:
        return [
            f"no md array of the set's members (md UUID {md_uuid}) is assembled on the instance"
        ]
    out = []
    for md in found:
        state = str(md.get("state") or "")
        members = md.get("members") or []
        if state not in HEALTHY_STATES:
            out.append(f"{md.get('device')} is {state or 'in an unknown state'}")
        if md.get("raidDevices") and len(members) < int(md["raidDevices"]):
            out.append(f"{md.get('device')} has {len(members)} of {md['raidDevices']} members")
        unchecked = sorted({str(m.get("volumeId")) for m in members if m.get("volumeId")} - checked)
        out += volume_evidence(unchecked)
    return out


def decide(look: dict[str, Any]) -> dict[str, Any]:
    look = dict(look)
    look["status"] = "act" if look["evidence"] else "none"
    return look
