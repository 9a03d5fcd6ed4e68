"""Every emulated call authorized as AWS would authorize it, against the synthesized template.

The double calls ``Authorizer.authorize`` once per call that a known principal makes (a function
by its logical id, a state machine's integrations by the state machine's logical id) before the
call takes effect. A denied call fails with the error AWS gives: EC2's UnauthorizedOperation
(HTTP 403) with an encoded authorization message, else the access-denied error botocore models
for that service. Every decision is kept for tests to inspect.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import botocore.session

from raidsnap_emulation.double import AwsError
from raidsnap_emulation.iam import policies as stack_policies
from raidsnap_emulation.iam.context import Builder, Params, Resource
from raidsnap_emulation.iam.evaluate import (
    Decision,
    PolicySet,
    Principal,
    Request,
    Statement,
    StatementRef,
    evaluate,
)
from raidsnap_emulation.template import Template

if TYPE_CHECKING:
    from raidsnap_emulation.double import AwsDouble

EC2_DENIED = "UnauthorizedOperation"
EC2_DENIED_DOC = (
    "https://docs.aws.amazon.com/STS/latest/APIReference/API_DecodeAuthorizationMessage.html"
)


class AccessDeniedError(AwsError):
    """An AwsError that carries the decision that denied the call."""

    def __init__(self, code: str, message: str, decision: Decision) -> None:
        super().__init__(code, message, 403)
        self.decision = decision


def _denied_code(service: str) -> str:
    """The access-denied error code botocore's model gives the service (EC2 has its own)."""
    if service == "ec2":
        return EC2_DENIED
    model = botocore.session.get_session().get_service_model(service)
    for shape in model.error_shapes:
        code = shape.metadata.get("error", {}).get("code", shape.name)
        if code in ("AccessDeniedException", "AccessDenied", "AuthorizationError"):
            return str(code)
    protocol = model.metadata.get("protocol", "")
    return "AccessDenied" if protocol in ("query", "rest-xml") else "AccessDeniedException"


def encode(decision: Decision) -> str:
    """What sts:DecodeAuthorizationMessage would show: allowed, explicit deny, the matched
    statements, and the request context."""
    r = decision.request
    body = {
        "allowed": decision.allowed,
        "explicitDeny": bool(decision.explicit_deny),
        "matchedStatements": {"items": [str(s) for s in decision.explicit_deny]},
        "failures": {"items": [decision.reason]},
        "context": {
            "principal": {"arn": r.principal.caller},
            "action": r.action,
            "resource": r.resource,
            "conditions": {"items": [{"key": k, "values": list(v)} for k, v in r.context.items()]},
        },
    }
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode()


def decode(message: str) -> dict[str, Any]:
    """The decision an EC2 denial message carries (for tests and people)."""
    encoded = message.rsplit("Encoded authorization failure message: ", 1)[1]
    loaded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(encoded.encode()))
    return loaded


def denial(service: str, decision: Decision) -> AccessDeniedError:
    r = decision.request
    what = (
        f"User: {r.principal.caller} is not authorized to perform: {r.action} on resource: "
        f"{r.resource} because {decision.reason}"
    )
    if r.via:
        what += f" (used by {r.via} for {r.operation})"
    if service == "ec2":
        message = (
            f"You are not authorized to perform this operation. {what}. "
            f"Encoded authorization failure message: {encode(decision)}"
        )
        return AccessDeniedError(EC2_DENIED, message, decision)
    return AccessDeniedError(_denied_code(service), what, decision)


class _State:
    """The resources' current state, read from moto through the double (before the call), in
    the Region and account the call is made to."""

    def __init__(self, double: AwsDouble, stack: stack_policies.StackPolicies) -> None:
        self.double = double
        self.stack = stack
        # Trust policies of roles of every stack deployed (a role another account assumes).
        self.trusts: dict[str, list[Statement]] = {}

    @property
    def region(self) -> str:
        return self.double.region

    @property
    def account(self) -> str:
        return self.double.account

    def _first(self, operation: str, params: Params, field: str) -> Resource | None:
        try:
            found = self.double._moto("ec2", operation, dict(params))
        except AwsError:
            return None
        items = found.get(field, [])
        return dict(items[0]) if items else None

    def instance(self, instance_id: str) -> Resource | None:
        try:
            return self.double._instance(instance_id)
        except (AwsError, IndexError):
            return None

    def volume(self, volume_id: str) -> Resource | None:
        found = self._first("DescribeVolumes", {"VolumeIds": [volume_id]}, "Volumes")
        return self.double._volume_view(found) if found else None

    def snapshot(self, snapshot_id: str, region: str | None = None) -> Resource | None:
        """The snapshot as seen in its Region (``region``: another than the call's, such as a
        copy's source)."""
        with self.double.calls_in(region or self.region, self.account):
            found = self._first("DescribeSnapshots", {"SnapshotIds": [snapshot_id]}, "Snapshots")
            return self.double._snapshot_view(found) if found else None

    def key_arn(self, key_id: str) -> str:
        if key_id.startswith("arn:"):
            return key_id
        return f"arn:aws:kms:{self.region}:{self.account}:key/{key_id}"

    def resource_policy(self, arn: str) -> str | None:
        if arn in self.stack.policies.resource:
            return arn
        if arn in self.trusts:
            self.stack.policies.resource[arn] = self.trusts[arn]
            return arn
        if arn.startswith("arn:aws:kms:"):
            return self._moto_key_policy(arn)
        return None

    def _moto_key_policy(self, arn: str) -> str | None:
        """A key made outside the stack (an operator's volume key): its policy from KMS."""
        try:
            answer = self.double._moto(
                "kms", "GetKeyPolicy", {"KeyId": arn, "PolicyName": "default"}
            )
        except AwsError:
            return None
        doc = json.loads(answer["Policy"])
        raw = doc["Statement"]
        statements = raw if isinstance(raw, list) else [raw]
        self.stack.policies.resource[arn] = [
            Statement(StatementRef(f"key-policy:{arn}", i), s) for i, s in enumerate(statements)
        ]
        return arn

    def encryption_key(self, arn: str) -> str | None:
        return self.stack.encryption_keys.get(arn)


