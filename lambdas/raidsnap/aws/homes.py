"""Which instance an array lives on, as raidsnap recorded it.

The tag ``raidsnap:array=A`` on a running instance says where A lives, but anyone allowed to
tag an instance can write it: on their own instance while A's is stopped, raidsnap would back
up their volumes as A, and ``latest`` (an automated recovery included) would restore them in
A's place. So a tag alone never moves an array. raidsnap keeps its own record of where A lives,
from two sources only raidsnap writes:

- the moves raidsnap made or an operator confirmed: an item ``home#A`` in the restore lock
  table, written by a restore or recovery that made its target A's instance, by a backup that
  found A on an instance the configuration names for it, and by ``raidsnap move A <instance>``;
- where there is no such item (the lock table is the stack's, and goes with it): the instance
  the newest set was taken from (the manifest's ``instanceId``, written by the backup).

An array with neither (never backed up since sets recorded their instance) has none yet: its
first backup records it. No time is compared: every run that moves the array writes the item.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from raidsnap import clients, environment, tags
from raidsnap.aws import instances, manifests
from raidsnap.aws.instances import ArrayInstance
from raidsnap.observability import count, logger
from raidsnap.plan import targets as plan_targets

HOME_PREFIX = "home#"


@dataclass(frozen=True)
class Home:
    instance_id: str
    since: datetime
    # What recorded it: "set <id>", "restore <execution ARN>", "operator <principal ARN>".
    by: str


def _key(array: str) -> dict[str, dict[str, str]]:
    return {"array": {"S": HOME_PREFIX + array}}


def moved(table: str, array: str) -> Home | None:
    """The last move raidsnap made or an operator confirmed, if any."""
    item = (
        clients.dynamodb()
        .get_item(TableName=table, Key=_key(array), ConsistentRead=True)
        .get("Item")
    )
    if not item:
        return None
    return Home(
        instance_id=item["instanceId"]["S"],
        since=datetime.fromisoformat(item["since"]["S"]),
        by=item.get("by", {}).get("S", ""),
    )


def record_move(table: str, array: str, instance_id: str, by: str) -> Home:
    """Record that ``array`` lives on ``instance_id`` from now on."""
    home = Home(instance_id=instance_id, since=datetime.now(UTC), by=by)
    clients.dynamodb().put_item(
        TableName=table,
        Item={
            **_key(array),
            "instanceId": {"S": instance_id},
            "since": {"S": home.since.isoformat()},
            "by": {"S": by},
        },
    )
    return home


def last_set(array: str) -> Home | None:
    """The instance of the newest set that recorded one."""
    taken = [
        m
        for m in manifests.of_array(array)
        if m.instance_id and m.started is not None and m.status == "taken"
    ]
    if not taken:
        return None
    newest = max(taken, key=lambda m: m.started or datetime.min.replace(tzinfo=UTC))
    assert newest.started is not None
    return Home(instance_id=newest.instance_id, since=newest.started, by=f"set {newest.set_id}")


def recorded(table: str | None, array: str) -> Home | None:
    """The array's recorded instance: its last move, else its newest set's."""
    return (moved(table, array) if table else None) or last_set(array)


def configured(array: str) -> plan_targets.Configured:
    """What the config names for the array (nothing for an array found by tags only)."""
    entry = environment.array_instances().get(array, {})

    def ids(key: str) -> frozenset[str]:
        raw = entry.get(key)
        return frozenset(str(i) for i in raw) if isinstance(raw, list) else frozenset()

    return plan_targets.Configured(
        ids("instances"), str(entry.get("autoScalingGroup") or ""), ids("copies")
    )


def as_recorded(home: Home | None) -> plan_targets.Recorded | None:
    if home is None:
        return None
    since = home.since.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return plan_targets.Recorded(home.instance_id, since, home.by)


def array_instance(
    table: str | None, array: str, notes: list[str], *, record: bool = True
) -> ArrayInstance:
    """The array's instance: the running instance tagged with it that raidsnap recorded (or the
    config names); refuses a tag that would move the array on its own (ArrayInstanceChanged).
    Other instances tagged with the array are named in ``notes`` and counted in the metric
    ArrayTagConflicts, whose alarm notifies. ``record`` False: a question only (a restore's
    plan shown before it starts), so the move the configuration implies is not written."""
    tagged = instances.tagged_running(array)
    candidates = [plan_targets.Candidate(i.instance_id, t) for i, t in tagged]
    before = len(notes)
    home = recorded(table, array)
    chosen = plan_targets.choose_array_instance(
        array, candidates, as_recorded(home), configured(array), notes
    )
    if record and table and home is not None and home.instance_id != chosen:
        record_move(table, array, chosen, "configuration")
    _warn_unusable_replacements(array, chosen, notes)
    if len(tagged) > 1 and len(notes) > before:
        logger.warning("other instances carry the array's tag", extra={"note": notes[-1]})
        count("ArrayTagConflicts")
    return next(i for i, _ in tagged if i.instance_id == chosen)


def known_array(table: str | None, name: str) -> bool:
    """Whether ``name`` is an array raidsnap knows: configured, with a set, or a recorded move."""
    if name in environment.array_instances() or manifests.of_array(name):
        return True
    return bool(table) and moved(str(table), name) is not None


def _warn_unusable_replacements(array: str, chosen: str, notes: list[str]) -> None:
    """A configured instance or replacement that carries another name than the array's would
    refuse its recovery (plan.targets.tag_target): say so at every backup, and alarm, long
    before the recovery that needs it."""
    for instance_id in sorted(configured(array).instances - {chosen}):
        state, found = instances.instance_facts(instance_id)
        held = tags.held_name(found, array) or None
        if state in instances.GONE_STATES or held in (None, array):
            continue
        notes.append(
            f"{instance_id}, which the configuration names for {array}'s recovery, carries "
            f"{tags.ARRAY}={held}: a recovery onto it would be refused. Remove that tag"
        )
        count("ArrayTagConflicts")
