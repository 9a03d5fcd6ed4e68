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
from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation, Execution, Invocation
from raidsnap_emulation.world import (
    ArrayFixture,
    alarm_event,
    configure_recovery,
    create_topics,
    launch_instance,
    make_array,
    sets_of,
)

console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
Narrator = Callable[[dict[str, Any]], str]


def _short(items: list[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _prepare(r: dict[str, Any]) -> str:
    d = r.get("discovery", {})
    how = "discovery started on the instance" if d.get("status") == "pending" else d.get("reason")
    return f"array instance {r['instanceId']} in {r['availabilityZone']}; {how}"


def _members(r: dict[str, Any]) -> str:
    d = r.get("discovery", {})
    if d.get("status") == "pending":
        return "discover document still running"
    md = r.get("md") or {}
    facts = (
        f"md {md.get('level', '?')} {md.get('uuid', '?')}, "
        f"{md.get('fsType', '?')} at {md.get('mountPoint', '?')}"
    )
    return f"{len(r['members'])} members from {d.get('source')}: {facts}"


def _snapshot(r: dict[str, Any]) -> str:
    return f"one CreateSnapshots call: set {r['setId']} = {_short(r['ids'])}"


def _check(r: dict[str, Any]) -> str:
    if r["status"] == "completed":
        return "every snapshot completed"
    return f"slowest snapshot at {r.get('progress', 0)}%; next look in {r['waitSeconds']} s"


def _retention(r: dict[str, Any]) -> str:
    ret = r["output"]["retention"]
    return f"retention keeps {len(ret['keptSets'])} set(s), deleted {len(ret['deletedSets'])}"


def _poll(r: dict[str, Any]) -> str:
    return f"{r.get('document')}: {r.get('status')}"


def _failed(r: dict[str, Any]) -> str:
    return f"{r.get('error')}: {r.get('cause')}"


def _restore_prepare(r: dict[str, Any]) -> str:
    init = r["initialization"]
    chosen = "" if init["used"] == init["requested"] else f" (chose {init['used']})"
    return (
        f"set {r['setId']} ({len(r['members'])} members) onto {r['targetInstanceId']} in "
        f"{r['availabilityZone']}; {r['mode']} mode, initialization {init['requested']}"
        f"{chosen}; lock taken"
    )


def _restore_fsr(f: dict[str, Any]) -> str:
    if f["status"] == "ready":
        return "Fast Snapshot Restore usable for every snapshot: create the volumes"
    if f["status"] == "pending" and not f.get("seen"):
        return f"enabled FSR for {len(f['ours'])} snapshots in the target's AZ only"
    if f["status"] == "pending":
        states = sorted({v[0] for v in f["seen"].values()})
        return f"FSR {', '.join(states)}; next look in {f['waitSeconds']} s"
    return f"FSR: {f['status']} ({'; '.join(f.get('notes', [])[-1:])})"


def _restore_create(v: dict[str, Any]) -> str:
    ids = v["ids"]
    return f"one step asked for {len(ids)} volumes (a ClientToken per member): {_short(ids)}"


def _restore_check(v: dict[str, Any]) -> str:
    done = "; FSR disabled again" if v.get("fsrDisabled") else ""
    return f"{len(v['ids'])} volumes {v['status']} (one DescribeVolumes call){done}"


def _restore_old(old: dict[str, Any]) -> str:
    if old["status"] == "detached":
        kept = _short(old["volumeIds"])
        return f"old members detached and kept, tagged raidsnap:replaced-by: {kept}"
    return f"detaching old members {_short(old['volumeIds'])}"


def _restore_attach(a: dict[str, Any]) -> str:
    return f"attach: {a['status']}"


def _restore_command(r: dict[str, Any]) -> str:
    return f"sent {r.get('document')} to {r.get('instanceId')}"


def _restore_finish(r: dict[str, Any]) -> str:
    out = r["output"]
    return f"array back: {out['mdDevice']} at {out['mountPoint']}; lock released"


NARRATORS: dict[str, Narrator] = {
    "restore_prepare": _restore_prepare,
    "restore_fsr": _restore_fsr,
    "restore_create_volumes": _restore_create,
    "restore_check_volumes": _restore_check,
    "restore_detach_old": _restore_old,
    "restore_attach": _restore_attach,
    "restore_command": _restore_command,
    "restore_finish": _restore_finish,
    "backup_prepare": _prepare,
    "backup_members": _members,
    "backup_snapshot": _snapshot,
    "backup_check": _check,
    "backup_retention": _retention,
    "command_poll": _poll,
    "backup_failed": _failed,
    "restore_failed": _failed,
}


def _stepwise(inv: Invocation) -> str | None:
    """Recovery and drill functions serve several steps, named in the event."""
    step = str(inv.event.get("step")) if isinstance(inv.event, dict) else ""
    r = inv.result if isinstance(inv.result, dict) else {}
    texts = {
        ("recovery_step", "target"): "the target instance is ready for the restore",
        ("recovery_step", "succeeded"): "recovery done: metric RecoverySucceeded, notification",
        ("recovery_step", "failed"): "recovery failed: metric RecoveryFailed",
        ("drill_verify", "discover"): "discover document on the drill instance",
        ("drill_teardown", "release"): "release document: unmount and stop the drill copy",
    }
    if (inv.module, step) in texts:
        return texts[(inv.module, step)]
    if inv.module == "drill_verify" and step == "check":
        return (
            f"the copy is the array: md UUID {r.get('mdUuid')}, {r.get('filesystem')}, "
            f"{r.get('members')} members, read-only"
        )
    if inv.module == "drill_teardown" and step == "volumes":
        left = r.get("left") or []
        return f"deleted {len(r.get('deleted', []))} drill volumes" + (
            f", {len(left)} still detaching" if left else "; nothing else touched"
        )
    if inv.module == "drill_prepare":
        return f"drill of {r.get('array')} onto {r.get('targetInstanceId')}, restore nested"
    if inv.module == "drill_report":
        return "metric DrillSucceeded or DrillFailed, and a notification"
    if inv.module == "recovery_start":
        return f"trigger: one recovery execution, named for the event: {r.get('name', '')}"
    return None


def _narrate(inv: Invocation) -> str:
    if inv.error_type:
        return (
            f"[red]{inv.error_type}[/red]: {inv.error_message} "
            "[dim](the workflow decides: retry or fail)[/dim]"
        )
    stepwise = _stepwise(inv)
    if stepwise is not None:
        return stepwise
    narrator = NARRATORS.get(inv.module)
    if narrator is not None and isinstance(inv.result, dict):
        try:
            return narrator(inv.result)
        except (KeyError, TypeError):
            pass
    if isinstance(inv.result, dict) and isinstance(inv.result.get("narration"), str):
        return str(inv.result["narration"])
    return "done"


def _timeline(emu: Emulation, since: int, start: datetime) -> None:
    assert emu.router is not None
    for inv in emu.router.invocations[since:]:
        offset = int((inv.at - start).total_seconds())
        stamp = f"+{offset // 60:02d}:{offset % 60:02d}"
        console.print(f"   [dim]{stamp}[/dim]  [cyan]{inv.module:<20}[/cyan] {_narrate(inv)}")


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
        f"{workflow} {payload}  [dim](execution {name})[/dim]",
        lambda: emu.start(workflow, payload, name=name),
    )


def _deliver_alarm(emu: Emulation, fx: ArrayFixture) -> Execution:
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
    run.nested_transitions = its_restore(run)[0].transitions
    again = emu.invoke("recovery_start", event)
    result = again.result or {}
    console.print(
        f"   the same event delivered again: started={result.get('started')} "
        f"[dim]({result.get('reason', 'same execution name')})[/dim]"
    )
    return run


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


def _summary(rows: list[tuple[str, Execution]]) -> None:
    table = Table(title="summary", title_justify="left")
    for column in ("run", "result", "transitions", "set", "detail"):
        table.add_column(column)
    for label, run in rows:
        out = run.output if isinstance(run.output, dict) else {}
        if isinstance(out.get("restore"), dict):  # a recovery reports its nested restore
            out = {**out["restore"], "trigger": out.get("trigger")}
        detail = ""
        if "verification" in out:
            v = out["verification"]
            detail = (
                f"{v.get('members')} members verified read-only, "
                f"{len(out.get('deletedVolumeIds', []))} drill volumes removed"
            )
        if "snapshotIds" in out:
            detail = f"{len(out['snapshotIds'])} snapshots"
        if "volumeIds" in out and "verification" not in out:
            detail = (
                f"{len(out['volumeIds'])} volumes → {out.get('mdDevice')} "
                f"at {out.get('mountPoint')}"
            )
        if run.error:
            detail = f"{run.error}"
        transitions = str(run.transitions)
        if run.nested_transitions:
            transitions += f" + {run.nested_transitions}"
        table.add_row(label, run.status, transitions, str(out.get("setId", "")), detail)
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
    rows: list[tuple[str, Execution]] = []
    with Emulation() as emu:
        fx, drill_host = _world(emu)
        backup = _run(emu, "backup", {"array": "db1"}, "nightly-backup")
        rows.append(("backup", backup))
        if backup.status == "SUCCEEDED":
            console.print(f"   snapshot sets of db1 now: {', '.join(sets_of('db1'))}")
            _lose_member(emu, fx)
            recovery = _deliver_alarm(emu, fx)
            rows.append(("automated recovery", recovery))
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
            rows.append(("drill", drill))
            rows.append(("restore, prewarm fails", _prewarm_fails(emu, fx)))
    _summary(rows)
    console.print(f"[dim]{time.monotonic() - real:.0f} s real in all[/dim]")
    return 0 if all(run.status == "SUCCEEDED" for _, run in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
