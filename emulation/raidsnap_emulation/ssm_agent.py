"""A Command document as Systems Manager and the SSM agent turn it into a process.

``render`` takes a document's content (what CloudFormation stores: the ``Content`` of the
synthesized ``AWS::SSM::Document``) and the ``Parameters`` of a SendCommand call, and returns per
``aws:runShellScript`` step exactly what the agent runs: the script file's bytes, the program and
arguments, the working directory and the environment. The emulation's SendCommand and the VM
suite both go through it, so neither can hand a script an environment the agent would not give.

Rules, each with where it comes from (docs/emulation.md's table "AWS rules the emulation
enforces" has the same rows with their addresses):

- Only declared parameters may be sent; every parameter without a ``default`` must be sent; a
  value must satisfy its ``allowedPattern``, ``allowedValues``, ``minChars`` and ``maxChars``;
  otherwise SendCommand fails with ``InvalidParameters`` and nothing runs.
  Source: SendCommand API reference (InvalidParameters); "Data elements and parameters".
- ``allowedPattern`` is searched for, not matched whole, with Go's ``regexp.MatchString`` on the
  instance before anything runs: ``^...$`` anchors it, ``$`` is the end of the text only (a
  final newline fails), and ``\\d``/``\\w``/``\\s`` are ASCII.
  Source: agent/framework/docparser/docparser.go getValidatedParameters ->
  agent/framework/docparser/paramvalidator/allowedregexparamvalidator; Go regexp/syntax.
- A parameter whose OWN definition has ``interpolationType: ENV_VAR`` is exported as
  ``SSM_<Name>``. The field is read nowhere else: under a step's ``inputs`` it is ignored
  (``aws:runShellScript`` takes runCommand, workingDirectory, timeoutSeconds, environment).
  Source: "Data elements and parameters"; agent/plugins/runscript/runscript.go.
- Agents older than 3.3.2746.0 export nothing for ENV_VAR.
  Source: "Troubleshooting parameter handling issues"; AWS blog "AWS Systems Manager Run Command
  now supports interpolating parameters into environment variables".
- ``{{ Name }}`` (spaces allowed inside the braces) is replaced by the value in every step
  input, ENV_VAR or not: the documented fallback for older agents, ``export SSM_X="{{X}}"``
  inside ``if [ -z "${SSM_X+x}" ]``, relies on the substitution still happening. One pass; a
  ``$$`` in a value becomes ``$``.
  Source: agent/framework/docparser/parameters/parameters.go (ReplaceParameter);
  "Troubleshooting parameter handling issues".
- A step runs only where its ``precondition`` ``StringEquals [platformType, Linux]`` holds.
  Source: "Data elements and parameters" (precondition).
- runCommand lines are joined with newlines, plus a final one, into ``_script.sh`` (mode 0700)
  in the step's orchestration directory and run as ``sh -c <that path>`` (the kernel honours its
  ``#!``), as the leader of its own process group, in the agent's working directory
  (``/usr/bin/`` under the packaged systemd unit).
  Source: agent/plugins/runscript/runshellscript.go and runscript.go; agent/plugins/pluginutil
  (CreateScriptFile); agent/executers/executers_unix.go; packaging/linux/amazon-ssm-agent.service.
- The environment is the agent's own plus ``SSM_COMMAND_ID``, the ENV_VAR parameters,
  ``AWS_SSM_INSTANCE_ID``, ``AWS_SSM_REGION_NAME``, ``AWS_SSM_PLATFORM_NAME`` and
  ``AWS_SSM_PLATFORM_VERSION``.
  Source: agent/executers/executers.go (prepareEnvironment); runscript.go.
- A step's ``timeoutSeconds`` bounds it (3600 s when absent).
  Source: agent/plugins/pluginutil (ValidateExecutionTimeout).

Agent source: github.com/aws/amazon-ssm-agent (paths above). The ENV_VAR export itself is not in
the public source this was checked against (it predates 3.3.2746.0); its behaviour is taken from
the AWS documentation named above.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_VAR_MIN_AGENT_VERSION = "3.3.2746.0"
"""The first SSM agent that exports ``SSM_<Name>`` for ``interpolationType: ENV_VAR``."""

CURRENT_AGENT_VERSION = "3.3.3598.0"
"""A released agent (January 2026), the version an instance reports unless told otherwise."""

AGENT_WORKING_DIRECTORY = "/usr/bin/"
"""WorkingDirectory of the packaged amazon-ssm-agent.service; plugins inherit it."""

AGENT_BASE_ENVIRONMENT: dict[str, str] = {
    # What systemd gives a system service (no Environment= in the packaged unit).
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}

DEFAULT_STEP_TIMEOUT_SECONDS = 3600
SCRIPT_NAME = "_script.sh"
ORCHESTRATION_ROOT = "/var/lib/amazon/ssm/{instance}/document/orchestration"

_PARAMETER_NAME = re.compile(r"^[a-zA-Z0-9]+$")


class InvalidParametersError(Exception):
    """SendCommand would answer InvalidParameters: the command is not started anywhere."""

    code = "InvalidParameters"


class UnsupportedDocumentError(Exception):
    """The document uses something this renderer does not model; refused rather than guessed."""


def agent_version_key(version: str) -> tuple[int, ...]:
    """Numeric order of agent versions: 3.3.987.0 < 3.3.2746.0 (not string order)."""
    parts = version.strip().split(".")
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"not an SSM agent version: {version!r}")
    return tuple(int(p) for p in parts)


def honours_env_var(agent_version: str) -> bool:
    return agent_version_key(agent_version) >= agent_version_key(ENV_VAR_MIN_AGENT_VERSION)


@dataclass(frozen=True)
class RenderedStep:
    """One ``aws:runShellScript`` step as the agent runs it."""

    name: str
    script: str  # the bytes of _script.sh
    script_path: str
    argv: tuple[str, ...]
    working_directory: str
    # What the agent adds to its own environment for this process.
    environment: dict[str, str]
    timeout_seconds: int
    # The SSM_<Name> variables among ``environment``: what a script reads as its parameters.
    parameters: dict[str, str] = field(default_factory=dict)

    def full_environment(
        self, agent_environment: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The process environment: the agent's own (inherited) with the step's on top."""
        base = dict(AGENT_BASE_ENVIRONMENT if agent_environment is None else agent_environment)
        return {**base, **self.environment}


