"""What may be done with a volume a restore created, once the run that created it has failed,
ended or is being torn down. Restore cleanup, drill teardown, the rule after a stopped run and
the sweeper all ask this one question; each decides for itself what to do with the answer
(detach and wait, leave it and report it, or delete it)."""

from __future__ import annotations

from typing import Literal

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
