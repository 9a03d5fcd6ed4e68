"""Running ``raidsnap`` in this process against the emulation, for the CLI tests."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.stepfunctions.parser.models import stepfunctions_parser_backends
from typer.testing import CliRunner, Result

from raidsnap_cli import restoring
from raidsnap_cli.app import app
from raidsnap_emulation import backend
from raidsnap_emulation.harness import ACCOUNT, REGION, Emulation
from raidsnap_emulation.world import ArrayFixture

Prepare = Callable[[Emulation, ArrayFixture], None]
READ_ONLY = ("Describe", "Get", "List", "Query", "Scan", "BatchGet")


class Cli:
    """``raidsnap ARGS`` in this process; with --emulation the command builds its own emulated
    account (from the template synthesized once for the session), and ``prepare`` shapes it
    before the command runs. ``terminal``: someone at a terminal answers with ``input``."""

    def __init__(self, template: Path) -> None:
        self.runner = CliRunner()
        self.template = template

    def __call__(
        self,
        *args: str,
        prepare: Prepare | None = None,
        terminal: bool = False,
        input: str | None = None,
    ) -> Result:
        with pytest.MonkeyPatch.context() as patch:
            account = partial(backend.account, template=self.template, prepare=prepare)
            patch.setattr(backend, "account", account)
            # The command configures boto3's default session for its process: this one's is
            # the test session's, and is put back after each command.
            patch.setattr(boto3, "DEFAULT_SESSION", boto3.DEFAULT_SESSION)
            patch.setattr(restoring, "stdin_is_terminal", lambda: terminal)
            return self.runner.invoke(app, list(args), env={"COLUMNS": "200"}, input=input)


def plain(output: str) -> str:
    """Output without the error panel's frame, on one line: messages wrap inside the panel."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", output).split())


def line_of(output: str, needle: str) -> str:
    lines = [line for line in output.splitlines() if needle in line]
    assert len(lines) == 1, f"{needle!r} in {len(lines)} lines of:\n{output}"
    return lines[0]


def json_of(stdout: str) -> Any:
    """The JSON a command printed. The emulation's functions run in the command's process, and
    a metric Powertools prints on its own (single_metric) lands on the same stdout: such lines
    are not the command's."""
    return json.loads("\n".join(ln for ln in stdout.splitlines() if not ln.startswith('{"_aws"')))


class Watch:
    """What the emulation saw, kept past the command (whose emulation ends with it): the
    calls made after ``prepare`` and the array it built."""

    def __init__(self, then: Prepare | None = None) -> None:
        self.then = then
        self.emu: Emulation | None = None
        self.fx: ArrayFixture | None = None
        self.mark = 0

    def __call__(self, emu: Emulation, fx: ArrayFixture) -> None:
        if self.then is not None:
            self.then(emu, fx)
        self.emu, self.fx, self.mark = emu, fx, len(emu.double.calls)

    def calls(self) -> list[Any]:
        assert self.emu is not None
        return list(self.emu.double.calls[self.mark :])

    def changes(self) -> list[str]:
        """Every call after ``prepare`` that was not a read."""
        return [
            f"{c.service}:{c.operation}"
            for c in self.calls()
            if c.applied and not c.operation.startswith(READ_ONLY)
        ]


def hold_in_step(emu: Emulation, module: str, step: str | None = None) -> threading.Event:
    """The first invocation of the function with handler ``module`` (for ``step``, where the
    function serves several) waits until its execution is stopped, and time stands still
    meanwhile (the waiting thread takes part in the clock, running): a command sees every run
    as it was when the step was reached. The emulation stops what runs when it ends. The event
    is set when the step is reached."""
    router = emu.router
    assert router is not None
    function = next(
        n for n, f in router.functions.items() if f.handler.endswith(f".{module}.handler")
    )
    reached = threading.Event()

    def running(arn: str) -> bool:
        """Until the execution is told to stop (moto marks it stopped only once the step in
        hand returns: its environment knows at once)."""
        backend = stepfunctions_parser_backends[ACCOUNT][REGION]
        for machine in backend.state_machines:
            for execution in machine.executions:
                if execution.execution_arn == arn:
                    env = getattr(getattr(execution, "exec_worker", None), "env", None)
                    return env is not None and bool(env.is_running())
        return False

    def invoke(params: dict[str, Any]) -> Any:
        name = str(params["FunctionName"]).rsplit(":", 1)[-1]
        if name == function and not reached.is_set():
            event = _event(params)
            if step is None or event.get("step") == step:
                arn = str((event.get("plan") or {}).get("executionArn") or "")
                reached.set()
                while arn and running(arn):
                    time.sleep(0.01)
        return router(params)

    emu.double.route("lambda", "Invoke", invoke)
    return reached


def _event(params: dict[str, Any]) -> dict[str, Any]:
    raw = params.get("Payload", b"{}")
    loaded = json.loads(raw.decode() if isinstance(raw, bytes | bytearray) else raw or "{}")
    return loaded if isinstance(loaded, dict) else {}


REPO = Path(__file__).resolve().parents[3]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def on_terminal(args: list[str], answer: str, timeout: float = 240.0) -> tuple[int, str]:
    """``raidsnap ARGS`` in a process of its own on a pseudo-terminal (stdin, stdout and stderr
    a terminal, as an operator's), answering ``answer`` to its question: its exit code, and
    what it wrote with the terminal's control sequences taken out."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: this worktree's code, this interpreter
        os.environ.update(
            {"PYTHONPATH": os.pathsep.join(str(REPO / d) for d in ("cli", "lambdas", "emulation")),
             "COLUMNS": "120", "LINES": "50", "TERM": "xterm-256color"}
        )  # fmt: skip
        os.chdir(REPO)
        os.execv(sys.executable, [sys.executable, "-m", "raidsnap_cli", *args])  # noqa: S606 - no shell: the arguments stay as given
    out, asked, deadline = b"", False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                data = b""
            if not data:
                break
            out += data
            if not asked and b"[y/N]" in out:
                os.write(fd, answer.encode() + b"\n")
                asked = True
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), ANSI.sub("", out.decode(errors="replace"))
