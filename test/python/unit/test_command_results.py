"""What a person reads about a failed document: commands.CommandResult.stderr_tail."""

from __future__ import annotations

import json

from raidsnap.aws.commands import CommandResult


def result(stdout: str, stderr: str) -> CommandResult:
    return CommandResult("c-1", "failed", "Failed", 1, stdout, stderr)


def test_the_documents_own_reason_comes_last_when_stderr_does_not_hold_it() -> None:
    progress = "\n".join(f"raidsnap: progress: nvme1n1 {n}/100MiB" for n in range(50))
    stdout = json.dumps({"ok": False, "error": "MemberMissing", "message": "vol-1 not found"})
    tail = result(stdout + "\n", progress + "\n--output truncated--").stderr_tail(2)
    assert tail.splitlines() == [
        "raidsnap: progress: nvme1n1 49/100MiB",
        "--output truncated--",
        "MemberMissing: vol-1 not found",
    ]


def test_a_reason_already_in_stderr_is_not_repeated() -> None:
    stdout = json.dumps({"ok": False, "error": "MemberMissing", "message": "vol-1 not found"})
    tail = result(stdout, "raidsnap: MemberMissing: vol-1 not found\n").stderr_tail()
    assert tail == "raidsnap: MemberMissing: vol-1 not found"


def test_without_a_json_verdict_the_tail_is_stderr_or_else_stdout() -> None:
    assert result("", "line 1\nline 2\n").stderr_tail(1) == "line 2"
    assert result("partial output\n", "").stderr_tail() == "partial output"
    ok = json.dumps({"ok": True})
    assert result(ok, "warning: slow\n").stderr_tail() == "warning: slow"
