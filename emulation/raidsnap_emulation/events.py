"""What CloudWatch alarms and EventBridge rules of the synthesized stack do when they fire.

An alarm that changes state publishes to each SNS topic among its actions for that state, as the
service principal cloudwatch.amazonaws.com with the alarm as aws:SourceArn, and sends its state
change event to EventBridge. A rule whose pattern matches an event delivers it to each target as
events.amazonaws.com with the rule as aws:SourceArn: a function is invoked if its resource policy
lets the rule invoke it, a topic is published to (the target's input transformer applied) if the
topic policy lets the service publish and, for an encrypted topic, the key policy lets it use the
key. A delivery that is not allowed is dropped, as AWS drops it, and kept here with the decision
that dropped it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import boto3

from raidsnap_emulation.iam.evaluate import Decision, Principal, evaluate
from raidsnap_emulation.template import ACCOUNT, REGION

if TYPE_CHECKING:
    from raidsnap_emulation.harness import Emulation

CLOUDWATCH = "cloudwatch.amazonaws.com"
EVENTS = "events.amazonaws.com"
ALARM_SNS_DOC = "https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger"
SNS_KMS_DOC = (
    "https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html"
    "#compatibility-with-aws-services"
)
EVENT_PATTERNS_DOC = (
    "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html"
)
ASYNC_RETRY_DOC = (
    "https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html"
)
# EventBridge invokes a function asynchronously: on a function error Lambda runs it two more
# times, one minute and then two minutes later (ASYNC_RETRY_DOC), and then drops the event.
ASYNC_RETRY_WAITS = (60, 120)


@dataclass
class Delivery:
    """One attempt of a service to deliver to a target."""

    source: str
    target: str
    principal: str
    delivered: bool
    decisions: list[Decision] = field(default_factory=list)
    message: str | None = None
    result: Any = None
    # Every invocation of the function for this event: the first, and Lambda's retries of it.
    attempts: list[Any] = field(default_factory=list)

    @property
    def denied(self) -> Decision | None:
        return next((d for d in self.decisions if not d.allowed), None)


@dataclass(frozen=True)
class Notification:
    topic: str
    message: str
    subject: str | None
    published_by: str


# ---------------------------------------------------------------------- event patterns


def _value_matches(rule: Any, value: Any) -> bool:
    if isinstance(rule, dict):
        if "prefix" in rule:
            return isinstance(value, str) and value.startswith(rule["prefix"])
        if "anything-but" in rule:
            inner = rule["anything-but"]
            if isinstance(inner, dict):
                return not _value_matches(inner, value)
            banned = inner if isinstance(inner, list) else [inner]
            return value not in banned
        if "exists" in rule:
            return (value is not None) == bool(rule["exists"])
        raise NotImplementedError(f"event pattern operator {rule} is not emulated")
    return bool(rule == value)


def pattern_matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """EventBridge event patterns: every field named must match; a list means any of it."""
    for key, rule in pattern.items():
        value = event.get(key)
        if isinstance(rule, dict):
            if not isinstance(value, dict) or not pattern_matches(rule, value):
                return False
            continue
        values = value if isinstance(value, list) else [value]
        exists_rules = [r for r in rule if isinstance(r, dict) and "exists" in r]
        if value is None and not exists_rules:
            return False
        if not any(_value_matches(r, v) for r in rule for v in values):
            return False
    return True


def _epoch_ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _path(event: dict[str, Any], path: str) -> Any:
    node: Any = event
    for part in path.lstrip("$").strip(".").split("."):
        if not part:
            continue
        node = node.get(part) if isinstance(node, dict) else None
    return node


def render(transformer: dict[str, Any] | None, event: dict[str, Any]) -> str:
    """The input a target gets: the event, or the transformer's template filled in."""
    if not transformer:
        return json.dumps(event)
    values = {k: _path(event, v) for k, v in transformer.get("InputPathsMap", {}).items()}

    def one(match: re.Match[str]) -> str:
        found = values.get(match.group(1))
        if found is None:
            return ""
        return found if isinstance(found, str) else json.dumps(found)

    text = re.sub(r"<([A-Za-z0-9_.-]+)>", one, str(transformer["InputTemplate"]))
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        return text
    return loaded if isinstance(loaded, str) else json.dumps(loaded)


# ---------------------------------------------------------------------- the services


