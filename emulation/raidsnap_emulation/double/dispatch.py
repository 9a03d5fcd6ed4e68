"""The double as one object: every service over one patch of botocore, and the dispatcher that
sends each call to IAM, injected faults, a test's route, a service's handler or moto."""

from __future__ import annotations

import contextlib
import copy
import re
import threading
import unicodedata
import uuid
from collections import Counter
from collections.abc import Iterator
from email.utils import format_datetime

from botocore.client import BaseClient
from botocore.exceptions import ClientError

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import (
    ACTOR_ATTRIBUTE,
    Answer,
    AwsError,
    Params,
    _actor,
    account_of,
    assumed_role_of,
)
from raidsnap_emulation.double.copies import Copies
from raidsnap_emulation.double.faults import Faults
from raidsnap_emulation.double.health import Health
from raidsnap_emulation.double.limits import RateLimits
from raidsnap_emulation.double.ssm import Ssm
from raidsnap_emulation.double.states import States, stopping_ends_waiting_tasks


class AwsDouble(Ssm, Health, States, Copies, Faults):
    """EC2, FSR, SSM and the rest as they behave, on top of moto, on a virtual clock."""

    _installed: AwsDouble | None = None
    _install_guard = threading.Lock()

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self._depth = 0
        self._executor_patch: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        self._handlers[("cloudformation", "ListStackResources")] = self._list_stack_resources
        self._handlers[("cloudformation", "DescribeStacks")] = self._describe_stacks
        # Stacks a test says exist, by stack id (ARN), with their StackStatus; the emulation
        # deploys none itself.
        self.stacks: dict[str, str] = {}
        self._handlers[("sns", "Publish")] = self._sns_publish
        # Documented request-rate limits (limits.py), off unless set; what they refused, by call.
        self.rate_limits: RateLimits | None = None
        self.throttled: Counter[tuple[str, str]] = Counter()

    @contextlib.contextmanager
    def install(self) -> Iterator[AwsDouble]:
        """Patch botocore for the duration of the block; nested blocks of one double are fine."""
        with AwsDouble._install_guard:
            if AwsDouble._installed is not None and AwsDouble._installed is not self:
                raise RuntimeError("another AwsDouble is already installed")
            if self._depth == 0:
                self._original = getattr(BaseClient, "_make_api_call")  # noqa: B009
                double = self

                def _make_api_call(client: BaseClient, operation: str, params: Params) -> Answer:
                    return double._dispatch(client, operation, params)

                setattr(BaseClient, "_make_api_call", _make_api_call)  # noqa: B010
                self._executor_patch = stopping_ends_waiting_tasks()
                self._executor_patch.__enter__()
                AwsDouble._installed = self
            self._depth += 1
        try:
            yield self
        finally:
            with AwsDouble._install_guard:
                self._depth -= 1
                if self._depth == 0:
                    setattr(BaseClient, "_make_api_call", self._original)  # noqa: B010
                    self._executor_patch.__exit__(None, None, None)
                    self._original = None
                    self._clients.clear()
                    AwsDouble._installed = None

    def _dispatch(self, client: BaseClient, operation: str, params: Params) -> Answer:
        region = client.meta.region_name or self.default_region
        actor = _actor.name or getattr(client, ACTOR_ATTRIBUTE, None)
        role = assumed_role_of(client)
        if role is not None and self.role_actor is not None:
            # Calls made with a role's credentials are that role's, whoever holds them.
            actor = self.role_actor(role) or actor
        # A new call is its own client's: never the principal whose call is being answered.
        with self.calls_in(region, account_of(client), actor, inherit=False):
            return self._dispatch_here(client, operation, params)

    def _dispatch_here(self, client: BaseClient, operation: str, params: Params) -> Answer:
        service: str = client.meta.service_model.service_name
        recorded = copy.copy(params)
        actor = self.actor
        if self.authorize is not None and actor is not None:
            try:
                with self._lock:
                    if service == "ec2":
                        self._settle_detachments()
                    self.authorize(service, operation, params, actor)
            except AwsError as err:
                self._record(service, operation, recorded, err.code, applied=False, actor=actor)
                raise self._client_error(client, operation, err) from None
        with self._lock:
            fault = self._take_fault(service, operation)
            limited = self.rate_limits is not None and not self.rate_limits.allow(
                service, operation, params, self.clock.now()
            )
            if limited:
                self.throttled[(service, operation)] += 1
        if limited:
            code = "RequestLimitExceeded" if service == "ec2" else "ThrottlingException"
            self._record(service, operation, recorded, code, applied=False, actor=actor)
            raise self._client_error(client, operation, AwsError(code, "Rate exceeded"))
        if fault is not None and not fault.after_success:
            self._record(service, operation, recorded, fault.code, applied=False, actor=actor)
            raise self._client_error(client, operation, AwsError(fault.code, fault.message))
        try:
            answer = self._answer(client, service, operation, params)
        except AwsError as err:
            self._record(service, operation, recorded, err.code, applied=False, actor=actor)
            raise self._client_error(client, operation, err) from None
        except ClientError as err:
            self._record(service, operation, recorded, err.response["Error"]["Code"], False, actor)
            raise
        if fault is not None:
            self._record(service, operation, recorded, fault.code, applied=True, actor=actor)
            raise self._client_error(client, operation, AwsError(fault.code, fault.message))
        self._record(service, operation, recorded, None, applied=True, actor=actor)
        return self._dated(answer)

    def _dated(self, answer: Answer) -> Answer:
        """Every AWS answer carries a Date header (RFC 9110, 6.6.1: an origin server with a clock
        sends one): here the virtual clock's, the time EC2's own timestamps are on."""
        meta = answer.setdefault("ResponseMetadata", {"HTTPStatusCode": 200})
        headers = dict(meta.get("HTTPHeaders") or {})
        headers["date"] = format_datetime(self.clock.now(), usegmt=True)
        meta["HTTPHeaders"] = headers
        return answer

    def _answer(self, client: BaseClient, service: str, operation: str, params: Params) -> Answer:
        route = self._routes.get((service, operation))
        if route is not None:
            return route(params)
        if (service, operation) == ("stepfunctions", "GetExecutionHistory"):
            return self._execution_history(client, params)
        handler = self._handlers.get((service, operation))
        if (service, operation) == ("stepfunctions", "StartExecution"):
            self._check_execution_name(params)
        if handler is None and service not in ("ec2", "ssm"):
            return self._passthrough(client, operation, params)
        with self._lock:
            if service == "ec2":
                self._settle_detachments()
            if service == "ec2" and self._lagging:
                self._not_yet_visible(operation, params)
            if handler is not None:
                answer = handler(params)
                answer.setdefault(
                    "ResponseMetadata", {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": 200}
                )
            else:
                answer = self._passthrough(client, operation, params)
            if service == "ec2":
                answer = self._lag(operation, answer)
            return answer

    def _check_execution_name(self, params: Params) -> None:
        """StartExecution's name rules (Step Functions API reference, StartExecution ``name``):
        1 to 80 characters, none of whitespace, brackets, wildcards, special characters or
        control characters; and where the state machine has logging enabled, only 0-9, A-Z,
        a-z, - and _. Otherwise InvalidName, and nothing starts."""
        name = params.get("name")
        if name is None:
            return
        text = str(name)
        with self._lock:
            logged = params.get("stateMachineArn") in self._logged_machines
        forbidden = re.compile(r'[\s<>{}\[\]?*"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]')
        if not 1 <= len(text) <= 80 or forbidden.search(text):
            raise AwsError("InvalidName", f"Invalid Name: '{text}'")
        if logged and re.search(r"[^0-9A-Za-z_-]", text):
            raise AwsError(
                "InvalidName",
                f"Invalid Name: '{text}' (with logging enabled, names may contain only 0-9, "
                "A-Z, a-z, - and _)",
            )

    def _execution_history(self, client: BaseClient, params: Params) -> Answer:
        """moto 5.2.5's backend ignores reverseOrder and maxResults; AWS lists the newest events
        first with reverseOrder and returns at most maxResults (default 100, at most 1000) per page
        (https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetExecutionHistory.html),
        with a nextToken while more follow."""
        paging = ("reverseOrder", "maxResults", "nextToken")
        forward = {k: v for k, v in params.items() if k not in paging}
        answer = self._passthrough(client, "GetExecutionHistory", forward)
        events = list(answer.get("events") or [])
        events.sort(key=lambda e: int(e.get("id") or 0), reverse=bool(params.get("reverseOrder")))
        start = int(params.get("nextToken") or 0)
        end = start + int(params.get("maxResults") or 100)
        answer["events"] = events[start:end]
        answer.pop("nextToken", None)
        if end < len(events):
            answer["nextToken"] = str(end)
        return answer

    def _sns_publish(self, params: Params) -> Answer:
        """SNS Publish refuses a Subject that is not one line of printable text shorter than 100
        characters (API reference, Publish: "Subjects must be UTF-8 text with no line breaks or
        control characters, and less than 100 characters long"); moto accepts any."""
        subject = params.get("Subject")
        if isinstance(subject, str) and (
            len(subject) >= 100 or any(unicodedata.category(c) == "Cc" for c in subject)
        ):
            raise AwsError("InvalidParameter", "Invalid parameter: Subject")
        return self._moto("sns", "Publish", params)

    def _describe_stacks(self, params: Params) -> Answer:
        """A stack a test said exists, with the status it gave; else what CloudFormation answers
        for a stack that does not exist (a ValidationError)."""
        name = str(params.get("StackName", ""))
        status = self.stacks.get(name)
        if status is None:
            raise AwsError("ValidationError", f"Stack with id {name} does not exist")
        stack = {"StackId": name, "StackName": name.split("/")[1], "StackStatus": status}
        return {"Stacks": [{**stack, "CreationTime": self.clock.now()}]}

    @staticmethod
    def _list_stack_resources(params: Params) -> Answer:
        """The emulation deploys no CloudFormation stack (moto's CloudFormation needs packages
        this project does not install): every stack is one that does not exist, answered as
        CloudFormation answers it."""
        raise AwsError("ValidationError", f"Stack with id {params['StackName']} does not exist")
