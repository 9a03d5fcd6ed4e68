"""A stack deployed on the emulation: the synthesized template's documents, tables, secrets,
topics, alarms, state machines and functions, created in one Region of one account.

The emulation deploys its own stack (us-east-1 of its account) and, where a test needs one, the
same template in another Region or account: a stack where copies of sets are made and restored.
moto keeps every Region and account apart, as AWS does; the stacks share the clock, the double
and the hosts (an instance id names one instance wherever it runs)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from secrets import token_hex
from typing import Any

import boto3

from raidsnap_emulation.double import AwsDouble
from raidsnap_emulation.double.base import DEFAULT_ACCOUNT
from raidsnap_emulation.environ import thread_environ
from raidsnap_emulation.iam.authorizer import Authorizer
from raidsnap_emulation.template import Template, secret_name

# What the functions see on top of their template environment: fake keys, and Powertools quiet
# enough for a person to follow the workflow (the Region is the deployment's).
BASE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "raidsnap",
    "POWERTOOLS_SERVICE_NAME": "raidsnap",
}


@dataclass(frozen=True)
class FunctionDef:
    name: str
    handler: str
    environment: dict[str, str]


@dataclass
class Deployment:
    """One stack: where it is, its IAM, and what was created for it."""

    template: Template
    iam: Authorizer
    # Prefixed to its functions' and state machines' logical ids where the double names who makes
    # a call: "" for the emulation's own stack, "<account>/<region>/" for another.
    prefix: str = ""
    functions: dict[str, FunctionDef] = field(default_factory=dict)
    state_machines: dict[str, str] = field(default_factory=dict)
    machine_ids: dict[str, str] = field(default_factory=dict)
    document_names: dict[str, str] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return self.template.region

    @property
    def account(self) -> str:
        return self.template.account

    @property
    def runtime_env(self) -> dict[str, str]:
        """A function of this stack runs in its Region (AWS_REGION) and, for a stack of another
        account, in that account (moto's MOTO_ACCOUNT_ID stands for the role's credentials)."""
        env = {**BASE_ENV, "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}
        if self.account != DEFAULT_ACCOUNT:
            env["MOTO_ACCOUNT_ID"] = self.account
        return env

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """Calls this thread makes in the block act in this stack's account."""
        if self.account == DEFAULT_ACCOUNT:
            yield
            return
        with thread_environ().adding({"MOTO_ACCOUNT_ID": self.account}):
            yield

    def role_names(self) -> set[str]:
        """The names the template gives its IAM roles (RoleName), case-folded: "IAM user,
        group, role, and policy names must be unique within the account. Names are not
        distinguished by case" (IAM API reference, CreateRole, RoleName)."""
        return {
            str(self.template.resolve(res["Properties"]["RoleName"])).lower()
            for res in self.template.of_type("AWS::IAM::Role").values()
            if "RoleName" in res.get("Properties", {})
        }

    def client(self, service: str) -> Any:
        """A client of this stack's Region (use it inside ``inside()`` for another account)."""
        return boto3.client(service, region_name=self.region)  # type: ignore[call-overload]

    # ------------------------------------------------------------------ creating it

    def create(self, double: AwsDouble) -> None:
        with self.inside():
            self.document_names = self._create_documents()
            self._create_tables()
            self._create_secrets()
            self._create_topics()
            self._create_alarms()
            self.functions = self._functions()
            self._create_state_machines(double)

    def _functions(self) -> dict[str, FunctionDef]:
        out = {}
        for logical_id, res in self.template.of_type("AWS::Lambda::Function").items():
            props = res["Properties"]
            env = self.template.resolve(props.get("Environment", {}).get("Variables", {}))
            out[logical_id] = FunctionDef(
                name=logical_id,
                handler=props["Handler"],
                environment={k: str(v) for k, v in env.items()},
            )
        return out

    def _create_documents(self) -> dict[str, str]:
        """Create the stack's documents in moto; returns kind (``discover``...) -> name."""
        ssm = self.client("ssm")
        names = {}
        for res in self.template.of_type("AWS::SSM::Document").values():
            props = res["Properties"]
            name = str(self.template.resolve(props["Name"]))
            names[name.rsplit("-", 1)[-1]] = name
            ssm.create_document(
                Name=name,
                Content=json.dumps(props["Content"]),
                DocumentType=props.get("DocumentType", "Command"),
                DocumentFormat="JSON",
            )
        return names

    def _create_tables(self) -> None:
        ddb = self.client("dynamodb")
        for logical_id, res in self.template.of_type("AWS::DynamoDB::Table").items():
            props = res["Properties"]
            ddb.create_table(
                TableName=self.template.physical_id(logical_id),
                KeySchema=props["KeySchema"],
                AttributeDefinitions=props["AttributeDefinitions"],
                BillingMode="PAY_PER_REQUEST",
            )

    def _create_secrets(self) -> None:
        """Each secret as CloudFormation makes it from GenerateSecretString: a random value no
        one sees, under the ARN the template's Ref resolves to."""
        client = self.client("secretsmanager")
        for logical_id in self.template.of_type("AWS::SecretsManager::Secret"):
            client.create_secret(Name=secret_name(logical_id), SecretString=token_hex(32))

    def _create_topics(self) -> None:
        sns = self.client("sns")
        for logical_id in self.template.of_type("AWS::SNS::Topic"):
            sns.create_topic(Name=self.template.get_att(logical_id, "TopicName"))

    def _create_alarms(self) -> None:
        """The stack's alarms as CloudFormation creates them (named by logical id here): a
        function that reads or changes one (PutMetricAlarm) finds it as deployed."""
        cloudwatch = self.client("cloudwatch")
        for logical_id, res in self.template.of_type("AWS::CloudWatch::Alarm").items():
            props = self.template.resolve(res["Properties"])
            cloudwatch.put_metric_alarm(AlarmName=logical_id, **props)

    def _create_state_machines(self, double: AwsDouble) -> None:
        sfn = self.client("stepfunctions")
        role = self.client("iam").create_role(
            # IAM is global: one role name per Region of an account.
            RoleName=f"raidsnap-emulation-{self.region}",
            AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
        )["Role"]["Arn"]
        for logical_id, (name, definition) in self.template.state_machines().items():
            physical = self.template.physical_id(logical_id).rsplit(":", 1)[1]
            arn = sfn.create_state_machine(name=physical, definition=definition, roleArn=role)[
                "stateMachineArn"
            ]
            self.state_machines[name] = arn
            self.machine_ids[arn] = self.prefix + logical_id
            logging = self.template.resources[logical_id]["Properties"].get(
                "LoggingConfiguration", {}
            )
            double.set_logged(arn, logging.get("Level", "OFF") != "OFF")
