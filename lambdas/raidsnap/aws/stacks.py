"""The stack itself: whether it is being deleted, and answering CloudFormation's requests to a
custom resource whose provider is one of the stack's functions."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any

import boto3

# CloudFormation's ResponseURL is a presigned https URL: the answer goes nowhere else.
RESPONSE_URL_PREFIXES: tuple[str, ...] = ("https://",)


def deleting(stack_id: str) -> bool:
    """Whether the stack is being deleted (DescribeStacks: StackStatus DELETE_IN_PROGRESS). A
    custom resource gets a Delete request too when an update removes it from the template."""
    stacks = boto3.client("cloudformation").describe_stacks(StackName=stack_id)["Stacks"]
    return bool(stacks) and stacks[0].get("StackStatus") == "DELETE_IN_PROGRESS"


def respond(url: str, body: Mapping[str, Any]) -> None:
    """PUT the answer to a request at its ResponseURL, a presigned S3 URL signed for an empty
    content type (CloudFormation User Guide, "Custom resource request and response reference":
    the provider "returns a JSON response to a presigned Amazon S3 bucket URL"; the body is at
    most 4096 bytes)."""
    if not url.startswith(RESPONSE_URL_PREFIXES):
        raise ValueError("a ResponseURL is CloudFormation's presigned https URL")
    data = json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - CloudFormation's URL, https only
        url, data=data, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(data))}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        response.read()
