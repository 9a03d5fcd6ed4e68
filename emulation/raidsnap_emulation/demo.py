"""raidsnap's main job, end to end on the local emulation, printed for a person to follow:
an array is backed up, loses a member, and is restored from its newest complete set.

Run with `make demo`. Nothing here talks to AWS: moto and the double stand in for EC2 and SSM,
and time is virtual (Wait states and snapshot progress take no real time)."""

from __future__ import annotations

import logging
import sys
import time
import warnings
from collections.abc import Callable
from datetime import datetime
from typing import Any

import boto3
from rich.console import Console
from rich.table import Table

from raidsnap.observability import logger
from raidsnap.text import input_words
from raidsnap_emulation.demo_timeline import timeline
from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation, Execution
from raidsnap_emulation.world import (
    ArrayFixture,
    alarm_event,
    configure_recovery,
    create_topics,
    launch_instance,
    make_array,
    sets_of,
)

# A summary row: the run, and the run it started that went on after it (a recovery's restore).
Row = tuple[str, Execution, Execution | None]

# Lines are not cut to the width (the terminal wraps them): a line stays one line for grep and
# for a copy; the width lays out the rule and the summary table.
console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)


def _timeline(emu: Emulation, since: int, start: datetime) -> None:
    assert emu.router is not None
    for line in timeline(emu.router.invocations[since:], start):
        console.print(line)


def _minutes(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60} min {whole % 60} s"


def _follow(
    emu: Emulation,
    title: str,
    start: Callable[[], str],
    outlived_by: Callable[[Execution], list[Execution]] | None = None,
) -> Execution:
    """Start a run (``start`` returns its execution ARN), wait for it (and for the runs it
    started that go on after it, ``outlived_by``), print the timeline of them all."""
    assert emu.router is not None
    console.print(f"\n[bold]▶ {title}[/bold]")
    mark, begin, real = len(emu.router.invocations), emu.clock.now(), time.monotonic()
    run = emu.wait(start())
    later = outlived_by(run) if outlived_by is not None else []
    _timeline(emu, mark, begin)
    ended = run.ended_at or emu.clock.now()
    colour = "green" if run.status == "SUCCEEDED" else "red"
    console.print(
        f"   [{colour}]{run.status}[/{colour}] in {run.transitions} state transitions, "
        f"{_minutes((ended - begin).total_seconds())} of emulated time, "
        f"{time.monotonic() - real:.1f} s real"
    )
    for other in later:
        went_on = ((other.ended_at or emu.clock.now()) - begin).total_seconds()
        console.print(
            f"   {other.arn.rsplit(':', 1)[-1]} went on to +{int(went_on) // 60:02d}:"
            f"{int(went_on) % 60:02d} ({other.status}, {other.transitions} state transitions "
            "more)"
        )
    if run.status != "SUCCEEDED":
        console.print(f"   error [bold]{run.error}[/bold]: {run.cause}")
    return run


def _run(emu: Emulation, workflow: str, payload: dict[str, Any], name: str) -> Execution:
    return _follow(
        emu,
        f"{workflow} {input_words(payload)}  [dim](execution {name})[/dim]",
        lambda: emu.start(workflow, payload, name=name),
    )


