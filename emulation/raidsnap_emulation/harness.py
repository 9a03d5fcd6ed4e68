"""Run raidsnap's synthesized state machines on moto, with the Lambda handlers in-process.

The definitions, function handlers and function environments are read from the synthesized
template in cdk.out, never from a hand copy: what runs here is what would be deployed.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import io
import json
import os
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import botocore.session
from botocore.response import StreamingBody
from moto import mock_aws
from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
    StatesErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.state.choice.comparison import (
    comparison_operator_type,
    comparison_variable,
)
from moto.stepfunctions.parser.asl.component.state.choice.comparison.variable import (
    NoSuchVariable,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_sfn,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.models import stepfunctions_parser_backends
from moto.stepfunctions.parser.utils import TMP_THREADS

from raidsnap import clients
from raidsnap_emulation import executor_time, process_caches
from raidsnap_emulation.clock import ClockStalledError, OwnedLock, VirtualClock
from raidsnap_emulation.deployment import BASE_ENV, Deployment, FunctionDef
from raidsnap_emulation.double import ACTOR_ATTRIBUTE, AwsDouble, AwsError, acting_as
from raidsnap_emulation.environ import thread_environ
from raidsnap_emulation.events import Services
from raidsnap_emulation.host import Hosts
from raidsnap_emulation.iam.authorizer import Authorizer
from raidsnap_emulation.template import ACCOUNT, REGION, Template

__all__ = [
    "ACCOUNT",
    "REGION",
    "Emulation",
    "Execution",
    "FunctionDef",
    "Peer",
    "Template",
    "synthesize",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = REPO_ROOT / "cdk.out" / "raidsnap.template.json"
EXAMPLE_CONFIG = REPO_ROOT / "config" / "example.yaml"
# Arrays whose sets are copied to another Region, and to a backup account
# (config/copies.example.yaml), and that backup account's stack (backup-account.example.yaml).
COPIES_CONFIG = REPO_ROOT / "config" / "copies.example.yaml"
BACKUP_ACCOUNT_CONFIG = REPO_ROOT / "config" / "backup-account.example.yaml"
COPIES_DESTINATION_CONFIG = REPO_ROOT / "config" / "copies-destination.example.yaml"
COPIES_LOCKED_DESTINATION_CONFIG = REPO_ROOT / "config" / "copies-locked-destination.example.yaml"

# What the emulation's own stack's functions see on top of their template environment: its
# Region, fake keys, and Powertools quiet enough for a person to follow the workflow.
RUNTIME_ENV = {**BASE_ENV, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}

# Real seconds for which nothing in the emulation may run, with no wake-up due, before a wait
# for an execution says so (only the world outside could still change that).
STALL_GRACE_SECONDS = 2.0

# Real seconds between two looks at an execution that a test waits for, when no end of its
# thread wakes the wait sooner.
WAIT_LOOK_SECONDS = 0.05

_SYNTH_INPUTS = ("bin", "lib", "statemachines", "ssm", "config", "cdk.json")


def synthesize(force: bool = False, config: Path | None = None) -> Path:
    """Synthesize the app (with a config file NAME.yaml: into cdk.out.NAME) unless the template
    is newer than everything it is made from."""
    outdir = "cdk.out" if config is None else f"cdk.out.{config.stem}"
    template = REPO_ROOT / outdir / "raidsnap.template.json"
    if not force and _fresh(template):
        return template
    # The test processes that run at once (pytest -n) may all find it stale: one synthesizes,
    # the others wait for it and then find it fresh.
    lock = REPO_ROOT / ".cache" / f"synth-{outdir}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not force and _fresh(template):
            return template
        cdk = REPO_ROOT / "node_modules" / ".bin" / "cdk"
        if not cdk.exists():
            raise RuntimeError("node_modules is missing: run scripts/setup.sh first")
        command = [str(cdk), "synth", "--quiet", "-o", outdir]
        if config is not None:
            command += ["-c", f"config={config.relative_to(REPO_ROOT)}"]
        subprocess.run(command, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)
    return template


def _fresh(template: Path) -> bool:
    """Whether the template is newer than everything it is made from."""
    if not template.exists():
        return False
    newest = max(
        (p.stat().st_mtime for name in _SYNTH_INPUTS for p in _files(REPO_ROOT / name)),
        default=0.0,
    )
    return newest <= template.stat().st_mtime


def _files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif path.is_dir():
        yield from (p for p in path.rglob("*") if p.is_file())


# ---------------------------------------------------------------------- in-process Lambda


class _Context:
    """The parts of the Lambda context object that Powertools reads."""

    def __init__(self, name: str, region: str = REGION, account: str = ACCOUNT) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:{account}:function:{name}"
        self.memory_limit_in_mb = 256
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "emulation"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class Invocation:
    function: str
    module: str
    at: datetime
    event: Any
    result: Any = None
    error_type: str | None = None
    error_message: str | None = None


_ENVIRONMENT_LOCK = OwnedLock()


class LambdaRouter:
    """Answers lambda:Invoke by calling the handler named in the template, in this process,
    under the environment the template gives that function."""

    def __init__(
        self, own: Deployment, clock: VirtualClock, double: AwsDouble | None = None
    ) -> None:
        self.own = own
        self.functions = own.functions
        self.clock = clock
        self.double = double
        # Every stack deployed, by (Region, account): a function ARN names its stack.
        self.stacks: dict[tuple[str, str], Deployment] = {(own.region, own.account): own}
        self.invocations: list[Invocation] = []
        # One invocation at a time, across every emulation of the process, as the workflows'
        # functions share the process (its clients, its moto backends). Each sees its own
        # function's environment (environ.py), set for its thread only.
        self._lock = _ENVIRONMENT_LOCK

    def _stack_of(self, function: str) -> Deployment:
        """The stack a function belongs to: named by its ARN (arn:aws:lambda:region:account:
        function:name), else the one the call was made to."""
        parts = function.split(":")
        if len(parts) >= 7 and parts[0] == "arn":
            where = (parts[3], parts[4])
        elif self.double is not None:
            where = (self.double.region, self.double.account)
        else:
            where = (self.own.region, self.own.account)
        return self.stacks.get(where, self.own)

    def configuration(self, params: dict[str, Any]) -> dict[str, Any]:
        """lambda:GetFunctionConfiguration as Lambda answers it for a deployed function: its
        name, ARN, handler and environment variables (Lambda API reference,
        GetFunctionConfiguration; FunctionName is a name or an ARN). The operator's tools read
        a function's settings so (the CLI's restore plan reads the restore's Prepare)."""
        asked = str(params["FunctionName"])
        stack = self._stack_of(asked)
        fn = stack.functions.get(asked.rsplit(":", 1)[-1])
        if fn is None:
            raise AwsError("ResourceNotFoundException", f"Function not found: {asked}", 404)
        return {
            "FunctionName": fn.name,
            "FunctionArn": f"arn:aws:lambda:{stack.region}:{stack.account}:function:{fn.name}",
            "Handler": fn.handler,
            "Environment": {"Variables": dict(fn.environment)},
        }

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        stack = self._stack_of(str(params["FunctionName"]))
        name = str(params["FunctionName"]).rsplit(":", 1)[-1]
        fn = stack.functions[name]
        raw = params.get("Payload", b"{}")
        event = json.loads(raw.decode() if isinstance(raw, bytes | bytearray) else raw or "{}")
        module = fn.handler.rsplit(".", 2)[-2]
        # Time stands still while a function runs (but for its own pauses), whichever thread
        # runs it; waiting for another's invocation to end waits for that one.
        with (
            self.clock.hold(),
            self.clock.locked(self._lock, "the invoke lock"),
            thread_environ().overlay({**fn.environment, **stack.runtime_env}),
        ):
            record = Invocation(
                function=stack.prefix + name, module=module, at=self.clock.now(), event=event
            )
            try:
                module_name, attr = fn.handler.rsplit(".", 1)
                handler = getattr(importlib.import_module(module_name), attr)
                with acting_as(stack.prefix + name):
                    record.result = handler(event, _Context(name, stack.region, stack.account))
                payload = json.dumps(record.result, default=str).encode()
                error = None
            except Exception as exc:  # a Lambda runtime reports any exception this way
                record.error_type = type(exc).__name__
                record.error_message = str(exc)
                payload = json.dumps(
                    {
                        "errorType": record.error_type,
                        "errorMessage": record.error_message,
                        "stackTrace": traceback.format_exception(exc)[-3:],
                    }
                ).encode()
                error = "Unhandled"
            self.invocations.append(record)
        answer: dict[str, Any] = {
            "StatusCode": 200,
            "ExecutedVersion": "$LATEST",
            "Payload": StreamingBody(io.BytesIO(payload), len(payload)),
        }
        if error:
            answer["FunctionError"] = error
        return answer


