"""Step Functions' answers to a task token where moto 5.2.5's differ: SendTaskSuccess and
SendTaskFailure (Step Functions API Reference).

- The waiting Task ends with the output, or with the error and the cause, given; moto's
  SendTaskFailure handler passes on the error only, so a parent would never see why its child
  failed.
- A token whose Task no longer waits (it ended with an earlier answer, or its execution ended)
  is refused with TaskTimedOut ("The task token has either expired or the task associated with
  the token has already been closed"); moto answers the second call as the first, or with
  InvalidToken once the execution ended. A token no Task ever had is InvalidToken.

- A stopped execution's waiting Tasks end with it (StopExecution: the execution stops, and
  with it whatever it was doing); moto's leave their threads waiting on the token for the
  Task's whole timeout (a year), and a test's end would wait for them.

moto keeps each waiting Task's token in its executor's callback pool (internals of the pinned
moto): the answer is handed to that pool as moto's own handlers hand it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.asl.eval.callback.callback import (
    CallbackOutcome,
    CallbackOutcomeFailure,
    CallbackOutcomeSuccess,
)
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

    def _send_task_success(self, params: Params) -> Answer:
        token = str(params["taskToken"])
        self._answer_task(token, CallbackOutcomeSuccess(token, str(params.get("output", ""))))
        return {}

    def _send_task_failure(self, params: Params) -> Answer:
        token = str(params["taskToken"])
        error, cause = params.get("error"), params.get("cause")
        self._answer_task(token, CallbackOutcomeFailure(token, error, cause))
        return {}

    def _answer_task(self, token: str, outcome: CallbackOutcome) -> None:
        account = os.environ.get("MOTO_ACCOUNT_ID", "123456789012")
        backend: Any = stepfunctions_parser_backends[account][self.region]
        for execution in backend._get_executions():
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


@contextlib.contextmanager
def stopping_ends_waiting_tasks() -> Iterator[None]:
    """While installed, stopping an execution also ends its Tasks that wait on a token."""
    original = ExecutionWorker.stop

    def stop(worker: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
        original(worker, stop_date=stop_date, error=error, cause=cause)
        pool = getattr(getattr(worker, "env", None), "callback_pool_manager", None)
        for endpoint in list(getattr(pool, "_pool", {}).values()):
            if endpoint.get_outcome() is None:
                endpoint.interrupt_all()

    setattr(ExecutionWorker, "stop", stop)  # noqa: B010 - moto internals, pinned
    try:
        yield
    finally:
        setattr(ExecutionWorker, "stop", original)  # noqa: B010
