"""The output schemas and the emulation's host model, held to the scripts themselves."""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from pydantic import ValidationError

from raidsnap_emulation import script_outputs
from raidsnap_emulation.harness import synthesize
from raidsnap_emulation.host import MOUNT_POINT_FORM, SCRIPT_INPUTS
from raidsnap_emulation.ssm_agent import documents_in_template


@cache
def script_of(name: str) -> str:
    """The script as its deployed document carries it: with the libraries it sources inlined."""
    document = documents_in_template(json.loads(synthesize().read_text()))[name]
    (step,) = document["mainSteps"]
    return "\n".join(step["inputs"]["runCommand"]) + "\n"


@pytest.mark.parametrize("name", script_outputs.SCRIPTS)
def test_schema_error_names_are_the_scripts_fail_calls(name: str) -> None:
    emitted = set(re.findall(r"\bfail ([A-Z][A-Za-z]+)\b", script_of(name)))
    assert script_outputs.error_names(name) == emitted


@pytest.mark.parametrize("name", script_outputs.SCRIPTS)
def test_host_model_checks_parameters_with_the_scripts_patterns(name: str) -> None:
    """The emulated script refuses what the script refuses: same parameters, same order, same
    patterns (the patterns are in the refusal message the workflow shows)."""
    script = script_of(name)
    matched = [
        (param, pattern)
        for param, pattern in re.findall(
            r"^\s*(?:if .*\n\s*)?require_match (\w+) \"\$[\w{}]+\" '([^']+)'", script, re.M
        )
    ]
    ours = [
        (param, check.removeprefix("if-set:"))
        for param, check, _ in SCRIPT_INPUTS[name]
        if check not in ("mount", "not-system")
    ]
    assert ours == matched
    mounts = re.findall(r"^require_mount_point (\w+) ", script, re.M)
    assert mounts == [p for p, check, _ in SCRIPT_INPUTS[name] if check == "mount"]
    assert f'require_match "$1" "$2" \'{MOUNT_POINT_FORM}\'' in script or not mounts


@pytest.mark.parametrize("name", script_outputs.SCRIPTS)
def test_host_model_defaults_are_the_scripts(name: str) -> None:
    """${SSM_X-default} (a default when unset) versus ${SSM_X:-} (unset and empty alike)."""
    script = script_of(name)
    for param, _check, unset in SCRIPT_INPUTS[name]:
        if unset is None:
            assert re.search(rf"\$\{{SSM_{param}:-\}}", script), param
        else:
            assert f"${{SSM_{param}-{unset}}}" in script, param


def test_a_failure_line_with_an_error_the_script_never_prints_is_refused() -> None:
    line = json.dumps({"ok": False, "error": "MissingMember", "message": "x"})
    with pytest.raises(ValidationError, match="error"):
        script_outputs.validate("assemble", line)
    ok = json.dumps({"ok": False, "error": "MemberMissing", "message": "x"})
    assert script_outputs.validate("assemble", ok).model_dump()["error"] == "MemberMissing"


def test_persisted_states_are_the_scripts_words_not_booleans() -> None:
    base = {
        "ok": True,
        "mdDevice": "/dev/md0",
        "uuid": "a",
        "setMdUuid": "b",
        "level": "raid0",
        "metadata": "1.2",
        "members": [],
        "mountPoint": "/data",
        "filesystem": {"type": "xfs", "uuid": "u"},
        "readOnly": False,
        "alreadyAssembled": False,
        "stoppedArrays": [],
        "changed": True,
        "warnings": [],
    }
    words = {"mdadmConf": "added", "mdadmConfPath": "/etc/mdadm/mdadm.conf"}
    good = {**base, "persisted": {**words, "initramfs": "updated", "fstab": "replaced"}}
    script_outputs.validate("assemble", json.dumps(good))
    bad = {**base, "persisted": {"mdadmConf": True, "initramfs": True, "fstab": True}}
    with pytest.raises(ValidationError):
        script_outputs.validate("assemble", json.dumps(bad))
