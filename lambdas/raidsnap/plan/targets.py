"""Which instance a workflow may act on for an array, and where it may mount it: the rules,
without AWS.

Whoever may start a restore names its target and mount point, and whoever may tag an instance
or a snapshot writes the tags raidsnap reads; neither may reach beyond the array they name. An
array's instance is the one raidsnap recorded (raidsnap.aws.homes), or one the config names for
it; a restore acts only on that instance, on an instance tagged for the array, or on one tagged
for a copy (a name that is no array raidsnap knows); and a restored array is mounted only under
the allowed places, or where its own set recorded it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raidsnap import tags
from raidsnap.errors import ArrayInstanceChangedError, ArrayNotFoundError, InvalidInputError
from raidsnap.models import normal_path

# Set by Auto Scaling on the instances it launches; users cannot write aws: tags ("Tag your
# Amazon EC2 resources", tag restrictions: the aws: prefix is reserved for AWS use).
AUTO_SCALING_GROUP_TAG = "aws:autoscaling:groupName"

# Where a restored array may be mounted when the config says nothing (allowedMountPoints):
# under these directories, "<array>" standing for the array's name.
DEFAULT_ALLOWED_MOUNT_POINTS = ("/data", "/mnt", "/srv", "/opt/<array>")


@dataclass(frozen=True)
class Configured:
    """What the config names for one array: the instances that are or become the array's (its
    instance, its replacement, the launches of its Auto Scaling group), and the instances that
    only ever receive copies of it (its drill instance: never the array's own)."""

    instances: frozenset[str] = frozenset()
    auto_scaling_group: str = ""
    copies: frozenset[str] = frozenset()

    def names(self, instance_id: str, instance_tags: Mapping[str, str]) -> bool:
        """Whether the config names this instance as (becoming) the array's own."""
        if instance_id in self.instances:
            return True
        group = self.auto_scaling_group
        return bool(group) and instance_tags.get(AUTO_SCALING_GROUP_TAG) == group

    def launched(self, instance_tags: Mapping[str, str]) -> bool:
        """Whether the array's Auto Scaling group launched this instance."""
        group = self.auto_scaling_group
        return bool(group) and instance_tags.get(AUTO_SCALING_GROUP_TAG) == group


@dataclass(frozen=True)
class Candidate:
    """A running instance tagged with the array."""

    instance_id: str
    tags: Mapping[str, str]


@dataclass(frozen=True)
class Recorded:
    instance_id: str
    since: str  # ISO time
    by: str


def choose_array_instance(
    array: str,
    tagged: Sequence[Candidate],
    recorded: Recorded | None,
    configured: Configured,
    notes: list[str],
) -> str:
    """The instance that is the array's, among the running instances tagged with it.

    The recorded instance wins; other instances tagged with the array are named in ``notes``
    (and alarmed on by the caller) but block nothing: a tag on someone else's instance must not
    stop the array's backups. Without a record, the one tagged instance is the array's (its
    first set records it). A tagged instance that is not the recorded one counts only when the
    config names it; otherwise the run is refused: the array moved, or someone tagged an
    instance that is not the array's, and only an operator can say which."""
    ids = sorted(c.instance_id for c in tagged)
    if recorded is not None and recorded.instance_id in ids:
        others = [i for i in ids if i != recorded.instance_id]
        if others:
            notes.append(
                f"{', '.join(others)} also carr{'y' if len(others) > 1 else 'ies'} "
                f"{tags.ARRAY}={array}, but {array}'s recorded instance is "
                f"{recorded.instance_id} ({recorded.by}): raidsnap went on with "
                f"{recorded.instance_id}. Remove the tag from the other instance, or, if the "
                f"array moved, run: raidsnap move {array} <instance-id>"
            )
        return recorded.instance_id
    if not tagged:
        raise ArrayNotFoundError(
            f"no running instance is tagged {tags.ARRAY}={array}; tag the instance that holds "
            "the array, or check the array name"
        )
    named = [c for c in tagged if configured.names(c.instance_id, c.tags)]
    if len(tagged) > 1 and len(named) != 1:
        raise ArrayNotFoundError(
            f"several running instances are tagged {tags.ARRAY}={array} ({', '.join(ids)}), "
            f"and none is {array}'s recorded instance"
            + (f" ({recorded.instance_id})" if recorded else "")
            + f"; an array lives on one instance: remove the tag from the others, or run: "
            f"raidsnap move {array} <instance-id>"
        )
    chosen = named[0] if named else tagged[0]
    if recorded is None or named:
        if recorded is not None:
            notes.append(
                f"{array} moved from {recorded.instance_id} to {chosen.instance_id}, which the "
                "configuration names for it"
            )
        return chosen.instance_id
    raise ArrayInstanceChangedError(
        f"{chosen.instance_id} carries {tags.ARRAY}={array}, but {array}'s recorded instance "
        f"is {recorded.instance_id} (since {recorded.since}, {recorded.by}); raidsnap does not "
        "move an array on a tag alone. If the array moved, confirm it: raidsnap move "
        f"{array} {chosen.instance_id}. If it did not, remove the tag from "
        f"{chosen.instance_id}. Nothing was changed"
    )


def mount_point_allowed(
    path: str, array: str, allowed: Sequence[str], recorded: str | None
) -> bool:
    """Whether ``path`` lies under an allowed directory ("<array>" standing for the array's
    name), or is the mount point the array's own set recorded (the backup's record, never a
    tag). Paths are compared normalized."""
    normal = normal_path(path)
    if recorded and normal == normal_path(recorded):
        return True
    for entry in allowed:
        base = normal_path(entry.replace("<array>", array))
        if normal == base or normal.startswith(base.rstrip("/") + "/"):
            return True
    return False


def tag_target(
    array: str,
    target_id: str,
    target_tags: Mapping[str, str],
    recorded: Recorded | None,
    configured: Configured,
    *,
    another_array: bool,
) -> bool:
    """Whether a restore of ``array`` may act on the instance it was given, and must tag it
    with the array (True) or leave its tags alone (False); refuses otherwise.

    Allowed: an instance tagged for this array; the array's recorded instance or one the config
    names as its instance or replacement, untagged (the restore tags it: it becomes the array's
    instance); an instance tagged for a copy of this array, with a name made from the array's
    own (``<array>-drill``, ``<array>-copy``, ...), or the drill instance the config names,
    either tagged with a name that is no array raidsnap knows. Never another
    array's instance, whatever the config or the record says (``another_array``: its tag names
    an array raidsnap knows), never an instance tagged with a name that is not this array's
    (an array found by its tags alone, not yet backed up, is known by nothing else), and never
    an untagged instance nobody named for the array: ``raidsnap:array`` is the mark that lets
    raidsnap's documents run on an instance, and a restore must not put it, or a filesystem,
    where its array has no business."""
    held = tags.held_name(target_tags, array) or None
    if held == array:
        return False
    own = (recorded is not None and recorded.instance_id == target_id) or configured.names(
        target_id, target_tags
    )
    if held is not None:
        _refuse_a_tagged_target(
            array, target_id, held, own=own, copy=target_id in configured.copies,
            another_array=another_array,
        )  # fmt: skip
        return False
    if not own:
        raise _not_the_arrays(
            array,
            target_id,
            f"it carries no {tags.ARRAY} tag, and it is neither {array}'s recorded instance "
            "nor one the configuration names for it",
            f"if it is meant to hold {array}, tag it {tags.ARRAY}={array} first (that tag is "
            "the confirmation of someone allowed to tag instances)",
        )
    return True


def _refuse_a_tagged_target(
    array: str, target_id: str, held: str, *, own: bool, copy: bool, another_array: bool
) -> None:
    """A target tagged with another name than the array's takes only a copy: never when the
    name is another array's, never when it is the array's own instance (backups find that by
    the array's tag), and only with a name made from the array's, or as the drill instance."""
    if another_array:
        raise _not_the_arrays(
            array,
            target_id,
            f"it carries {tags.ARRAY}={held}, another array's",
            "a restore never acts on another array's instance; restore onto an instance of "
            f"{array}'s own, or tag one for a copy ({tags.ARRAY}={array}-copy)",
        )
    if own:
        raise _not_the_arrays(
            array,
            target_id,
            f"it is {array}'s own instance (recorded, or named in the configuration as its "
            f"instance or replacement) but carries {tags.ARRAY}={held}",
            f"remove that tag (or tag it {tags.ARRAY}={array}) and restore again, or the "
            "array would run there without backups",
        )
    if not (copy or is_copy_name(held, array)):
        raise _not_the_arrays(
            array,
            target_id,
            f"it carries {tags.ARRAY}={held}, a name that is not {array}'s",
            "a copy goes onto an instance tagged with a name made from the array's own "
            f"({tags.ARRAY}={array}-copy), or onto its drill instance as the configuration "
            "names it",
        )


def is_copy_name(name: str, array: str) -> bool:
    """A name for a copy of ``array``: the array's own name, a dash, and more."""
    return name.startswith(f"{array}-") and len(name) > len(array) + 1


def _not_the_arrays(array: str, target_id: str, why: str, next_step: str) -> InvalidInputError:
    return InvalidInputError(
        "targetInstanceId",
        f"a restore of {array} may not act on {target_id}: {why}; {next_step}. Nothing was changed",
    )


def moves_home(target_id: str, recorded: Recorded | None, recorded_still_holds: bool) -> bool:
    """Whether a restore that succeeded onto ``target_id`` (not a read-only copy) made it the
    array's instance: there was no record yet, or the recorded instance no longer holds the
    array (not running, or no longer tagged with it: a recovery took the tag off). Onto a
    second instance while the recorded one still holds the array, it restored a copy."""
    if recorded is None:
        return True
    if recorded.instance_id == target_id:
        return False
    return not recorded_still_holds
