"""The demo's second Region: db1's stack copies each set to us-west-2 (config/copies.example.yaml),
where the same stack is deployed too; the demo ends with db1 restored there, onto an instance of
that Region, from its copied set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

from raidsnap.text import input_words
from raidsnap_emulation.harness import COPIES_CONFIG, Emulation, Execution, Peer, synthesize
from raidsnap_emulation.world import ArrayFixture, launch_instance

SECOND_REGION = "us-west-2"

# How the demo follows a run: a title and what starts it (demo._follow).
Follow = Callable[[Emulation, str, Callable[[], str]], Execution]


def templates() -> tuple[Any, Any]:
    """The stack here copies db1's sets (the copies example config); the one in the second
    Region has no config of its own: its copy and restore workflows need none."""
    return synthesize(config=COPIES_CONFIG), synthesize()


def deploy_second_region(emu: Emulation, template: Any, console: Console) -> Peer:
    peer = emu.deploy(SECOND_REGION, template=template)
    console.print(
        f"   the same stack deployed in {SECOND_REGION}: every set of db1 is copied there "
        "(config/copies.example.yaml), and restores there as a set of its own"
    )
    return peer


def tell_copies(backup: Execution, console: Console) -> None:
    """Where the backup's set was copied, from its output."""
    out = backup.output if isinstance(backup.output, dict) else {}
    for where, report in sorted((out.get("copies") or {}).items()):
        ids = report.get("snapshotIds") or []
        console.print(
            f"   set {out.get('setId')} in {where}: {report.get('status')}, "
            f"copies {', '.join(sorted(ids)) or 'none'}"
        )


def restore_in_second_region(
    emu: Emulation, peer: Peer, fx: ArrayFixture, follow: Follow, console: Console
) -> Execution:
    """us-east-1 is gone: an instance in the second Region is made db1's, and the stack there
    restores db1's newest complete set there (the copy) onto it."""
    console.print(
        f"\n[bold red]✗ disaster[/bold red]: {emu.own.region} is out of reach; db1 comes back "
        f"in {SECOND_REGION} from its copied set"
    )
    target = launch_instance("db1", f"{SECOND_REGION}a", region=SECOND_REGION)
    console.print(f"   instance {target} in {SECOND_REGION}a, tagged raidsnap:array=db1")
    name, payload = "restore-in-the-west", {"array": "db1"}
    run = follow(
        emu,
        f"restore {input_words(payload)} in {SECOND_REGION}  [dim](execution {name})[/dim]",
        lambda: peer.start("restore", payload, name=name),
    )
    out = run.output if isinstance(run.output, dict) else {}
    md = emu.hosts.state(target).arrays.get(str(out.get("mdDevice") or "/dev/md0"))
    if md:
        console.print(
            f"   on the instance in {SECOND_REGION}: {md.device} assembled from "
            f"{', '.join(md.members)}, mounted at {md.mount_point}; its md UUID {md.md_uuid} "
            f"is its own (the array in {emu.own.region} was {fx.md_uuid})"
        )
    return run
