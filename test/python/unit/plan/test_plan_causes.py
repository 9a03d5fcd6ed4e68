"""plan.causes: the named error and cause a drill or recovery reports for a failed step."""

from __future__ import annotations

import json

from raidsnap.plan.causes import child_failure


def test_a_failed_lambda_step_reports_its_own_error_and_message() -> None:
    cause = json.dumps({"errorType": "VolumeFailedError", "errorMessage": "volumes ended"})
    assert child_failure({"Error": "VolumeFailedError", "Cause": cause}) == (
        "VolumeFailed",
        "volumes ended",
    )


def test_a_nested_restore_that_failed_reports_the_restore_error_and_where() -> None:
    cause = json.dumps(
        {"executionArn": "arn:x:restore", "status": "FAILED", "error": "NoSet", "cause": "gone"}
    )
    assert child_failure({"Error": "States.TaskFailed", "Cause": cause}) == (
        "NoSet",
        "gone (restore arn:x:restore)",
    )


def test_a_nested_failure_without_an_arn_names_no_restore() -> None:
    cause = json.dumps({"status": "FAILED", "cause": "no luck"})
    assert child_failure({"Error": "CommandFailedError", "Cause": cause}) == (
        "CommandFailed",
        "no luck",
    )


def test_a_stopped_or_timed_out_restore_is_named_so() -> None:
    stopped = json.dumps({"executionArn": "arn:r", "status": "ABORTED"})
    timed = json.dumps({"executionArn": "arn:r", "status": "TIMED_OUT"})
    assert child_failure({"Error": "States.TaskFailed", "Cause": stopped}) == (
        "RestoreAborted",
        "the restore arn:r was stopped before it finished",
    )
    assert child_failure({"Error": "States.TaskFailed", "Cause": timed}) == (
        "RestoreTimedOut",
        "the restore arn:r was timed out before it finished",
    )


def test_a_states_error_becomes_restore_failed_with_its_name_in_the_cause() -> None:
    assert child_failure({"Error": "States.Timeout", "Cause": "took too long"}) == (
        "RestoreFailed",
        "States.Timeout: took too long",
    )
    # JSON that is not an object, or an object that says nothing known, is kept as it is.
    assert child_failure({"Error": "States.Runtime", "Cause": "[1]"}) == (
        "RestoreFailed",
        "States.Runtime: [1]",
    )
    assert child_failure({"Error": "BadError", "Cause": '{"other": 1}'}) == (
        "Bad",
        '{"other": 1}',
    )


def test_an_empty_error_is_a_runtime_failure() -> None:
    assert child_failure({}) == ("RestoreFailed", "States.Runtime: ")