# ---------------------------------------------------------------------- executions


@dataclass
class Execution:
    arn: str
    status: str
    input: dict[str, Any]
    output: Any
    error: str | None
    cause: str | None
    events: list[dict[str, Any]] = field(default_factory=list)
    # Transitions of executions this one ran nested (Step Functions bills those too).
    nested_transitions: int = 0
    # When it ended, on the emulation's clock.
    ended_at: datetime | None = None

    @property
    def states_entered(self) -> list[str]:
        return [
            e["stateEnteredEventDetails"]["name"]
            for e in self.events
            if e["type"].endswith("StateEntered")
        ]

    @property
    def transitions(self) -> int:
        """State transitions as Step Functions bills them: one per state entered."""
        return len(self.states_entered)


class Emulation:
    """moto + the double + patched executor timing + in-process Lambda, as one context."""

    def __init__(
        self, template: Path | None = None, *, iam: bool = True, clock: VirtualClock | None = None
    ) -> None:
        self.template = Template(template or synthesize())
        # Discrete-event by default; a local world that lives on paces it (paced.py).
        self.clock = clock or VirtualClock()
        self.double = AwsDouble(self.clock, region=REGION)
        # Every call a function or a state machine makes is authorized against its synthesized
        # role (and the topic and key policies it reaches); decisions are in self.iam.decisions.
        self.iam = Authorizer(self.template, self.double)
        self.own = Deployment(self.template, self.iam)
        # Stacks deployed in other Regions or accounts (deploy()), each with its own IAM.
        self.peers: list[Peer] = []
        if iam:
            self.double.authorize = self._authorize
            self.double.key_usable = self._key_usable
        self.double.role_actor = self._role_actor
        # What the stack's alarms and rules do when they fire (publish, invoke), under IAM.
        self.services = Services(self)
        self.double.on_snapshots_done = self._snapshots_done
        self.state_machines: dict[str, str] = self.own.state_machines
        self.router: LambdaRouter | None = None
        self.hosts: Hosts
        self._stack = contextlib.ExitStack()
        self._sfn: Any = None

    def _snapshots_done(self, event: dict[str, Any]) -> None:
        """EBS's event for a CreateSnapshots call reaches the EventBridge of the Region and
        account the call was made in: this stack's, or a peer's (Emulation.deploy)."""
        where = (event.get("region"), event.get("account"))
        if where == (self.own.region, self.own.account):
            self.services.put_event(event)
            return
        for peer in self.peers:
            if where == (peer.region, peer.account):
                with peer.inside():
                    peer.services.put_event(event)

    # -- lifecycle

    def __enter__(self) -> Emulation:
        stack = self._stack
        stack.enter_context(_environment())
        stack.enter_context(process_caches.shared_service_models())
        stack.enter_context(process_caches.definitions_parsed_once())
        stack.enter_context(
            mock_aws(
                config={
                    "stepfunctions": {"execute_state_machine": True},
                    "lambda": {"use_docker": False},
                }
            )
        )
        stack.enter_context(self.double.install())
        stack.enter_context(executor_time.on_clock(self.clock))
        stack.enter_context(_sfn_integration())
        stack.enter_context(_strict_choice_rules())
        stack.enter_context(_state_machine_principals(self._state_machine_actor))
        self._reset_raidsnap_clients()
        self.own.create(self.double)
        self.document_names = self.own.document_names
        self.hosts = Hosts(self.double, self.document_names, REGION)
        self.router = LambdaRouter(self.own, self.clock, self.double)
        self.double.route("lambda", "Invoke", self.router)
        self.double.route("lambda", "GetFunctionConfiguration", self.router.configuration)
        self._sfn = boto3.client("stepfunctions", region_name=REGION)
        return self

    def deploy(self, region: str, account: str = ACCOUNT, template: Path | None = None) -> Peer:
        """The stack (this template, or another) deployed in another Region or account as well:
        its functions run in that Region and account, under their own roles there."""
        if (region, account) in [(self.own.region, self.own.account)] + [
            (p.region, p.account) for p in self.peers
        ]:
            raise ValueError(f"a stack is deployed in {region} of {account} already")
        body = Template(template or self.template.path, region=region, account=account)
        stack = Deployment(body, Authorizer(body, self.double), prefix=f"{account}/{region}/")
        # IAM is global: a role name taken by a stack of the account in another Region fails
        # the deployment, as CloudFormation's CreateRole would (EntityAlreadyExists).
        for other in [self.own, *(p.stack for p in self.peers)]:
            taken = stack.role_names() & other.role_names() if other.account == account else set()
            if taken:
                raise ValueError(
                    f"EntityAlreadyExists: role {', '.join(sorted(taken))} of account {account} "
                    f"exists already (the stack in {other.region}): IAM names are unique "
                    "within an account"
                )
        stack.create(self.double)
        assert self.router is not None
        self.router.stacks[(region, account)] = stack
        self.double.places.append((account, region))
        peer = Peer(self, stack)
        self.peers.append(peer)
        # Each stack's IAM knows the roles of the others that a principal of it may assume.
        stacks = [self.own, *(p.stack for p in self.peers)]
        for one in stacks:
            for other in stacks:
                if other is not one:
                    one.iam.know_trusts(other.iam.stack.trusts)
        return peer

    def _role_actor(self, role_arn: str) -> str | None:
        """The stack role (of a deployed stack) whose credentials a client holds."""
        name = f"role:{role_arn.rsplit('/', 1)[-1]}"
        account = role_arn.split(":")[4]
        for stack in [self.own, *(p.stack for p in self.peers)]:
            if stack.account == account and name in stack.iam.stack.principals:
                return stack.prefix + name
        return None

    def _iam_of(self, actor: str) -> tuple[Authorizer, str]:
        """The IAM of the stack whose function or state machine ``actor`` is, and its name
        there."""
        for peer in self.peers:
            if actor.startswith(peer.stack.prefix):
                return peer.iam, actor[len(peer.stack.prefix) :]
        return self.iam, actor

    def _key_usable(self, actor: str | None, key_arn: str) -> bool:
        """EC2 makes an encrypted copy with the caller's permission on the key."""
        if actor is None:
            return True
        iam, name = self._iam_of(actor)
        return iam.key_usable(name, key_arn, ["GenerateDataKeyWithoutPlaintext"], grant=True)

    def _authorize(self, service: str, operation: str, params: Any, actor: str) -> None:
        """A call is authorized by the IAM of the stack whose function or state machine makes
        it (its actor name carries that stack's prefix)."""
        iam, name = self._iam_of(actor)
        iam.authorize(service, operation, params, name)

    def __exit__(self, *exc: object) -> None:
        try:
            self._settle()
        finally:
            self._stack.close()
            self._reset_raidsnap_clients()

    def _settle(self, timeout: float = 60.0) -> None:
        """Stop what this emulation left running and wait for the executor's threads to end,
        while its world is still in place: an execution that outlived its test would otherwise
        go on invoking functions in the next test's world and changing the process environment
        under it."""
        self.clock.close()  # what is left sleeping wakes, and ends once stopped
        backends = [stepfunctions_parser_backends[ACCOUNT][REGION]] + [
            stepfunctions_parser_backends[p.account][p.region] for p in self.peers
        ]
        deadline = time.monotonic() + timeout
        while True:
            running = [
                e
                for backend in backends
                for machine in backend.state_machines
                for e in machine.executions
                if e.status == "RUNNING"
            ]
            for execution in running:
                if getattr(getattr(execution, "exec_worker", None), "env", None) is None:
                    continue  # its worker has not begun yet: stopped at the next pass
                execution.stop(
                    stop_date=datetime.now(UTC), error="States.Aborted", cause="emulation ended"
                )
            alive = [t for t in TMP_THREADS if t.is_alive() and t is not threading.current_thread()]
            if not alive:
                # Every executor thread has ended (an execution whose worker died before it began
                # stays RUNNING in moto, with nothing left to run it).
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(running)} executions and {len(alive)} executor threads still running "
                    f"{timeout} s after the emulation ended"
                )
            for thread in alive:
                thread.join(timeout=0.05)
        TMP_THREADS[:] = [t for t in TMP_THREADS if t.is_alive()]

    @staticmethod
    def _reset_raidsnap_clients() -> None:
        clients.reset()

    @property
    def sfn(self) -> Any:
        return self._sfn

    def _state_machine_actor(self, state_machine_arn: str) -> str | None:
        for stack in [self.own, *(p.stack for p in self.peers)]:
            if state_machine_arn in stack.machine_ids:
                return stack.machine_ids[state_machine_arn]
        return None

    # -- running

    def start(self, workflow: str, payload: Any, name: str | None = None) -> str:
        arn = self.state_machines[workflow]
        response = self._sfn.start_execution(
            stateMachineArn=arn,
            name=name or f"{workflow}-{uuid.uuid4().hex[:12]}",
            input=json.dumps(payload),
        )
        return str(response["executionArn"])

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Time stands still inside the block: what it starts starts at one instant."""
        with self.clock.hold("the test"):
            yield

    def _stack_of(self, arn: str) -> tuple[Deployment, Any]:
        """The stack an execution ARN (arn:aws:states:region:account:...) belongs to, and a Step
        Functions client of it."""
        region, account = arn.split(":")[3:5]
        for peer in self.peers:
            if (peer.region, peer.account) == (region, account):
                return peer.stack, peer.sfn
        return self.own, self._sfn

    def wait(self, execution_arn: str, timeout: float = 120.0) -> Execution:
        """Wait (in real time, from outside the executions) until the execution ends."""
        stack, sfn = self._stack_of(execution_arn)
        with stack.inside():
            return self._wait(sfn, execution_arn, timeout)

    def _wait(self, sfn: Any, execution_arn: str, timeout: float) -> Execution:
        deadline = time.monotonic() + timeout
        while True:
            desc = sfn.describe_execution(executionArn=execution_arn)
            if desc["status"] != "RUNNING":
                break
            if self.clock.stalled_for() > STALL_GRACE_SECONDS:
                raise ClockStalledError(
                    f"{execution_arn} can never end: every thread of the emulation waits and no "
                    f"wake-up is due\n{self.clock.describe()}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{execution_arn} still running after {timeout} s\n{self.clock.describe()}"
                )
            # Wake when its thread ends rather than look every few milliseconds: each look is a
            # DescribeExecution through botocore and moto, which took the executions' CPU. Once
            # it ended (and only its status lags), or while nothing ends, look now and then.
            if self.clock.await_end(execution_arn, WAIT_LOOK_SECONDS):
                time.sleep(0.005)
        events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
        output = json.loads(desc["output"]) if desc.get("output") else None
        return Execution(
            arn=execution_arn,
            status=desc["status"],
            input=json.loads(desc.get("input") or "null"),
            output=output,
            error=desc.get("error"),
            cause=desc.get("cause"),
            events=events,
            ended_at=self.clock.ended.get(execution_arn),
        )

    def invoke(self, module: str, event: Any) -> Invocation:
        """Invoke the function with this handler module directly, as a schedule or rule would."""
        assert self.router is not None
        names = [
            n for n, f in self.router.functions.items() if f.handler.rsplit(".", 2)[-2] == module
        ]
        if len(names) != 1:
            raise KeyError(f"expected one function with handler module {module}, found {names}")
        lam = boto3.client("lambda", region_name=REGION)
        lam.invoke(FunctionName=names[0], Payload=json.dumps(event).encode())
        return self.router.invocations[-1]

    def run(self, workflow: str, payload: Any, name: str | None = None) -> Execution:
        return self.wait(self.start(workflow, payload, name))

    def expire_execution(self, execution_arn: str) -> None:
        """Step Functions forgets an ended execution after 90 days, and its name may then be
        used again (execution names are unique for 90 days only): a new execution of that name
        has the same ARN. moto never forgets, so this does what the 90 days would."""
        backend = stepfunctions_parser_backends[ACCOUNT][REGION]
        machine_arn = execution_arn.replace(":execution:", ":stateMachine:").rsplit(":", 1)[0]
        machine = backend.describe_state_machine(machine_arn)
        status = [e.status for e in machine.executions if e.execution_arn == execution_arn]
        if status != [] and status[0] == "RUNNING":
            raise ValueError(f"{execution_arn} is still running")
        machine.executions = [e for e in machine.executions if e.execution_arn != execution_arn]


class Peer:
    """The stack deployed in another Region or account (Emulation.deploy): run its workflows,
    invoke its functions, ask its Region and account."""

    def __init__(self, emu: Emulation, stack: Deployment) -> None:
        self.emu = emu
        self.stack = stack
        self.template = stack.template
        self.iam = stack.iam
        self.region = stack.region
        self.account = stack.account
        self.state_machines = stack.state_machines
        self.functions = stack.functions
        with stack.inside():
            self.sfn = stack.client("stepfunctions")
        # Its EventBridge rules, acting on the emulation under its own IAM.
        view = SimpleNamespace(
            template=stack.template,
            iam=stack.iam,
            router=emu.router,
            double=emu.double,
            clock=emu.clock,
        )
        self.services = Services(view)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """What this thread asks of AWS in the block, it asks of this stack's account."""
        with self.stack.inside():
            yield

    def client(self, service: str) -> Any:
        """A client of this Region (of this account, used inside ``inside()``)."""
        return self.stack.client(service)

    def start(self, workflow: str, payload: Any, name: str | None = None) -> str:
        with self.inside():
            response = self.sfn.start_execution(
                stateMachineArn=self.state_machines[workflow],
                name=name or f"{workflow}-{uuid.uuid4().hex[:12]}",
                input=json.dumps(payload),
            )
        return str(response["executionArn"])

    def wait(self, execution_arn: str, timeout: float = 120.0) -> Execution:
        return self.emu.wait(execution_arn, timeout)

    def run(self, workflow: str, payload: Any, name: str | None = None) -> Execution:
        return self.wait(self.start(workflow, payload, name))

    def executions(self, workflow: str) -> list[str]:
        """The ARNs of this stack's runs of a workflow, newest first."""
        with self.inside():
            found = self.sfn.list_executions(stateMachineArn=self.state_machines[workflow])
        return [str(e["executionArn"]) for e in found["executions"]]

    def invoke(self, module: str, event: Any) -> Invocation:
        router = self.emu.router
        assert router is not None
        names = [n for n, f in self.functions.items() if f.handler.rsplit(".", 2)[-2] == module]
        if len(names) != 1:
            raise KeyError(f"expected one function with handler module {module}, found {names}")
        with self.inside():
            self.client("lambda").invoke(FunctionName=names[0], Payload=json.dumps(event).encode())
        return router.invocations[-1]


