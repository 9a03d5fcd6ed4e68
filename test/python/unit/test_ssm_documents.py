"""Offline checks of the SSM Command documents and the scripts they inline (no VM needed).

What runs on an instance is the deployed script: the script of ssm/scripts with the libraries
it sources (ssm/scripts/lib) inlined at synth. Everything that runs or inspects a script here
takes that text from the synthesized template.

Patterns are checked with Python's `re`. SSM evaluates allowedPattern with a Java regex; for the
constructs used here (anchors, classes, bounded repetition, alternation) the two agree, with one
difference that matters: Java's `$` also matches before a final line terminator when the
pattern is searched for rather than matched whole, so "valid\\n" is tested both ways below and
the scripts' own checks (bash `=~`, where `$` is the end of the string) must reject it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from raidsnap.models import SYSTEM_DIRECTORIES, SYSTEM_TREES, system_directory
from raidsnap_emulation.harness import synthesize
from raidsnap_emulation.ssm_agent import InvalidParametersError, documents_in_template, render

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "ssm" / "documents"
SCRIPTS = REPO / "ssm" / "scripts"
LIBRARY = SCRIPTS / "lib"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"

EXPECTED_PARAMETERS = {
    "discover": {"ArrayName"},
    "freeze": {
        "MountPoint",
        "MaxFreezeSeconds",
        "FreezeToken",
        "PreSnapshot",
        "PostSnapshot",
        "HookSeconds",
        "Freeze",
    },
    "thaw": {"MountPoint", "MaxFreezeSeconds", "FreezeToken", "PostSnapshot", "HookSeconds"},
    "assemble": {
        "VolumeIds",
        "MdUuid",
        "NewMdUuid",
        "MdDevice",
        "MountPoint",
        "OwnMountPoint",
        "ReadOnly",
        "Persist",
    },
    "release": {"MdDevice", "MdUuid", "MountPoint", "OwnMountPoint"},
    "prewarm": {"VolumeIds", "Method"},
}

VALID = {
    "ArrayName": "db1",
    "MountPoint": "/data/pg_main",
    "MaxFreezeSeconds": "30",
    "VolumeIds": "vol-0123456789abcdef0,vol-0fedcba9876543210",
    "MdUuid": "90cb05cc:861c4468:b2f18f0f:60608708",
    "NewMdUuid": "1f2e3d4c:5b6a7988:90cb05cc:861c4468",
    "MdDevice": "/dev/md0",
    "ReadOnly": "false",
    "Persist": "true",
    "OwnMountPoint": "false",
    "Method": "auto",
    "FreezeToken": "0123456789abcdef0123456789abcdef",
    "PreSnapshot": "builtin:postgresql-checkpoint",
    "PostSnapshot": "/usr/local/bin/app-hook --flag=1 release",
    "HookSeconds": "30",
    "Freeze": "true",
}

INJECTIONS = [
    "; rm -rf /",
    "$(reboot)",
    "`reboot`",
    "\nreboot",
    "/../etc",
    "&& id",
    "| sh",
    "'",
    '"',
]


def load(name: str) -> dict:
    return yaml.safe_load((DOCS / f"{name}.yaml").read_text())


def script_of(name: str) -> str:
    return (SCRIPTS / f"{name}.sh").read_text()


def parameters() -> list[tuple[str, str]]:
    return [(doc, p) for doc, ps in EXPECTED_PARAMETERS.items() for p in sorted(ps)]


@cache
def synthesized() -> dict[str, dict[str, Any]]:
    """The documents as deployed: the Content of each AWS::SSM::Document in cdk.out."""
    return documents_in_template(json.loads(synthesize().read_text()))


def deployed_script(name: str) -> str:
    """The script of the deployed document, as the agent writes it to _script.sh."""
    (step,) = synthesized()[name]["mainSteps"]
    return "\n".join(step["inputs"]["runCommand"]) + "\n"


def valid_parameters(name: str) -> dict[str, list[str]]:
    return {p: [VALID[p]] for p in EXPECTED_PARAMETERS[name]}


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_document_shape(name: str) -> None:
    doc = load(name)
    assert doc["schemaVersion"] == "2.2"
    assert doc["description"]
    assert set(doc["parameters"]) == EXPECTED_PARAMETERS[name]
    (step,) = doc["mainSteps"]
    assert step["action"] == "aws:runShellScript"
    assert step["precondition"] == {"StringEquals": ["platformType", "Linux"]}
    assert step["inputs"]["runCommand"] == [f"@include {name}.sh"]
    assert (SCRIPTS / f"{name}.sh").is_file()
    assert "{{" not in json.dumps(doc), "parameters must reach the script as environment variables"


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_agent_exports_every_parameter_of_the_synthesized_document(name: str) -> None:
    """Rendered as the SSM agent renders it, the deployed document hands the script every
    parameter as SSM_<Name>, and the script reads no SSM_ variable it is not given."""
    (step,) = render(synthesized()[name], valid_parameters(name))
    assert step.parameters == {f"SSM_{p}": VALID[p] for p in EXPECTED_PARAMETERS[name]}
    read = set(re.findall(r"\bSSM_([A-Za-z0-9]+)", step.script))
    assert read == EXPECTED_PARAMETERS[name], f"{name}.sh reads {sorted(read)}"
    assert step.script == deployed_script(name), "the script runs as deployed, nothing substituted"


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_rendered_document_gets_past_its_parameter_checks(name: str) -> None:
    """The deployed document, run as the agent runs it (script file, sh -c, its working
    directory and environment): the script accepts its parameters. What stops it afterwards
    on this machine (no md array, no such mount point, a missing tool) is not InvalidInput."""
    (step,) = render(synthesized()[name], valid_parameters(name))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "_script.sh"
        path.write_text(step.script)
        path.chmod(0o700)
        # The agent's own environment as the packaged unit gives it, plus a short device wait
        # (the agent passes its environment through), so assemble does not wait 120 s here.
        agent_env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        agent_env["RAIDSNAP_DEVICE_WAIT_SECONDS"] = "0"
        proc = subprocess.run(
            [*step.argv[:2], str(path)],
            cwd=step.working_directory,
            env=step.full_environment(agent_env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode != 2 and out.get("error") != "InvalidInput", (out, proc.stderr[-500:])


def test_renderer_refuses_what_the_synthesized_patterns_refuse() -> None:
    for name, params in EXPECTED_PARAMETERS.items():
        for param in params:
            with pytest.raises(InvalidParametersError, match=param):
                render(synthesized()[name], {**valid_parameters(name), param: ["$(reboot)"]})


@pytest.mark.parametrize(("name", "param"), parameters())
def test_parameter_is_typed_described_and_strict(name: str, param: str) -> None:
    spec = load(name)["parameters"][param]
    assert spec["type"] == "String"
    assert len(spec["description"]) > 10
    pattern = spec["allowedPattern"]
    assert pattern.startswith("^") and pattern.endswith("$")
    assert re.fullmatch(pattern, VALID[param])
    if "default" in spec:
        assert re.fullmatch(pattern, spec["default"]), "the default must satisfy its own pattern"
    assert f"SSM_{param}" in script_of(name), f"{name}.sh never reads SSM_{param}"


@pytest.mark.parametrize(("name", "param"), parameters())
def test_pattern_rejects_injection(name: str, param: str) -> None:
    pattern = load(name)["parameters"][param]["allowedPattern"]
    valid = VALID[param]
    for bad in INJECTIONS:
        for value in (bad, valid + bad, bad + valid):
            assert not re.fullmatch(pattern, value), f"{param} accepts {value!r}"
            # Java's find() with an unanchored-at-newline `$`: the middle and leading forms must
            # still fail; the trailing-newline form is left to the scripts (see module doc).
            if not value.endswith("\n" + "reboot") and not value.endswith("\n"):
                assert not re.search(pattern, value), f"{param} (search) accepts {value!r}"
    assert not re.fullmatch(pattern, valid * 5000)
    assert not re.fullmatch(pattern, "a" * 5000)
    assert not re.fullmatch(pattern, valid + "\n")


@pytest.mark.parametrize(
    "value",
    ["/", "/data/..", "/data/../etc", "/./data", "//data", "data", "/da ta", "/data/x" * 40],
)
def test_mount_point_pattern_refuses_traversal_root_and_oddities(value: str) -> None:
    pattern = load("assemble")["parameters"]["MountPoint"]["allowedPattern"]
    assert not re.fullmatch(pattern, value)


@pytest.mark.parametrize(
    "value", ["/data", "/mnt/md0", "/srv/pg_15/main", "/.hidden", "/a..b", "/x/...y"]
)
def test_mount_point_pattern_accepts_ordinary_paths(value: str) -> None:
    assert re.fullmatch(load("freeze")["parameters"]["MountPoint"]["allowedPattern"], value)


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_script_is_strict_bash_without_templates(name: str) -> None:
    text = deployed_script(name)
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert "{{" not in text and "}}" not in text


def code_only(text: str) -> str:
    """Shell text with comments and quoted strings removed, so words in messages and comments
    ("never --force") do not count as commands."""
    out = []
    for raw in text.splitlines():
        if raw.lstrip().startswith("#"):
            continue
        code = re.sub(r"'[^']*'", "''", raw)
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', code)
        code = re.sub(r"(^|\s)#.*$", "", code)
        out.append(code)
    return "\n".join(out)


FORBIDDEN = [
    r"--create\b",
    r"\bmkfs(\.\w+)?\b",
    r"--force\b",
    r"--zero-superblock\b",
    r"\bwipefs\b",
    r"--scan\b",
    r"\bmdadm\s+-C\b",
    r"\bdd\b[^\n]*\bof=/dev/(?!null)",
]


def forbidden_in(text: str) -> list[str]:
    code = code_only(text)
    return [p for p in FORBIDDEN if re.search(p, code)]


def test_forbidden_detector_sees_commands_not_words() -> None:
    assert forbidden_in("mdadm --create /dev/md0 --level=0") == [r"--create\b"]
    assert forbidden_in("  mkfs.xfs /dev/md0  # format") == [r"\bmkfs(\.\w+)?\b"]
    assert forbidden_in('x=1 # never --force\nsay "no --zero-superblock here"\n# mkfs') == []


@pytest.mark.parametrize("name", ["assemble", "release", "prewarm", "discover"])
def test_no_destructive_command(name: str) -> None:
    assert forbidden_in(deployed_script(name)) == []


def test_assemble_names_the_array_and_its_devices() -> None:
    code = code_only(script_of("assemble"))
    assert re.search(
        r'mdadm --assemble "\$md_dev" "\$\{assemble_args\[@\]\}" "\$\{members\[@\]\}"',
        script_of("assemble"),
    )
    # exactly the checked devices, under the new identity, whatever mdadm.conf says
    assert 'assemble_args=(--config=none --update=uuid --uuid="$new_uuid")' in script_of("assemble")
    assert "--run" not in code


def run_script(name: str, env: dict[str, str]) -> tuple[int, dict]:
    """The deployed script run by hand (bash FILE) with exactly this environment."""
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.sh"
        path.write_text(deployed_script(name))
        proc = subprocess.run(
            ["bash", str(path)],
            env={**clean, **env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("name", "param"), parameters())
def test_script_rejects_what_the_pattern_would_have(name: str, param: str) -> None:
    """Defence in depth: with the document's patterns bypassed (the raw script, run with a
    hand-made environment on purpose), the script refuses on its own, before it touches
    anything, including the trailing-newline form that SSM's pattern search lets through."""
    base = {f"SSM_{p}": VALID[p] for p in EXPECTED_PARAMETERS[name]}
    for bad in [VALID[param] + "\n", VALID[param] + "; rm -rf /", "$(reboot)", "/data/../etc"]:
        rc, out = run_script(name, {**base, f"SSM_{param}": bad})
        assert rc == 2 and out == {"ok": False, "error": "InvalidInput", "message": out["message"]}
        assert param in out["message"]


