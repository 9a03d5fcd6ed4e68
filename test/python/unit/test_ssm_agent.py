"""The renderer's rules (raidsnap_emulation.ssm_agent), each on a small document of its own."""

from __future__ import annotations

import pytest

from raidsnap_emulation.ssm_agent import (
    AGENT_WORKING_DIRECTORY,
    ENV_VAR_MIN_AGENT_VERSION,
    InvalidParametersError,
    agent_version_key,
    honours_env_var,
    render,
)


def document(parameters: dict, run: list[str], **inputs: object) -> dict:
    return {
        "schemaVersion": "2.2",
        "description": "test",
        "parameters": parameters,
        "mainSteps": [
            {
                "action": "aws:runShellScript",
                "name": "step",
                "precondition": {"StringEquals": ["platformType", "Linux"]},
                "inputs": {"runCommand": run, **inputs},
            }
        ],
    }


ENV = {"type": "String", "interpolationType": "ENV_VAR", "allowedPattern": "^[a-z]+$"}


def test_parameter_level_env_var_is_exported() -> None:
    (step,) = render(document({"Word": ENV}, ['echo "$SSM_Word"']), {"Word": ["abc"]})
    assert step.parameters == {"SSM_Word": "abc"}
    assert step.environment["SSM_Word"] == "abc"


def test_step_level_interpolation_type_exports_nothing() -> None:
    spec = {"type": "String", "allowedPattern": "^[a-z]+$"}
    doc = document({"Word": spec}, ['echo "$SSM_Word"'], interpolationType="ENV_VAR")
    (step,) = render(doc, {"Word": ["abc"]})
    assert step.parameters == {}
    assert not any(k.startswith("SSM_Word") for k in step.environment)


def test_agent_older_than_the_first_env_var_version_exports_nothing() -> None:
    doc = document({"Word": ENV}, ['echo "$SSM_Word"'])
    (old,) = render(doc, {"Word": ["abc"]}, agent_version="3.3.1142.0")
    (first,) = render(doc, {"Word": ["abc"]}, agent_version=ENV_VAR_MIN_AGENT_VERSION)
    assert old.parameters == {} and first.parameters == {"SSM_Word": "abc"}


def test_agent_versions_compare_numerically() -> None:
    assert agent_version_key("3.3.987.0") < agent_version_key("3.3.2746.0")
    assert not honours_env_var("3.3.987.0")
    assert honours_env_var("3.10.0.0") and not honours_env_var("2.99.9999.0")
    with pytest.raises(ValueError, match="not an SSM agent version"):
        agent_version_key("latest")


def test_unknown_and_missing_parameters_are_invalid() -> None:
    doc = document({"Word": ENV}, ["true"])
    with pytest.raises(InvalidParametersError, match='"Other" is not valid'):
        render(doc, {"Word": ["a"], "Other": ["b"]})
    with pytest.raises(InvalidParametersError, match='"Word" is required'):
        render(doc, {})


def test_default_fills_a_parameter_not_sent() -> None:
    doc = document({"Word": {**ENV, "default": "dflt"}}, ["echo {{ Word }}"])
    (step,) = render(doc, {})
    assert step.parameters == {"SSM_Word": "dflt"} and step.script == "echo dflt\n"


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ({"type": "String", "allowedPattern": "^[a-z]+$"}, "ab1"),
        ({"type": "String", "allowedValues": ["a", "b"]}, "c"),
        ({"type": "String", "maxChars": 3}, "abcd"),
        ({"type": "String", "minChars": 2}, "a"),
    ],
)
def test_values_outside_the_constraints_are_invalid(spec: dict, value: str) -> None:
    with pytest.raises(InvalidParametersError):
        render(document({"P": spec}, ["true"]), {"P": [value]})


def test_pattern_is_searched_and_its_dollar_is_the_end_of_the_text() -> None:
    """Go's MatchString searches (an unanchored pattern matches inside the value), and its `$`
    matches only at the very end: a final newline fails `^...$` on the agent."""
    unanchored = {"type": "String", "interpolationType": "ENV_VAR", "allowedPattern": "b"}
    (step,) = render(document({"Word": unanchored}, ["true"]), {"Word": ["abc"]})
    assert step.parameters == {"SSM_Word": "abc"}
    for value in ("abc\n", "abc\nx"):
        with pytest.raises(InvalidParametersError):
            render(document({"Word": ENV}, ["true"]), {"Word": [value]})


def test_braces_are_substituted_for_env_var_parameters_too() -> None:
    doc = document(
        {"Word": ENV}, ['if [ -z "${SSM_Word+x}" ]; then X="{{Word}}"; fi', "{{  Word }}"]
    )
    (step,) = render(doc, {"Word": ["abc"]})
    assert step.script == 'if [ -z "${SSM_Word+x}" ]; then X="abc"; fi\nabc\n'


def test_substitution_is_one_pass_and_turns_double_dollar_into_one() -> None:
    spec = {"type": "String"}
    doc = document({"A": spec, "B": spec}, ["{{A}} {{B}}"])
    (step,) = render(doc, {"A": ["{{B}}"], "B": ["$$HOME"]})
    assert step.script == "{{B}} $HOME\n"


def test_script_file_and_process_are_the_agents() -> None:
    (step,) = render(
        document({}, ["#!/usr/bin/env bash", "echo hi"], timeoutSeconds=42),
        {},
        command_id="c-1",
        instance_id="i-1",
    )
    assert step.script == "#!/usr/bin/env bash\necho hi\n"
    assert step.script_path.endswith("/i-1/document/orchestration/c-1/step/_script.sh")
    assert step.argv == ("sh", "-c", step.script_path)
    assert step.working_directory == AGENT_WORKING_DIRECTORY
    assert step.timeout_seconds == 42
    assert step.environment["SSM_COMMAND_ID"] == "c-1"
    assert step.environment["AWS_SSM_INSTANCE_ID"] == "i-1"


def test_a_step_for_another_platform_does_not_run() -> None:
    doc = document({}, ["true"])
    doc["mainSteps"][0]["precondition"] = {"StringEquals": ["platformType", "Windows"]}
    assert render(doc, {}) == []
