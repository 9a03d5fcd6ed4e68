"""Just enough CloudFormation to resolve what the emulation reads from the synthesized template:
state machine definitions, function environments, IAM and resource policies, alarms and rules.

Physical names follow one rule: a resource's name property when the template sets one, else its
logical id; ARNs are built from those names in the emulation's account and region.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"


def stack_id(region: str = REGION, account: str = ACCOUNT) -> str:
    """The id (ARN) of the stack deployed to ``region`` of ``account``: AWS::StackId."""
    stack = "raidsnap/5e1f0c2a-7b3d-4e6f-9a8b-0c1d2e3f4a5b"
    return f"arn:aws:cloudformation:{region}:{account}:stack/{stack}"


STACK_ID = stack_id()


# The six characters Secrets Manager appends to a secret's name in its ARN (any will do here).
ARN_SUFFIX = "-Xy12Ab"


def secret_name(logical_id: str) -> str:
    """The name the emulation gives a secret of the template (with the suffix AWS would add)."""
    return f"{logical_id}{ARN_SUFFIX}"


class Template:
    """A synthesized CloudFormation template with its intrinsics resolved on demand."""

    def __init__(self, path: Path, *, region: str = REGION, account: str = ACCOUNT) -> None:
        """The template as deployed to ``region`` of ``account`` (the emulation's own by
        default; a stack of another Region or account is the same template deployed there)."""
        self.path = path
        self.region = region
        self.account = account
        self.body: dict[str, Any] = json.loads(path.read_text())
        self.resources: dict[str, dict[str, Any]] = self.body["Resources"]
        self._pseudo = {
            "AWS::Partition": "aws",
            "AWS::Region": region,
            "AWS::AccountId": account,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "raidsnap",
            "AWS::StackId": stack_id(region, account),
        }

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    def _name(self, logical_id: str, prop: str) -> str:
        props = self.resources[logical_id].get("Properties", {})
        return str(self.resolve(props[prop])) if prop in props else logical_id

    def physical_id(self, logical_id: str) -> str:
        """What ``Ref`` gives for the resource."""
        if logical_id in self.body.get("Parameters", {}):
            raise KeyError(f"Ref {logical_id}: template parameters are not emulated")
        kind = self.resources[logical_id]["Type"]
        if kind == "AWS::SSM::Document":
            return self._name(logical_id, "Name")
        if kind == "AWS::StepFunctions::StateMachine":
            name = self._name(logical_id, "StateMachineName")
            return f"arn:aws:states:{self.region}:{self.account}:stateMachine:{name}"
        if kind == "AWS::DynamoDB::Table":
            return self._name(logical_id, "TableName")
        if kind == "AWS::SNS::Topic":
            return f"arn:aws:sns:{self.region}:{self.account}:{self._name(logical_id, 'TopicName')}"
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{logical_id}"
        if kind == "AWS::IAM::Role":
            return self._name(logical_id, "RoleName")
        if kind == "AWS::SecretsManager::Secret":
            # Ref gives the secret's ARN, whose name Secrets Manager ends with a hyphen and six
            # random characters (AWS::SecretsManager::Secret, "Return values"; Secrets Manager
            # User Guide, "Secret ARN"): the emulation creates it under exactly that name.
            secret = secret_name(logical_id)
            return f"arn:aws:secretsmanager:{self.region}:{self.account}:secret:{secret}"
        return logical_id

    def get_att(self, logical_id: str, attribute: str) -> str:
        kind = self.resources[logical_id]["Type"]
        name = self.physical_id(logical_id)
        where = f"{self.region}:{self.account}"
        arns = {
            "AWS::Lambda::Function": f"arn:aws:lambda:{where}:function:{name}",
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{where}:table/{name}",
            "AWS::StepFunctions::StateMachine": name,
            "AWS::IAM::Role": f"arn:aws:iam::{self.account}:role/{name}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{where}:log-group:{name}:*",
            "AWS::KMS::Key": f"arn:aws:kms:{where}:key/{name}",
            "AWS::CloudWatch::Alarm": f"arn:aws:cloudwatch:{where}:alarm:{name}",
            "AWS::Events::Rule": f"arn:aws:events:{where}:rule/{name}",
            "AWS::SQS::Queue": f"arn:aws:sqs:{where}:{logical_id}",
            "AWS::Scheduler::ScheduleGroup": (f"arn:aws:scheduler:{where}:schedule-group/{name}"),
            "AWS::SNS::Topic": name,
        }
        if kind == "AWS::StepFunctions::StateMachine" and attribute == "Name":
            return name.rsplit(":", 1)[1]
        if kind == "AWS::SNS::Topic" and attribute == "TopicName":
            return name.rsplit(":", 1)[1]
        if kind == "AWS::SQS::Queue" and attribute == "QueueName":
            return logical_id  # the name in its URL and ARN above
        if attribute in ("Arn", "TopicArn") and kind in arns:
            return arns[kind]
        raise KeyError(f"GetAtt {logical_id}.{attribute} is not emulated")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self._pseudo[arg] if arg in self._pseudo else self.physical_id(arg)
            if key == "Fn::GetAtt":
                return self.get_att(arg[0], arg[1])
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(self.resolve(p)) for p in parts)
            if key == "Fn::Sub" and isinstance(arg, str):
                return self._sub(arg)
            if key == "Fn::Select":
                return self.resolve(arg[1])[int(arg[0])]
            if key == "Fn::Split":
                return str(self.resolve(arg[1])).split(arg[0])
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if "." in name:
                logical, attr = name.split(".", 1)
                return self.get_att(logical, attr)
            return str(self.resolve({"Ref": name}))

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def state_machines(self) -> dict[str, tuple[str, str]]:
        """Logical id -> (workflow name from its definition file, resolved definition)."""
        out = {}
        for logical_id, res in self.of_type("AWS::StepFunctions::StateMachine").items():
            props = res["Properties"]
            definition = str(self.resolve(props["DefinitionString"]))
            # CloudFormation puts DefinitionSubstitutions into ${Name} placeholders.
            values = self.resolve(props.get("DefinitionSubstitutions", {}))
            for key, value in values.items():
                definition = definition.replace("${" + key + "}", str(value))
            comment = json.loads(definition).get("Comment", "")
            name = comment.split(":", 1)[0].replace("raidsnap ", "").strip() or logical_id
            out[logical_id] = (name, definition)
        return out
