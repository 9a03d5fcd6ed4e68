"""Running raidsnap's SSM Command documents, following them, and reading what they printed.
Every workflow's command loop (send, then poll until done) goes through here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from botocore.exceptions import ClientError

from raidsnap import clients
from raidsnap.aws import error_code
from raidsnap.errors import CommandFailedError, HookFailedError
from raidsnap.models import Poll, wait_toward_end

Status = Literal["pending", "success", "failed"]

_PENDING = {"Pending", "InProgress", "Delayed"}


@dataclass(frozen=True)
class CommandResult:
    command_id: str
    status: Status
    detail: str
    exit_code: int
    stdout: str
    stderr: str

    @property
    def result(self) -> dict[str, Any] | None:
        """The JSON object every raidsnap document prints as its last line, if it did."""
        return last_json_line(self.stdout)

    @property
    def failure(self) -> str | None:
        """``Error: message`` from the last JSON line of a document that says it failed."""
        result = self.result
        if not result or result.get("ok") is not False:
            return None
        error, message = result.get("error"), result.get("message")
        return ": ".join(str(part) for part in (error, message) if part) or None

    def stderr_tail(self, lines: int = 15) -> str:
        """What a person reads about a failed command: the last lines of stderr, then the
        document's own statement of why it failed. SSM returns only the first 8,000 characters
        of stderr (GetCommandInvocation StandardErrorContent), so after a long run of progress
        lines the reason is past that limit; the JSON last line on stdout still carries it."""
        text = self.stderr.strip() or self.stdout.strip()
        tail = "\n".join(text.splitlines()[-lines:])
        failure = self.failure
        if failure and failure not in tail:
            return f"{tail}\n{failure}" if tail else failure
        return tail


def send(
    document: str, instance_id: str, parameters: dict[str, str], comment: str, timeout: int = 600
) -> str:
    return send_timed(document, instance_id, parameters, comment, timeout)[0]


def send_timed(
    document: str, instance_id: str, parameters: dict[str, str], comment: str, timeout: int = 600
) -> tuple[str, datetime]:
    """Send, and say when SSM recorded the request (RequestedDateTime, on AWS's clock): nothing
    the command does on the instance can start before it."""
    response = clients.ssm().send_command(
        DocumentName=document,
        InstanceIds=[instance_id],
        Parameters={name: [value] for name, value in parameters.items()},
        Comment=comment[:100],
        TimeoutSeconds=timeout,
    )
    command = response["Command"]
    return command["CommandId"], command["RequestedDateTime"]


def fetch(command_id: str, instance_id: str) -> CommandResult:
    try:
        inv = clients.ssm().get_command_invocation(CommandId=command_id, InstanceId=instance_id)
    except ClientError as err:
        # Right after SendCommand the invocation may not exist yet.
        if error_code(err) == "InvocationDoesNotExist":
            return CommandResult(command_id, "pending", "Pending", -1, "", "")
        raise
    raw_status = inv.get("Status", "Pending")
    if raw_status in _PENDING:
        status: Status = "pending"
    elif raw_status == "Success":
        status = "success"
    else:
        status = "failed"
    return CommandResult(
        command_id=command_id,
        status=status,
        detail=str(inv.get("StatusDetails", raw_status)),
        exit_code=int(inv.get("ResponseCode", -1)),
        stdout=inv.get("StandardOutputContent", ""),
        stderr=inv.get("StandardErrorContent", ""),
    )


def cancel(command_id: str, instance_id: str) -> None:
    clients.ssm().cancel_command(CommandId=command_id, InstanceIds=[instance_id])


def last_json_line(stdout: str) -> dict[str, Any] | None:
    for raw in reversed(stdout.strip().splitlines()):
        line = raw.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None
    return None


def record(
    command_id: str,
    instance_id: str,
    document: str,
    poll: Poll,
    *,
    fail_on_error: bool,
    predicted_seconds: int | None = None,
) -> dict[str, Any]:
    """What a workflow keeps of a command it started: what poll reads on every look. With
    ``predicted_seconds`` (how long the command is expected to run), the looks follow that
    prediction (models.wait_toward_end) instead of a fixed wait."""
    kept: dict[str, Any] = {
        "commandId": command_id,
        "instanceId": instance_id,
        "document": document,
        "status": "pending",
        **poll.as_dict(),
        "failOnError": fail_on_error,
    }
    if predicted_seconds is not None:
        kept |= {"predictedSeconds": predicted_seconds, "waitedSeconds": 0}
        kept["waitSeconds"] = wait_toward_end(predicted_seconds, 0)
    return kept


def poll(command: dict[str, Any]) -> dict[str, Any]:
    """One look at a running command; failures raise CommandFailedError unless tolerated."""
    result = fetch(command["commandId"], command["instanceId"])
    status = result.status
    poll = Poll.of(command).waited()
    cancelled = status == "pending" and poll.spent
    if cancelled:
        cancel(command["commandId"], command["instanceId"])
        status = "failed"
    updated = dict(command, status=status) | poll.as_dict()
    if "predictedSeconds" in command:
        waited = int(command.get("waitedSeconds", 0)) + poll.wait_seconds
        updated["waitedSeconds"] = waited
        updated["waitSeconds"] = wait_toward_end(int(command["predictedSeconds"]), waited)
    if status == "success":
        updated["result"] = result.result
    if status == "failed":
        tail = result.stderr_tail()
        said = result.result or {}
        # A hook that failed fails the run even where the document's other failures are
        # tolerated (a thaw's): thaw reports HookFailed only once the filesystem is thawed.
        if said.get("error") == "HookFailed":
            raise HookFailedError(f"on {command['instanceId']}: {said.get('message', tail)}")
        if command.get("postOwed"):
            raise HookFailedError(_post_hook_unconfirmed(command, result, cancelled))
        if command.get("failOnError", True):
            raise CommandFailedError(
                f"{command['document']} failed on {command['instanceId']} "
                f"({result.detail}, exit {result.exit_code}): {tail}"
            )
        updated["stderrTail"] = tail
    return updated


def _post_hook_unconfirmed(command: dict[str, Any], result: CommandResult, cancelled: bool) -> str:
    """A thaw that owed a post hook and did not report success: whether the post hook ran is
    not known (an invocation cancelled before it started does not run, one that started may go
    on: "There is no guarantee that the command will be terminated", CancelCommand, SSM API
    reference). The freeze recorded it on the instance, where it is run later."""
    how = (
        f"did not finish within its {command.get('budgetSeconds', 0)} s budget and was cancelled"
        if cancelled
        else f"failed ({result.detail}, exit {result.exit_code}): {result.stderr_tail(3)}"
    )
    return (
        f"on {command['instanceId']}: the thaw {command['commandId']} {how}, so the "
        "post-snapshot hook is not confirmed and may still be owed. The freeze recorded it in "
        "/var/lib/raidsnap on the instance: the freeze guard runs it at its deadline, and if "
        "the instance restarted since, the next freeze of the mount point runs it first"
    )