class Services:
    """CloudWatch alarms and EventBridge rules of the stack, acting on the emulation."""

    def __init__(self, emu: Emulation) -> None:
        self.emu = emu
        self.deliveries: list[Delivery] = []
        self.notifications: list[Notification] = []

    # -- alarms

    def alarm(
        self, alarm: str, state: str = "ALARM", reason: str = "Threshold Crossed"
    ) -> list[Delivery]:
        """The alarm (logical id) changes to ``state``: its actions and its event."""
        template = self.emu.template
        props = template.resources[alarm]["Properties"]
        arn = template.get_att(alarm, "Arn")
        actions_key = {
            "ALARM": "AlarmActions",
            "OK": "OKActions",
            "INSUFFICIENT_DATA": "InsufficientDataActions",
        }[state]
        out = []
        message = json.dumps(
            {
                "AlarmName": alarm,
                "AlarmDescription": props.get("AlarmDescription"),
                "AWSAccountId": ACCOUNT,
                "NewStateValue": state,
                "NewStateReason": reason,
                "Region": REGION,
                "AlarmArn": arn,
            }
        )
        for action in template.resolve(props.get(actions_key, [])):
            if str(action).startswith("arn:aws:sns:"):
                out.append(
                    self._publish(
                        CLOUDWATCH,
                        source=arn,
                        topic=str(action),
                        message=message,
                        subject=f'{state}: "{alarm}" in {REGION}',
                        kms_source_keys=True,
                    )
                )
        event = {
            "version": "0",
            "id": f"alarm-{alarm}-{state}",
            "detail-type": "CloudWatch Alarm State Change",
            "source": "aws.cloudwatch",
            "account": ACCOUNT,
            "time": self.emu.clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [arn],
            "detail": {
                "alarmName": alarm,
                "state": {"value": state, "reason": reason},
                "configuration": {
                    "description": props.get("AlarmDescription", ""),
                    "metrics": [
                        {
                            "id": "m1",
                            "metricStat": {
                                "metric": {
                                    "dimensions": self._dimensions(alarm, props),
                                    "name": props.get("MetricName"),
                                    "namespace": props.get("Namespace"),
                                },
                                "period": props.get("Period"),
                                "stat": props.get("Statistic"),
                            },
                            "returnData": True,
                        }
                    ],
                },
            },
        }
        return out + self.put_event(event)

    def _dimensions(self, alarm: str, props: dict[str, Any]) -> dict[str, str]:
        """The alarm's dimensions as it stands (a function may have changed it since the
        stack was deployed), else as the template made it."""
        found = boto3.client("cloudwatch", region_name=REGION).describe_alarms(AlarmNames=[alarm])[
            "MetricAlarms"
        ]
        dims = (
            found[0]["Dimensions"]
            if found
            else self.emu.template.resolve(props.get("Dimensions", []))
        )
        return {str(d["Name"]): str(d["Value"]) for d in dims}

    # -- rules

    def put_event(self, event: dict[str, Any]) -> list[Delivery]:
        """EventBridge receives the event: every enabled rule that matches delivers it."""
        template = self.emu.template
        out = []
        for logical_id, res in template.of_type("AWS::Events::Rule").items():
            props = template.resolve(res["Properties"])
            if props.get("State", "ENABLED") != "ENABLED" or "EventPattern" not in props:
                continue
            if not pattern_matches(props["EventPattern"], event):
                continue
            rule_arn = template.get_att(logical_id, "Arn")
            for target in props.get("Targets", []):
                arn = str(target["Arn"])
                text = render(target.get("InputTransformer"), event)
                if arn.startswith("arn:aws:sns:"):
                    out.append(
                        self._publish(
                            EVENTS,
                            source=rule_arn,
                            topic=arn,
                            message=text,
                            subject=None,
                            kms_source_keys=False,
                        )
                    )
                elif arn.startswith("arn:aws:lambda:"):
                    out.append(self._invoke(rule_arn, arn, json.loads(text)))
                else:
                    raise NotImplementedError(f"rule target {arn} is not emulated")
        return out

    def execution_event(self, execution_arn: str) -> list[Delivery]:
        """Step Functions reports the execution's status change to EventBridge."""
        sfn = self.emu.sfn
        desc = sfn.describe_execution(executionArn=execution_arn)
        detail = {
            "executionArn": execution_arn,
            "stateMachineArn": desc["stateMachineArn"],
            "name": desc["name"],
            "status": desc["status"],
            # Epoch milliseconds, as the EventBridge reference for Step Functions shows them.
            "startDate": _epoch_ms(desc.get("startDate")),
            "stopDate": _epoch_ms(desc.get("stopDate")),
            "input": desc.get("input"),
            "output": desc.get("output"),
            "error": desc.get("error"),
            "cause": desc.get("cause"),
        }
        event = {
            "version": "0",
            "id": f"status-{desc['name']}-{desc['status']}",
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "account": ACCOUNT,
            "region": REGION,
            "resources": [execution_arn],
            "detail": detail,
        }
        return self.put_event(event)

    # -- delivery

    def _publish(
        self,
        service: str,
        *,
        source: str,
        topic: str,
        message: str,
        subject: str | None,
        kms_source_keys: bool,
    ) -> Delivery:
        params: dict[str, Any] = {"TopicArn": topic, "Message": message}
        if subject:
            params["Subject"] = subject[:99]
        keys = {"aws:SourceArn": source, "aws:SourceAccount": ACCOUNT}
        decisions = self.emu.iam.as_service(
            service, "sns", "Publish", params, source=keys, kms_source_keys=kms_source_keys
        )
        delivered = all(d.allowed for d in decisions)
        if delivered:
            self.emu.double._moto("sns", "Publish", params)
            self.notifications.append(Notification(topic, message, subject, service))
        delivery = Delivery(source, topic, service, delivered, decisions, message)
        self.deliveries.append(delivery)
        return delivery

    def _invoke(self, rule_arn: str, function_arn: str, event: Any) -> Delivery:
        principal = Principal(f"service:{EVENTS}", service=EVENTS, account=ACCOUNT)
        requests = self.emu.iam.builder.requests(
            "lambda",
            "Invoke",
            {"FunctionName": function_arn},
            principal,
            {"aws:SourceArn": (rule_arn,), "aws:SourceAccount": (ACCOUNT,)},
        )
        decisions = [evaluate(self.emu.iam.policies, r, EVENTS) for r in requests]
        self.emu.iam.decisions.extend(decisions)
        delivered = all(d.allowed for d in decisions)
        result = None
        attempts = []
        if delivered:
            assert self.emu.router is not None
            for wait in (0, *ASYNC_RETRY_WAITS):
                self.emu.clock.sleep(wait)  # other executions go on meanwhile
                # By its ARN: the function of the stack the rule belongs to (a peer's too).
                self.emu.router({"FunctionName": function_arn, "Payload": json.dumps(event)})
                result = self.emu.router.invocations[-1]
                attempts.append(result)
                if result.error_type is None:
                    break
        delivery = Delivery(
            rule_arn, function_arn, EVENTS, delivered, decisions, None, result, attempts
        )
        self.deliveries.append(delivery)
        return delivery
