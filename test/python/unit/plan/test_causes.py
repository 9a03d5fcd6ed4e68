"""The named error and cause a failed step or nested restore reports (plan.causes)."""

from __future__ import annotations

import json

import pytest

from raidsnap.plan.causes import child_failure

RESTORE = "arn:aws:states:us-east-1:123456789012:execution:restore:r1"


def test_a_lambda_error_reports_its_public_name_and_message() -> None:
    cause = json.dumps({"errorType": "SnapshotSetNotFoundError", "errorMessage": "no set"})
    assert child_failure({"Error": "SnapshotSetNotFoundError", "Cause": cause}) == (
        "SnapshotSetNotFound",
        "no set",
    )


def test_a_failed_nested_restore_reports_its_own_error_and_where() -> None:
    cause = json.dumps(
        {"Status": "FAILED", "Error": "AssemblyFailed", "Cause": "md0", "ExecutionArn": RESTORE}
    )
    assert child_failure({"Error": "States.TaskFailed", "Cause": cause}) == (
        "AssemblyFailed",
        f"md0 (restore {RESTORE})",
    )


@pytest.mark.parametrize(
    ("status", "error", "word"),
    [("ABORTED", "RestoreAborted", "stopped"), ("TIMED_OUT", "RestoreTimedOut", "timed out")],
)
def test_a_stopped_or_timed_out_restore_is_named_so(status: str, error: str, word: str) -> None:
    cause = json.dumps({"status": status, "executionArn": RESTORE})
    assert child_failure({"Error": "States.TaskFailed", "Cause": cause}) == (
        error,
        f"the restore {RESTORE} was {word} before it finished",
    )


def test_a_states_error_is_never_the_name_a_fail_state_reports() -> None:
    assert child_failure({"Error": "States.Timeout", "Cause": "late"}) == (
        "RestoreFailed",
        "States.Timeout: late",
    )
    assert child_failure({}) == ("RestoreFailed", "States.Runtime: ")


def test_a_cause_that_is_json_but_says_nothing_is_kept_as_it_is() -> None:
    assert child_failure({"Error": "Boom", "Cause": "[1, 2]"}) == ("Boom", "[1, 2]")
    assert child_failure({"Error": "Boom", "Cause": '{"other": 1}'}) == ("Boom", '{"other": 1}')