@contextlib.contextmanager
def _environment() -> Iterator[None]:
    thread_environ()  # functions' variables live in their invocation's thread only
    saved = dict(os.environ)
    os.environ.update(RUNTIME_ENV)
    os.environ["MOTO_EC2_LOAD_DEFAULT_AMIS"] = "false"
    try:
        yield
    finally:
        with _ENVIRONMENT_LOCK:  # never under an invocation that has set its function's keys
            os.environ.clear()
            os.environ.update(saved)


@contextlib.contextmanager
def _sfn_integration() -> Iterator[None]:
    """The states:startExecution integration as Step Functions has it (see _sfn_parameters)."""
    sfn_task = state_task_service_sfn.StateTaskServiceSfn
    saved_sfn = (sfn_task._normalise_parameters, sfn_task._normalise_response)
    sfn_task._normalise_parameters = _sfn_parameters(saved_sfn[0])  # type: ignore[method-assign]
    sfn_task._normalise_response = _sfn_response  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        sfn_task._normalise_parameters, sfn_task._normalise_response = saved_sfn  # type: ignore[method-assign]


@contextlib.contextmanager
def _strict_choice_rules() -> Iterator[None]:
    """A Choice rule whose Variable is not in the state's input fails the run (States.Runtime),
    as in Step Functions ("If the state input doesn't contain the $.type field, the execution
    fails", developer guide, Choice state); only IsPresent may look at a missing path. moto
    5.2.5 takes such a rule as not matching and goes on to the Default."""
    cls = comparison_variable.ComparisonVariable
    saved = cls.__dict__["_eval_body"]

    def eval_body(self: Any, env: Any) -> None:
        self.variable.eval(env)
        value = env.stack[-1]
        operator = self.comparison_function.operator_type
        if (
            isinstance(value, NoSuchVariable)
            and operator != comparison_operator_type.ComparisonOperatorType.IsPresent
        ):
            cause = (
                f"Invalid path '{self.variable.string_sampler.literal_value}': the choice state's "
                "condition path references an invalid value."
            )
            raise FailureEventException(
                failure_event=FailureEvent(
                    env=env,
                    error_name=StatesErrorName(typ=StatesErrorNameType.StatesRuntime),
                    event_type=HistoryEventType.ExecutionFailed,
                    # moto's TypedDict lists every kind of detail as required; it builds them so too
                    event_details=EventDetails(  # type: ignore[typeddict-item]
                        executionFailedEventDetails=ExecutionFailedEventDetails(
                            error=StatesErrorNameType.StatesRuntime.to_name(), cause=cause
                        )
                    ),
                )
            )
        self.comparison_function.eval(env)

    setattr(cls, "_eval_body", eval_body)  # noqa: B010 - moto internals, pinned
    try:
        yield
    finally:
        setattr(cls, "_eval_body", saved)  # noqa: B010


