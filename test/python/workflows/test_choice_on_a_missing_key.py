"""The emulation runs Choice states as Step Functions does when a rule's Variable is missing.

Step Functions fails the execution when a Choice rule compares a Variable whose path is not in
the state's input: "If the state input doesn't contain the $.type field, the execution fails
and an error is displayed in the execution history"
(https://docs.aws.amazon.com/step-functions/latest/dg/amazon-states-language-choice-state.html;
the Variable of a comparison must be a valid reference path; only IsPresent may ask about a
path that is not there). A Choice has no Catch, so that failure skips every failure path (the
restore's Cleanup, the backup's thaw): the workflows' Choice states must only read keys that are
there on every path to them, and the emulation has to fail a run that does not, or no workflow
test can show it.
"""

from __future__ import annotations

import json

from raidsnap_emulation.harness import Emulation, Execution


def _run(emu: Emulation, name: str, definition: dict[str, object], payload: object) -> Execution:
    # The role the emulation's own state machines run with.
    machine = emu.state_machines["restore"]
    role_arn = emu.sfn.describe_state_machine(stateMachineArn=machine)["roleArn"]
    arn = emu.sfn.create_state_machine(
        name=name, definition=json.dumps(definition), roleArn=role_arn
    )["stateMachineArn"]
    started = emu.sfn.start_execution(stateMachineArn=arn, name=name, input=json.dumps(payload))
    return emu.wait(started["executionArn"])


def test_a_choice_on_a_missing_variable_fails_the_run_with_states_runtime(emu: Emulation) -> None:
    # The shape of the restore's IsCleanupDone / IsFsrUsable: a status read under a step's key.
    definition = {
        "StartAt": "IsItDone",
        "States": {
            "IsItDone": {
                "Type": "Choice",
                "Choices": [
                    {"Variable": "$.cleanup.status", "StringEquals": "pending", "Next": "Wait"}
                ],
                "Default": "Done",
            },
            "Wait": {"Type": "Succeed"},
            "Done": {"Type": "Succeed"},
        },
    }
    run = _run(emu, "choice-missing-key", definition, {"plan": {}})
    assert (run.status, run.error) == ("FAILED", "States.Runtime")


def test_an_is_present_rule_on_a_missing_variable_does_not_fail_the_run(emu: Emulation) -> None:
    # The one rule that may look at a missing path (the restore's IsAssembled uses it).
    definition = {
        "StartAt": "Has",
        "States": {
            "Has": {
                "Type": "Choice",
                "Choices": [
                    {"Variable": "$.volumes.prewarmVolumeIds", "IsPresent": True, "Next": "Yes"}
                ],
                "Default": "No",
            },
            "Yes": {"Type": "Fail", "Error": "Wrong"},
            "No": {"Type": "Succeed"},
        },
    }
    run = _run(emu, "choice-is-present", definition, {"volumes": {}})
    assert run.status == "SUCCEEDED"
