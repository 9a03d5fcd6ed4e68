"""Review of the group freeze guards (freeze.sh group_deadline, FreezeWindowClosed)."""

from __future__ import annotations

from test_backup_together import two

from raidsnap_emulation.harness import Emulation


def _max_freeze_seconds(emu: Emulation, seconds: int) -> None:
    """The stack's defaults.maxFreezeSeconds (lib/config.ts accepts 1-900) as the functions get it."""
    assert emu.router is not None
    for fn in emu.router.functions.values():
        if "MAX_FREEZE_SECONDS" in fn.environment:
            fn.environment["MAX_FREEZE_SECONDS"] = str(seconds)


def test_a_two_array_fsfreeze_group_works_with_a_max_freeze_seconds_the_stack_accepts(
    emu: Emulation,
) -> None:
    # GIVEN db1 and logs of one instance, and defaults.maxFreezeSeconds 12: the stack accepts
    # it (1-900), and before the group cap a freeze of 12 s left time for the snapshots
    two(emu)
    _max_freeze_seconds(emu, 12)
    # WHEN db1 is backed up with logs, fsfreeze-consistent
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    # THEN the run takes its sets: the second freeze is not refused because the first freeze's
    # 12 s less the 2 s gap and the time the workflow needed to send it is under 10 s; a
    # configuration that makes every backup of a group fail must be refused when the stack is
    # synthesized, or the freeze must fit
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
