"""Step Functions executions on the emulation's discrete-event clock (clock.py).

moto 5.2.5's executor (pinned: these are its internals) runs an execution on threads of its own:
one for the execution, one for its program, one per Task attempt, one per Parallel branch or
inline Map iteration (each with a program thread of its own), one per task-token wait. Each of
them takes part in the clock from the moment it is created; where the executor waits for another
of its threads (a join, an Event), the waiting thread counts as blocked until that happens.
Wait states, Retry back-offs and the functions' own pauses sleep on the clock, and a Task that
runs a nested execution (``startExecution.sync``, ``.sync:2``) is blocked until that execution
ends: Step Functions waits for it to complete ("Run a Job (.sync)", developer guide, Service
integration patterns) and documents no polling interval, so the parent resumes at the instant
its child ended.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_callback,
    state_task_service_sfn,
)
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function
from moto.stepfunctions.parser.asl.eval.event.event_manager import EventManager
from moto.stepfunctions.parser.models import stepfunctions_parser_backends

from raidsnap import aws as raidsnap_aws
from raidsnap_emulation.clock import VirtualClock

_PARSER = "moto.stepfunctions.parser."
_STATE = _PARSER + "asl.component.state.exec."


def _thread_type(clock: VirtualClock, new_execution: bool = False) -> type[threading.Thread]:
    class ClockThread(threading.Thread):
        """A thread that takes part in the clock from its start to its end; joining it waits
        for it."""

        execution_arn: str | None = None

        def start(self) -> None:
            label = _execution_name(self) if new_execution else None
            # Thread.run drops its target at the end: what the end needs is read now.
            self.execution_arn = _execution_arn(self) if new_execution else None
            clock.enlist(self, label=label, new=new_execution)
            try:
                super().start()
            except BaseException:
                clock.leave(self)
                raise

        def run(self) -> None:
            try:
                super().run()
            finally:
                if self.execution_arn is not None:
                    clock.ended[self.execution_arn] = clock.now()
                clock.leave(self)

        def join(self, timeout: float | None = None) -> None:
            with clock.waiting(lambda: clock.takes_part(self), f"thread {self.name} to end"):
                super().join(timeout)

    return ClockThread


def _execution_details(thread: threading.Thread) -> Any:
    """The details of the execution an ExecutionWorker's thread runs (its target's owner)."""
    worker = getattr(getattr(thread, "_target", None), "__self__", None)
    return getattr(getattr(worker, "_evaluation_details", None), "execution_details", None)


def _execution_name(thread: threading.Thread) -> str | None:
    return getattr(_execution_details(thread), "name", None)


def _execution_arn(thread: threading.Thread) -> str | None:
    return getattr(_execution_details(thread), "arn", None)


# The executor's "no timeout" (moto's TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS): a state without
# TimeoutSeconds waits on its task with this.
NO_TIMEOUT_SECONDS = 99999999


def _event_type(clock: VirtualClock, what: str) -> type[threading.Event]:
    class ClockEvent(threading.Event):
        """An Event whose waiter counts as blocked until another thread sets it. With the
        clock's task_timeouts on, a wait with a timeout (a Task's TimeoutSeconds or
        HeartbeatSeconds, on the state's task and on its task token) ends at that time on the
        clock: Step Functions fails the Task with States.Timeout once it has run that long
        ("Task workflow state", developer guide)."""

        def wait(self, timeout: float | None = None) -> bool:
            if clock.task_timeouts and timeout is not None and 0 < timeout < NO_TIMEOUT_SECONDS:
                clock.sleep(timeout, until=self.is_set)
                return self.is_set()
            with clock.waiting(lambda: not self.is_set(), what):
                return super().wait(timeout)

    return ClockEvent


class _Threading(types.ModuleType):
    """The threading module as one executor module sees it: some names replaced."""

    def __init__(self, **replaced: Any) -> None:
        super().__init__("threading")
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


def _module_patches(clock: VirtualClock) -> list[tuple[str, str, Any]]:
    """(module, attribute, replacement): every place the executor makes a thread, or an Event it
    waits on until another of its threads sets it."""
    thread = _thread_type(clock)

    def event(what: str) -> type[threading.Event]:
        return _event_type(clock, what)

    return [
        (_PARSER + "backend.execution_worker", "Thread", _thread_type(clock, new_execution=True)),
        (_PARSER + "asl.component.program.program", "threading", _Threading(Thread=thread)),
        (_STATE + "execute_state", "Thread", thread),
        (_STATE + "execute_state", "threading", _Threading(Event=event("its state's task"))),
        (_STATE + "state_parallel.branch_worker", "threading", _Threading(Thread=thread)),
        (
            _STATE + "state_parallel.branches_decl",
            "threading",
            _Threading(Event=event("its parallel branches")),
        ),
        (
            _STATE + "state_map.iteration.inline_iteration_component",
            "threading",
            _Threading(Thread=thread),
        ),
        (
            _STATE + "state_map.iteration.job",
            "threading",
            _Threading(Event=event("its iterations")),
        ),
        (
            _STATE + "state_task.service.state_task_service_callback",
            "threading",
            _Threading(Thread=thread),
        ),
        (_PARSER + "asl.eval.callback.callback", "Event", event("a task token or heartbeat")),
    ]


def _execution(arn: str) -> Any:
    """moto's record of the execution with this ARN (arn:aws:states:region:account:...)."""
    region, account = arn.split(":")[3:5]
    backend = stepfunctions_parser_backends[account][region]
    for machine in backend.state_machines:
        for execution in machine.executions:
            if execution.execution_arn == arn:
                return execution
    return None


