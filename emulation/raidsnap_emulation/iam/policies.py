"""The policies of the synthesized template, resolved: the identity-based statements of every
role (AWS::IAM::Policy attached to it, its inline policies), the resource-based policies of
topics (AWS::SNS::TopicPolicy), keys (KeyPolicy) and functions (AWS::Lambda::Permission), and
which role each function and state machine runs as."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from raidsnap_emulation.iam.evaluate import (
    PolicySet,
    Principal,
    Statement,
    StatementRef,
    UnsupportedPolicyError,
)
from raidsnap_emulation.template import Template


@dataclass
class StackPolicies:
    policies: PolicySet
    # Function or state machine logical id -> the role it runs as; "role:<name>" -> a role that
    # principals of other accounts assume (their stacks' calls with its credentials).
    principals: dict[str, Principal]
    # Resource ARN -> the KMS key ARN that encrypts it (topics, tables).
    encryption_keys: dict[str, str] = field(default_factory=dict)
    # Role ARN -> the trust policy of a role other accounts may assume (sts:AssumeRole).
    trusts: dict[str, list[Statement]] = field(default_factory=dict)


def _trusted_accounts(document: Any) -> bool:
    """Whether a role's trust policy names principals of an account (not only services)."""
    return any(
        isinstance(s.get("Principal"), dict) and "AWS" in s["Principal"]
        for s in _statements(document)
    )


def _statements(document: Any) -> list[dict[str, Any]]:
    raw = document["Statement"]
    return list(raw) if isinstance(raw, list) else [raw]


def load(template: Template) -> StackPolicies:
    policies = PolicySet()
    roles: dict[str, str] = {}
    for logical_id, res in template.of_type("AWS::IAM::Role").items():
        props = res.get("Properties", {})
        if props.get("ManagedPolicyArns") or props.get("PermissionsBoundary"):
            raise UnsupportedPolicyError(
                f"{logical_id}: managed policies and permission boundaries are not emulated"
            )
        arn = template.get_att(logical_id, "Arn")
        roles[logical_id] = arn
        statements = policies.identity.setdefault(arn, [])
        for inline in props.get("Policies", []):
            doc = template.resolve(inline["PolicyDocument"])
            for index, body in enumerate(_statements(doc)):
                ref = StatementRef(f"{logical_id}/{inline['PolicyName']}", index)
                statements.append(Statement(ref, body))
    for logical_id, res in template.of_type("AWS::IAM::Policy").items():
        props = res["Properties"]
        doc = template.resolve(props["PolicyDocument"])
        for role in props.get("Roles", []):
            arn = template.get_att(role["Ref"], "Arn")
            for index, body in enumerate(_statements(doc)):
                policies.identity.setdefault(arn, []).append(
                    Statement(StatementRef(logical_id, index), body)
                )
        if props.get("Users") or props.get("Groups"):
            raise UnsupportedPolicyError(f"{logical_id}: only role policies are emulated")

    encryption: dict[str, str] = {}
    for logical_id, res in template.of_type("AWS::KMS::Key").items():
        arn = template.get_att(logical_id, "Arn")
        doc = template.resolve(res["Properties"]["KeyPolicy"])
        policies.resource[arn] = [
            Statement(StatementRef(logical_id, i), body) for i, body in enumerate(_statements(doc))
        ]
    for logical_id, res in template.of_type("AWS::SNS::TopicPolicy").items():
        props = res["Properties"]
        doc = template.resolve(props["PolicyDocument"])
        for topic in template.resolve(props["Topics"]):
            policies.resource[str(topic)] = [
                Statement(StatementRef(logical_id, i), body)
                for i, body in enumerate(_statements(doc))
            ]
    for logical_id, res in template.of_type("AWS::SNS::Topic").items():
        key = res["Properties"].get("KmsMasterKeyId")
        if key is not None:
            encryption[template.physical_id(logical_id)] = str(template.resolve(key))
    for logical_id, res in template.of_type("AWS::SecretsManager::Secret").items():
        key = res["Properties"].get("KmsKeyId")
        if key is not None:
            encryption[template.physical_id(logical_id)] = str(template.resolve(key))
    for logical_id, res in template.of_type("AWS::DynamoDB::Table").items():
        sse = res["Properties"].get("SSESpecification") or {}
        if sse.get("SSEEnabled") and sse.get("KMSMasterKeyId"):
            arn = template.get_att(logical_id, "Arn")
            encryption[arn] = str(template.resolve(sse["KMSMasterKeyId"]))
    for logical_id, res in template.of_type("AWS::Lambda::Permission").items():
        props = template.resolve(res["Properties"])
        function = str(props["FunctionName"])
        condition: dict[str, Any] = {}
        if "SourceArn" in props:
            condition["ArnLike"] = {"aws:SourceArn": props["SourceArn"]}
        if "SourceAccount" in props:
            condition["StringEquals"] = {"aws:SourceAccount": props["SourceAccount"]}
        permission: dict[str, Any] = {
            "Effect": "Allow",
            "Principal": {"Service": props["Principal"]}
            if str(props["Principal"]).endswith(".amazonaws.com")
            else {"AWS": props["Principal"]},
            "Action": props["Action"],
            "Resource": function,
        }
        if condition:
            permission["Condition"] = condition
        policies.resource.setdefault(function, []).append(
            Statement(StatementRef(logical_id, 0), permission)
        )

    principals: dict[str, Principal] = {}
    account = template.account
    for logical_id, res in template.of_type("AWS::Lambda::Function").items():
        role = res["Properties"]["Role"]["Fn::GetAtt"][0]
        principals[logical_id] = Principal(roles[role], session=logical_id, account=account)
    for logical_id, res in template.of_type("AWS::StepFunctions::StateMachine").items():
        role = res["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        principals[logical_id] = Principal(roles[role], session=logical_id, account=account)
    trusts: dict[str, list[Statement]] = {}
    for logical_id, res in template.of_type("AWS::IAM::Role").items():
        document = template.resolve(res["Properties"]["AssumeRolePolicyDocument"])
        if not _trusted_accounts(document):
            continue
        arn = roles[logical_id]
        trusts[arn] = [
            Statement(StatementRef(f"{logical_id}/trust", i), body)
            for i, body in enumerate(_statements(document))
        ]
        principals[f"role:{arn.rsplit('/', 1)[-1]}"] = Principal(arn, account=account)
    return StackPolicies(policies, principals, encryption, trusts)
