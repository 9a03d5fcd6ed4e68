"""A backup's hold against restores lasts as long as its snapshot step may, retries included:
the stack gives that time (SNAPSHOT_STEP_SECONDS, from the Retry it deploys); without it the
hold is not guessed."""

from __future__ import annotations

import pytest

from raidsnap.environment import BackupSettings
from raidsnap.errors import ConfigurationError
from raidsnap.workflows.backup.prepare import _hold_seconds


def test_the_hold_covers_discovery_the_freeze_and_the_snapshot_step_at_its_longest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SNAPSHOT_STEP_SECONDS", "13461")
    settings = BackupSettings.from_env()
    assert _hold_seconds(settings) == 90 + 60 + 13461


def test_without_the_snapshot_steps_time_the_hold_is_not_guessed() -> None:
    with pytest.raises(ConfigurationError, match="SNAPSHOT_STEP_SECONDS"):
        _hold_seconds(BackupSettings.from_env())
