"""Which md array of an instance's discover report is the array asked for: the one the
instance's per-array tag names by md UUID or mount point, else the one its member volumes' tags,
its md name or its being the only one make it (raidsnap.tags)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raidsnap import tags
from raidsnap.errors import ArrayNotFoundError


def choose(
    array: str,
    instance_id: str,
    instance_tags: Mapping[str, str],
    arrays: list[dict[str, Any]],
    tagged: set[str],
) -> dict[str, Any]:
    """The md array of the report that is ``array``: the one its per-array instance tag names
    (by md UUID or mount point; never another), else, among those no other array's tag names,
    the one its member tags name, else the one named so, else the only one."""
    selector = tags.array_selector(instance_tags, array)
    if selector:
        return _by_selector(array, instance_id, arrays, selector)
    others = {
        name: value
        for key, value in instance_tags.items()
        if key.startswith(tags.ARRAY_KEY_PREFIX)
        and (name := key[len(tags.ARRAY_KEY_PREFIX) :]) != array
    }
    arrays = [md for md in arrays if not any(_named_by(md, v) for v in others.values())]

    def volume_ids(md: dict[str, Any]) -> set[str]:
        return {m.get("volumeId") for m in md["members"] if m.get("volumeId")}

    chosen: dict[str, Any] | None = None
    by_tag = [md for md in arrays if tagged and volume_ids(md) <= tagged]
    by_name = [md for md in arrays if str(md.get("name") or "").split(":")[-1] == array]
    if len(by_tag) == 1:
        chosen = by_tag[0]
    elif len(by_name) == 1:
        chosen = by_name[0]
    elif len(arrays) == 1:
        chosen = arrays[0]
    if chosen is None:
        devices = ", ".join(str(md.get("device")) for md in arrays) or "none left"
        raise ArrayNotFoundError(
            f"{instance_id} has several md arrays ({devices}) and none is clearly "
            f"{array}: tag the instance {tags.array_key(array)}=<its md UUID or mount point>"
        )
    return chosen


def uuid_key(value: str) -> str:
    """An md UUID compared without its separators and case (mdadm prints it with ':', udev's
    by-id links and blkid with '-')."""
    return "".join(c for c in value.lower() if c in "0123456789abcdef")


def _named_by(md: dict[str, Any], selector: str) -> bool:
    if selector.startswith("/"):
        return str(md.get("mountPoint") or "").rstrip("/") == selector.rstrip("/")
    key = uuid_key(selector)
    return len(key) == 32 and uuid_key(str(md.get("uuid") or "")) == key


def _by_selector(
    array: str, instance_id: str, arrays: list[dict[str, Any]], selector: str
) -> dict[str, Any]:
    """The one md array the per-array tag names; none or several is ArrayNotFound, never a
    guess (a wrong guess would snapshot or release another array)."""
    named = [md for md in arrays if _named_by(md, selector)]
    if len(named) == 1:
        return named[0]
    devices = ", ".join(str(md.get("device")) for md in arrays)
    raise ArrayNotFoundError(
        f"{instance_id} carries {tags.array_key(array)}={selector}, but "
        f"{'no' if not named else 'more than one'} md array there has that md UUID or mount "
        f"point (found: {devices})"
    )
