"""What a restore tells the workflow waiting on it, and whom it believes is waiting."""

from __future__ import annotations

import json

import pytest

from raidsnap.aws import awaited, callbacks
from raidsnap.errors import InvalidInputError, UntrustedReportError
from raidsnap.models import parse_restore_input
from raidsnap.workflows.recovery import following
from raidsnap.workflows.recovery.contracts import RecoveryState


@pytest.mark.parametrize(
    ("status", "error", "told"),
    [
        # A stop is a stop, whatever error its caller gave StopExecution.
        ("ABORTED", "RestoreUsable", "RestoreAborted"),
        ("ABORTED", "CommandFailed", "RestoreAborted"),
        ("ABORTED", None, "RestoreAborted"),
        ("TIMED_OUT", "RestoreUsable", "RestoreTimedOut"),
        # A failure by its own name, except one the parent takes for something else.
        ("FAILED", "CommandFailed", "CommandFailed"),
        ("FAILED", "RestoreUsable", "RestoreFailed"),
        ("FAILED", "RestoreUnanswered", "RestoreFailed"),
        ("FAILED", "States.Runtime", "RestoreFailed"),
        ("FAILED", None, "RestoreFailed"),
    ],
)
def test_a_parent_is_told_a_childs_end_by_what_it_was(
    status: str, error: str | None, told: str
) -> None:
    assert callbacks.parent_error(status, error) == told


def test_the_input_digest_does_not_depend_on_how_the_json_was_written() -> None:
    request = {"array": "db1", "setId": "latest", "mode": "attach", "targetInstanceId": "i-0a"}
    written = json.dumps(request, sort_keys=True)
    given_back = json.loads(json.dumps(json.loads(written), separators=(",", ":")))
    assert awaited.digest(given_back) == awaited.digest(request)
    assert awaited.digest({**request, "mountPoint": "/data"}) != awaited.digest(request)


def test_a_waiting_record_answers_only_the_run_it_started() -> None:
    request = {"array": "db1", "setId": "latest"}
    record = awaited.Awaited(
        restore_name="alarm-db1-x-restore",
        token="t",  # noqa: S106 - not a secret
        parent_arn="arn:aws:states:us-east-1:123456789012:execution:raidsnap-recovery:alarm-db1-x",
        array="db1",
        input_digest=awaited.digest(request),
    )
    assert record.started("db1", request)
    assert not record.started("evil", {**request, "array": "evil"})
    assert not record.started("db1", {**request, "targetInstanceId": "i-0b"})
    assert not record.started(None, None)


def test_a_restore_input_naming_a_callback_is_refused() -> None:
    with pytest.raises(InvalidInputError) as refused:
        parse_restore_input({"array": "db1", "callback": {"taskToken": "stolen"}})
    assert refused.value.field == "callback"


RESTORE = "arn:aws:states:us-east-1:123456789012:execution:raidsnap-restore:alarm-db1-x-restore"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"array": "evil"}, "array 'evil'"),
        ({"executionArn": RESTORE.replace("alarm-db1-x", "other")}, "not this run's"),
        ({"setId": ""}, "no setId"),
        ({"mountPoint": None}, "no mountPoint"),
    ],
)
def test_a_report_of_a_mounted_array_is_believed_only_from_the_recoverys_own_restore(
    change: dict[str, object], why: str
) -> None:
    state = RecoveryState.model_validate(
        {
            "input": {"array": "db1", "trigger": "alarm", "restore": {"array": "db1"}},
            "execution": {"id": RESTORE.replace("-restore", ""), "name": "alarm-db1-x"},
        }
    )
    report = {"array": "db1", "executionArn": RESTORE, "setId": "db1-1", "mountPoint": "/data"}
    assert following.checked_report(report, state, RESTORE) == report
    with pytest.raises(UntrustedReportError, match=why):
        following.checked_report({**report, **change}, state, RESTORE)
    with pytest.raises(UntrustedReportError):
        following.checked_report("RestoreUsable", state, RESTORE)