class Authorizer:
    """IAM for the emulation: the synthesized policies, evaluated on every call."""

    def __init__(self, template: Template, double: AwsDouble) -> None:
        self.template = template
        self.stack = stack_policies.load(template)
        self.double = double
        self.state = _State(double, self.stack)
        self.builder = Builder(self.state)
        self.decisions: list[Decision] = []
        self._lock = threading.Lock()

    def know_trusts(self, trusts: Mapping[str, list[Statement]]) -> None:
        """The trust policies of roles of other stacks (of other accounts), which a role of
        this stack may be allowed to assume."""
        self.state.trusts.update(trusts)

    @property
    def policies(self) -> PolicySet:
        return self.stack.policies

    def principal(self, actor: str) -> Principal:
        try:
            return self.stack.principals[actor]
        except KeyError:
            raise KeyError(f"{actor} runs as no role of the template") from None

    def authorize(self, service: str, operation: str, params: Params, actor: str) -> None:
        """Raise the service's access-denied error unless every request of the call is allowed."""
        principal = self.principal(actor)
        requests = self.builder.requests(service, operation, params, principal)
        self._decide(service, requests, actor)

    def key_usable(self, actor: str, key_arn: str, actions: list[str], grant: bool) -> bool:
        """Whether EC2 may use the key on this principal's behalf (kms:ViaService ec2): the
        actions, and a grant for an AWS resource (``grant``). Decided as every call is, and kept
        with the decisions; a denial is answered by EC2 (the copy fails), not raised here."""
        principal = self.principal(actor)
        requests = self.builder.kms_requests(actions, key_arn, principal, "ec2")
        if grant:
            requests += self.builder.kms_requests(
                ["CreateGrant"], key_arn, principal, "ec2", {"kms:GrantIsForAWSResource": ("true",)}
            )
        allowed = True
        for request in requests:
            decision = evaluate(self.stack.policies, request, actor)
            with self._lock:
                self.decisions.append(decision)
            allowed = allowed and decision.allowed
        return allowed

    def _decide(self, service: str, requests: list[Request], actor: str | None) -> None:
        for request in requests:
            decision = evaluate(self.stack.policies, request, actor)
            with self._lock:
                self.decisions.append(decision)
            if not decision.allowed:
                raise denial(service, decision)

    def as_service(
        self,
        service_principal: str,
        service: str,
        operation: str,
        params: Params,
        *,
        source: Mapping[str, str],
        kms_source_keys: bool,
    ) -> list[Decision]:
        """Authorize a call an AWS service makes as its service principal (an alarm or a rule
        publishing to a topic), and the key use it needs; returns the decisions, denied ones
        included, and never raises for a denial (the service just fails to deliver)."""
        principal = Principal(
            f"service:{service_principal}", service=service_principal, account=self.template.account
        )
        extra = {k: (v,) for k, v in source.items()}
        requests = self.builder.requests(service, operation, params, principal, extra)
        requests = [r for r in requests if r.via is None]  # no caller identity to delegate
        if service == "sns" and operation == "Publish":
            key = self.stack.encryption_keys.get(str(params["TopicArn"]))
            if key is not None:
                # SNS asks KMS with the topic as encryption context (its key policy examples
                # condition on kms:EncryptionContext:aws:sns:topicArn; e.g. "Set up an SNS topic
                # with server-side encryption", Amazon GameLift Servers guide).
                context = {"kms:EncryptionContext:aws:sns:topicArn": (str(params["TopicArn"]),)}
                requests += self.builder.kms_requests(
                    ["GenerateDataKey", "Decrypt"],
                    key,
                    principal,
                    None,
                    {**(extra if kms_source_keys else {}), **context},
                )
        out = []
        for request in requests:
            decision = evaluate(self.stack.policies, request, service_principal)
            with self._lock:
                self.decisions.append(decision)
            out.append(decision)
            if not decision.allowed:
                break
        return out

    def denied(self) -> list[Decision]:
        with self._lock:
            return [d for d in self.decisions if not d.allowed]
