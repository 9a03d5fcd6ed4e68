"""What every service of the double shares: the calls it saw, the principal making a call, the
errors it answers with, paging and filters as AWS does them, and the way through to moto.

A service (ec2.py, volumes.py, fsr.py, ssm.py, health.py, faults.py) is a class over
``DoubleBase`` that keeps only the state moto lacks and adds its (service, operation) handlers to
``_handlers``; ``AwsDouble`` (dispatch.py) is all of them over one patched botocore.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import boto3
from botocore.client import BaseClient
from botocore.exceptions import ClientError
from moto.iam.models import get_account_id_from
from moto.sts.models import sts_backends

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.environ import thread_environ

Params = dict[str, Any]

Answer = dict[str, Any]

_MUTATING_PREFIXES = (
    "Create",
    "Delete",
    "Attach",
    "Detach",
    "Enable",
    "Disable",
    "Modify",
    "Send",
    "Cancel",
    "Run",
    "Start",
    "Stop",
    "Terminate",
    "Reboot",
    "Put",
    "Update",
    "Register",
    "Deregister",
    "Associate",
    "Disassociate",
    "Copy",
    "Restore",
    "Import",
    "Reset",
    "Replace",
    "Lock",
    "Unlock",
    "Add",
    "Remove",
)

_SERVER_STATUS = {
    "RequestLimitExceeded": 503,
    "ServiceUnavailable": 503,
    "Unavailable": 503,
    "InternalError": 500,
    "InternalFailure": 500,
    "InternalServerError": 500,
}


@dataclass(frozen=True)
class Call:
    """One API call the double saw. ``applied`` is true when AWS carried it out, which includes a
    call that was made to fail after it took effect."""

    service: str
    operation: str
    params: dict[str, Any]
    error_code: str | None
    time: datetime
    applied: bool = True
    # The function (by logical id) on whose behalf the call was made, when the harness knows.
    actor: str | None = None


class AwsError(Exception):
    """An error the double answers with; the dispatcher turns it into the client's ClientError."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status if status is not None else _SERVER_STATUS.get(code, 400)


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _page(items: list[Any], params: Params, default_size: int = 1000) -> tuple[list[Any], str]:
    """Slice one page the way AWS does: an opaque NextToken, empty when there is no more."""
    start = int(params.get("NextToken") or 0)
    size = int(params.get("MaxResults") or default_size)
    end = start + size
    return items[start:end], (str(end) if end < len(items) else "")


def _split_filters(params: Params, names: set[str]) -> tuple[Params, list[dict[str, Any]]]:
    """Take the filters the double evaluates itself out of params meant for moto."""
    rest = copy.deepcopy(params)
    ours = [f for f in rest.get("Filters", []) if f.get("Name") in names]
    kept = [f for f in rest.get("Filters", []) if f.get("Name") not in names]
    if kept:
        rest["Filters"] = kept
    else:
        rest.pop("Filters", None)
    for key in ("MaxResults", "NextToken"):
        rest.pop(key, None)
    return rest, ours


def _matches(filters: list[dict[str, Any]], values: Callable[[str], list[str]]) -> bool:
    return all(set(values(f["Name"])) & set(f.get("Values", [])) for f in filters)


def _constant(values: list[str]) -> Callable[[str], list[str]]:
    return lambda _name: values


def _lookup(fields: dict[str, list[str]]) -> Callable[[str], list[str]]:
    return lambda name: fields.get(name, [])


class _Actor(threading.local):
    name: str | None = None


_actor = _Actor()

DEFAULT_ACCOUNT = "123456789012"
"""moto's account for credentials it does not know (the emulation's own account)."""


class _Where(threading.local):
    """The Region, account and principal of the call this thread is answering (innermost
    last)."""

    def __init__(self) -> None:
        self.stack: list[tuple[str, str, str | None]] = []


def assumed_role_of(client: BaseClient) -> str | None:
    """The role whose credentials the client uses, when they come from sts:AssumeRole (moto
    keeps each assumed role's access key with the role's account)."""
    credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    key = getattr(credentials, "access_key", None)
    if not key:
        return None
    for account in list(sts_backends):
        assumed = sts_backends[account]["aws"].get_assumed_role_from_access_key(key)
        if assumed is not None:
            return str(assumed.role_arn)
    return None


def account_of(client: BaseClient) -> str:
    """The account a client acts in, as moto decides it: MOTO_ACCOUNT_ID where set (a function
    of a stack deployed in another account has it in its environment), else the account its
    access key belongs to (an assumed role's key: the role's account), else moto's default."""
    pinned = os.environ.get("MOTO_ACCOUNT_ID")
    if pinned:
        return pinned
    credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    key = getattr(credentials, "access_key", None)
    return get_account_id_from(key) if key else DEFAULT_ACCOUNT


ACTOR_ATTRIBUTE = "_raidsnap_actor"
"""Set on a client whose calls a known principal makes (a state machine's integrations)."""

Authorize = Callable[[str, str, dict[str, Any], str], None]
"""(service, operation, params, actor): raises AwsError when IAM would deny the call."""


@contextlib.contextmanager
def acting_as(name: str) -> Iterator[None]:
    """Attribute the calls this thread makes inside the block to ``name``."""
    previous, _actor.name = _actor.name, name
    try:
        yield
    finally:
        _actor.name = previous


