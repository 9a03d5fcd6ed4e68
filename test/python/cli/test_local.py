"""``raidsnap local`` and ``--local`` without a world running, and the one rule that keeps the
machine safe: ``local down`` ends the recorded process only while it is still the world's (the
same PID and the same start time), never a process that took its PID later."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from raidsnap_cli import local_state
from raidsnap_cli.app import app


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAIDSNAP_LOCAL_DIR", str(tmp_path))
    monkeypatch.delenv("RAIDSNAP_LOCAL", raising=False)
    return tmp_path


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process this test starts, and ends by its PID."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    if child.poll() is None:
        child.kill()
    child.wait(5)


def record(state: Path, pid: int, start: str | None, *, starting: bool = False) -> None:
    """A state file as the world writes it while it builds (``starting``) and once it serves."""
    serving = {
        "url": "http://127.0.0.1:9",
        "token": "t",
        "speed": 60,
        "region": "us-east-1",
        "stateMachines": {},
    }
    recorded = {"pid": pid, "processStart": start}
    recorded |= {"starting": True} if starting else serving
    (state / local_state.STATE_FILE).write_text(json.dumps(recorded))


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_the_state_directory_is_chosen_then_runtime_then_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("RAIDSNAP_LOCAL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert local_state.state_dir() == tmp_path / "cache" / "raidsnap" / "local"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert local_state.state_dir() == tmp_path / "run" / "raidsnap-local"
    monkeypatch.setenv("RAIDSNAP_LOCAL_DIR", str(tmp_path / "chosen"))
    assert local_state.state_dir() == tmp_path / "chosen"


def test_a_recorded_pid_now_held_by_another_process_is_not_the_world(
    state: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    # GIVEN a state file whose PID is alive, but started at another time than recorded
    record(state, sleeper.pid, "1")
    # THEN it is no world, and down ends nothing
    assert local_state.running() is None
    result = run("local", "down")
    assert result.exit_code == 0
    assert "no local world runs" in result.output
    time.sleep(0.2)
    assert sleeper.poll() is None


def test_down_ends_the_recorded_process_while_it_is_the_worlds(
    state: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    record(state, sleeper.pid, local_state.process_start(sleeper.pid))
    assert local_state.running() is not None
    result = run("local", "down")
    assert result.exit_code == 0, result.output
    assert f"ended (process {sleeper.pid})" in result.output
    assert sleeper.wait(5) == -15  # SIGTERM
    assert not (state / local_state.STATE_FILE).exists()


def test_down_ends_a_world_still_being_built(state: Path, sleeper: subprocess.Popen[bytes]) -> None:
    record(state, sleeper.pid, local_state.process_start(sleeper.pid), starting=True)
    assert local_state.running() is None  # not serving: no command can use it yet
    assert "is being built" in run("local", "status").output
    result = run("local", "down")
    assert result.exit_code == 0, result.output
    assert f"local world that was starting ended (process {sleeper.pid})" in result.output
    assert sleeper.wait(5) == -15


def test_status_without_a_world_says_so_and_exits_1(state: Path) -> None:
    result = run("local", "status")
    assert result.exit_code == 1
    assert "no local world runs; start one with `raidsnap local up`" in result.output
    record(state, 2**22 + 1, "1")  # above any PID the kernel hands out by default
    result = run("local", "status")
    assert result.exit_code == 1
    assert "is gone" in result.output


def test_local_commands_need_a_running_world(state: Path) -> None:
    for args in (
        ("--local", "sets"),
        ("--local", "backup", "db1", "--no-wait"),
        ("local", "break", "db1", "--member", "1"),
        ("local", "clock", "--pause"),
    ):
        result = run(*args)
        assert result.exit_code == 1, args
        assert "no local world runs: start one with `raidsnap local up`" in result.output


def test_local_is_one_world_and_emulation_another(state: Path) -> None:
    result = run("--local", "sets", "--emulation")
    assert result.exit_code == 1
    assert "--local and --emulation are two different worlds" in result.output


def test_raidsnap_local_in_the_environment_chooses_the_world(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAIDSNAP_LOCAL", "1")
    result = CliRunner().invoke(app, ["sets"], env={"RAIDSNAP_LOCAL": "1"})
    assert result.exit_code == 1
    assert "no local world runs" in result.output


def test_break_takes_one_fault(state: Path) -> None:
    assert run("local", "break", "db1").exit_code == 2
    assert run("local", "break", "db1", "--member", "1", "--assemble").exit_code == 2


def test_a_command_against_the_world_leaves_this_process_pointed_at_aws(
    state: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    # GIVEN a recorded world that does not answer (its process is another one)
    record(state, sleeper.pid, local_state.process_start(sleeper.pid))
    before = dict(os.environ)
    # WHEN a command runs against it and fails
    result = run("--local", "sets")
    assert result.exit_code == 1
    # THEN the environment is this process's again: no endpoint, no keys of the world's
    assert dict(os.environ) == before
