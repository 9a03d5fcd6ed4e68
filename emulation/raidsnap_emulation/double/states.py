"""Step Functions where moto 5.2.5 differs: the answers to a task token (SendTaskSuccess and
SendTaskFailure), and what a stop ends (StopExecution; a Parallel's branches) (Step Functions
API Reference; developer guide).

- The waiting Task ends with the output, or with the error and the cause, given; moto's
  SendTaskFailure handler passes on the error only, so a parent would never see why its child
  failed.
- A token whose Task no longer waits (it ended with an earlier answer, or its execution ended)
  is refused with TaskTimedOut ("The task token has either expired or the task associated with
  the token has already been closed"); moto answers the second call as the first, or with
  InvalidToken once the execution ended. A token no Task ever had is InvalidToken.

- A stopped execution's waiting Tasks end with it (StopExecution: the execution stops, and
  with it whatever it was doing; it stays ABORTED); moto's leave their threads waiting on the
  token for the Task's whole timeout (a year), and a test's end would wait for them. So do the
  waiting Tasks of a Parallel's other branches when one branch fails ("Parallel workflow
  state", developer guide, error handling: the Parallel fails and Step Functions stops all its
  branches).
- A branch that fails with an error Step Functions names (States.Timeout: a Task of the branch
  ran out of time) fails the Parallel with that error, which its Catch can handle ("Error
  handling in Step Functions", developer guide: States.ALL matches every error name but
  States.Runtime and States.DataLimitExceeded); moto refuses to raise a States.* name from a
  branch and fails the Parallel with States.Runtime instead, which no Catch can handle.
- StopExecution keeps the error and the cause it was given: the ExecutionAborted event carries
  them (ExecutionAbortedEventDetails, API reference); moto stops every execution with empty
  ones.

moto keeps each waiting Task's token in its executor's callback pool (internals of the pinned
moto): the answer is handed to that pool as moto's own handlers hand it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
    CustomErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.error_name import ErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
    StatesErrorName,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branches_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branch_worker import (
    BranchWorker,
)
from moto.stepfunctions.parser.asl.eval.callback.callback import (
    CallbackOutcome,
    CallbackOutcomeFailure,
    CallbackOutcomeSuccess,
)
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from moto.stepfunctions.parser.models import stepfunctions_parser_backends

from raidsnap_emulation.clock import VirtualClock
from raidsnap_emulation.double.base import Answer, AwsError, DoubleBase, Params


class States(DoubleBase):
    """SendTaskSuccess and SendTaskFailure as Step Functions answers them."""

    def __init__(self, clock: VirtualClock, region: str = "us-east-1") -> None:
        super().__init__(clock, region)
        self._handlers[("stepfunctions", "SendTaskSuccess")] = self._send_task_success
        self._handlers[("stepfunctions", "SendTaskFailure")] = self._send_task_failure
        self._handlers[("stepfunctions", "StopExecution")] = self._stop_execution

    def _send_task_success(self, params: Params) -> Answer:
        token = str(params["taskToken"])
        self._answer_task(token, CallbackOutcomeSuccess(token, str(params.get("output", ""))))
        return {}

    def _send_task_failure(self, params: Params) -> Answer:
        token = str(params["taskToken"])
        error, cause = params.get("error"), params.get("cause")
        self._answer_task(token, CallbackOutcomeFailure(token, error, cause))
        return {}

    def _stop_execution(self, params: Params) -> Answer:
        arn = str(params["executionArn"])
        for execution in self._executions():
            if execution.exec_arn == arn and execution.exec_status == ExecutionStatus.RUNNING:
                # Stopped here with the caller's error and cause; moto's own stop below then
                # finds it stopped already, and answers as StopExecution does.
                execution.stop(datetime.now(UTC), params.get("error"), params.get("cause"))
        return self._moto("stepfunctions", "StopExecution", params)

    def _executions(self) -> list[Any]:
        account = os.environ.get("MOTO_ACCOUNT_ID", "123456789012")
        backend: Any = stepfunctions_parser_backends[account][self.region]
        return list(backend._get_executions())

    def _answer_task(self, token: str, outcome: CallbackOutcome) -> None:
        for execution in self._executions():
            env = getattr(getattr(execution, "exec_worker", None), "env", None)
            endpoint = env.callback_pool_manager.get(token) if env is not None else None
            if endpoint is None:
                continue
            closed = endpoint.get_outcome() is not None or endpoint.consumer_error is not None
            if closed or execution.exec_status != ExecutionStatus.RUNNING:
                raise AwsError(
                    "TaskTimedOut",
                    "Task Timed Out: the task of this token has already been closed",
                )
            endpoint.notify(outcome=outcome)
            return
        raise AwsError("InvalidToken", "Invalid Token: no task has this token")


def _tokens_waited_on(env: Any) -> list[str]:
    """The task tokens the Tasks running in ``env`` (a branch's frame) and in the frames inside
    it wait on: each frame's context object holds its running Task's token."""
    data = getattr(
        getattr(getattr(env, "states", None), "context_object", None), "context_object_data", {}
    )
    task = data.get("Task") if isinstance(data, dict) else None
    tokens = [str(task["Token"])] if isinstance(task, dict) and task.get("Token") else []
    for frame in list(getattr(env, "_frames", [])):
        tokens += _tokens_waited_on(frame)
    return tokens


def _end_waits(env: Any, tokens: list[str] | None) -> None:
    """Interrupt the token waits of ``tokens`` (all of the pool's when None) that no answer
    ended: the Task then ends with its stopped frame."""
    pool = getattr(env, "callback_pool_manager", None)
    endpoints = getattr(pool, "_pool", {})
    for token in list(endpoints) if tokens is None else tokens:
        endpoint = endpoints.get(token)
        if endpoint is not None and endpoint.get_outcome() is None:
            endpoint.interrupt_all()


def _branch_error_name(error_name: str | None) -> ErrorName:
    """The error a failed branch fails its Parallel with, by its own name."""
    if error_name is not None and error_name.startswith("States."):
        return StatesErrorName.from_name(error_name)
    return CustomErrorName(error_name=error_name)


@contextlib.contextmanager
def stopping_ends_waiting_tasks() -> Iterator[None]:
    """While installed, stopping an execution also ends its Tasks that wait on a token, and so
    does stopping a Parallel's branch (the Parallel failed); a branch's States.* error fails the
    Parallel under its own name."""
    setattr(branches_decl, "CustomErrorName", _branch_error_name)  # noqa: B010
    original = ExecutionWorker.stop
    original_branch = BranchWorker.stop
    original_error = Environment.set_error

    def set_error(env: Any, error: Any) -> None:
        # A Task whose wait was ended by the stop fails in a stopped frame: the execution stays
        # ABORTED (moto would record the Task's failure over the stop).
        if not isinstance(env._program_state, ProgramStopped):
            original_error(env, error)

    def stop(worker: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
        original(worker, stop_date=stop_date, error=error, cause=cause)
        _end_waits(getattr(worker, "env", None), None)

    def stop_branch(worker: Any, stop_date: Any, cause: str | None, error: str | None) -> None:
        env = getattr(worker, "env", None)
        tokens = _tokens_waited_on(env)  # before the stop: its frames are closed after it
        original_branch(worker, stop_date=stop_date, cause=cause, error=error)
        _end_waits(env, tokens)

    setattr(ExecutionWorker, "stop", stop)  # noqa: B010 - moto internals, pinned
    setattr(BranchWorker, "stop", stop_branch)  # noqa: B010
    setattr(Environment, "set_error", set_error)  # noqa: B010
    try:
        yield
    finally:
        setattr(ExecutionWorker, "stop", original)  # noqa: B010
        setattr(BranchWorker, "stop", original_branch)  # noqa: B010
        setattr(Environment, "set_error", original_error)  # noqa: B010
        setattr(branches_decl, "CustomErrorName", CustomErrorName)  # noqa: B010
