"""`raidsnap doctor` on tag protection, and `raidsnap tag-protection-policy`, against moto: one
readable line with the next step when protection is missing, never raw JSON or a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from raidsnap_cli import trust
from raidsnap_cli.app import app

DENY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Action": "ec2:CreateTags", "Resource": "*"}],
    }
)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield


def doctor() -> tuple[int, str]:
    result = CliRunner().invoke(app, ["doctor", "--region", "eu-west-1"])
    return result.exit_code, result.output


def test_doctor_says_tag_protection_is_missing_and_what_to_do(aws: None) -> None:
    code, output = doctor()
    assert code == 0
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert "tag protection: NOT in place" in lines[0]
    assert "raidsnap-tag-protection" in lines[0]
    assert "raidsnap tag-protection-policy" in lines[0]
    assert "SCP" in lines[0] and "not visible" in lines[0]
    assert "{" not in output and "Traceback" not in output


def test_doctor_says_an_unattached_policy_protects_nothing(aws: None) -> None:
    boto3.client("iam").create_policy(PolicyName="raidsnap-tag-protection", PolicyDocument=DENY)
    _, output = doctor()
    assert "NOT in place" in output and "attached to nothing" in output
    assert "Next: attach it" in output


def test_doctor_says_an_attached_policy_is_in_place(aws: None) -> None:
    iam = boto3.client("iam")
    arn = iam.create_policy(PolicyName="raidsnap-tag-protection", PolicyDocument=DENY)["Policy"][
        "Arn"
    ]
    iam.create_role(RoleName="ops", AssumeRolePolicyDocument=DENY)
    iam.attach_role_policy(RoleName="ops", PolicyArn=arn)
    code, output = doctor()
    assert code == 0
    assert "tag protection: in place" in output and "1 identity" in output


def test_tag_protection_policy_prints_the_scp_with_the_stack_roles_and_admins(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = {
        "Resources": {
            "FnRole": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "RoleName": "raidsnap-fn",
                    "AssumeRolePolicyDocument": json.loads(DENY),
                },
            }
        }
    }
    del template
    # moto's CloudFormation needs packages this suite does not install: the stack's roles come
    # from a stand-in that checks what it is asked.
    asked: list[tuple[str, str, str]] = []

    def roles(_cfn: object, stack: str, partition: str, account: str) -> list[str]:
        asked.append((stack, partition, account))
        return [f"arn:{partition}:iam::{account}:role/raidsnap-fn"]

    monkeypatch.setattr(trust, "stack_roles", roles)
    admin = "arn:aws:iam::123456789012:role/storage-admin"
    result = CliRunner().invoke(
        app, ["tag-protection-policy", "--region", "eu-west-1", "--admin", admin]
    )
    assert result.exit_code == 0, result.output
    statement = json.loads(result.stdout)["Statement"][0]
    assert statement["Effect"] == "Deny"
    assert statement["Action"] == ["ec2:CreateTags", "ec2:DeleteTags"]
    assert statement["Condition"]["ForAnyValue:StringLike"] == {"aws:TagKeys": ["raidsnap:*"]}
    exempt = statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    assert asked == [("raidsnap", "aws", "123456789012")]
    assert exempt == [
        "arn:aws:iam::123456789012:role/raidsnap-fn",
        admin,
        "arn:aws:iam::*:role/aws-service-role/*",
    ]
