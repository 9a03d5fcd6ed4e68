"""Freezing the filesystems of several arrays around one CreateSnapshots call (takeWith with
fsfreeze, or an array's hooks): one freeze command per mount point, one after the other (the
array with hooks first, then in array name order), each with its own guard on the instance;
then one thaw per mount point in reverse order.

The freeze and thaw documents keep one mount point each, so each array's freeze has the guard
a single array's has: if the workflow dies, every frozen mount point is thawed by its own guard
within MaxFreezeSeconds of its own freeze. The guards keep the run's order: each later freeze's
guard fires before the first one's (freeze.sh caps its deadline GROUP_GAP before it, and refuses
with FreezeWindowClosed when too little is left), and a post hook waits on the instance
until the run's other freezes ended (thaw.sh and the guard: lib/freeze_guard.sh, wait_group), so
the application it lets go never finds a filesystem of its run still frozen, even after a thaw
that failed. A freeze that fails stops the run before the next one is sent, and the failure path
thaws every mount point the run may have frozen."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from raidsnap.hooks import SetConsistency
from raidsnap.workflows.backup import times
from raidsnap.workflows.backup.contracts import Command, Members

# A later freeze of one run ends this long before the first one: freeze.sh caps its guard's
# deadline so (lib/freeze_guard.sh, group_gap_seconds), and refuses a freeze that would have less
# than MIN_WINDOW left (FreezeWindowClosed).
GROUP_GAP = timedelta(seconds=2)
MIN_WINDOW = timedelta(seconds=10)
# How long the workflow waits before it looks at a command it sent (WaitForFreeze, WaitForThaw).
COMMAND_POLL_SECONDS = 2
# The time between two freezes of a run that a group's room is counted with: the workflow's wait
# before it looks at the freeze it sent, then the next freeze sent (the Task's Lambda and
# SendCommand) and picked up by the agent, allowed a second (an allowance, not a measured figure).
FREEZE_STEP = timedelta(seconds=COMMAND_POLL_SECONDS + 1)


def seconds_needed(arrays: int) -> int:
    """The least MaxFreezeSeconds with which ``arrays`` freezes of one run can all be made: each
    comes FREEZE_STEP after the one before, and the last must still have MIN_WINDOW before the
    first one's deadline less GROUP_GAP. lib/take-with.ts computes the same at synth."""
    spent = (arrays - 1) * FREEZE_STEP + GROUP_GAP + MIN_WINDOW
    return int(spent.total_seconds())


@dataclass(frozen=True)
class Target:
    """One array's mount point, and whether another array comes after it."""

    array: str
    mount_point: str
    more: bool


def mount_points(members: Members, main: str) -> dict[str, str]:
    """Array -> mount point, for the plan's array (``main``) and every array taken with it."""
    found = {main: members.mount_point()}
    found |= {p.array: p.mount_point() for p in members.together}
    return found


def next_target(
    members: Members, main: str, previous: Command | None, *, reverse: bool = False
) -> Target | None:
    """The array whose freeze (or, ``reverse``, thaw) comes after ``previous`` (None: the
    first); None when the run freezes no several arrays."""
    order = list(reversed(members.freezes)) if reverse else list(members.freezes)
    if not order:
        return None
    index = 0
    if previous is not None and previous.array in order:
        index = order.index(previous.array) + 1
    array = order[index]
    return Target(array, mount_points(members, main)[array], index < len(order) - 1)


def carried(command: Command, previous: Command | None, target: Target) -> Command:
    """``command`` (for ``target``) carrying the sequence on from ``previous``."""
    earlier = list(previous.earlier) if previous is not None and previous.array else []
    if previous is not None and previous.array:
        earlier.append(previous.model_copy(update={"earlier": []}))
    return command.model_copy(
        update={"array": target.array, "earlier": earlier, "more": target.more}
    )


def commands(last: Command | None) -> list[Command]:
    """Every command of the sequence ending with ``last``, in the order they were sent."""
    if last is None:
        return []
    return [*last.earlier, last] if last.array else [last]


def command_of(freeze: Command | None, array: str) -> Command | None:
    """The array's freeze command, if it succeeded."""
    for command in commands(freeze):
        if command.array == array and command.status == "success":
            return command
    return None


def got(
    asked: str | None, command: Command | None, holds: bool
) -> tuple[SetConsistency, datetime | None]:
    """What the array's set got, never more than its freeze command says, and until when its
    guard certainly held (None: no freeze): ``application`` only where the pre hook ran and
    holds the application (``holds``), ``fsfreeze`` only where the filesystem was frozen."""
    if asked not in ("fsfreeze", "application") or command is None:
        return "crash", None
    said = command.result if isinstance(command.result, dict) else {}
    frozen = said.get("frozen") is True
    label: SetConsistency = "fsfreeze" if frozen else "crash"
    if asked == "application" and said.get("preSnapshot") == "ok" and holds:
        label = "application"
    if label == "crash" or not command.frozenUntil:
        return label, None
    return label, times.parse_time(command.frozenUntil)


def to_thaw_after_failure(
    members: Members, main: str, freeze: Command | None, thaw: Command | None
) -> list[Target]:
    """The mount points a failed run thaws, in reverse freeze order: every array the run was to
    freeze once any freeze was sent (a freeze whose answer was lost may still have frozen; a
    thaw of a mount point this run did not freeze changes nothing), but those whose thaw
    succeeded."""
    if freeze is None or freeze.status == "none" or not members.freezes:
        return []
    thawed = {c.array for c in commands(thaw) if c.status == "success"}
    where = mount_points(members, main)
    order = [a for a in reversed(members.freezes) if a not in thawed]
    return [Target(a, where[a], i < len(order) - 1) for i, a in enumerate(order)]
