"""``raidsnap sets adopt``, against AWS: read an array's snapshots and the table, judge each set
(raidsnap.plan.adoption), and record the ones an operator confirmed.

It runs with the operator's own credentials, not in a function of the stack: only the backup's
functions write the manifest table, because a manifest is what a restore's safety decisions rest
on and a tag is not. Adopting turns tags into manifests, so it is a person's decision, taken
after seeing what would be recorded, and no function of the stack does it. The
operator needs ec2:DescribeSnapshots, dynamodb:Query and dynamodb:PutItem on the table (and
kms:Decrypt/GenerateDataKey through DynamoDB on its key), and sts:GetCallerIdentity, which needs
no permission."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from raidsnap import clients
from raidsnap.aws import manifests, snapshot_sets
from raidsnap.plan.adoption import Group, Review, review


@dataclass(frozen=True)
class Recorded:
    """What ``record`` did: the sets written, and those whose set id someone recorded in the
    meantime (not overwritten)."""

    written: list[str]
    taken_meanwhile: list[str]


def caller() -> tuple[str, str]:
    """This account's id and the caller's ARN (GetCallerIdentity needs no permission)."""
    identity = clients.sts().get_caller_identity()
    return str(identity["Account"]), str(identity["Arn"])


def look(array: str, now: datetime | None = None) -> Review:
    """Every set of the array as its snapshots' tags say it, judged; nothing is written."""
    account, arn = caller()
    when = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    recorded = {m.set_id: m for m in manifests.of_array(array)}
    found = snapshot_sets.tagged_with(array)
    return review(array, found, account, recorded, f"{when} by {arn}")


def record(groups: list[Group]) -> Recorded:
    """Write the manifest of each adoptable group, as a backup writes one, never over a
    manifest the table holds (a conditional write: a backup or another operator may have
    recorded the set id since the look)."""
    written: list[str] = []
    meanwhile: list[str] = []
    for group in groups:
        if not group.adoptable or group.manifest is None:
            continue
        if manifests.adopt(group.manifest) is None:
            written.append(group.set_id)
        else:
            meanwhile.append(group.set_id)
    return Recorded(written, meanwhile)