def _deliver_alarm(emu: Emulation, fx: ArrayFixture) -> tuple[Execution, Execution]:
    """The attached-EBS status check fails; CloudWatch raises the alarm; EventBridge delivers
    its state change to the recovery trigger (twice: EventBridge delivers at least once)."""
    event = alarm_event(fx.instance_id)
    console.print(
        f"   CloudWatch: StatusCheckFailed_AttachedEBS of {fx.instance_id} → alarm "
        f"{event['detail']['alarmName']} in ALARM; EventBridge delivers the state change"
    )
    started: dict[str, Any] = {}

    def start() -> str:
        first = emu.invoke("recovery_start", event)
        started.update(first.result or {})
        return str(started["executionArn"])

    nested = emu.state_machines["restore"].replace(":stateMachine:", ":execution:", 1)

    def its_restore(recovery: Execution) -> list[Execution]:
        return [emu.wait(f"{nested}:{recovery.arn.rsplit(':', 1)[1]}-restore")]

    console.print(
        "   the recovery ends when its restore reports the array mounted; the restore's "
        "prewarm goes on"
    )
    run = _follow(emu, "automated recovery (recovery workflow, restore nested)", start, its_restore)
    (restore,) = its_restore(run)
    run.nested_transitions = restore.transitions
    again = emu.invoke("recovery_start", event)
    result = again.result or {}
    console.print(
        f"   the same event delivered again: started={result.get('started')} "
        f"[dim]({result.get('reason', 'same execution name')})[/dim]"
    )
    return run, restore


def _world(emu: Emulation) -> tuple[ArrayFixture, str]:
    fx = make_array(emu.hosts, "db1", 3, size_gib=32, unrelated=1)
    console.print(
        f"[bold]The array[/bold]: instance {fx.instance_id} in {fx.availability_zone}, tagged "
        f"raidsnap:array=db1\n   md0 = RAID 0 of 3 x 8 GiB gp3 (16,000 IOPS, 1,000 MiB/s each), "
        f"xfs at {fx.mount_point}\n   members {', '.join(fx.member_ids)}\n"
        f"   also attached: boot {fx.boot_volume_id} and scratch {fx.other_volume_ids[0]} "
        "(never snapshotted)"
    )
    drill_host = launch_instance("db1-drill", fx.availability_zone, tag_array=False)
    boto3.client("ec2").create_tags(
        Resources=[drill_host], Tags=[{"Key": "raidsnap:array", "Value": "db1-drill"}]
    )
    create_topics(emu)
    configure_recovery(emu, "db1", instanceId=fx.instance_id, mode="replace")
    console.print(
        f"   recovery configured: the instance's attached-EBS alarm restores in place; "
        f"drills go to {drill_host}"
    )
    return fx, drill_host


def _lose_member(emu: Emulation, fx: ArrayFixture) -> str:
    lost = fx.member_ids[1]
    console.print(
        f"\n[bold red]✗ failure[/bold red]: member {lost} is lost; "
        "RAID 0 has no redundancy, md0 is gone"
    )
    ec2 = boto3.client("ec2")
    ec2.detach_volume(VolumeId=lost, Force=True)
    emu.clock.advance(emu.double.detach_seconds + 1)
    emu.hosts.lose_member(fx.instance_id, lost)
    return lost


def _prewarm_fails(emu: Emulation, fx: ArrayFixture) -> Execution:
    """A restore whose prewarm fails after the array is assembled and mounted: the array is the
    user's by then, so the run ends with a warning, and nothing is detached or deleted."""
    console.print(
        "\n[bold red]✗ failure[/bold red]: during the next restore's prewarm, reading a member "
        "fails (an I/O error, the agent killed the reader)"
    )
    emu.hosts.fail_next(
        "prewarm",
        CommandOutcome(
            status="Failed",
            stdout='{"ok":false,"error":"PrewarmFailed","message":"reading a member failed"}',
            stderr="raidsnap: PrewarmFailed: reading a member failed",
            exit_code=1,
            duration_seconds=600,
        ),
    )
    run = _run(
        emu,
        "restore",
        {"array": "db1", "mode": "replace", "initialization": "prewarm"},
        "restore-prewarm-fails",
    )
    out = run.output if isinstance(run.output, dict) else {}
    for warning in out.get("warnings") or []:
        console.print(f"   [yellow]warning[/yellow]: {warning}")
    md = emu.hosts.state(fx.instance_id).arrays.get(str(out.get("mdDevice") or "/dev/md0"))
    if md:
        console.print(
            f"   on the instance: {md.device} still assembled from {', '.join(md.members)}, "
            f"mounted at {md.mount_point}: the new volumes were neither detached nor deleted"
        )
    return run


