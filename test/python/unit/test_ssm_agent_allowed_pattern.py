"""allowedPattern as the SSM agent applies it.

The agent checks every parameter of a Command document against its allowedPattern before it
runs anything (agent/framework/docparser/docparser.go getValidatedParameters ->
parameterstore.ValidateSSMParameters -> the mandatory AllowedRegexParamValidator), with Go's
``regexp.Compile(pattern).MatchString(value)``
(agent/framework/docparser/paramvalidator/allowedregexparamvalidator). Go's RE2 syntax gives
``$`` without the ``m`` flag one meaning: the end of the text (not before a final newline, as
Python's ``re`` and Java's ``$`` allow). So "true\\n" does not satisfy ``^(true|false)$`` on the
instance, and the step never runs; the renderer must not hand such a value to a script."""

from __future__ import annotations

import json

import pytest

from raidsnap_emulation.harness import synthesize
from raidsnap_emulation.ssm_agent import InvalidParametersError, documents_in_template, render


def document(pattern: str) -> dict:
    return {
        "schemaVersion": "2.2",
        "description": "test",
        "parameters": {
            "Word": {"type": "String", "interpolationType": "ENV_VAR", "allowedPattern": pattern}
        },
        "mainSteps": [
            {
                "action": "aws:runShellScript",
                "name": "step",
                "inputs": {"runCommand": ['echo "$SSM_Word"']},
            }
        ],
    }


@pytest.mark.parametrize("value", ["true\n", "abc\n"])
def test_a_final_newline_fails_an_anchored_pattern_on_the_agent(value: str) -> None:
    with pytest.raises(InvalidParametersError):
        render(document("^(true|false|abc)$"), {"Word": [value]})


def test_no_deployed_document_runs_a_value_with_a_final_newline() -> None:
    documents = documents_in_template(json.loads(synthesize().read_text()))
    valid = {
        "VolumeIds": "vol-0123456789abcdef0",
        "MdUuid": "01234567:89abcdef:01234567:89abcdef",
        "NewMdUuid": "fedcba98:76543210:01234567:89abcdef",
        "MdDevice": "/dev/md0",
        "MountPoint": "/data/db",
        "ReadOnly": "true",
        "Persist": "false",
        "OwnMountPoint": "false",
        "MaxFreezeSeconds": "60",
        "ArrayName": "db1",
        "Method": "auto",
        "FreezeToken": "0123456789abcdef0123456789abcdef",
        "PreSnapshot": "builtin:mysql-lock",
        "PostSnapshot": "/usr/local/sbin/app-hook --done",
        "HookSeconds": "60",
        "Freeze": "true",
    }
    ran = []
    for kind, content in sorted(documents.items()):
        for name in content["parameters"]:
            given = {k: [valid[k]] for k in content["parameters"] if k in valid}
            given[name] = [valid[name] + "\n"]
            try:
                render(content, given)
            except InvalidParametersError:
                continue
            ran.append(f"{kind}.{name}")
    assert ran == [], f"the agent would refuse these, the renderer runs them: {ran}"
