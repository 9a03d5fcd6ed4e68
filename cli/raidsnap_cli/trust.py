"""Tag protection as the CLI sees it: whether it is in place (``raidsnap doctor``), and the SCP
form of its policy (``raidsnap tag-protection-policy``).

The statement is the one lib/constructs/tag-protection.ts puts in the managed policy: deny
ec2:CreateTags and ec2:DeleteTags whenever the request names a raidsnap:* key (tag-on-create is
authorized as ec2:CreateTags too), to everyone but raidsnap's own roles, the named
administrators and service-linked roles."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError


def policy_name(stack: str) -> str:
    """The managed policy's name (tagProtectionPolicyName in lib/constructs/tag-protection.ts)."""
    return f"{stack}-tag-protection"


def scp_document(partition: str, exempt: list[str]) -> dict[str, Any]:
    """The SCP: the managed policy's statement. An SCP binds every identity of the accounts it
    is attached to (not service-linked roles, which SCPs never restrict)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "OnlyRaidsnapWritesRaidsnapTags",
                "Effect": "Deny",
                "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
                "Resource": "*",
                "Condition": {
                    "ForAnyValue:StringLike": {"aws:TagKeys": ["raidsnap:*"]},
                    "ArnNotLike": {
                        "aws:PrincipalArn": [
                            *exempt,
                            f"arn:{partition}:iam::*:role/aws-service-role/*",
                        ]
                    },
                },
            }
        ],
    }


def stack_roles(cfn: Any, stack: str, partition: str, account: str) -> list[str]:
    """The ARNs of every IAM role the stack made (its functions', workflows', schedules')."""
    names: list[str] = []
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack):
        names += [
            r["PhysicalResourceId"]
            for r in page["StackResourceSummaries"]
            if r["ResourceType"] == "AWS::IAM::Role" and r.get("PhysicalResourceId")
        ]
    return [f"arn:{partition}:iam::{account}:role/{name}" for name in sorted(names)]


def protection_line(iam: Any, stack: str) -> tuple[bool, str]:
    """One line: is the managed policy there and attached to something? An SCP is out of this
    account's sight (only the Organization's management account can list SCPs), so the line
    says so rather than guess."""
    name = policy_name(stack)
    scp = "an SCP, if your Organization applies one, is not visible from here"
    try:
        found = [
            p
            for page in iam.get_paginator("list_policies").paginate(Scope="Local")
            for p in page["Policies"]
            if p["PolicyName"] == name
        ]
    except (ClientError, BotoCoreError) as error:
        code = error.response.get("Error", {}).get("Code") if isinstance(error, ClientError) else ""
        return False, (
            f"tag protection: cannot tell ({code or 'IAM could not be asked'}: "
            f"iam:ListPolicies is needed to look for the managed policy {name}); {scp}"
        )
    if not found:
        return False, (
            f"tag protection: NOT in place: no managed policy {name} ({scp}). "
            "Next: set tagProtection.administrators in the config and deploy, then attach the "
            "policy; or apply the SCP that `raidsnap tag-protection-policy` prints"
        )
    count = int(found[0].get("AttachmentCount", 0))
    if not count:
        return False, (
            f"tag protection: NOT in place: the managed policy {name} is attached to nothing. "
            "Next: attach it to every role, user or group that may call ec2:CreateTags"
        )
    return True, (
        f"tag protection: in place: the managed policy {name} is attached to {count} "
        f"identit{'y' if count == 1 else 'ies'} ({scp})"
    )
