"""The IAM evaluator's rules, each against what the IAM User Guide documents, and the request
model against the Service Authorization Reference."""

from __future__ import annotations

from typing import Any

import pytest

from raidsnap_emulation.iam import sar
from raidsnap_emulation.iam.evaluate import (
    PolicySet,
    Principal,
    Request,
    Statement,
    StatementRef,
    condition_holds,
    evaluate,
)

ROLE = Principal("arn:aws:iam::123456789012:role/R", session="fn")
CLOUDWATCH = Principal("service:cloudwatch", service="cloudwatch.amazonaws.com")


def policies(
    *bodies: dict[str, Any], resource: dict[str, list[dict[str, Any]]] | None = None
) -> PolicySet:
    out = PolicySet()
    out.identity[ROLE.arn] = [Statement(StatementRef("P", i), b) for i, b in enumerate(bodies)]
    for arn, statements in (resource or {}).items():
        out.resource[arn] = [Statement(StatementRef(arn, i), b) for i, b in enumerate(statements)]
    return out


def request(
    action: str, resource: str, principal: Principal = ROLE, policy: str | None = None, **ctx: Any
) -> Request:
    context = {
        k.replace("__", "/").replace("_", ":", 1).lower(): tuple(v if isinstance(v, list) else [v])
        for k, v in ctx.items()
    }
    return Request(action, resource, context, principal, policy)


ALLOW_ALL_INSTANCES = {
    "Effect": "Allow",
    "Action": "ec2:AttachVolume",
    "Resource": "arn:aws:ec2:us-east-1:123456789012:instance/*",
}


def test_no_statement_means_implicit_deny_and_an_allow_allows() -> None:
    arn = "arn:aws:ec2:us-east-1:123456789012:instance/i-1"
    assert not evaluate(policies(), request("ec2:AttachVolume", arn)).allowed
    assert evaluate(policies(ALLOW_ALL_INSTANCES), request("ec2:AttachVolume", arn)).allowed
    assert not evaluate(policies(ALLOW_ALL_INSTANCES), request("ec2:DetachVolume", arn)).allowed


def test_an_explicit_deny_wins_over_any_allow() -> None:
    deny = {"Effect": "Deny", "Action": "ec2:*", "Resource": "*"}
    decision = evaluate(
        policies(ALLOW_ALL_INSTANCES, deny),
        request("ec2:AttachVolume", "arn:aws:ec2:us-east-1:123456789012:instance/i-1"),
    )
    assert (decision.allowed, decision.explicit_deny) == (False, (StatementRef("P", 1),))


def test_actions_match_without_case_and_resources_segment_by_segment() -> None:
    allow = {
        "Effect": "Allow",
        "Action": "EC2:attach*",
        "Resource": "arn:aws:ec2:*:123456789012:instance/*",
    }
    assert evaluate(
        policies(allow),
        request("ec2:AttachVolume", "arn:aws:ec2:us-east-1:123456789012:instance/i-1"),
    ).allowed
    assert not evaluate(
        policies(allow),
        request("ec2:AttachVolume", "arn:aws:ec2:us-east-1:999999999999:instance/i-1"),
    ).allowed


@pytest.mark.parametrize(
    ("operator", "values", "context", "holds"),
    [
        ("StringEquals", ["a"], ["a"], True),
        ("StringEquals", ["a"], None, False),  # an absent key makes a condition false
        ("StringNotEquals", ["a"], None, True),  # ... except a negated one
        ("StringNotEquals", ["a", "b"], ["b"], False),
        ("StringLike", ["*"], None, False),
        ("StringLike", ["db?"], ["db1"], True),
        ("StringEqualsIfExists", ["a"], None, True),
        ("StringEqualsIfExists", ["a"], ["b"], False),
        ("Null", ["true"], None, True),
        ("Null", ["false"], None, False),
        ("Bool", ["false"], ["true"], False),
        ("ForAllValues:StringEquals", ["k"], None, True),  # vacuously true
        ("ForAllValues:StringEquals", ["k"], ["k", "other"], False),
        ("ForAnyValue:StringEquals", ["k"], None, False),
        ("ForAnyValue:StringEquals", ["k"], ["other", "k"], True),
        (
            "ArnLike",
            ["arn:aws:cloudwatch:*:1:alarm:*"],
            ["arn:aws:cloudwatch:us-east-1:1:alarm:x"],
            True,
        ),
        (
            "ArnLike",
            ["arn:aws:cloudwatch:*:1:alarm:*"],
            ["arn:aws:cloudwatch:us-east-1:2:alarm:x"],
            False,
        ),
        ("NumericLessThanEquals", ["300"], ["300"], True),
    ],
)
def test_condition_operators(
    operator: str, values: list[str], context: list[str] | None, holds: bool
) -> None:
    ctx = {} if context is None else {"k:key": tuple(context)}
    assert condition_holds(operator, "K:Key", values, ctx) is holds


def test_condition_key_names_match_without_case() -> None:
    assert condition_holds("StringEquals", "EC2:InstanceId", ["i-1"], {"ec2:instanceid": ("i-1",)})


def test_a_key_policy_must_allow_itself_or_delegate_to_iam() -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/k"
    use = {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"}
    root = {
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
        "Action": "kms:*",
        "Resource": "*",
    }
    # identity allows, key policy neither allows nor delegates: denied
    assert not evaluate(
        policies(use, resource={key: []}), request("kms:Decrypt", key, policy=key)
    ).allowed
    # the key policy delegates to the account: the identity policy decides
    assert evaluate(
        policies(use, resource={key: [root]}), request("kms:Decrypt", key, policy=key)
    ).allowed
    assert not evaluate(
        policies(resource={key: [root]}), request("kms:Decrypt", key, policy=key)
    ).allowed


def test_a_service_principal_needs_the_resource_policy_and_a_deny_to_anyone_applies() -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:t"
    allow = {
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": "sns:Publish",
        "Resource": topic,
        "Condition": {
            "ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:a"}
        },
    }
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "sns:Publish",
        "Resource": topic,
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }
    ok = request(
        "sns:Publish",
        topic,
        CLOUDWATCH,
        topic,
        aws_SourceArn="arn:aws:cloudwatch:us-east-1:123456789012:alarm:a",
        aws_SecureTransport="true",
    )
    assert evaluate(policies(resource={topic: [deny, allow]}), ok).allowed
    other = request(
        "sns:Publish",
        topic,
        CLOUDWATCH,
        topic,
        aws_SourceArn="arn:aws:cloudwatch:us-east-1:123456789012:alarm:b",
        aws_SecureTransport="true",
    )
    assert not evaluate(policies(resource={topic: [deny, allow]}), other).allowed
    plain = request(
        "sns:Publish",
        topic,
        CLOUDWATCH,
        topic,
        aws_SourceArn="arn:aws:cloudwatch:us-east-1:123456789012:alarm:a",
        aws_SecureTransport="false",
    )
    assert evaluate(policies(resource={topic: [deny, allow]}), plain).explicit_deny


def test_the_reference_decides_resource_types_and_keys() -> None:
    snapshots = sar.action_model("ec2", "CreateSnapshots")
    assert {"instance", "volume", "snapshot"} <= set(snapshots.resource_types)
    assert "ec2:instanceid" in snapshots.keys_for("instance")
    assert "ec2:instanceid" not in snapshots.keys_for("volume")
    assert sar.action_model("ssm", "CancelCommand").wildcard_only
    assert "ec2:createaction" in sar.action_model("ec2", "CreateTags").action_keys
    with pytest.raises(sar.UnknownActionError):
        sar.action_model("ec2", "CreateSnapshotz")
