"""What ``raidsnap cancel`` stops, and what stopping it leaves.

cancel stops only runs of the stack's restore, recovery and drill workflows: an execution of any
other state machine (another application's, or raidsnap's backup, whose set and freeze have
paths of their own) is no run it knows how to stop. Given an array, it stops the array's running
restore (one a recovery runs, when that is what runs), else its one running recovery or drill;
where that leaves a choice, it names the runs and stops none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from raidsnap.workflows.drill.prepare import RESTORE_NAME_PREFIX

from . import queries
from .backends import Backend
from .follow import narrate
from .progress import Narrator
from .status import NESTED_SUFFIX

STOPPABLE = ("restore", "recovery", "drill")

# A recovery has handed its restore's outcome on once it entered one of these (recovery.asl.json).
_RECOVERY_PAST_RESTORE = ("Settle", "IsSettled", "WaitToSettle", "Finish")
# The restore's assemble command runs on the instance from Assemble until IsAssembled says it
# ended (restore.asl.json).
_ASSEMBLING = ("Assemble", "WaitForAssemble", "PollAssemble")


def to_stop(backend: Backend, what: str) -> tuple[queries.ExecutionInfo, str]:
    """The run to stop, and why that one: the one named, or the array's running restore (else
    its recovery or drill); for a recovery or a drill, the restore it runs, while it runs (the
    parent then ends through its own failure path, which a stop of the parent itself skips)."""
    machines = {w: a for w, a in backend.state_machines.items() if w in STOPPABLE}
    why = ""
    try:
        run = queries.find(backend.sfn, machines, what)
    except queries.ExecutionNotFoundError:
        if what.startswith("arn:"):
            raise
        run, why = _of_array(backend, machines, what)
    if run.workflow not in STOPPABLE:
        raise queries.ExecutionNotFoundError(
            f"{what} is no run of raidsnap's restore, recovery or drill workflows "
            f"({run.state_machine}); raidsnap cancel stops only those"
        )
    if run.status != "RUNNING":
        raise queries.ExecutionNotFoundError(f"{run.workflow} {run.name} has ended: {run.status}")
    if run.workflow in ("recovery", "drill"):
        child = _child(backend, run)
        if child is not None and child.status == "RUNNING":
            return child, (
                f"the restore that {run.workflow} {run.name} runs: stopping it ends that "
                f"{run.workflow} through its own failure path"
            )
    return run, why


def _of_array(
    backend: Backend, machines: dict[str, str], array: str
) -> tuple[queries.ExecutionInfo, str]:
    running = list(_running(backend, machines, array))
    if not running:
        raise queries.ExecutionNotFoundError(
            f"no execution named {array!r}, and no restore, recovery or drill of an array "
            f"{array!r} runs now (raidsnap status shows what does)"
        )
    parents = [r for r in running if r.workflow != "restore"]
    nested = {p.name + NESTED_SUFFIX for p in parents if p.workflow == "recovery"}
    # A restore of the array's own comes first: a drill's restore is its copy, not the array.
    own = [
        r
        for r in running
        if r.workflow == "restore"
        and r.name not in nested
        and not r.name.startswith(RESTORE_NAME_PREFIX)
    ]
    if len(own) == 1:
        return own[0], f"the restore of {array} that runs now"
    recoveries = [p for p in parents if p.workflow == "recovery"]
    if not own and len(recoveries) == 1:
        return recoveries[0], f"the recovery of {array} that runs now"
    if not own and len(parents) == 1:
        return parents[0], f"the {parents[0].workflow} of {array} that runs now"
    names = "; ".join(f"{r.workflow} {r.name}" for r in running)
    raise queries.ExecutionNotFoundError(
        f"several runs of {array} run now ({names}); name the one to stop: raidsnap cancel "
        "<execution name>"
    )


def _running(
    backend: Backend, machines: dict[str, str], array: str
) -> Iterator[queries.ExecutionInfo]:
    """The array's running executions of ``machines``, every page of ListExecutions read (a page
    may hold fewer than maxResults and still have a nextToken: Step Functions API reference,
    ListExecutions)."""
    for workflow in STOPPABLE:
        machine = machines.get(workflow)
        if machine is None:
            continue
        token: str | None = None
        while True:
            asked: dict[str, Any] = {"stateMachineArn": machine, "statusFilter": "RUNNING"}
            if token:
                asked["nextToken"] = token
            page = backend.sfn.list_executions(**asked)
            for e in page["executions"]:
                info = queries.describe(backend.sfn, e["executionArn"], workflow)
                if info.array == array:
                    yield info
            token = page.get("nextToken")
            if not token:
                break


def _child(backend: Backend, run: queries.ExecutionInfo) -> queries.ExecutionInfo | None:
    if run.workflow == "recovery":
        name = run.name + NESTED_SUFFIX
    else:
        name = narrate(backend.sfn, run.arn, run.workflow).facts.restore
    machine = backend.state_machines.get("restore")
    if not name or machine is None:
        return None
    arn = machine.replace(":stateMachine:", ":execution:", 1) + ":" + name
    try:
        return queries.describe(backend.sfn, arn, "restore")
    except ClientError:
        return None


def consequences(run: queries.ExecutionInfo, told: Narrator) -> list[str]:
    """What stopping ``run`` now leaves, from the steps it has entered."""
    entered = {name for _, name in told.states}
    if run.workflow != "restore":
        lines = [
            f"the {run.workflow} stops where it is; a {run.workflow} stopped by hand runs no "
            "failure path of its own"
        ]
        if run.workflow == "recovery":
            lines.extend(_lifecycle_left(run, entered))
        return lines
    lines = []
    if told.mounted:
        lines.append(
            f"the array is assembled and mounted at {told.facts.mount_point or 'its mount point'}"
            " and stays so: it is the user's now; a prewarm command still reading on the "
            "instance goes on (aws ssm cancel-command stops it)"
        )
    elif "CreateVolumes" not in entered:
        lines.append("nothing was created yet: the run ends and its lock is given back")
    else:
        lines.append(
            "the clean-up after a stopped run deletes the volumes this run created that are not "
            "attached, turns off the FSR it enabled and gives the lock back; a volume already "
            "attached is left alone and reported"
        )
    if told.states and told.states[-1][1] in _ASSEMBLING and not told.mounted:
        lines.append(_assemble_goes_on(told))
    if "ReleaseOldArray" in entered and not told.mounted:
        old = ", ".join(told.facts.old_volumes) or "its old members"
        lines.append(
            "WARNING: this replace has released the old array on "
            f"{told.facts.target or 'the instance'}: a stopped run does NOT put it back (only a "
            f"failed run does). {old} stay detached, kept and tagged raidsnap:replaced-by; "
            "bring the array back by hand (attach them, mdadm --assemble, mount) or restore again"
        )
    return lines


def _assemble_goes_on(told: Narrator) -> str:
    """Run Command goes on when the workflow stops: the assemble still assembles, mounts and
    persists the array (SSM documentation, "Canceling a command": only CancelCommand stops a
    command that is in progress)."""
    instance = told.facts.target or "<instance-id>"
    return (
        "WARNING: the assemble command is running on the instance and does not stop with the "
        "run: it goes on to assemble, mount and persist the array (mdadm.conf, fstab). To stop "
        "it, find its id with `aws ssm list-commands --instance-id "
        f"{instance} --filters key=Status,value=InProgress`, then run `aws ssm cancel-command "
        f"--command-id <command-id> --instance-ids {instance}`"
    )


def _lifecycle_left(run: queries.ExecutionInfo, entered: set[str]) -> list[str]:
    """A launch's recovery past its restore holds the launch's lifecycle action: stopped, it
    never completes it, and when the hook times out Auto Scaling applies the hook's default
    result, ABANDON (lib/constructs/recovery.ts), and terminates the instance the array was
    just mounted on (Amazon EC2 Auto Scaling user guide, lifecycle hooks: ABANDON terminates
    a launching instance)."""
    payload = run.input if isinstance(run.input, dict) else {}
    hook = payload.get("lifecycle")
    if payload.get("trigger") != "launch" or not isinstance(hook, dict):
        return []
    if not entered & set(_RECOVERY_PAST_RESTORE):
        return []
    return [
        "WARNING: its restore has ended and the array is mounted on "
        f"{hook.get('instanceId', 'the new instance')}; stopped now, the recovery never "
        "completes the launch's lifecycle action, and when the hook times out Auto Scaling "
        "applies its default result, ABANDON, and terminates that instance with the array on "
        "it. Let the recovery finish instead; if it must stop, complete the action first: "
        "aws autoscaling complete-lifecycle-action --lifecycle-action-result CONTINUE "
        f"--lifecycle-hook-name {hook.get('hookName', '<hook>')} --auto-scaling-group-name "
        f"{hook.get('groupName', '<group>')} --lifecycle-action-token "
        f"{hook.get('token', '<token>')}"
    ]
