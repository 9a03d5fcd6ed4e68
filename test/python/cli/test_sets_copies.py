"""`raidsnap sets` shows where each set was copied and what holds the copies there: a Region of
this account is asked for its locks; another account's copies are that account's to read."""

from __future__ import annotations

import re

from cli_runner import Cli, line_of

from raidsnap_emulation.harness import COPIES_CONFIG, EXAMPLE_CONFIG, Emulation, synthesize
from raidsnap_emulation.world import ArrayFixture


def test_sets_shows_each_sets_copies_and_the_locks_on_them_in_that_region() -> None:
    # GIVEN db1's stack copies its sets to us-west-2, whose stack locks the 2 newest copies
    # (config/example.yaml's lock for db1, governance), and three backups of db1 were copied
    locking = synthesize(config=EXAMPLE_CONFIG)
    taken: list[str] = []

    def world(emu: Emulation, fx: ArrayFixture) -> None:
        emu.deploy("us-west-2", template=locking)
        for _ in range(3):
            run = emu.run("backup", {"array": fx.name})
            assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
            taken.append(run.output["setId"])
            emu.clock.advance(3600)

    result = Cli(synthesize(config=COPIES_CONFIG))("sets", "--emulation", prepare=world)

    assert result.exit_code == 0, result.output
    out = result.stdout
    # THEN each set names its copy there and the locks the stack there put on it
    for set_id in taken[1:]:
        below = out[out.index(set_id) :]
        copy = below.splitlines()[1]
        assert "copy to us-west-2: copied · locked there (governance, 3/3 snapshots) until" in copy
        assert re.search(r"\d{4}-\d\d-\d\d ", below.splitlines()[2]), below
    # AND the oldest copy, locked while it was among the newest two, is still held there
    assert "copy to us-west-2: copied · locked there" in out[out.index(taken[0]) :]
    assert line_of(out, taken[2])
