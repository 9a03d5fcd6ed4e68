"""SSM Run Command as it behaves: managed instances and their agents, SendCommand's parameter
checks, the document rendered as the agent renders it (raidsnap_emulation.ssm_agent), command
and invocation states on the virtual clock, output limits, and CancelCommand."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import yaml  # type: ignore[import-untyped]

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    Answer,
    AwsError,
    DoubleBase,
    Params,
    _iso,
    _page,
)
from raidsnap_emulation.ssm_agent import (
    CURRENT_AGENT_VERSION,
    InvalidParametersError,
    RenderedStep,
    UnsupportedDocumentError,
    execution_timeout,
    render,
    validate_parameters,
)

CommandStatus = Literal["Success", "Failed", "TimedOut", "Cancelled"]

# GetCommandInvocation returns the first 24,000 characters of stdout and the first 8,000 of
# stderr (SSM API reference, GetCommandInvocation StandardOutputContent/StandardErrorContent).
# The agent keeps a prefix and ends it with a marker (agent/plugins/pluginutil StringPrefix,
# suffix "--output truncated--" from agent/framework/processor/executer/iohandler), counting
# bytes as Go does.
STDOUT_LIMIT = 24000

STDERR_LIMIT = 8000

PLUGIN_OUTPUT_LIMIT = 2500

TRUNCATED_SUFFIX = "--output truncated--"


@dataclass(frozen=True)
class CommandContext:
    """What one instance's agent was asked to run. ``parameters`` is the SendCommand call's;
    ``environment`` is what the script sees of them: the SSM_<Name> variables the agent exports
    (raidsnap_emulation.ssm_agent), none for a parameter not declared ENV_VAR or on an agent too
    old to export them. ``script`` is the _script.sh the agent wrote ("" for a document the
    renderer does not model, such as AWS-owned ones moto does not carry)."""

    instance_id: str
    document_name: str
    parameters: dict[str, list[str]]
    command_id: str
    now: datetime
    environment: dict[str, str] = field(default_factory=dict)
    script: str = ""


@dataclass(frozen=True)
class CommandOutcome:
    status: CommandStatus = "Success"
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    duration_seconds: float = 0.0
    # The agent stopped reporting (hung or gone): nothing enforces the step's timeoutSeconds,
    # the invocation stays InProgress for duration_seconds and only CancelCommand ends it.
    unresponsive: bool = False


Responder = Callable[[CommandContext], CommandOutcome]


@dataclass
class _Invocation:
    instance_id: str
    outcome: CommandOutcome
    start: datetime
    end: datetime
    cancelled_at: datetime | None = None


@dataclass
class _Command:
    command_id: str
    document_name: str
    parameters: dict[str, list[str]]
    comment: str
    requested: datetime
    timeout_seconds: int
    plugin_name: str
    invocations: dict[str, _Invocation] = field(default_factory=dict)


def _truncate(text: str, limit: int) -> str:
    """The agent's StringPrefix: under the limit (in bytes) the text is whole; otherwise its
    first limit bytes, the last of them given to the truncation marker."""
    data = text.encode()
    if len(data) < limit:
        return text
    keep = data[: limit - len(TRUNCATED_SUFFIX)]
    return keep.decode(errors="ignore") + TRUNCATED_SUFFIX


class Ssm(DoubleBase):
    """SendCommand, GetCommandInvocation, ListCommandInvocations, ListCommands, CancelCommand,
    DescribeInstanceInformation; what an instance's agent answers is its document's responder."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self.invocation_visible_after_seconds: float = 0.0
        self._agents: dict[str, bool] = {}
        self._agent_versions: dict[str, str] = {}
        self._responders: dict[str, Responder] = {}
        self._commands: dict[str, _Command] = {}
        self._handlers.update(
            {
                ("ssm", "SendCommand"): self._send_command,
                ("ssm", "GetCommandInvocation"): self._get_command_invocation,
                ("ssm", "ListCommandInvocations"): self._list_command_invocations,
                ("ssm", "ListCommands"): self._list_commands,
                ("ssm", "CancelCommand"): self._cancel_command,
                ("ssm", "DescribeInstanceInformation"): self._describe_instance_information,
            }
        )

    def set_agent(self, instance_id: str, online: bool = True, version: str | None = None) -> None:
        """The instance's SSM agent: online or not, and the version it reports (the current
        release unless given)."""
        with self._lock:
            self._agents[instance_id] = online
            if version is not None:
                self._agent_versions[instance_id] = version

    def agent_version(self, instance_id: str) -> str:
        with self._lock:
            return self._agent_versions.get(instance_id, CURRENT_AGENT_VERSION)

    def on_command(self, document_name: str, responder: Responder) -> None:
        with self._lock:
            self._responders[document_name] = responder

    def _managed_instances(self) -> dict[str, bool]:
        """Instances that have an SSM agent, and whether it is online."""
        managed: dict[str, bool] = {}
        reservations = self._moto("ec2", "DescribeInstances", {})["Reservations"]
        for reservation in reservations:
            for instance in reservation["Instances"]:
                if instance["State"]["Name"] == "terminated":
                    continue
                managed[instance["InstanceId"]] = instance["State"]["Name"] in (
                    "running",
                    "pending",
                )
        managed.update(self._agents)
        return managed

    def _describe_instance_information(self, params: Params) -> Answer:
        now = self.clock.now()
        wanted: dict[str, set[str]] = {}
        for item in params.get("InstanceInformationFilterList", []):
            wanted.setdefault(item["key"], set()).update(item["valueSet"])
        for item in params.get("Filters", []):
            wanted.setdefault(item["Key"], set()).update(item["Values"])
        infos = []
        for instance_id, online in sorted(self._managed_instances().items()):
            ping = "Online" if online else "ConnectionLost"
            info = {
                "InstanceId": instance_id,
                "PingStatus": ping,
                "LastPingDateTime": now if online else now - timedelta(hours=1),
                "AgentVersion": self.agent_version(instance_id),
                "IsLatestVersion": self.agent_version(instance_id) == CURRENT_AGENT_VERSION,
                "PlatformType": "Linux",
                "PlatformName": "Amazon Linux",
                "PlatformVersion": "2023",
                "ResourceType": "EC2Instance",
                "ComputerName": f"{instance_id}.ec2.internal",
            }
            fields: dict[str, set[str]] = {
                "InstanceIds": {instance_id},
                "PingStatus": {ping},
                "PlatformTypes": {"Linux"},
                "ResourceType": {"EC2Instance"},
            }
            if all(fields.get(key, set()) & values for key, values in wanted.items()):
                infos.append(info)
        page, token = _page(infos, params, default_size=50)
        answer: Answer = {"InstanceInformationList": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _document(self, name: str) -> dict[str, Any] | None:
        """The document's content, None for AWS-owned documents moto does not carry."""
        try:
            answer = self._moto("ssm", "GetDocument", {"Name": name})
        except AwsError:
            if name.startswith("AWS-"):
                return None
            raise AwsError(
                "InvalidDocument", f"Document with name {name} does not exist."
            ) from None
        content = answer.get("Content", "")
        if answer.get("DocumentFormat") == "YAML":
            loaded: Any = yaml.safe_load(content)
        else:
            loaded = json.loads(content)
        return loaded if isinstance(loaded, dict) else {}

    @staticmethod
    def _check_parameters(name: str, document: dict[str, Any], given: dict[str, list[str]]) -> None:
        """SendCommand's own check, as the agent's renderer models it (one set of rules)."""
        try:
            validate_parameters(document, given, name)
        except InvalidParametersError as err:
            raise AwsError("InvalidParameters", str(err)) from None

    def _render(
        self, name: str, document: dict[str, Any] | None, context: CommandContext
    ) -> RenderedStep | None:
        """The first step as this instance's agent runs it; None for documents not modelled."""
        if document is None:
            return None
        try:
            steps = render(
                document,
                context.parameters,
                agent_version=self.agent_version(context.instance_id),
                command_id=context.command_id,
                instance_id=context.instance_id,
                region=self.region,
                document_name=name,
            )
        except UnsupportedDocumentError:
            return None
        except InvalidParametersError as err:
            raise AwsError("InvalidParameters", str(err)) from None
        return steps[0] if steps else None

    def _responder(self, document_name: str) -> Responder | None:
        if document_name in self._responders:
            return self._responders[document_name]
        suffixes = [n for n in self._responders if document_name.endswith(n)]
        return self._responders[max(suffixes, key=len)] if suffixes else None

    def _target_instances(self, params: Params) -> list[str]:
        instance_ids = list(params.get("InstanceIds", []))
        for target in params.get("Targets", []):
            key, values = target["Key"], target["Values"]
            if key == "InstanceIds":
                instance_ids.extend(values)
            elif key.startswith("tag:"):
                filters = [{"Name": key, "Values": values}]
                answer = self._moto("ec2", "DescribeInstances", {"Filters": filters})
                instance_ids.extend(
                    i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]
                )
        return list(dict.fromkeys(instance_ids))

    def _send_command(self, params: Params) -> Answer:
        now = self.clock.now()
        name = params["DocumentName"]
        document = self._document(name)
        parameters: dict[str, list[str]] = {
            k: list(v) for k, v in params.get("Parameters", {}).items()
        }
        if document is not None:
            self._check_parameters(name, document, parameters)
        instance_ids = self._target_instances(params)
        managed = self._managed_instances()
        offline = [i for i in instance_ids if not managed.get(i, False)]
        if offline or not instance_ids:
            account = os.environ.get("MOTO_ACCOUNT_ID", "123456789012")
            raise AwsError(
                "InvalidInstanceId",
                f"Instances [{offline}] not in a valid state for account {account}",
            )
        steps = (document or {}).get("mainSteps") or [{"name": "aws:runShellScript"}]
        # The agent stops a step at its timeoutSeconds (ssm_agent.execution_timeout). For
        # AWS-RunShellScript (not carried by moto) that is its executionTimeout parameter.
        fallback = execution_timeout(parameters.get("executionTimeout", ["3600"])[0], {})
        command = _Command(
            command_id=str(uuid.uuid4()),
            document_name=name,
            parameters=parameters,
            comment=params.get("Comment", ""),
            requested=now,
            timeout_seconds=int(params.get("TimeoutSeconds", 3600)),
            plugin_name=str(steps[0].get("name", "aws:runShellScript")),
        )
        responder = self._responder(name)
        for instance_id in instance_ids:
            context = CommandContext(
                instance_id, name, copy.deepcopy(parameters), command.command_id, now
            )
            step = self._render(name, document, context)
            if step is not None:
                context = dataclasses.replace(
                    context, environment=dict(step.parameters), script=step.script
                )
            outcome = responder(context) if responder is not None else CommandOutcome()
            timeout = step.timeout_seconds if step is not None else fallback
            if outcome.duration_seconds > timeout and not outcome.unresponsive:
                outcome = CommandOutcome(
                    "TimedOut", outcome.stdout, outcome.stderr, -1, float(timeout)
                )
            end = now + timedelta(seconds=max(0.0, outcome.duration_seconds))
            command.invocations[instance_id] = _Invocation(instance_id, outcome, now, end)
        self._commands[command.command_id] = command
        return {"Command": self._command_view(command, now)}

    @staticmethod
    def _invocation_status(inv: _Invocation, now: datetime) -> tuple[str, str]:
        if inv.cancelled_at is not None and inv.cancelled_at < inv.end:
            return "Cancelled", "Cancelled"
        if now < inv.end:
            return "InProgress", "InProgress"
        status = inv.outcome.status
        details = {"TimedOut": "ExecutionTimedOut"}.get(status, status)
        return status, details

    @staticmethod
    def _response_code(inv: _Invocation, status: str) -> int:
        if status in ("InProgress", "Cancelled"):
            return -1
        if status == "Failed" and inv.outcome.exit_code == 0:
            return 1
        return inv.outcome.exit_code

    def _command_view(self, command: _Command, now: datetime) -> Answer:
        statuses = [self._invocation_status(i, now)[0] for i in command.invocations.values()]
        if "InProgress" in statuses:
            status = "InProgress"
        elif all(s == "Success" for s in statuses):
            status = "Success"
        else:
            status = next(s for s in ("Failed", "TimedOut", "Cancelled") if s in statuses)
        return {
            "CommandId": command.command_id,
            "DocumentName": command.document_name,
            "DocumentVersion": "$DEFAULT",
            "Comment": command.comment,
            "ExpiresAfter": command.requested + timedelta(seconds=command.timeout_seconds),
            "Parameters": command.parameters,
            "InstanceIds": list(command.invocations),
            "Targets": [],
            "RequestedDateTime": command.requested,
            "Status": status,
            "StatusDetails": status,
            "TargetCount": len(statuses),
            "CompletedCount": sum(s != "InProgress" for s in statuses),
            "ErrorCount": sum(s in ("Failed", "TimedOut") for s in statuses),
            "DeliveryTimedOutCount": 0,
            "TimeoutSeconds": command.timeout_seconds,
            "CloudWatchOutputConfig": {"CloudWatchOutputEnabled": False},
        }

    def _invocation(
        self, command_id: str, instance_id: str, now: datetime
    ) -> tuple[_Command, _Invocation]:
        command = self._commands.get(command_id)
        inv = command.invocations.get(instance_id) if command is not None else None
        visible = command is not None and (
            (now - command.requested).total_seconds() >= self.invocation_visible_after_seconds
        )
        if command is None or inv is None or not visible:
            raise AwsError("InvocationDoesNotExist", "An error occurred (InvocationDoesNotExist)")
        return command, inv

    def _get_command_invocation(self, params: Params) -> Answer:
        now = self.clock.now()
        command, inv = self._invocation(params["CommandId"], params["InstanceId"], now)
        plugin = params.get("PluginName")
        if plugin is not None and plugin != command.plugin_name:
            raise AwsError("InvalidPluginName", f"Plugin {plugin} does not exist in the document.")
        status, details = self._invocation_status(inv, now)
        done = status not in ("InProgress",)
        end = min(inv.end, inv.cancelled_at) if inv.cancelled_at is not None else inv.end
        elapsed = (end - inv.start).total_seconds() if done else (now - inv.start).total_seconds()
        return {
            "CommandId": command.command_id,
            "InstanceId": inv.instance_id,
            "Comment": command.comment,
            "DocumentName": command.document_name,
            "DocumentVersion": "$DEFAULT",
            "PluginName": command.plugin_name,
            "ResponseCode": self._response_code(inv, status),
            "ExecutionStartDateTime": _iso(inv.start),
            "ExecutionElapsedTime": f"PT{elapsed:.3f}S",
            "ExecutionEndDateTime": _iso(end) if done else "",
            "Status": status,
            "StatusDetails": details,
            "StandardOutputContent": _truncate(inv.outcome.stdout, STDOUT_LIMIT)
            if done and status != "Cancelled"
            else "",
            "StandardOutputUrl": "",
            "StandardErrorContent": _truncate(inv.outcome.stderr, STDERR_LIMIT)
            if done and status != "Cancelled"
            else "",
            "StandardErrorUrl": "",
            "CloudWatchOutputConfig": {
                "CloudWatchLogGroupName": "",
                "CloudWatchOutputEnabled": False,
            },
        }

    def _list_command_invocations(self, params: Params) -> Answer:
        now = self.clock.now()
        command_id = params.get("CommandId")
        if command_id is not None and command_id not in self._commands:
            raise AwsError("InvalidCommandId", f"Command {command_id} does not exist.")
        items = []
        for command in self._commands.values():
            if command_id is not None and command.command_id != command_id:
                continue
            for inv in command.invocations.values():
                if params.get("InstanceId") not in (None, inv.instance_id):
                    continue
                status, details = self._invocation_status(inv, now)
                item: Answer = {
                    "CommandId": command.command_id,
                    "InstanceId": inv.instance_id,
                    "InstanceName": "",
                    "Comment": command.comment,
                    "DocumentName": command.document_name,
                    "DocumentVersion": "$DEFAULT",
                    "RequestedDateTime": command.requested,
                    "Status": status,
                    "StatusDetails": details,
                    "TraceOutput": "",
                    "StandardOutputUrl": "",
                    "StandardErrorUrl": "",
                    "CommandPlugins": [],
                    "CloudWatchOutputConfig": {"CloudWatchOutputEnabled": False},
                }
                if params.get("Details"):
                    done = status not in ("InProgress", "Cancelled")
                    output = inv.outcome.stdout
                    if inv.outcome.stderr:
                        output += "\n----------ERROR-------\n" + inv.outcome.stderr
                    plugin: Answer = {
                        "Name": command.plugin_name,
                        "Status": status,
                        "StatusDetails": details,
                        "ResponseCode": self._response_code(inv, status),
                        "ResponseStartDateTime": inv.start,
                        "Output": _truncate(output, PLUGIN_OUTPUT_LIMIT) if done else "",
                        "StandardOutputUrl": "",
                        "StandardErrorUrl": "",
                    }
                    if done:
                        plugin["ResponseFinishDateTime"] = inv.end
                    item["CommandPlugins"] = [plugin]
                items.append(item)
        page, token = _page(items, params, default_size=50)
        answer: Answer = {"CommandInvocations": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _list_commands(self, params: Params) -> Answer:
        now = self.clock.now()
        command_id = params.get("CommandId")
        if command_id is not None and command_id not in self._commands:
            raise AwsError("InvalidCommandId", f"Command {command_id} does not exist.")
        commands = [
            self._command_view(c, now)
            for c in self._commands.values()
            if command_id in (None, c.command_id)
            and params.get("InstanceId") in (None, *c.invocations)
        ]
        page, token = _page(commands, params, default_size=50)
        answer: Answer = {"Commands": page}
        if token:
            answer["NextToken"] = token
        return answer

    def _cancel_command(self, params: Params) -> Answer:
        now = self.clock.now()
        command = self._commands.get(params["CommandId"])
        if command is None:
            raise AwsError("InvalidCommandId", f"Command {params['CommandId']} does not exist.")
        for inv in command.invocations.values():
            if params.get("InstanceIds") and inv.instance_id not in params["InstanceIds"]:
                continue
            if now < inv.end and inv.cancelled_at is None:
                inv.cancelled_at = now
        return {}