def _declared(content: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    declared = content.get("parameters") or {}
    if not isinstance(declared, dict):
        raise UnsupportedDocumentError("parameters must be a map")
    return {str(k): dict(v or {}) for k, v in declared.items()}


def _as_strings(name: str, spec: Mapping[str, Any], values: list[str]) -> list[str]:
    kind = spec.get("type", "String")
    if kind == "String" and len(values) != 1:
        raise InvalidParametersError(
            f'Parameter "{name}" is of type String and takes exactly one value, not {len(values)}.'
        )
    if kind not in ("String", "StringList"):
        raise UnsupportedDocumentError(f"parameter {name} has type {kind}")
    return values


def validate_parameters(
    content: Mapping[str, Any], given: Mapping[str, list[str]], document_name: str = "document"
) -> dict[str, str]:
    """SendCommand's check of ``Parameters`` against the document; returns every parameter's
    value (given, else its default) as the agent will substitute it."""
    declared = _declared(content)
    for key in given:
        if key not in declared:
            raise InvalidParametersError(
                f'Parameter "{key}" is not valid for {document_name}: the document declares '
                f"{', '.join(sorted(declared)) or 'no parameters'}."
            )
    values: dict[str, str] = {}
    for key, spec in declared.items():
        if not _PARAMETER_NAME.match(key):
            raise UnsupportedDocumentError(f"parameter name {key!r} is not alphanumeric")
        if key in given:
            raw = _as_strings(key, spec, [str(v) for v in given[key]])
        elif "default" in spec:
            default = spec["default"]
            raw = [str(v) for v in default] if isinstance(default, list) else [str(default)]
        else:
            raise InvalidParametersError(
                f'Parameter "{key}" is required by {document_name} and has no default.'
            )
        if key in given:
            for value in raw:
                _check_value(key, spec, value)
        values[key] = raw[0] if spec.get("type", "String") == "String" else ",".join(raw)
    return values


def _check_value(key: str, spec: Mapping[str, Any], value: str) -> None:
    pattern = spec.get("allowedPattern")
    # The agent checks every value before it runs anything, with Go's regexp MatchString
    # (agent/framework/docparser/paramvalidator/allowedregexparamvalidator): a search, in RE2
    # syntax, where `$` is the end of the text only and \d \w \s are ASCII. Whatever the
    # service let by, a value that fails here never reaches a script.
    if pattern and not go_regexp(str(pattern)).search(value):
        raise InvalidParametersError(
            f'Parameter "{key}" "{value}" failed to satisfy constraint: Member must satisfy '
            f"regular expression pattern: {pattern}"
        )
    allowed = spec.get("allowedValues")
    if allowed is not None and value not in [str(a) for a in allowed]:
        raise InvalidParametersError(
            f'Parameter "{key}" "{value}" is not one of the allowed values {list(allowed)}.'
        )
    low, high = spec.get("minChars"), spec.get("maxChars")
    if (low is not None and len(value) < int(low)) or (high is not None and len(value) > int(high)):
        raise InvalidParametersError(
            f'Parameter "{key}" has {len(value)} characters; minChars {low}, maxChars {high}.'
        )


def go_regexp(pattern: str) -> re.Pattern[str]:
    """A Python pattern that matches what Go's RE2 ``regexp`` matches for ``pattern``.

    The two differ, for the patterns documents use, in two ways: Go's ``$`` (without the m flag)
    matches only at the end of the text, Python's also before a final newline; and Go's
    ``\\d``, ``\\w``, ``\\s`` are ASCII-only. So each unescaped ``$`` outside a character class
    becomes ``\\Z``, and the pattern is compiled with re.ASCII."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]" or (bool(out) and out[-1] in ("[", "[^"))
            out.append(c)
        elif c == "[":
            in_class = True
            out.append("[^" if pattern[i + 1 : i + 2] == "^" else "[")
            i += 1 if pattern[i + 1 : i + 2] == "^" else 0
        elif c == "$":
            out.append(r"\Z")
        else:
            out.append(c)
        i += 1
    return re.compile("".join(out), re.ASCII)


MIN_STEP_TIMEOUT_SECONDS = 5
MAX_STEP_TIMEOUT_SECONDS = 172800


def execution_timeout(raw: object, values: Mapping[str, str]) -> int:
    """The seconds the agent lets a step run before it stops it (ExecutionTimedOut).

    As agent/plugins/pluginutil ValidateExecutionTimeout reads ``inputs.timeoutSeconds`` once
    parameters are substituted: an integer, or a string holding an integer (a float is cut to
    its integer part); anything else, or a value outside 5..172,800, is the default 3,600."""
    value = _substitute(raw, values) if isinstance(raw, str) else raw
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            try:
                number = int(float(value))
            except ValueError:
                number = None
    if number is None or not MIN_STEP_TIMEOUT_SECONDS <= number <= MAX_STEP_TIMEOUT_SECONDS:
        return DEFAULT_STEP_TIMEOUT_SECONDS
    return number


def _substitute(text: str, values: Mapping[str, str]) -> str:
    """Every ``{{ Name }}`` of a declared parameter, in one pass, left to right (a value that
    itself looks like ``{{ Other }}`` is not expanded again), as ReplaceParameter does."""
    if not values:
        return text
    names = "|".join(re.escape(k) for k in sorted(values, key=len, reverse=True))
    token = re.compile(r"{{\s*(" + names + r")\s*}}")
    return token.sub(lambda m: values[m.group(1)].replace("$$", "$"), text)


def _precondition_holds(step: Mapping[str, Any], platform_type: str) -> bool:
    pre = step.get("precondition")
    if not pre:
        return True
    if set(pre) != {"StringEquals"}:
        raise UnsupportedDocumentError(f"precondition {pre} is not modelled")
    left, right = pre["StringEquals"]
    if left != "platformType":
        raise UnsupportedDocumentError(f"precondition on {left} is not modelled")
    return bool(right == platform_type)


def render(
    content: Mapping[str, Any],
    given: Mapping[str, list[str]],
    *,
    agent_version: str = CURRENT_AGENT_VERSION,
    command_id: str = "00000000-0000-0000-0000-000000000000",
    instance_id: str = "i-00000000000000000",
    region: str = "us-east-1",
    platform_name: str = "Amazon Linux",
    platform_version: str = "2023",
    document_name: str = "document",
) -> list[RenderedStep]:
    """What the agent runs for this command on one Linux instance, step by step."""
    if str(content.get("schemaVersion")) != "2.2":
        raise UnsupportedDocumentError("only schemaVersion 2.2 Command documents are modelled")
    values = validate_parameters(content, given, document_name)
    declared = _declared(content)
    exported: dict[str, str] = {}
    if honours_env_var(agent_version):
        exported = {
            f"SSM_{k}": values[k]
            for k, spec in declared.items()
            if spec.get("interpolationType") == "ENV_VAR"
        }
    steps: list[RenderedStep] = []
    for step in content.get("mainSteps") or []:
        if step.get("action") != "aws:runShellScript":
            raise UnsupportedDocumentError(f"action {step.get('action')} is not modelled")
        if not _precondition_holds(step, "Linux"):
            continue
        inputs = step.get("inputs") or {}
        lines = inputs.get("runCommand") or []
        if isinstance(lines, str):
            lines = [lines]
        script = "\n".join(_substitute(str(line), values) for line in lines) + "\n"
        timeout = execution_timeout(inputs.get("timeoutSeconds"), values)
        name = str(step.get("name", "aws:runShellScript"))
        root = ORCHESTRATION_ROOT.format(instance=instance_id)
        path = f"{root}/{command_id}/{name}/{SCRIPT_NAME}"
        environment = {
            "SSM_COMMAND_ID": command_id,
            **exported,
            "AWS_SSM_INSTANCE_ID": instance_id,
            "AWS_SSM_REGION_NAME": region,
            "AWS_SSM_PLATFORM_NAME": platform_name,
            "AWS_SSM_PLATFORM_VERSION": platform_version,
        }
        steps.append(
            RenderedStep(
                name=name,
                script=script,
                script_path=path,
                argv=("sh", "-c", path),
                working_directory=AGENT_WORKING_DIRECTORY,
                environment=environment,
                timeout_seconds=timeout,
                parameters=dict(exported),
            )
        )
    return steps


def documents_in_template(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The Command documents of a synthesized template by kind (the part of the name after the
    last dash: ``raidsnap-assemble`` -> ``assemble``), their Content as CloudFormation has it."""
    out: dict[str, dict[str, Any]] = {}
    for res in (template.get("Resources") or {}).values():
        if res.get("Type") != "AWS::SSM::Document":
            continue
        props = res.get("Properties") or {}
        name = props.get("Name")
        if not isinstance(name, str):
            raise UnsupportedDocumentError(f"document name {name!r} is not a plain string")
        out[name.rsplit("-", 1)[-1]] = dict(props["Content"])
    return out
