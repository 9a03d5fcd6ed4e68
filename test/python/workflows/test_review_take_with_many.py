"""Review of takeWith with many arrays (the input allows 8 beside the array a backup is started
for): each test reproduces one finding on the real state machine and fails on the code it was
written against.

- ExplainFailure's wait for the other thaws (finish.THAW_WAIT_SECONDS, 30 s) counts only its own
  sleeps, not the time its looks take: with 8 other arrays it makes 16 rounds of 8
  GetCommandInvocation calls, so at a quarter of a second a look (an ordinary SSM answer with
  the SDK's standard-mode retry of one throttled call) it sends the thaw that runs the post hook
  about a minute after the first thaw, past the BackupFailed function's 60 s Lambda timeout
  (lib/constructs/functions.ts default). A function that times out is not retried
  (LAMBDA_RETRY names Lambda's service errors only) and goes to FailedUnexplained: the post hook
  is left to the freeze guard, the hold to its lease, and the run has no cause. The cause also
  says the thaw "had not ended after 30 s" when the run waited twice that.
- The array with hooks is frozen first and thawed last, one array after the other, each
  freeze and each thaw followed until it ends (2 s looks): its filesystem stays frozen, and
  its application held, through every other freeze, the CreateSnapshots call and every other
  thaw. Its freeze guard (MaxFreezeSeconds from its own freeze, 60 s by default) is the first
  to run out: with 9 arrays whose freezes take 5 s each (fsfreeze -f writes the dirty data out
  first) it runs out while the others are being thawed, and the guard thaws it and runs its
  post hook (ssm/scripts/freeze.sh: "else in the guard") while other filesystems are still
  frozen: what the group's order is for. Nothing (the synth check, Prepare) relates the size
  of a group with hooks to MaxFreezeSeconds, and the run reports nothing of it.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import boto3
import pytest

import raidsnap.aws
from raidsnap.aws import commands
from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import ArrayFixture, make_array

HOLD = "/usr/local/sbin/db-hook --hold"
RELEASE = "/usr/local/sbin/db-hook --release"
# db1's hooks (its backups run them by default): its thaw runs the post hook.
DB1_HOOKS = {"db1": {"timeoutSeconds": 20, "preSnapshot": HOLD, "postSnapshot": RELEASE}}
# The module (the package exports its function of the same name).
finish = importlib.import_module("raidsnap.workflows.backup.finish")
# What one SSM look costs in time, taken as a quarter of a second (see the module docstring).
LOOK_SECONDS = 0.25
# The BackupFailed function's timeout (FunctionFactory's default, lib/constructs/functions.ts).
FAILURE_FUNCTION_SECONDS = 60


def many(emu: Emulation, count: int) -> tuple[ArrayFixture, list[str]]:
    """db1 (/data) and ``count`` more one-volume arrays a0.. at /a0.. on its instance."""
    fx = make_array(emu.hosts, "db1", 2, unrelated=0)
    ec2 = boto3.client("ec2")
    names = [f"a{i}" for i in range(count)]
    for i, name in enumerate(names):
        vid = ec2.create_volume(AvailabilityZone=fx.availability_zone, Size=8)["VolumeId"]
        emu.clock.advance(emu.double.volume_seconds + 1)
        ec2.attach_volume(VolumeId=vid, InstanceId=fx.instance_id, Device=f"/dev/sd{'mnopqrst'[i]}")
        emu.clock.advance(emu.double.attach_seconds + 1)
        uuid = emu.hosts.build_array(
            fx.instance_id, [vid], name=name, md_device=f"/dev/md{i + 1}", mount_point=f"/{name}"
        )
        ec2.create_tags(
            Resources=[fx.instance_id], Tags=[{"Key": f"raidsnap:array:{name}", "Value": uuid}]
        )
    return fx, names


def configure_hooks(emu: Emulation) -> None:
    assert emu.router is not None
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(DB1_HOOKS)


def sent(emu: Emulation, document: str) -> list[Any]:
    return [c for c in emu.double.calls if c.applied and c.params.get("DocumentName") == document]


def test_the_failure_paths_thaw_wait_is_bounded_in_time_not_in_sleeps(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN db1 (hooked) and 8 more arrays of its instance, all frozen, then CreateSnapshots
    # refused; the agent answers none of the thaws of the 8 (hung), and each SSM look takes
    # a quarter of a second
    _, names = many(emu, 8)
    configure_hooks(emu)
    emu.double.fail("ec2", "CreateSnapshots", times=5, code="UnauthorizedOperation")
    plain = emu.hosts._do_thaw

    def hung(ctx: Any, p: dict[str, str]) -> CommandOutcome:
        if p["MountPoint"] == "/data":
            return plain(ctx, p)
        return CommandOutcome(duration_seconds=100_000, unresponsive=True)

    monkeypatch.setattr(emu.hosts, "_do_thaw", hung)
    fetch = commands.fetch

    def slow_fetch(command_id: str, instance_id: str) -> commands.CommandResult:
        raidsnap.aws.pause(LOOK_SECONDS)
        return fetch(command_id, instance_id)

    monkeypatch.setattr(commands, "fetch", slow_fetch)
    # WHEN db1 is backed up with them, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": names, "consistency": "fsfreeze"})
    assert run.status == "FAILED", run.output
    # THEN the thaw that runs db1's post hook goes at most THAW_WAIT_SECONDS (and one look)
    # after the first thaw, as the cause says
    thaws = sent(emu, "raidsnap-thaw")
    assert [t.params["Parameters"]["MountPoint"][0] for t in thaws][-1] == "/data"
    waited = (thaws[-1].time - thaws[0].time).total_seconds()
    assert f"after {finish.THAW_WAIT_SECONDS} s" in str(run.cause), run.cause
    assert waited <= finish.THAW_WAIT_SECONDS + 5, (
        f"the post hook's thaw went {waited:.0f} s after the first thaw; the cause says "
        f"{finish.THAW_WAIT_SECONDS} s"
    )
    # AND the failure function's work fits in its Lambda timeout
    own = [c for c in emu.double.calls if "BackupFailed" in str(c.actor)]
    span = (own[-1].time - own[0].time).total_seconds()
    assert span < FAILURE_FUNCTION_SECONDS, f"ExplainFailure ran {span:.0f} s"
