"""Device names and identities: which names new EBS attachments get, which md device a restore
uses, and the md UUID a restored array gets."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable

# Device names for EBS data volumes on Linux: /dev/sd[f-z] first, as EC2 recommends, then the
# two-letter names /dev/xvd[b-c][a-z] it also lists as available on HVM instances.
DEVICE_NAMES = tuple(f"/dev/sd{c}" for c in "fghijklmnopqrstuvwxyz") + tuple(
    f"/dev/xvd{a}{b}" for a in "bc" for b in "abcdefghijklmnopqrstuvwxyz"
)
MD_DEVICE_PATTERN = r"/dev/md[0-9]{1,3}"
DEFAULT_MD_DEVICE = "/dev/md0"


def _suffix(device: str) -> str:
    name = device.rsplit("/", 1)[-1]
    for prefix in ("xvd", "sd", "hd"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def free_device_names(in_use: Iterable[str], count: int) -> list[str]:
    """``count`` names no attachment uses. /dev/sdf and /dev/xvdf are one device to Xen
    instances, so a name is taken when either spelling is."""
    taken = {_suffix(d) for d in in_use}
    free = [d for d in DEVICE_NAMES if _suffix(d) not in taken]
    if len(free) < count:
        raise ValueError(f"only {len(free)} free device names, {count} needed")
    return free[:count]


def md_device(given: str | None, recorded: str, notes: list[str]) -> str:
    """The input's mdDevice, else the device the array was when the set was taken (replace
    mode releases that device: /dev/md0 may be another array), else /dev/md0."""
    if given is not None:
        return given
    if re.fullmatch(MD_DEVICE_PATTERN, recorded):
        return recorded
    if recorded:
        notes.append(f"the set's md device {recorded!r} is not usable; {DEFAULT_MD_DEVICE} used")
    return DEFAULT_MD_DEVICE


def new_md_uuid(seed: str | None = None) -> str:
    """A fresh md UUID in mdadm's notation (four groups of 8 hex digits); from ``seed`` the same
    one every time (a step that is retried chooses the same identity)."""
    raw = hashlib.sha256(seed.encode()).hexdigest()[:32] if seed else uuid.uuid4().hex
    return ":".join(raw[i : i + 8] for i in range(0, 32, 8))