def test_freeze_refuses_root() -> None:
    rc, out = run_script("freeze", {"SSM_MountPoint": "/", "SSM_MaxFreezeSeconds": "5"})
    assert rc == 2 and out["error"] == "InvalidInput"


# The scripts that act on a MountPoint other than to thaw it, and the paths of the rule's cases.
MOUNTING_SCRIPTS = ["assemble", "freeze", "release"]
RULE_PATHS = [
    *SYSTEM_TREES,
    *(t + "/x/y" for t in SYSTEM_TREES),
    *(t + "x" for t in SYSTEM_TREES),
    *SYSTEM_DIRECTORIES,
    *(d + "/x" for d in SYSTEM_DIRECTORIES),
    *(d + "x" for d in SYSTEM_DIRECTORIES),
    "/",
    "/data",
    "/var/lib/postgresql",
    "/mnt/md0",
    "/srv/db",
    "/home/data",
    "/etc/cron.d",
    "/usr/local",
    "/var/log/app",
    "/.hidden",
]


def test_the_system_directory_rule_is_the_workflows_rule() -> None:
    """The scripts' system-directory rule (lib/system_directory.sh) gives what
    raidsnap.models.system_directory gives, for every listed directory and its neighbours."""
    program = (
        'source "$1"; shift\n'
        'for p in "$@"; do printf \'%s=%s\\n\' "$p" "$(system_directory "$p")"; done'
    )
    proc = subprocess.run(
        ["bash", "-c", program, "_", str(LIBRARY / "system_directory.sh"), *RULE_PATHS],
        capture_output=True,
        text=True,
        check=True,
        env={"LC_ALL": "C", "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    got = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert got == {p: system_directory(p) or "" for p in RULE_PATHS}


@pytest.mark.parametrize("name", MOUNTING_SCRIPTS)
def test_script_carries_the_system_directory_rule(name: str) -> None:
    """Each script that mounts, freezes or unmounts carries that library, once."""
    body = [
        line
        for line in (LIBRARY / "system_directory.sh").read_text().splitlines()
        if not line.startswith(("# shellcheck ", "source "))
    ]
    lines = deployed_script(name).splitlines()
    starts = [i for i in range(len(lines)) if lines[i : i + len(body)] == body]
    assert len(starts) == 1, f"{name}: the rule's lines stand {len(starts)} times"


@pytest.mark.parametrize("name", MOUNTING_SCRIPTS)
@pytest.mark.parametrize(
    "mount_point", ["/etc", "/etc/cron.d", "/usr/lib", "/var", "/boot", "/root/x", "/mnt", "/home"]
)
def test_script_refuses_a_system_mount_point(name: str, mount_point: str) -> None:
    base = {f"SSM_{p}": VALID[p] for p in EXPECTED_PARAMETERS[name]}
    rc, out = run_script(name, {**base, "SSM_MountPoint": mount_point})
    assert rc == 2 and out["error"] == "InvalidInput", out
    assert "MountPoint" in out["message"] and "system directory" in out["message"], out


def test_json_escaping_of_hostile_text() -> None:
    probe = 'a"b\\c\nd\te\x01f'
    proc = subprocess.run(
        ["bash", "-c", 'source "$1"; json_str "$2"', "_", str(LIBRARY / "json.sh"), probe],
        capture_output=True,
        text=True,
        check=True,
        env={"LC_ALL": "C"},
    )
    assert json.loads(proc.stdout) == probe


def test_shellcheck_follows_every_script_into_its_libraries() -> None:
    """shellcheck -x passes on every script and library, reading each library a file sources
    (a missing one would be SC1091, reported as an error here)."""
    files = sorted(SCRIPTS.glob("*.sh")) + sorted(LIBRARY.glob("*.sh"))
    proc = subprocess.run(
        [str(SHELLCHECK), "-x", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert {p.stem for p in SCRIPTS.glob("*.sh")} == set(EXPECTED_PARAMETERS)


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_shellcheck_passes_on_the_deployed_script(name: str) -> None:
    """The script as the document carries it is one file that shellcheck accepts on its own."""
    proc = subprocess.run(
        [str(SHELLCHECK), "--shell=bash", "-"],
        input=deployed_script(name),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
