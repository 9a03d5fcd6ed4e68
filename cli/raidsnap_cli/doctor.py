"""``raidsnap doctor [ARRAY]``: what raidsnap relies on, checked against the account, one line a
finding: ok, PROBLEM with the fix, or cannot tell (and what would let it tell).

Without ARRAY: whether raidsnap:* tags are protected. With ARRAY, also:
- tag: a running instance carries raidsnap:array=ARRAY, one only, and it is the one raidsnap
  recorded (a tag alone never moves an array: raidsnap.aws.homes);
- agent: that instance's SSM agent is online and at least the version raidsnap's documents
  need (ssm:DescribeInstanceInformation, as a restore's Prepare asks);
- members: the members the newest complete set recorded (found by on-instance discovery, or
  from the volume tags when it could not run) are attached to that instance now;
- instances: every instance id the configuration names for the array exists and is not gone
  (an alarm on a wrong id never fires; a recovery onto it is refused);
- fsr quota: the Region's Fast Snapshot Restore quota has room for the array's members;
- schedule: an EventBridge Scheduler schedule starts its backups, and is enabled.

The checks run with the operator's credentials. Beyond what ``raidsnap sets`` needs, they read:
ec2:DescribeInstances, ec2:DescribeVolumes, ec2:DescribeFastSnapshotRestores,
ssm:DescribeInstanceInformation, servicequotas:GetServiceQuota, scheduler:ListSchedules,
scheduler:GetSchedule, states:DescribeStateMachine and lambda:GetFunctionConfiguration (the
configuration, as the restore's Prepare function has it), dynamodb:GetItem on the lock table,
iam:ListPolicies. A check whose call is denied says "cannot tell" and names the action.

Exit code 0 when nothing of ARRAY is a problem (tag protection is advice), 1 otherwise."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import boto3
import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.text import Text

from raidsnap import tags
from raidsnap.aws import fsr, homes, instances, snapshot_sets
from raidsnap.plan import fsr as plan_fsr

from . import schedules, trust
from .backends import Backend, BackendError
from .common import (
    EXIT_FAILED,
    EmulationFlag,
    Profile,
    Region,
    SeedBackups,
    Stack,
    consoles,
    opened,
    target_of,
)
from .plan import PlanUnavailableError, prepare_settings
from .views import aws_message

OK, PROBLEM, UNKNOWN = "ok", "PROBLEM", "cannot tell"
STYLE = {OK: "green", PROBLEM: "red", UNKNOWN: "yellow"}


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: str
    text: str
    fix: str = ""

    def line(self) -> str:
        """``PROBLEM     agent      the SSM agent of i-... is not online... Fix: ...``"""
        fix = f". Fix: {self.fix}" if self.fix else ""
        return f"{self.verdict:<11} {self.check:<10} {self.text}{fix}"


@dataclass
class Seen:
    """What one check learned that the next one needs."""

    instance: instances.ArrayInstance | None = None
    members: int = 0


def _tagged(array: str) -> list[dict[str, Any]]:
    ec2: Any = boto3.client("ec2")
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:{tags.ARRAY}", "Values": [array]}]
    )
    return [
        i
        for page in pages
        for r in page["Reservations"]
        for i in r["Instances"]
        if i["State"]["Name"] != "terminated"
    ]


def check_tag(backend: Backend, array: str, seen: Seen) -> Finding:
    found = _tagged(array)
    running = sorted(i["InstanceId"] for i in found if i["State"]["Name"] == "running")
    idle = sorted(
        f"{i['InstanceId']} ({i['State']['Name']})" for i in found if i["InstanceId"] not in running
    )
    if not running:
        return Finding(
            "tag",
            PROBLEM,
            f"no running instance carries {tags.ARRAY}={array}"
            + (f" ({', '.join(idle)} does, not running)" if idle else ""),
            "start it"
            if idle
            else f"tag the array's instance: aws ec2 create-tags --resources <instance id> "
            f"--tags Key={tags.ARRAY},Value={array}",
        )
    home = homes.recorded(backend.lock_table(), array)
    chosen = home.instance_id if home is not None and home.instance_id in running else running[0]
    seen.instance = instances.describe_instance(chosen)
    if len(running) > 1:
        return Finding(
            "tag",
            PROBLEM,
            f"{len(running)} running instances carry {tags.ARRAY}={array}: {', '.join(running)}; "
            f"backups go to the recorded one ({home.instance_id if home else 'none recorded'})",
            f"take the tag off the instances that do not hold {array}",
        )
    if home is not None and home.instance_id != chosen:
        return Finding(
            "tag",
            PROBLEM,
            f"{chosen} carries {tags.ARRAY}={array}, but raidsnap records {array} on "
            f"{home.instance_id} ({home.by}): its backups are refused (ArrayInstanceChanged)",
            f"if {array} lives on {chosen} now: raidsnap move {array} {chosen}",
        )
    where = seen.instance.availability_zone
    return Finding("tag", OK, f"{chosen} carries {tags.ARRAY}={array} and runs in {where}")


def check_agent(backend: Backend, array: str, seen: Seen) -> Finding:
    del backend, array
    if seen.instance is None:
        return Finding("agent", UNKNOWN, "no instance of the array to ask about")
    agent = instances.agent(seen.instance.instance_id)
    if not agent.online:
        return Finding(
            "agent",
            PROBLEM,
            f"the SSM agent of {agent.instance_id} is not online: backups take members from the "
            "volume tags, restores and recoveries cannot assemble there",
            "start the agent (systemctl start amazon-ssm-agent), and give the instance a profile "
            "with AmazonSSMManagedInstanceCore",
        )
    if agent.too_old:
        return Finding(
            "agent",
            PROBLEM,
            f"the SSM agent of {agent.instance_id} is version {agent.version or 'unknown'}, older "
            f"than {instances.ENV_VAR_MIN_AGENT_VERSION}: raidsnap's documents cannot run there",
            f"update it: aws ssm send-command --document-name AWS-UpdateSSMAgent "
            f"--instance-ids {agent.instance_id}",
        )
    return Finding(
        "agent",
        OK,
        f"the SSM agent of {agent.instance_id} is online, version {agent.version} (at least "
        f"{instances.ENV_VAR_MIN_AGENT_VERSION})",
    )


def check_members(backend: Backend, array: str, seen: Seen) -> Finding:
    backend.read_sets()
    every = snapshot_sets.list_sets(array)
    newest = snapshot_sets.latest_restorable(every)
    if newest is None or newest.manifest is None:
        return Finding(
            "members",
            PROBLEM,
            f"{array} has no complete set, so no members are recorded",
            f"take one: raidsnap backup {array}",
        )
    recorded = [v for _, v in sorted(newest.manifest.volumes.items())]
    seen.members = len(recorded)
    how = (
        "found by on-instance discovery"
        if newest.recorded_md
        else ("taken from the volume tags: discovery could not run then")
    )
    if seen.instance is None:
        return Finding(
            "members",
            UNKNOWN,
            f"set {newest.set_id} recorded {len(recorded)} ({how}); no instance to compare with",
        )
    attached = {a.volume_id for a in seen.instance.attachments}
    gone = [v for v in recorded if v not in attached]
    if gone:
        return Finding(
            "members",
            PROBLEM,
            f"set {newest.set_id} recorded {len(recorded)} members ({how}); {', '.join(gone)} "
            f"{'is' if len(gone) == 1 else 'are'} no longer attached to "
            f"{seen.instance.instance_id}",
            f"if the array changed on purpose, take a set of it as it is: raidsnap backup {array}",
        )
    if not newest.recorded_md:
        return Finding(
            "members",
            PROBLEM,
            f"set {newest.set_id} recorded {len(recorded)} members, {how}",
            "bring the SSM agent online, then take a backup",
        )
    return Finding(
        "members",
        OK,
        f"{len(recorded)} members recorded on set {newest.set_id} ({how}), all attached to "
        f"{seen.instance.instance_id}: {', '.join(recorded)}",
    )


def check_instances(backend: Backend, array: str, seen: Seen) -> Finding:
    del seen
    settings = prepare_settings(backend)
    named = json.loads(settings.get("ARRAY_INSTANCES") or "{}").get(array) or {}
    ids = sorted({*named.get("instances", []), *named.get("copies", [])})
    if not ids:
        return Finding(
            "instances",
            OK,
            f"the configuration names no instance for {array} (it is found by its tag alone; "
            "no automated recovery)",
        )
    problems = []
    for instance_id in ids:
        state, _ = instances.instance_facts(instance_id)
        if state in ("unknown", "terminated"):
            what = "does not exist in this Region" if state == "unknown" else "is terminated"
            problems.append(f"{instance_id} {what}")
    if problems:
        return Finding(
            "instances",
            PROBLEM,
            f"the configuration names for {array}: {'; '.join(problems)}: an alarm on it never "
            "fires and a recovery onto it is refused",
            f"correct the instance ids under arrays.{array} in the configuration and deploy",
        )
    return Finding(
        "instances", OK, f"the configuration names {', '.join(ids)} for {array}: all exist"
    )


def check_fsr_quota(backend: Backend, array: str, seen: Seen) -> Finding:
    del backend, array
    limit = fsr.region_limit()
    used = len(fsr.active_in_region())
    room = max(0, limit.snapshots - used)
    told = f"{used} of {limit.snapshots} snapshots have FSR on in this Region"
    if limit.assumed_because:
        return Finding(
            "fsr quota",
            UNKNOWN,
            f"{told}, by the documented default: the quota could not be read "
            f"({limit.assumed_because})",
            "allow servicequotas:GetServiceQuota",
        )
    if seen.members and room < seen.members:
        return Finding(
            "fsr quota",
            PROBLEM,
            f"{told}: room for {room}, the array has {seen.members} members, so a restore "
            "cannot fast restore them all (auto then chooses another way)",
            f"request an increase of Service Quotas {plan_fsr.QUOTA_SERVICE_CODE} "
            f"{plan_fsr.QUOTA_CODE}, or turn FSR off where it is not needed",
        )
    return Finding("fsr quota", OK, f"{told}: room for {room}")


def check_schedule(backend: Backend, array: str, seen: Seen) -> Finding:
    del seen
    found = schedules.of_array(backend.arn("backup"), array)
    if not found:
        return Finding(
            "schedule",
            PROBLEM,
            f"no schedule starts backups of {array}: it is backed up only by hand",
            f"add arrays.{array}.schedule to the configuration and deploy",
        )
    off = [s for s in found if s.get("State") != "ENABLED"]
    said = ", ".join(f"{s['Name']} ({s.get('ScheduleExpression')})" for s in found)
    if off:
        return Finding(
            "schedule",
            PROBLEM,
            f"backups of {array}: {said}; {', '.join(s['Name'] for s in off)} is DISABLED",
            "enable it in the EventBridge Scheduler console (Schedules, select it, Enable)",
        )
    return Finding("schedule", OK, f"backups of {array}: {said}, enabled")


CHECKS: tuple[tuple[str, Callable[[Backend, str, Seen], Finding], str], ...] = (
    ("tag", check_tag, "ec2:DescribeInstances, dynamodb:GetItem"),
    ("agent", check_agent, "ssm:DescribeInstanceInformation"),
    ("members", check_members, "ec2:DescribeSnapshots, dynamodb:Query"),
    ("instances", check_instances, "states:DescribeStateMachine, lambda:GetFunctionConfiguration"),
    ("fsr quota", check_fsr_quota, "ec2:DescribeFastSnapshotRestores"),
    ("schedule", check_schedule, "scheduler:ListSchedules, scheduler:GetSchedule"),
)


def array_findings(backend: Backend, array: str) -> list[Finding]:
    seen = Seen()
    out = []
    backend.read_sets()
    for name, check, needs in CHECKS:
        try:
            out.append(check(backend, array, seen))
        except (ClientError, BotoCoreError, BackendError, PlanUnavailableError) as error:
            why = (
                aws_message(error) if isinstance(error, ClientError | BotoCoreError) else str(error)
            )
            out.append(Finding(name, UNKNOWN, f"{why} (this check needs {needs})"))
    return out


def doctor(
    *,
    array: Annotated[
        str | None,
        typer.Argument(help="An array: check what its backups, restores and recovery rely on."),
    ] = None,
    emulation: EmulationFlag = False,
    seed_backups: SeedBackups = 0,
    region: Region = None,
    profile: Profile = None,
    stack: Stack = "raidsnap",
) -> None:
    """Check what raidsnap relies on in this account: one line a finding, with the fix.

    Whether raidsnap:* tags are protected; with ARRAY also its instance's tag, its SSM agent,
    its members, the instances the configuration names, the FSR quota and its backup schedule.
    Exit code 1 when a check of ARRAY found a problem."""
    target = target_of(emulation, seed_backups, region, profile, stack)
    out, err = consoles()
    with opened(target, err) as backend:
        try:
            ok, line = trust.protection_line(boto3.client("iam"), stack)
        except BotoCoreError as error:
            ok, line = False, f"tag protection: cannot tell ({error})"
        # One finding, one line, however long: a script can grep it, a person reads it whole.
        out.print(Text(line, style="green" if ok else "yellow"), soft_wrap=True)
        findings = array_findings(backend, array) if array else []
        for finding in findings:
            out.print(Text(finding.line(), style=STYLE[finding.verdict]), soft_wrap=True)
    raise typer.Exit(EXIT_FAILED if any(f.verdict == PROBLEM for f in findings) else 0)
