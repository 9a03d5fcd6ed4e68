"""What may be done with a volume a restore created, once the run that created it has failed,
ended or is being torn down. Restore cleanup, drill teardown, the rule after a stopped run and
the sweeper all ask this one question; each decides for itself what to do with the answer
(detach and wait, leave it and report it, or delete it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from raidsnap.plan.volumes import VolumeView

# Attachment states in which the volume is, or is becoming, a disk of the instance.
LIVE_ATTACHMENT = ("attaching", "attached", "busy")

Disposition = Literal["gone", "attached", "detaching", "creating", "deletable"]


def disposition(view: VolumeView) -> Disposition:
    """gone: deleting or deleted already; attached: an instance has it, or is getting it;
    detaching: on its way off an instance; creating: not yet made; deletable: none of these,
    so DeleteVolume may remove it. A "detached" attachment is no attachment."""
    if view.state in ("deleting", "deleted"):
        return "gone"
    states = {a.state for a in view.attachments}
    if states & set(LIVE_ATTACHMENT):
        return "attached"
    if "detaching" in states:
        return "detaching"
    if view.state == "creating":
        return "creating"
    return "deletable"


def attached_to(view: VolumeView, instance_id: str) -> bool:
    """Whether the volume is attached to ``instance_id``, or on its way on or off it."""
    return any(a.instance_id == instance_id and a.state != "detached" for a in view.attachments)


def arrays_holding(
    arrays: Sequence[Mapping[str, Any]], ours: Sequence[str], md_uuids: set[str]
) -> tuple[str | None, list[str]]:
    """What discover on the target says about this run's attached volumes (``ours``): why they
    must stay attached (an array of them is mounted, or is another array, or has members the
    instance could not name that may be them), else the md devices of this set's arrays that
    hold them, to release one by one before they are detached. ``arrays``: discover's "arrays"."""
    holding = [
        md for md in arrays if {str(m.get("volumeId")) for m in md.get("members") or []} & set(ours)
    ]
    mounted = [md for md in holding if md.get("mountPoint")]
    if mounted:
        md = mounted[0]
        members = [m.get("volumeId") for m in md.get("members") or []]
        return (
            f"{md.get('device')} is assembled and mounted at {md.get('mountPoint')} from "
            f"{members}: an assembled, mounted array is the user's"
        ), []
    # An array with members discover could not name may hold this run's volumes all the
    # same: if it is this set's array or mounted, nothing is proven free.
    unnamed = [
        md
        for md in arrays
        if any(not m.get("volumeId") for m in md.get("members") or [])
        and (md.get("uuid") in md_uuids or md.get("mountPoint"))
    ]
    if unnamed:
        md = unnamed[0]
        return (
            f"{md.get('device')} (array {md.get('uuid')}"
            f"{', mounted at ' + str(md.get('mountPoint')) if md.get('mountPoint') else ''})"
            " has members the instance could not name, which may be this run's volumes"
        ), []
    foreign = [md for md in holding if md.get("uuid") not in md_uuids]
    if foreign:
        return f"{foreign[0].get('device')} (array {foreign[0].get('uuid')}) holds them", []
    return None, [str(md["device"]) for md in holding]