def _following(clock: VirtualClock, build: Callable[..., Any]) -> Callable[..., Any]:
    """A .sync resolver that, while the nested execution runs, blocks until it ends (or the
    parent stops) instead of answering 'not yet' for the executor to look again."""

    def build_resolver(task: Any, env: Any, **kwargs: Any) -> Callable[[], Any]:
        child_arn = str(env.stack[-1]["ExecutionArn"])
        child = _execution(child_arn)
        resolve = build(task, env=env, **kwargs)

        def ended() -> bool:
            return child.exec_status != ExecutionStatus.RUNNING or not env.is_running()

        def resolver() -> Any:
            answer = resolve()
            if answer is None and child is not None:
                clock.wait_until(ended, f"nested execution {child_arn.rsplit(':', 1)[-1]}")
            return answer

        return resolver

    return build_resolver


@contextlib.contextmanager
def on_clock(clock: VirtualClock) -> Iterator[None]:
    """For the duration of the block, the executor's threads, waits and back-offs (and the
    functions' own pauses) run on ``clock``."""

    def wait_interval(_self: object, env: Any, wait_seconds: int) -> None:
        clock.sleep(max(0, wait_seconds), interrupted=lambda: not env.is_running())

    def back_off(seconds: float) -> None:
        env = sys._getframe(1).f_locals.get("env")  # RetrierDecl._eval_body's
        stopped = (lambda: not env.is_running()) if env is not None else None
        clock.sleep(seconds, interrupted=stopped)

    sfn_task = state_task_service_sfn.StateTaskServiceSfn
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    for module, name, value in _module_patches(clock):
        patch(importlib.import_module(module), name, value)
    patch(wait_function.WaitFunction, "_wait_interval", wait_interval)
    patch(retrier_decl, "time", SimpleNamespace(sleep=back_off, time=time.time))
    patch(raidsnap_aws, "pause", clock.sleep)  # a function's own short waits (aws.once_visible)
    # ... and the time it has waited (a bound in elapsed seconds, not in pauses).
    patch(raidsnap_aws, "monotonic", lambda: clock.seconds_since(clock._start))
    # Between two looks at a nested execution (each look first blocks until it ended).
    patch(state_task_service_callback, "_DELAY_SECONDS_SYNC_CONDITION_CHECK", 0.01)
    patch(sfn_task, "_build_sync_resolver", _following(clock, sfn_task._build_sync_resolver))
    patch(sfn_task, "_build_sync2_resolver", _following(clock, sfn_task._build_sync2_resolver))
    # Step Functions stamps each history event when it happens ("timestamp", GetExecutionHistory
    # API reference); here things happen on the clock, so a run's history tells its emulated
    # times (a prewarm of an hour takes an hour there, not the real instant it took here).
    patch(EventManager, "_get_current_timestamp", staticmethod(clock.now))
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)
