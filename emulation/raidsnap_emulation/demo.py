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

from raidsnap_emulation.harness import Emulation, Execution, Invocation
from raidsnap_emulation.world import ArrayFixture, make_array, sets_of

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
    return f"one CreateSnapshots call: set {r['setId']} = {_short(r['snapshots']['ids'])}"


def _check(r: dict[str, Any]) -> str:
    s = r["snapshots"]
    if s["status"] == "completed":
        return "every snapshot completed"
    return f"slowest snapshot at {s.get('progress', 0)}%; next look in {s['waitSeconds']} s"


def _retention(r: dict[str, Any]) -> str:
    ret = r["output"]["retention"]
    return f"retention keeps {len(ret['keptSets'])} set(s), deleted {len(ret['deletedSets'])}"


def _poll(r: dict[str, Any]) -> str:
    return f"{r.get('document')}: {r.get('status')}"


def _failed(r: dict[str, Any]) -> str:
    return f"{r.get('error')}: {r.get('cause')}"


def _restore_prepare(r: dict[str, Any]) -> str:
    init = r["initialization"]["requested"]
    return (
        f"set {r['setId']} ({len(r['members'])} members) onto {r['targetInstanceId']} in "
        f"{r['availabilityZone']}; {r['mode']} mode, initialization {init}; lock taken"
    )


def _restore_fsr(r: dict[str, Any]) -> str:
    f = r["fsr"]
    if f["status"] == "ready":
        return "Fast Snapshot Restore usable for every snapshot: create the volumes"
    if f["status"] == "pending" and not f.get("seen"):
        return f"enabled FSR for {len(f['ours'])} snapshots in {r['availabilityZone']} only"
    if f["status"] == "pending":
        states = sorted({v[0] for v in f["seen"].values()})
        return f"FSR {', '.join(states)}; next look in {f['waitSeconds']} s"
    return f"FSR: {f['status']} ({'; '.join(r.get('notes', [])[-1:])})"


def _restore_create(r: dict[str, Any]) -> str:
    ids = r["volumes"]["ids"]
    return f"one step asked for {len(ids)} volumes (a ClientToken per member): {_short(ids)}"


def _restore_check(r: dict[str, Any]) -> str:
    v = r["volumes"]
    done = "; FSR disabled again" if r.get("fsr", {}).get("disabled") else ""
    return f"{len(v['ids'])} volumes {v['status']} (one DescribeVolumes call){done}"


def _restore_old(r: dict[str, Any]) -> str:
    old = r["old"]
    if old["status"] == "detached":
        kept = _short(old["volumeIds"])
        return f"old members detached and kept, tagged raidsnap:replaced-by: {kept}"
    return f"detaching old members {_short(old['volumeIds'])}"


def _restore_attach(r: dict[str, Any]) -> str:
    return f"attach: {r['attach']['status']}"


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


def _narrate(inv: Invocation) -> str:
    if inv.error_type:
        return (
            f"[red]{inv.error_type}[/red]: {inv.error_message} "
            "[dim](the workflow decides: retry or fail)[/dim]"
        )
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


def _run(emu: Emulation, workflow: str, payload: dict[str, Any], name: str) -> Execution:
    assert emu.router is not None
    console.print(f"\n[bold]▶ {workflow}[/bold] {payload}  [dim](execution {name})[/dim]")
    mark, start, real = len(emu.router.invocations), emu.clock.now(), time.monotonic()
    run = emu.run(workflow, payload, name=name)
    _timeline(emu, mark, start)
    virtual = int((emu.clock.now() - start).total_seconds())
    colour = "green" if run.status == "SUCCEEDED" else "red"
    console.print(
        f"   [{colour}]{run.status}[/{colour}] in {run.transitions} state transitions, "
        f"{virtual // 60} min {virtual % 60} s of emulated time, "
        f"{time.monotonic() - real:.1f} s real"
    )
    if run.status != "SUCCEEDED":
        console.print(f"   error [bold]{run.error}[/bold]: {run.cause}")
    return run


def _world(emu: Emulation) -> ArrayFixture:
    fx = make_array(emu.hosts, "db1", 3, size_gib=8, unrelated=1)
    console.print(
        f"[bold]The array[/bold]: instance {fx.instance_id} in {fx.availability_zone}, tagged "
        f"raidsnap:array=db1\n   md0 = RAID 0 of 3 x 8 GiB gp3 (16,000 IOPS, 1,000 MiB/s each), "
        f"xfs at {fx.mount_point}\n   members {', '.join(fx.member_ids)}\n"
        f"   also attached: boot {fx.boot_volume_id} and scratch {fx.other_volume_ids[0]} "
        "(never snapshotted)"
    )
    return fx


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


def _summary(rows: list[tuple[str, Execution]]) -> None:
    table = Table(title="summary", title_justify="left")
    for column in ("run", "result", "transitions", "set", "detail"):
        table.add_column(column)
    for label, run in rows:
        out = run.output if isinstance(run.output, dict) else {}
        detail = ""
        if "snapshotIds" in out:
            detail = f"{len(out['snapshotIds'])} snapshots"
        if "volumeIds" in out:
            detail = (
                f"{len(out['volumeIds'])} volumes → {out.get('mdDevice')} "
                f"at {out.get('mountPoint')}"
            )
        if run.error:
            detail = f"{run.error}"
        table.add_row(label, run.status, str(run.transitions), str(out.get("setId", "")), detail)
    console.print()
    console.print(table)


def main() -> int:
    # The executor logs evaluation details (an IsPresent test on a missing path) as errors;
    # they are not failures and would hide the timeline.
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    console.rule("[bold]raidsnap demo[/bold]: local AWS emulation, virtual time")
    rows: list[tuple[str, Execution]] = []
    with Emulation() as emu:
        fx = _world(emu)
        backup = _run(emu, "backup", {"array": "db1"}, "nightly-backup")
        rows.append(("backup", backup))
        if backup.status != "SUCCEEDED":
            _summary(rows)
            return 1
        console.print(f"   snapshot sets of db1 now: {', '.join(sets_of('db1'))}")
        _lose_member(emu, fx)
        if "restore" not in emu.state_machines:
            console.print("\n[yellow]this build has no restore workflow yet[/yellow]")
            _summary(rows)
            return 0
        restore = _run(
            emu,
            "restore",
            {"array": "db1", "setId": "latest", "mode": "replace", "initialization": "fsr"},
            "restore-after-loss",
        )
        rows.append(("restore", restore))
        if restore.status == "SUCCEEDED":
            state = emu.hosts.state(fx.instance_id)
            md = state.arrays.get(restore.output.get("mdDevice", "/dev/md0"))
            if md:
                console.print(
                    f"   on the instance: {md.device} assembled from {', '.join(md.members)}, "
                    f"mounted at {md.mount_point}"
                )
            console.print(f"   mdadm.conf: {'; '.join(state.mdadm_conf.values())}")
            console.print(f"   fstab: {'; '.join(state.fstab.values())}")
    _summary(rows)
    return 0 if all(run.status == "SUCCEEDED" for _, run in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
