"""Which copied tags fit on a snapshot or a volume raidsnap makes.

A backup copies a member volume's own tags (cost allocation, owner) onto its snapshot, and a
restore copies them from the snapshot onto the new volume. EC2 allows at most 50 user tags per
resource; keys that start with ``aws:`` are reserved for AWS, cannot be written, and do not count
(EC2 User Guide, "Tag your Amazon EC2 resources", Tag restrictions:
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions). A
CreateTags or TagSpecification that would go past 50 fails as a whole (``TagLimitExceeded``),
and with it the backup or the restore. So raidsnap's own tags come first, room is kept for the
ones it adds to the resource later, and the copied tags that do not fit are named in the run's
notes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_TAGS = 50
RESERVED_PREFIX = "aws:"
# A note names at most this many dropped keys of a group, then says how many more.
NOTE_KEYS = 10


@dataclass(frozen=True)
class Fitted:
    kept: dict[str, str]
    dropped: tuple[str, ...]


def fit(own: Iterable[str], copied: Mapping[str, str], *, later: Iterable[str] = ()) -> Fitted:
    """The ``copied`` tags that fit beside the ``own`` keys raidsnap writes on the resource and
    the ``later`` keys it may add to it afterwards. A copied key that is also one of its own
    costs no room. Keys are taken in sorted order, so that a retried step copies the same ones
    (a CreateVolume retried with its ClientToken must ask for the same tags)."""
    keys = set(own)
    room = MAX_TAGS - len(keys) - len(set(later) - keys)
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for key in sorted(copied):
        if key.startswith(RESERVED_PREFIX):
            continue
        if key in keys:
            kept[key] = copied[key]
        elif room > 0:
            kept[key] = copied[key]
            room -= 1
        else:
            dropped.append(key)
    return Fitted(kept, tuple(dropped))


def note(dropped: Mapping[str, tuple[str, ...]], *, onto: str) -> str:
    """One sentence for the run's notes: which tags of which resources were not copied onto
    ``onto``; resources that dropped the same tags share a clause. Empty when none were."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for resource, keys in dropped.items():
        if keys:
            groups.setdefault(keys, []).append(resource)
    if not groups:
        return ""
    clauses = [f"tags {_keys(keys)} of {', '.join(ids)}" for keys, ids in groups.items()]
    return (
        f"{'; '.join(clauses)} were not copied onto {onto}: EC2 allows {MAX_TAGS} tags per "
        "resource and raidsnap's own come first"
    )


def _keys(keys: tuple[str, ...]) -> str:
    shown = ", ".join(keys[:NOTE_KEYS])
    more = len(keys) - NOTE_KEYS
    return f"{shown} and {more} more" if more > 0 else shown
