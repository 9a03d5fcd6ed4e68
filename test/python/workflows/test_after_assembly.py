"""Once the assemble document has assembled and mounted the array, it is the user's: a later
failure (the prewarm cannot start or be followed, the last step fails) ends the restore as
succeeded with warnings, and never detaches or deletes a volume. The failure path itself removes
an attached volume only once the instance has confirmed that no md device and no mount uses it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import boto3

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    ArrayFixture,
    backed_up,
    launch_instance,
    lock_table,
    make_array,
    restored_volumes,
    tags_of,
)

REMOVALS = ("DetachVolume", "DeleteVolume")


def before_step(
    emu: Emulation, when: Callable[[str, dict[str, Any]], bool], then: Callable[[], None]
) -> None:
    """Run ``then`` once, just before the first Lambda invocation (handler module, event) for
    which ``when`` holds: the moment between two steps of a workflow."""
    router = emu.router
    assert router is not None
    done: list[bool] = []

    def invoke(params: dict[str, Any]) -> Any:
        name = str(params["FunctionName"]).rsplit(":", 1)[-1]
        module = router.functions[name].handler.rsplit(".", 2)[-2]
        raw = params.get("Payload") or b"{}"
        event = json.loads(raw.decode() if isinstance(raw, bytes | bytearray) else raw)
        if not done and when(module, event):
            done.append(True)
            then()
        return router(params)

    emu.double.route("lambda", "Invoke", invoke)


def is_step(module: str, step: str) -> Callable[[str, dict[str, Any]], bool]:
    return lambda m, e: m == module and e.get("step") == step


def is_poll_of(kind: str) -> Callable[[str, dict[str, Any]], bool]:
    return lambda m, e: m == "command_poll" and str(e["command"]["document"]).endswith(f"-{kind}")


def db1(emu: Emulation, members: int = 3) -> ArrayFixture:
    fx = make_array(emu.hosts, "db1", members)
    backed_up(emu.hosts, emu.run, fx)
    return fx


def removals(emu: Emulation, volume_ids: list[str], since: int = 0) -> list[str]:
    return [
        f"{c.operation} {c.params.get('VolumeId')}"
        for c in emu.double.calls[since:]
        if c.operation in REMOVALS and c.params.get("VolumeId") in volume_ids and c.applied
    ]


def assert_in_place(emu: Emulation, instance_id: str, volume_ids: list[str], mount: str) -> None:
    """The restored array is attached, assembled from exactly these volumes, and mounted."""
    views = boto3.client("ec2").describe_volumes(VolumeIds=volume_ids)["Volumes"]
    assert {v["State"] for v in views} == {"in-use"}
    assert {v["Attachments"][0]["InstanceId"] for v in views} == {instance_id}
    md = emu.hosts.state(instance_id).arrays["/dev/md0"]
    assert (md.members, md.mount_point, md.failed) == (volume_ids, mount, False)


def lock_free(emu: Emulation) -> bool:
    item = boto3.client("dynamodb").get_item(TableName=lock_table(), Key={"array": {"S": "db1"}})
    return "Item" not in item


def test_a_prewarm_that_cannot_be_sent_after_assembly_keeps_the_array_mounted(
    emu: Emulation,
) -> None:
    # GIVEN a replace restore whose target's SSM agent blinks between assembly and prewarm
    fx = db1(emu)
    before_step(
        emu,
        is_step("restore_command", "prewarm"),
        lambda: emu.double.set_agent(fx.instance_id, online=False),
    )
    # WHEN the restore runs
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "prewarm"})
    # THEN it succeeds with a warning that names the prewarm, and how far it got
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output
    assert out["prewarm"]["status"] == "not-started"
    assert any("prewarm" in w and "not started" in w for w in out["warnings"]), out["warnings"]
    # AND the new array stays attached, assembled and mounted; nothing was detached or deleted
    new = out["volumeIds"]
    assert removals(emu, new) == []
    assert_in_place(emu, fx.instance_id, new, fx.mount_point)
    # AND the old members are kept, detached and tagged, and the lock is free
    old = boto3.client("ec2").describe_volumes(VolumeIds=fx.member_ids)["Volumes"]
    assert {tags_of(v)["raidsnap:replaced-by"] for v in old} == {run.arn}
    assert lock_free(emu)


def test_a_prewarm_that_cannot_be_followed_after_assembly_keeps_the_array_mounted(
    emu: Emulation,
) -> None:
    # GIVEN a restore whose prewarm starts, but every look at it fails
    fx = db1(emu)
    target = launch_instance("db1-copy", fx.availability_zone)
    before_step(
        emu,
        is_poll_of("prewarm"),
        lambda: emu.double.fail(
            "ssm", "GetCommandInvocation", times=10, code="InternalServerError"
        ),
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target})
    # THEN the restore succeeds, says it could not follow the prewarm, and the array stays
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    out = run.output
    assert out["prewarm"]["status"] == "unknown"
    assert out["prewarm"]["commandId"]
    assert any("could not follow the prewarm" in w for w in out["warnings"]), out["warnings"]
    assert removals(emu, out["volumeIds"]) == []
    assert_in_place(emu, target, out["volumeIds"], fx.mount_point)


def test_a_last_step_that_fails_after_assembly_keeps_the_array_mounted(emu: Emulation) -> None:
    # GIVEN a restore whose last step (the lock release) fails
    fx = db1(emu)
    target = launch_instance("db1-copy", fx.availability_zone)
    before_step(
        emu,
        lambda m, e: m == "restore_finish",
        lambda: emu.double.fail("dynamodb", "DeleteItem", times=1, code="InternalServerError"),
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    # THEN the run succeeds with a warning, and the assembled array stays
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    assert any("could not finish" in w for w in run.output["warnings"]), run.output
    assert removals(emu, run.output["volumeIds"]) == []
    assert_in_place(emu, target, run.output["volumeIds"], fx.mount_point)


def test_cleanup_leaves_volumes_the_instance_shows_assembled_and_mounted(emu: Emulation) -> None:
    # GIVEN a restore whose assemble document assembled and mounted the array, but the look
    # at the document failed, so the workflow never learned it
    fx = db1(emu)
    target = launch_instance("db1-copy", fx.availability_zone)
    before_step(
        emu,
        is_poll_of("assemble"),
        lambda: emu.double.fail("ssm", "GetCommandInvocation", times=1, code="InternalServerError"),
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    # THEN the run fails, and says the array is there and was left alone
    assert run.status == "FAILED"
    created = [v["VolumeId"] for v in restored_volumes(run.arn)]
    assert len(created) == 3
    cause = run.cause or ""
    assert "assembled and mounted at /data" in cause, cause
    assert all(vid in cause for vid in created), cause
    # AND none of its volumes was detached or deleted: the array is mounted where it was
    assert removals(emu, created) == []
    md = emu.hosts.state(target).arrays["/dev/md0"]
    assert (sorted(md.members), md.mount_point) == (sorted(created), fx.mount_point)
    assert lock_free(emu)


def test_cleanup_stops_an_unmounted_array_of_its_own_volumes_before_deleting_them(
    emu: Emulation,
) -> None:
    # GIVEN a restore whose assemble document failed after udev had built an array of the new
    # members on its own (md127, not mounted)
    fx = db1(emu, members=2)
    target = launch_instance("db1-copy", fx.availability_zone)

    def udev_assembles() -> None:
        ids = [v["VolumeId"] for v in restored_volumes_of_target(target)]
        emu.hosts.udev_assembled(target, ids, "/dev/md127")

    before_step(emu, is_step("restore_command", "assemble"), udev_assembles)
    emu.hosts.fail_next(
        "assemble",
        CommandOutcome(
            status="Failed",
            stdout=json.dumps({"ok": False, "error": "MemberInUse", "message": "busy"}),
            stderr="raidsnap: MemberInUse: busy",
            exit_code=1,
        ),
    )
    run = emu.run("restore", {"array": "db1", "targetInstanceId": target, "initialization": "none"})
    # THEN the failure path released md127 (with the set's md UUID) before deleting the volumes
    assert (run.status, run.error) == ("FAILED", "CommandFailed")
    releases = [
        c.params["Parameters"]
        for c in emu.double.calls
        if c.operation == "SendCommand" and str(c.params["DocumentName"]).endswith("-release")
    ]
    assert releases == [
        {
            "MdDevice": ["/dev/md127"],
            "MountPoint": [fx.mount_point],
            "MdUuid": [fx.md_uuid],
            "OwnMountPoint": ["false"],
        }
    ]
    assert "/dev/md127" not in emu.hosts.state(target).arrays
    assert restored_volumes(run.arn) == []
    assert "deleted the 2 volumes this run created" in (run.cause or "")


def restored_volumes_of_target(instance_id: str) -> list[dict[str, Any]]:
    """The volumes a restore created that are attached to this instance."""
    views = boto3.client("ec2").describe_volumes(
        Filters=[{"Name": "tag-key", "Values": ["raidsnap:restore-run"]}]
    )["Volumes"]
    return [v for v in views if any(a["InstanceId"] == instance_id for a in v["Attachments"])]


def test_a_replace_whose_assemble_poll_failed_never_advises_attaching_the_old_members(
    emu: Emulation,
) -> None:
    # GIVEN a replace restore that assembled and mounted the restored array, but whose look at
    # the assemble document failed, so the run fails with the restored array in service
    fx = db1(emu)
    before_step(
        emu,
        is_poll_of("assemble"),
        lambda: emu.double.fail("ssm", "GetCommandInvocation", times=1, code="InternalServerError"),
    )
    run = emu.run("restore", {"array": "db1", "mode": "replace", "initialization": "none"})
    assert run.status == "FAILED"
    created = [v["VolumeId"] for v in restored_volumes(run.arn)]
    md = emu.hosts.state(fx.instance_id).arrays["/dev/md0"]
    assert sorted(md.members) == sorted(created)  # the restored array is the one in service
    # THEN the cause never tells anyone to attach the old members back (they carry the same md
    # UUID: md could build the array from old and new members); it says not to
    cause = run.cause or ""
    assert "re-attach them to go back" not in cause, cause
    assert "attach-volume" not in cause, cause
    assert "Do not attach or assemble them" in cause, cause
