"""Finding the stack's state machines: which ARN runs backups, which runs restores.

CloudFormation names them (``BackupWorkflowStateMachine80046694-AbCd``), so the name says
nothing dependable. The stack's resource list is the link: every StateMachine resource of the
stack is described and recognised by its definition's top-level Comment (``raidsnap backup:
...``). Without CloudFormation access, or when the stack is not found, the account's state
machines are scanned for the same Comments, and those that CloudFormation tagged as another
stack's are left out."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

COMMENT = re.compile(r"^raidsnap ([a-z][a-z-]*):")
STACK_TAG = "aws:cloudformation:stack-name"
STATE_MACHINE_TYPE = "AWS::StepFunctions::StateMachine"


class ResolveError(Exception):
    """The state machines cannot be found or are ambiguous; the message says what to check."""


def workflow_of(definition: str) -> str | None:
    """``backup`` for a definition whose Comment starts ``raidsnap backup:``."""
    try:
        comment = json.loads(definition).get("Comment", "")
    except (ValueError, AttributeError):
        return None
    match = COMMENT.match(str(comment))
    return match.group(1) if match else None


def _recognise(sfn: SFNClient, arns: Iterable[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for arn in arns:
        definition = sfn.describe_state_machine(stateMachineArn=arn)["definition"]
        workflow = workflow_of(definition)
        if workflow:
            found.setdefault(workflow, []).append(arn)
    return found


def _single(found: dict[str, list[str]], where: str) -> dict[str, str]:
    ambiguous = {w: arns for w, arns in found.items() if len(arns) > 1}
    if ambiguous:
        detail = "; ".join(f"{w}: {', '.join(sorted(a))}" for w, a in sorted(ambiguous.items()))
        raise ResolveError(f"more than one raidsnap state machine per workflow {where}: {detail}")
    return {w: arns[0] for w, arns in found.items()}


def from_stack(cloudformation: Any, sfn: SFNClient, stack: str) -> dict[str, str] | None:
    """Workflow -> ARN from the stack's resources; None when the stack cannot be read.

    ListStackResources pages where DescribeStackResources stops at 100 resources; both give the
    physical id, which for a state machine is its ARN."""
    try:
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
        arns = [
            r["PhysicalResourceId"]
            for page in pages
            for r in page["StackResourceSummaries"]
            if r["ResourceType"] == STATE_MACHINE_TYPE and r.get("PhysicalResourceId")
        ]
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code in ("ValidationError", "AccessDenied", "AccessDeniedException"):
            return None
        raise
    return _single(_recognise(sfn, arns), f"in stack {stack}")


def by_comment(sfn: SFNClient, stack: str) -> dict[str, str]:
    """Workflow -> ARN by scanning the account's state machines for raidsnap Comments."""
    arns = [
        m["stateMachineArn"]
        for page in sfn.get_paginator("list_state_machines").paginate()
        for m in page["stateMachines"]
    ]
    found = _recognise(sfn, arns)
    for workflow, candidates in found.items():
        found[workflow] = [arn for arn in candidates if _stack_of(sfn, arn) in (None, stack)]
    return _single({w: a for w, a in found.items() if a}, "in this account and region")


def _stack_of(sfn: SFNClient, arn: str) -> str | None:
    try:
        tags = sfn.list_tags_for_resource(resourceArn=arn)["tags"]
    except ClientError:
        return None
    return next((t["value"] for t in tags if t.get("key") == STACK_TAG), None)


def resolve(cloudformation: Any, sfn: SFNClient, stack: str) -> tuple[dict[str, str], str]:
    """Workflow -> ARN, and how they were found (for the operator, when something is off)."""
    found = from_stack(cloudformation, sfn, stack)
    if found:
        return found, f"stack {stack}"
    found = by_comment(sfn, stack)
    if not found:
        raise ResolveError(
            f"no raidsnap state machine found: stack {stack!r} has none (or cannot be read), "
            "and no state machine in this account and region has a 'raidsnap <workflow>:' "
            "Comment; check --stack, --region and --profile"
        )
    return found, "state machine Comments"


TABLE_TYPE = "AWS::DynamoDB::Table"
# The logical id CDK gives the manifest table (lib/constructs/snapshot-sets.ts) starts so.
SETS_TABLE_ID = "SnapshotSetsTable"
SETS_KEYS = {"array": "HASH", "setId": "RANGE"}
LOCK_TABLE_ID = "RestoreLockTable"
LOCK_KEYS = {"array": "HASH"}


def manifest_table(cloudformation: Any, dynamodb: Any, stack: str) -> str:
    """The stack's table of set manifests: from the stack's resources, else the one table in
    this account and region keyed as raidsnap keys its manifests (array, setId)."""
    return _table(
        cloudformation, dynamodb, stack, SETS_TABLE_ID, keys=SETS_KEYS, what="set manifests"
    )


def lock_table(cloudformation: Any, dynamodb: Any, stack: str) -> str:
    """The stack's restore lock table (which also records each array's instance): from the
    stack's resources, else the one table here keyed (array) alone."""
    return _table(
        cloudformation, dynamodb, stack, LOCK_TABLE_ID, keys=LOCK_KEYS, what="restore locks"
    )


def _table(
    cloudformation: Any, dynamodb: Any, stack: str, logical: str, *, keys: dict[str, str], what: str
) -> str:
    try:
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack)
        named = [
            r["PhysicalResourceId"]
            for page in pages
            for r in page["StackResourceSummaries"]
            if r["ResourceType"] == TABLE_TYPE
            and r["LogicalResourceId"].startswith(logical)
            and r.get("PhysicalResourceId")
        ]
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code not in ("ValidationError", "AccessDenied", "AccessDeniedException"):
            raise
        named = []
    if len(named) == 1:
        return str(named[0])
    keyed = [
        name
        for page in dynamodb.get_paginator("list_tables").paginate()
        for name in page["TableNames"]
        if {
            k["AttributeName"]: k["KeyType"]
            for k in dynamodb.describe_table(TableName=name)["Table"]["KeySchema"]
        }
        == keys
    ]
    if len(keyed) != 1:
        found = ", ".join(sorted(keyed)) or "none"
        shape = ", ".join(keys)
        raise ResolveError(
            f"cannot tell which table holds raidsnap's {what}: stack {stack!r} names "
            f"none (or cannot be read), and tables keyed ({shape}) here: {found}; check "
            "--stack, --region and --profile"
        )
    return str(keyed[0])
