"""One rule for a group's freezes, written in four places: freeze.sh (and lib/freeze_guard.sh)
enforce it on the instance, the backup workflow labels sets by it and refuses a run that cannot
fit (raidsnap.workflows.backup.freezes), the synth check refuses such a configuration
(lib/take-with.ts), and the emulation answers as freeze.sh does. They must say the same."""

from __future__ import annotations

import re
from pathlib import Path

from raidsnap.workflows.backup import freezes, snapshot
from raidsnap_emulation import host

ROOT = Path(__file__).resolve().parents[3]


def _shell_value(name: str) -> int:
    text = "\n".join(
        (ROOT / "ssm" / "scripts" / f).read_text() for f in ("freeze.sh", "lib/freeze_guard.sh")
    )
    (value,) = re.findall(rf"^{name}=(\d+)$", text, re.MULTILINE)
    return int(value)


def _ts_value(name: str) -> int:
    text = (ROOT / "lib" / "take-with.ts").read_text()
    (value,) = re.findall(rf"^const {name} = (\d+);$", text, re.MULTILINE)
    return int(value)


def test_the_gap_and_the_window_are_the_scripts_everywhere() -> None:
    gap, window = _shell_value("group_gap_seconds"), _shell_value("min_window_seconds")
    assert (freezes.GROUP_GAP.total_seconds(), freezes.MIN_WINDOW.total_seconds()) == (gap, window)
    assert (host.GROUP_GAP.total_seconds(), host.MIN_WINDOW.total_seconds()) == (gap, window)
    assert (_ts_value("GROUP_GAP_SECONDS"), _ts_value("MIN_WINDOW_SECONDS")) == (gap, window)


def test_a_freeze_step_is_the_workflows_wait_before_it_looks_and_a_second() -> None:
    assert freezes.FREEZE_STEP.total_seconds() == snapshot.COMMAND_POLL_SECONDS + 1
    assert _ts_value("FREEZE_STEP_SECONDS") == freezes.FREEZE_STEP.total_seconds()


def test_the_least_max_freeze_seconds_of_a_group() -> None:
    # 2 arrays: the second freeze 3 s after the first, ending 2 s before it, 10 s left
    assert freezes.seconds_needed(2) == 15
    assert freezes.seconds_needed(9) == 36
