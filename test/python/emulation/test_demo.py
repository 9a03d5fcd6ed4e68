"""`make demo` is the first thing a new user runs: its story (a backup, a member lost and the
automated recovery, a drill, a restore whose prewarm fails) must end with every run succeeded."""

from __future__ import annotations

import pytest

from raidsnap_emulation import demo
from raidsnap_emulation.harness import synthesize


def test_the_demo_ends_with_every_run_succeeded(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    synthesize()
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "WARNING")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    assert demo.main() == 0, capsys.readouterr().out[-3000:]
    out = capsys.readouterr().out
    assert "automated recovery" in out and "FAILED" not in out, out[-3000:]