# The executor makes each integration's calls (lambda:invoke, startExecution and the polling of
# .sync:2, aws-sdk) through a client it builds per task with boto_client_for, from code that has
# the execution's Environment at hand. Tagging that client with the state machine makes those
# calls the state machine role's, whichever thread later uses the client.
_CLIENT_FACTORIES = (
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service."
    "state_task_service_aws_sdk",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sns",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service."
    "state_task_service_dynamodb",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service."
    "state_task_service_events",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sqs",
)


def _execution_state_machine() -> str | None:
    frame: Any = sys._getframe(2)  # the caller of boto_client_for
    for _ in range(8):
        if frame is None:
            return None
        env = frame.f_locals.get("env")
        states = getattr(env, "states", None)
        if states is not None:
            data = states.context_object.context_object_data
            return str(data["StateMachine"]["Id"])
        frame = frame.f_back
    return None


@contextlib.contextmanager
def _state_machine_principals(actor_of: Any) -> Iterator[None]:
    saved: list[tuple[Any, Any]] = []
    for name in _CLIENT_FACTORIES:
        module: Any = importlib.import_module(name)
        original = module.boto_client_for

        def factory(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            client = _original(*args, **kwargs)
            machine = _execution_state_machine()
            actor = actor_of(machine) if machine else None
            if actor is not None:
                setattr(client, ACTOR_ATTRIBUTE, actor)
            return client

        saved.append((module, original))
        module.boto_client_for = factory
    try:
        yield
    finally:
        for module, original in saved:
            module.boto_client_for = original


# moto 5.2.5's states:startExecution integration passes the ASL's Parameters (StateMachineArn,
# Input, Name) to boto3 unconverted, which fails, and returns boto3's camelCase answer where Step
# Functions gives PascalCase (ExecutionArn, Output, Error, Cause). These restore what the service
# does, from the Step Functions API model, for that integration only.
_SFN_MODEL = botocore.session.get_session().get_service_model("stepfunctions")


def _sfn_operation(task: Any, service_action_name: str | None) -> Any:
    action = task._get_boto_service_action(service_action_name)
    return _SFN_MODEL.operation_model("".join(w.capitalize() for w in action.split("_")))


def _sfn_parameters(original: Any) -> Any:
    def normalise(
        task: Any,
        parameters: dict[str, Any],
        boto_service_name: str | None = None,
        service_action_name: str | None = None,
    ) -> None:
        original(task, parameters, boto_service_name, service_action_name)
        task._to_boto_request(parameters, _sfn_operation(task, service_action_name).input_shape)

    return normalise


def _sfn_response(
    task: Any,
    response: Any,
    boto_service_name: str | None = None,
    service_action_name: str | None = None,
) -> None:
    del boto_service_name
    task._from_boto_response(response, _sfn_operation(task, service_action_name).output_shape)
    if isinstance(response, dict):  # Step Functions gives dates as epoch milliseconds
        for key, value in response.items():
            if isinstance(value, datetime):
                response[key] = int(value.timestamp() * 1000)