class DoubleBase:
    """State and lookups every service of the double uses; see AwsDouble for the whole."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        self.clock = clock
        self.default_region = region
        self._where = _Where()
        # (account, Region) of every stack deployed besides the emulation's own.
        self.places: list[tuple[str, str]] = []
        # Who calls with an assumed role's credentials: the role, named as the stack that made
        # it names its principals (the harness answers), or None for a role of no stack.
        self.role_actor: Callable[[str], str | None] | None = None
        self.calls: list[Call] = []

        # IAM: the emulation authorizes each call a known principal makes, in this one place.
        self.authorize: Authorize | None = None

        self._lock = threading.RLock()
        self._original: Callable[[BaseClient, str, Params], Answer] | None = None
        self._clients: dict[str, BaseClient] = {}
        self._routes: dict[tuple[str, str], Callable[[Params], Answer]] = {}
        self._logged_machines: set[str] = set()
        self._zones: dict[str, dict[str, str]] = {}
        # (service, operation) -> the method that answers it; each service adds its own.
        self._handlers: dict[tuple[str, str], Callable[[Params], Answer]] = {}

    @property
    def region(self) -> str:
        """The Region of the call being answered (the client's): each Region has its own
        resources in moto; outside a call, the emulation's own Region."""
        return self._where.stack[-1][0] if self._where.stack else self.default_region

    @property
    def account(self) -> str:
        """The account of the call being answered (see account_of)."""
        return self._where.stack[-1][1] if self._where.stack else DEFAULT_ACCOUNT

    @property
    def actor(self) -> str | None:
        """Who makes the call being answered (a function or state machine), where known."""
        return self._where.stack[-1][2] if self._where.stack else None

    @contextlib.contextmanager
    def calls_in(
        self, region: str, account: str, actor: str | None = None, *, inherit: bool = True
    ) -> Iterator[None]:
        """What this thread asks of moto inside the block goes to this Region and account, made
        by ``actor``; without one, by whoever makes the call being answered (``inherit``), or by
        nobody in particular (a new call, from a client of no principal)."""
        made_by = actor if actor is not None or not inherit else self.actor
        self._where.stack.append((region, account, made_by))
        try:
            with thread_environ().adding({"MOTO_ACCOUNT_ID": account}):
                yield
        finally:
            self._where.stack.pop()

    def route(self, service: str, operation: str, fn: Callable[[Params], Answer]) -> None:
        with self._lock:
            self._routes[(service, operation)] = fn

    def set_logged(self, state_machine_arn: str, logged: bool = True) -> None:
        """Whether the state machine has logging enabled: its execution names are then held to
        the narrower character set (StartExecution ``name``)."""
        with self._lock:
            if logged:
                self._logged_machines.add(state_machine_arn)
            else:
                self._logged_machines.discard(state_machine_arn)

    def mutating_calls(self, service: str = "ec2") -> list[Call]:
        """Calls of that service that changed something in AWS."""
        with self._lock:
            return [
                c
                for c in self.calls
                if c.service == service and c.applied and c.operation.startswith(_MUTATING_PREFIXES)
            ]

    def _passthrough(self, client: BaseClient, operation: str, params: Params) -> Answer:
        assert self._original is not None, "the double is not installed"
        return self._original(client, operation, params)

    def _record(  # noqa: PLR0917 - one line per call site reads best positionally
        self,
        service: str,
        operation: str,
        params: Params,
        code: str | None,
        applied: bool,
        actor: str | None = None,
    ) -> None:
        with self._lock:
            self.calls.append(
                Call(
                    service,
                    operation,
                    params,
                    code,
                    self.clock.now(),
                    applied,
                    actor or _actor.name,
                )
            )

    @staticmethod
    def _client_error(client: BaseClient, operation: str, err: AwsError) -> ClientError:
        response: dict[str, Any] = {
            "Error": {"Code": err.code, "Message": err.message},
            "ResponseMetadata": {
                "RequestId": str(uuid.uuid4()),
                "HTTPStatusCode": err.status,
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        }
        error_class: Any = client.exceptions.from_code(err.code)
        error: ClientError = error_class(response, operation)
        return error

    def _client(self, service: str) -> BaseClient:
        key = f"{service}@{self.region}"
        if key not in self._clients:
            self._clients[key] = boto3.client(service, region_name=self.region)  # type: ignore[call-overload]
        return self._clients[key]

    def _moto(self, service: str, operation: str, params: Params) -> Answer:
        """Ask moto directly, as AWS itself would; its errors come back as AwsError."""
        assert self._original is not None, "the double is not installed"
        try:
            return self._original(self._client(service), operation, params)
        except ClientError as err:
            error = err.response["Error"]
            raise AwsError(error.get("Code", "InternalError"), error.get("Message", "")) from None

    def _zones_by_name(self) -> dict[str, str]:
        if self.region not in self._zones:
            zones = self._moto("ec2", "DescribeAvailabilityZones", {})["AvailabilityZones"]
            self._zones[self.region] = {z["ZoneName"]: z["ZoneId"] for z in zones}
        return self._zones[self.region]

    def _instance(self, instance_id: str) -> dict[str, Any]:
        answer = self._moto("ec2", "DescribeInstances", {"InstanceIds": [instance_id]})
        return dict(answer["Reservations"][0]["Instances"][0])

    def _moto_volume(self, volume_id: str) -> dict[str, Any]:
        answer = self._moto("ec2", "DescribeVolumes", {"VolumeIds": [volume_id]})
        return dict(answer["Volumes"][0])

    def _moto_snapshot(self, snapshot_id: str) -> dict[str, Any]:
        answer = self._moto("ec2", "DescribeSnapshots", {"SnapshotIds": [snapshot_id]})
        return dict(answer["Snapshots"][0])
