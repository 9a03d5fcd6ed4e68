"""Review of the CLI's plan, cancel and operator permissions: each test reproduces one finding
and fails on the code it was written against."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from cli_runner import Cli, Watch, line_of

from raidsnap.aws.homes import record_move
from raidsnap_cli import queries, restoring, runs
from raidsnap_cli.backends import Backend
from raidsnap_emulation.iam.context import iam_action
from raidsnap_emulation.world import launch_instance, lock_table

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def cli(template: Path) -> Cli:
    return Cli(template)


# ---------------------------------------------------------------------- operator permissions


# Only when the stack's resources cannot be read (resolve._table's fallback, which the
# emulation's CloudFormation takes): not a call of the command on a deployed stack.
FALLBACK = {"dynamodb:ListTables", "dynamodb:DescribeTable"}


def readme_operator_actions(*tasks: str) -> set[str]:
    """The IAM actions the rows of README's "Operator roles" table whose task starts with one of
    ``tasks`` name (``svc:A``/``B`` is svc:A and svc:B)."""
    text = (REPO / "README.md").read_text()
    section = text.split("### Operator roles", 1)[1].split("\n### ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and r[2:].startswith(tasks)]
    assert len(rows) == len(tasks), rows
    found: set[str] = set()
    for match in re.finditer(r"`([a-z0-9-]+):([A-Za-z*]+)`((?:/`?[A-Za-z]+`?)*)", "".join(rows)):
        prefix = match.group(1)
        found.add(f"{prefix}:{match.group(2)}")
        for more in re.findall(r"[A-Za-z]+", match.group(3)):
            found.add(f"{prefix}:{more}")
    return found


def cli_actions(watch: Watch) -> set[str]:
    """The IAM actions of the calls the command itself made (not the emulated functions')."""
    actions = set()
    for call in watch.calls():
        if call.actor is not None:
            continue
        model = iam_action(call.service, call.operation)
        actions.add(f"{model.prefix}:{model.name}")
    return actions


def test_readme_operator_permissions_cover_the_calls_of_a_restore_plan(cli: Cli) -> None:
    # An operator given exactly what README's "Operator roles" lists for starting a restore
    # from the CLI gets AccessDenied on the plan (GetFunctionConfiguration first), and the
    # runbook's step 2 (--dry-run) then fails with exit 1.
    watch = Watch()

    result = cli("recover", "db1", "--dry-run", "--emulation", "--seed-backups", "1", prepare=watch)

    assert result.exit_code == 0, result.output
    granted = readme_operator_actions("start, stop and follow", "list sets")
    missing = sorted(cli_actions(watch) - granted - FALLBACK)
    assert missing == [], f"README's operator roles do not grant: {missing}"


def test_readme_operator_permissions_cover_the_calls_of_doctor(cli: Cli) -> None:
    # README's doctor row lists scheduler:GetSchedule, but doctor finds the schedule with
    # ListSchedules first (schedules.of_array).
    watch = Watch()

    result = cli("doctor", "db1", "--emulation", "--seed-backups", "1", prepare=watch)

    assert result.exit_code in (0, 1), result.output
    granted = readme_operator_actions(
        "start, stop and follow", "list sets", "run `raidsnap doctor`"
    )
    missing = sorted(cli_actions(watch) - granted - FALLBACK)
    assert missing == [], f"README's operator roles do not grant: {missing}"


# ---------------------------------------------------------------------- cancel

MACHINE = "arn:aws:states:us-east-1:111122223333:stateMachine:"
EXECUTION = "arn:aws:states:us-east-1:111122223333:execution:"


class StubSfn:
    """Step Functions as cancel sees it: a few executions, and the stops it was asked for."""

    def __init__(self, executions: dict[str, dict[str, Any]]) -> None:
        self.executions = executions
        self.stopped: list[str] = []

    def describe_execution(self, executionArn: str) -> dict[str, Any]:
        from botocore.exceptions import ClientError  # noqa: PLC0415

        if executionArn not in self.executions:
            raise ClientError(
                {"Error": {"Code": "ExecutionDoesNotExist", "Message": "no"}}, "DescribeExecution"
            )
        return self.executions[executionArn]

    def list_executions(self, **_: Any) -> dict[str, Any]:
        return {"executions": []}

    def get_execution_history(self, **_: Any) -> dict[str, Any]:
        return {"events": []}

    def stop_execution(self, executionArn: str, **_: Any) -> dict[str, Any]:
        self.stopped.append(executionArn)
        return {}


def running(machine: str, name: str, payload: str) -> dict[str, Any]:
    return {
        "name": name,
        "stateMachineArn": MACHINE + machine,
        "status": "RUNNING",
        "startDate": datetime(2026, 1, 1, tzinfo=UTC),
        "input": payload,
    }


def stub_backend(sfn: StubSfn) -> Backend:
    machines = {
        "backup": MACHINE + "raidsnap-backup",
        "restore": MACHINE + "raidsnap-restore",
        "recovery": MACHINE + "raidsnap-recovery",
        "drill": MACHINE + "raidsnap-drill",
    }
    return Backend(
        sfn=sfn,  # type: ignore[arg-type]
        snapshot_now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        poll_seconds=0,
        description="stub",
        outlives_command=True,
        _resolve=lambda: (machines, "stub"),
        _resolve_sets=lambda: "sets",
        _resolve_lock=lambda: "lock",
    )


def test_cancel_refuses_an_execution_of_a_state_machine_that_is_not_raidsnaps() -> None:
    # `raidsnap cancel ARN` stops any execution ARN it is given: one of another application's
    # state machine in the same account is "the ? run" and is stopped after a y.
    foreign = EXECUTION + "payments-settlement:run-42"
    sfn = StubSfn({foreign: running("payments-settlement", "run-42", '{"array": "db1"}')})

    with pytest.raises(queries.ExecutionNotFoundError):
        runs._to_stop(stub_backend(sfn), foreign)


def test_cancel_refuses_a_backup_it_does_not_claim_to_stop() -> None:
    # cancel says it stops "a running restore, recovery or drill"; given a backup's name it
    # finds it in the backup workflow and stops it (a set left half taken, a freeze thawed by
    # its guard only).
    backup = EXECUTION + "raidsnap-backup:backup-db1-20260101T000000Z"
    sfn = StubSfn(
        {backup: running("raidsnap-backup", "backup-db1-20260101T000000Z", '{"array": "db1"}')}
    )

    with pytest.raises(queries.ExecutionNotFoundError):
        runs._to_stop(stub_backend(sfn), "backup-db1-20260101T000000Z")


# ---------------------------------------------------------------------- plan against run


def test_the_run_acts_on_the_target_the_plan_showed_when_the_array_moves_before_it_starts(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN db1 on its instance, planned there and confirmed; before the run starts db1 is
    # moved (another instance tagged raidsnap:array=db1, the move recorded, as `raidsnap move`
    # does). The started input pins only setId: the run resolves the target afresh and
    # restores onto an instance the operator never saw in the plan.
    watch = Watch()
    ran: dict[str, Any] = {}
    original = restoring.start_and_follow

    def moved_then_started(**kwargs: Any) -> int:
        assert watch.fx is not None
        other = launch_instance("db1", watch.fx.availability_zone)
        record_move(lock_table(), "db1", other, "operator")
        code = original(**kwargs)
        backend = kwargs["backend"]
        arn = backend.sfn.list_executions(stateMachineArn=backend.arn("restore"))["executions"]
        described = backend.sfn.describe_execution(executionArn=arn[0]["executionArn"])
        ran["output"] = json.loads(described.get("output") or "{}")
        ran["status"] = described["status"]
        return code

    monkeypatch.setattr(restoring, "start_and_follow", moved_then_started)

    result = cli("recover", "db1", "--yes", "--emulation", "--seed-backups", "1", prepare=watch)

    assert watch.fx is not None
    planned = line_of(result.output, "    target  ")
    assert watch.fx.instance_id in planned, result.output
    # THEN the run restored onto the planned instance, or changed nothing
    assert ran["status"] == "SUCCEEDED", result.output
    assert ran["output"]["targetInstanceId"] == watch.fx.instance_id, result.output


def member_replaced_by_hand(emu: Any, fx: Any) -> str:
    """Since db1's last set, member 1 was replaced by hand (mdadm --replace onto a new volume,
    the old one detached afterwards): the new member is in no set and carries no raidsnap tag."""
    ec2 = boto3.client("ec2")
    hosts = emu.hosts
    new = ec2.create_volume(
        AvailabilityZone=fx.availability_zone, Size=32, VolumeType="gp3", Iops=16000,
        Throughput=1000,
    )["VolumeId"]  # fmt: skip
    hosts.double.clock.advance(hosts.double.volume_seconds + 1)
    ec2.attach_volume(VolumeId=new, InstanceId=fx.instance_id, Device="/dev/sdp")
    hosts.double.clock.advance(hosts.double.attach_seconds + 1)
    old = fx.member_ids[1]
    hosts.superblocks[new] = hosts.superblocks[old]
    hosts.state(fx.instance_id).arrays["/dev/md0"].members[1] = new
    ec2.detach_volume(VolumeId=old, InstanceId=fx.instance_id)
    hosts.double.clock.advance(hosts.double.detach_seconds + 1)
    ec2.describe_volumes(VolumeIds=[old])  # the double completes a detach when it is looked at
    return str(new)


def test_the_plan_names_every_volume_the_replace_then_detaches(cli: Cli) -> None:
    # The plan's detach and untouched lines come from the array's records (set sources, tags);
    # the run detaches what the release document verified on the instance. A member added by
    # hand since the last set is shown "untouched (attached, not the array's)", then detached.
    replaced: dict[str, str] = {}

    def hand(emu: Any, fx: Any) -> None:
        replaced["new"] = member_replaced_by_hand(emu, fx)

    watch = Watch(hand)

    result = cli("recover", "db1", "--yes", "--emulation", "--seed-backups", "1", prepare=watch)

    assert result.exit_code == 0, result.output
    out = result.output
    assert replaced["new"] in line_of(out, "replaced "), out  # the run detached it (kept)
    assert replaced["new"] in line_of(out, "    detach  "), out  # so the plan must say so


class PagedSfn(StubSfn):
    """ListExecutions as the API may answer: a page may hold fewer than maxResults, with a
    nextToken (Step Functions API reference, ListExecutions: maxResults is an upper limit)."""

    def __init__(self, executions: dict[str, dict[str, Any]], pages: dict[str, list[Any]]):
        super().__init__(executions)
        self.pages = pages

    def list_executions(self, **kwargs: Any) -> dict[str, Any]:
        machine = kwargs["stateMachineArn"]
        pages = self.pages.get(machine, [[]])
        index = int(kwargs.get("nextToken") or 0)
        page: dict[str, Any] = {
            "executions": [
                {"executionArn": a, "startDate": datetime(2026, 1, 1, tzinfo=UTC)}
                for a in pages[index]
                if self.executions[a]["status"] == kwargs.get("statusFilter", "RUNNING")
            ]
        }
        if index + 1 < len(pages):
            page["nextToken"] = str(index + 1)
        return page


def test_cancel_by_array_finds_a_running_restore_on_a_later_page() -> None:
    restore = EXECUTION + "raidsnap-restore:restore-db1-20260101T000000Z-0001"
    sfn = PagedSfn(
        {restore: running("raidsnap-restore", "restore-db1-20260101T000000Z-0001",
                          '{"array": "db1"}')},
        {MACHINE + "raidsnap-restore": [[], [restore]]},
    )  # fmt: skip

    run, _ = runs._to_stop(stub_backend(sfn), "db1")

    assert run.arn == restore


def test_cancel_by_array_stops_its_restore_not_a_drill_that_is_tearing_down() -> None:
    # `cancel db1` is documented as "an array: its running restore". With the operator's
    # restore of db1 running and db1's drill past its own restore (tearing its copy down), it
    # picks the drill and stops that: the drill's teardown never runs (a drill stopped by hand
    # runs no failure path), its copy stays on the drill instance, and the restore goes on.
    restore = EXECUTION + "raidsnap-restore:restore-db1-20260101T000000Z-0001"
    drill = EXECUTION + "raidsnap-drill:drill-db1-20260101T000000Z"
    sfn = PagedSfn(
        {
            restore: running("raidsnap-restore", "restore-db1-20260101T000000Z-0001",
                             '{"array": "db1"}'),
            drill: running("raidsnap-drill", "drill-db1-20260101T000000Z",
                           '{"array": "db1", "targetInstanceId": "i-0123456789abcdef0"}'),
        },
        {MACHINE + "raidsnap-restore": [[restore]], MACHINE + "raidsnap-drill": [[drill]]},
    )  # fmt: skip

    run, _ = runs._to_stop(stub_backend(sfn), "db1")

    assert run.arn == restore


# ---------------------------------------------------------------------- screens


def test_a_read_only_copy_next_to_the_array_can_be_asked_for_from_the_cli(cli: Cli) -> None:
    # The run asks for an mdDevice of its own for a copy next to the array ("give one, for
    # example mdDevice /dev/md10"), and the refusal names 'mdDevice' as the option; the command
    # has no such option, so the copy DESIGN promises cannot be made from the CLI.
    result = cli(
        "restore", "db1", "--read-only", "--md-device", "/dev/md10", "--mount-point",
        "/mnt/db1-copy", "--dry-run", "--emulation", "--seed-backups", "1",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert "/dev/md10 at /mnt/db1-copy" in result.stdout


def test_an_attach_refusal_reads_as_words_not_python(cli: Cli) -> None:
    # `restore db1` (no --mode given) on the array's own instance is refused as "Invalid value
    # for '--mode': ['vol-…', 'vol-…', 'vol-…'] of db1 are attached…": a Python list, and an
    # option the operator never typed.
    result = cli("restore", "db1", "--dry-run", "--emulation", "--seed-backups", "1")

    assert result.exit_code == 2, result.output
    assert "['vol-" not in result.output, result.output


def test_the_run_initializes_as_the_plan_showed_when_fsr_turns_on_before_it_starts(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plan shows "prewarm, chosen by auto" and the operator confirms; before the run
    # starts, FSR becomes enabled for the set's snapshots in the target's AZ (a fastRestore
    # policy's backup, or a colleague). The input pins setId only, so the run's auto decides
    # afresh and does something else than what was confirmed.
    watch = Watch()
    ran: dict[str, Any] = {}
    original = restoring.start_and_follow

    def fsr_on_then_started(**kwargs: Any) -> int:
        assert watch.fx is not None and watch.emu is not None
        ec2 = boto3.client("ec2")
        set_id = kwargs["payload"]["setId"]
        found = ec2.describe_snapshots(
            Filters=[{"Name": "tag:raidsnap:set-id", "Values": [set_id]}]
        )["Snapshots"]
        ec2.enable_fast_snapshot_restores(
            AvailabilityZones=[watch.fx.availability_zone],
            SourceSnapshotIds=[s["SnapshotId"] for s in found],
        )
        watch.emu.hosts.double.clock.advance(6 * 3600)
        code = original(**kwargs)
        backend = kwargs["backend"]
        arn = backend.sfn.list_executions(stateMachineArn=backend.arn("restore"))["executions"]
        described = backend.sfn.describe_execution(executionArn=arn[0]["executionArn"])
        ran["output"] = json.loads(described.get("output") or "{}")
        return code

    monkeypatch.setattr(restoring, "start_and_follow", fsr_on_then_started)

    result = cli("recover", "db1", "--yes", "--emulation", "--seed-backups", "1", prepare=watch)

    assert re.search(r"initialize\s+prewarm, chosen by auto", result.output), result.output
    assert ran["output"]["initialization"] == "prewarm", result.output


def restore_told(*states: str) -> Any:
    from raidsnap_cli.progress import Narrator  # noqa: PLC0415

    told = Narrator("restore")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for number, name in enumerate(states, start=1):
        told.take(
            {"id": number, "type": "TaskStateEntered", "timestamp": at,
             "stateEnteredEventDetails": {"name": name}}
        )  # fmt: skip
    return told


def test_cancel_during_assemble_says_the_assemble_goes_on_on_the_instance() -> None:
    # Stopped while its assemble document runs on the instance, the run ends but the command
    # does not: it assembles, mounts and persists the array (fstab, mdadm.conf) after the stop.
    # cancel says only that attached volumes are left alone (and, for a replace, to bring the
    # old array back by hand onto the very mount point the new one is about to take).
    run = queries.ExecutionInfo(
        arn=EXECUTION + "raidsnap-restore:r", name="r", workflow="restore",
        state_machine=MACHINE + "raidsnap-restore", status="RUNNING",
        start=datetime(2026, 1, 1, tzinfo=UTC), stop=None, input={"array": "db1"},
        output=None, error=None, cause=None,
    )  # fmt: skip
    told = restore_told(
        "Prepare", "CreateVolumes", "ReleaseOldArray", "DetachOldMembers", "AttachVolumes",
        "Assemble", "WaitForAssemble",
    )  # fmt: skip

    said = " ".join(runs.consequences(run, told))

    # the command still running on the instance, and how to stop it (aws ssm cancel-command)
    assert "cancel-command" in said, said


def test_cancel_of_a_recovery_says_in_words_which_run_it_stops() -> None:
    # "(the restore recovery alarm-db1-… runs: stopping it ends the recovery …)": the words
    # are put together from the workflow and the name, and read as nothing.
    recovery = EXECUTION + "raidsnap-recovery:alarm-db1-1"
    child = EXECUTION + "raidsnap-restore:alarm-db1-1-restore"
    sfn = PagedSfn(
        {
            recovery: running("raidsnap-recovery", "alarm-db1-1", '{"array": "db1"}'),
            child: running("raidsnap-restore", "alarm-db1-1-restore", '{"array": "db1"}'),
        },
        {MACHINE + "raidsnap-recovery": [[recovery]], MACHINE + "raidsnap-restore": [[child]]},
    )

    run, why = runs._to_stop(stub_backend(sfn), "db1")

    assert run.arn == child
    assert "the restore recovery" not in why, why
    assert "alarm-db1-1" in why


def test_one_set_is_one_set_in_the_list_of_arrays(cli: Cli) -> None:
    result = cli("restore", "nope", "--yes", "--emulation", "--seed-backups", "1")

    assert result.exit_code == 1, result.output
    assert "db1: 1 set, latest" in result.output, result.output


def test_the_emulated_prewarm_reads_no_faster_than_the_instance_can(cli: Cli) -> None:
    # The demo's restore says "prewarm done: 96.0 GiB at 3000 MiB/s" on an r6i.2xlarge whose
    # EBS bandwidth, by the same run's own note (DescribeInstanceTypes), is 1192 MiB/s at most:
    # the emulation's prewarm reads each member at a fixed pace, whatever the instance.
    result = cli("recover", "db1", "--yes", "--emulation", "--seed-backups", "1")

    assert result.exit_code == 0, result.output
    limit = re.search(r"\((\d+) MiB/s of EBS bandwidth at most", result.output)
    read = re.search(r"prewarm done: [\d.]+ GiB at (\d+) MiB/s", result.output)
    assert limit and read, result.output
    assert int(read.group(1)) <= int(limit.group(1)), result.output


def test_cancel_of_a_launch_recovery_after_its_restore_says_the_instance_is_abandoned() -> None:
    # A recovery of a launch whose restore ended (the array is mounted on the new instance) is
    # settling: cancel stops the recovery itself and says only that "a recovery stopped by hand
    # runs no failure path of its own". Its lifecycle hook is then never completed: when the
    # hook times out, Auto Scaling applies its default result, ABANDON (lib/constructs/
    # recovery.ts), and terminates the instance the array was just mounted on.
    from raidsnap_cli.progress import Narrator  # noqa: PLC0415

    run = queries.ExecutionInfo(
        arn=EXECUTION + "raidsnap-recovery:launch-db1-1", name="launch-db1-1",
        workflow="recovery", state_machine=MACHINE + "raidsnap-recovery", status="RUNNING",
        start=datetime(2026, 1, 1, tzinfo=UTC), stop=None,
        input={"array": "db1", "trigger": "launch", "restore": {"array": "db1"},
               "lifecycle": {"hookName": "h", "groupName": "g", "token": "t",
                             "instanceId": "i-0123456789abcdef0"}},
        output=None, error=None, cause=None,
    )  # fmt: skip
    told = Narrator("recovery")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for number, name in enumerate(["Start", "Assess", "CheckTarget", "RunRestore", "Settle"], 1):
        told.take(
            {"id": number, "type": "TaskStateEntered", "timestamp": at,
             "stateEnteredEventDetails": {"name": name}}
        )  # fmt: skip

    said = " ".join(runs.consequences(run, told))

    assert "ABANDON" in said or "terminat" in said, said


def test_readme_shows_the_commands_that_stop_and_drill() -> None:
    # README's command-line section lists sets, backup, restore, status, doctor and move; the
    # new `cancel` (which stops runs, with what that leaves) and `drill` appear nowhere.
    text = (REPO / "README.md").read_text()

    assert "raidsnap cancel" in text
    assert "raidsnap drill" in text


def test_readme_grants_the_execution_actions_on_the_executions() -> None:
    # README grants states:StopExecution, DescribeExecution and GetExecutionHistory "on the
    # stack's state machines". Those actions authorize the execution resource type
    # (arn:…:states:…:execution:<machine>:<id>; Service Authorization Reference, AWS Step
    # Functions), not the stateMachine one: a policy written as the row says denies cancel,
    # status and every follow.
    text = (REPO / "README.md").read_text()
    section = text.split("### Operator roles", 1)[1].split("\n### ", 1)[0]
    (row,) = [r for r in section.splitlines() if r.startswith("| start, stop and follow")]
    for action in ("StopExecution", "DescribeExecution", "GetExecutionHistory"):
        assert iam_action("stepfunctions", action).resource_types.keys() >= {"execution"}

    assert "executions" in row or ":execution:" in row, row
