"""Review (second) of issue 24, several arrays per instance: a further array is named by the
instance tag ``raidsnap:array:<name>=<md UUID or mount point>`` (README, "Several arrays on one
instance", which gives the md UUID first). A restore of that array onto the instance (replace
mode, or a recovery) assembles the copy under an md UUID of its own (assemble's NewMdUuid,
``mdadm --update=uuid``), and nothing updates the instance's tag: it then names no md array, so
the next backup of the array fails with ArrayNotFound (md_choice._by_selector refuses to guess),
and every later one until someone re-tags the instance by hand. The array is unprotected after
the very restore that was meant to bring it back, and after an automated recovery (the alarm,
no operator in the loop) too: its next recovery then has no set of the members it runs on."""

from __future__ import annotations

import boto3
from test_two_arrays import with_logs

from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    alarm_event,
    backed_up,
    configure_recovery,
    make_array,
    sets_of,
    tags_of,
)


def test_a_further_array_tagged_by_md_uuid_is_still_backed_up_after_its_replace_restore(
    emu: Emulation,
) -> None:
    # GIVEN db1 (md0, /data) and logs (md1, /logs, tagged raidsnap:array:logs=<md UUID>), both
    # backed up
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    _, logs_uuid = with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    backed_up(emu.hosts, emu.run, fx)
    # WHEN logs is replaced in place from its set (its copy gets an md UUID of its own)
    run = emu.run("restore", {"array": "logs", "mode": "replace", "initialization": "none"})
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    md1 = emu.hosts.state(fx.instance_id).arrays["/dev/md1"]
    assert md1.mount_point == "/logs" and md1.md_uuid != logs_uuid
    # THEN the next backup of logs takes md1's new members (the instance's tag still names it)
    again = emu.run("backup", {"array": "logs"})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"
    taken = sets_of("logs")[again.output["setId"]]
    assert {tags_of(s)["raidsnap:source-volume"] for s in taken} == set(md1.members)
    tag = {
        t["Key"]: t["Value"]
        for t in boto3.client("ec2").describe_tags(
            Filters=[{"Name": "resource-id", "Values": [fx.instance_id]}]
        )["Tags"]
    }
    assert tag.get("raidsnap:array:logs") in (md1.md_uuid, "/logs"), tag


def test_a_further_array_tagged_by_md_uuid_is_still_backed_up_after_its_recovery(
    emu: Emulation,
) -> None:
    # GIVEN logs with recovery configured, as test_two_arrays sets it up
    fx = make_array(emu.hosts, "db1", 3, unrelated=0)
    logs, _ = with_logs(emu, fx)
    assert emu.run("backup", {"array": "logs"}).status == "SUCCEEDED"
    backed_up(emu.hosts, emu.run, fx)
    configure_recovery(emu, "logs", instanceId=fx.instance_id, initialization="none")
    # WHEN a member of md1 is lost and logs' alarm recovers it (the copy gets its own md UUID)
    emu.hosts.lose_member(fx.instance_id, logs[1])
    started = emu.invoke(
        "recovery_start", alarm_event(fx.instance_id, alarm_name="raidsnap-attached-ebs-logs")
    )
    assert started.error_type is None, started.error_message
    assert emu.wait(started.result["executionArn"]).status == "SUCCEEDED"
    for restore in boto3.client("stepfunctions").list_executions(
        stateMachineArn=emu.state_machines["restore"]
    )["executions"]:
        assert emu.wait(restore["executionArn"]).status == "SUCCEEDED"
    md1 = emu.hosts.state(fx.instance_id).arrays["/dev/md1"]
    # THEN the next scheduled backup of logs still takes md1 (a recovery that leaves the array
    # without backups, and its next recovery without a set of the new members, is no recovery)
    again = emu.run("backup", {"array": "logs"})
    assert again.status == "SUCCEEDED", f"{again.error}: {again.cause}"
    taken = sets_of("logs")[again.output["setId"]]
    assert {tags_of(s)["raidsnap:source-volume"] for s in taken} == set(md1.members)
