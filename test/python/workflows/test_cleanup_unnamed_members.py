"""Checks of the restore failure path: the cleanup must never detach or delete the
volumes of an array the instance shows assembled and mounted, whatever detail the instance
could not report about it."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from test_after_assembly import before_step, db1, is_poll_of, removals

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import launch_instance, restored_volumes


def test_cleanup_keeps_a_mounted_array_whose_members_discover_could_not_name(
    emu: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a restore whose assemble document assembled and mounted the array, but the look at
    # the document failed, so the workflow went to its failure path
    fx = db1(emu)
    target = launch_instance("db1-copy", fx.availability_zone)
    before_step(
        emu,
        is_poll_of("assemble"),
        lambda: emu.double.fail("ssm", "GetCommandInvocation", times=1, code="InternalServerError"),
    )
    # AND on this instance discover cannot read the members' EBS volume ids (no NVMe serial and
    # no /dev/disk/by-id link carrying the id: discover.sh prints "serial": null and
    # "volumeId": null), so it reports the mounted md0, with the set's md UUID, by device only
    real = emu.hosts._do_discover
    seen: list[dict[str, Any]] = []

    def discover_without_volume_ids(ctx: Any, p: dict[str, str]) -> CommandOutcome:
        out = real(ctx, p)
        answer = json.loads(out.stdout)
        for md in answer["arrays"]:
            for m in md["members"]:
                m["serial"] = m["volumeId"] = None
        seen.extend(answer["arrays"])
        return CommandOutcome(
            status=out.status,
            stdout=json.dumps(answer),
            stderr=out.stderr,
            exit_code=out.exit_code,
            duration_seconds=out.duration_seconds,
        )

    monkeypatch.setattr(emu.hosts, "_do_discover", discover_without_volume_ids)
    # WHEN the restore runs
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    # THEN the run fails (the poll failed), after discover showed the set's array mounted
    assert run.status == "FAILED"
    mounted = [md for md in seen if md["mountPoint"] == fx.mount_point]
    (assembled,) = [
        c.params["Parameters"]["NewMdUuid"][0]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-assemble")
    ]
    assert [md["uuid"] for md in mounted] == [assembled], seen
    # AND the mounted array keeps its volumes: the cleanup could not confirm that nothing uses
    # them, so none of them is detached or deleted
    created = [v["VolumeId"] for v in restored_volumes(run.arn)]
    assert len(created) == 3, run.cause
    assert removals(emu, created) == [], run.cause
    views = boto3.client("ec2").describe_volumes(VolumeIds=created)["Volumes"]
    assert {v["State"] for v in views} == {"in-use"}, run.cause