def _result(run: Execution, went_on: Execution | None) -> str:
    """The run's status, and what a SUCCEEDED hides: a warning of its own restore, or of the
    restore it started that went on after it (a recovery's prewarm)."""
    said = run.status
    for source, whose in ((run, ""), (went_on, " (its restore)")):
        out = source.output if source is not None and isinstance(source.output, dict) else {}
        prewarm = out.get("prewarm") or {}
        warned = len(out.get("warnings") or [])
        if prewarm.get("status") == "failed":
            said += f", prewarm failed{whose}"
        elif warned:
            said += f", {warned} warning{'s' if warned > 1 else ''}{whose}"
    return said


def _detail(run: Execution, out: dict[str, Any]) -> str:
    if run.error:
        return str(run.error)
    if "verification" in out:
        v = out["verification"]
        return (
            f"{v.get('members')} members verified read-only, "
            f"{len(out.get('deletedVolumeIds', []))} drill volumes removed"
        )
    if "snapshotIds" in out:
        return f"{len(out['snapshotIds'])} snapshots"
    if "volumeIds" in out:
        return f"{len(out['volumeIds'])} volumes → {out.get('mdDevice')} at {out.get('mountPoint')}"
    return ""


def _summary(rows: list[Row]) -> None:
    table = Table(title="summary", title_justify="left")
    for column in ("run", "result", "transitions", "set", "detail"):
        table.add_column(column, no_wrap=column != "detail")
    for label, run, went_on in rows:
        out = run.output if isinstance(run.output, dict) else {}
        if isinstance(out.get("restore"), dict):  # a recovery reports its nested restore
            out = {**out["restore"], "trigger": out.get("trigger")}
        result = _result(run, went_on)
        colour = (
            "green" if result == "SUCCEEDED" else "yellow" if run.status == "SUCCEEDED" else "red"
        )
        transitions = str(run.transitions)
        if run.nested_transitions:
            transitions += f" + {run.nested_transitions}"
        table.add_row(
            label,
            f"[{colour}]{result}[/{colour}]",
            transitions,
            str(out.get("setId", "")),
            _detail(run, out),
        )
    console.print()
    console.print(table)


def main() -> int:
    # The executor logs evaluation details (an IsPresent test on a missing path) as errors;
    # they are not failures and would hide the timeline.
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    # Functions keep their warnings and errors; their info lines would bury the timeline.
    logger.setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    console.rule("[bold]raidsnap demo[/bold]: local AWS emulation, virtual time")
    real = time.monotonic()
    rows: list[Row] = []
    with Emulation() as emu:
        fx, drill_host = _world(emu)
        backup = _run(emu, "backup", {"array": "db1"}, "nightly-backup")
        rows.append(("backup", backup, None))
        if backup.status == "SUCCEEDED":
            console.print(f"   snapshot sets of db1 now: {', '.join(sets_of('db1'))}")
            _lose_member(emu, fx)
            recovery, its_restore = _deliver_alarm(emu, fx)
            rows.append(("automated recovery", recovery, its_restore))
            if recovery.status == "SUCCEEDED":
                state = emu.hosts.state(fx.instance_id)
                md = state.arrays.get("/dev/md0")
                if md:
                    console.print(
                        f"   on the instance: {md.device} assembled from {', '.join(md.members)}, "
                        f"mounted at {md.mount_point}"
                    )
                console.print(f"   mdadm.conf: {'; '.join(state.mdadm_conf.values())}")
                console.print(f"   fstab: {'; '.join(state.fstab.values())}")
            drill = _run(
                emu, "drill", {"array": "db1", "targetInstanceId": drill_host}, "weekly-drill"
            )
            rows.append(("drill", drill, None))
            rows.append(("restore, prewarm fails", _prewarm_fails(emu, fx), None))
    _summary(rows)
    console.print(f"[dim]{time.monotonic() - real:.0f} s real in all[/dim]")
    return 0 if all(run.status == "SUCCEEDED" for _, run, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
