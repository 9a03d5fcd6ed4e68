"""Review of takeWith: a thaw that fails on the way out of a successful run.

After the one CreateSnapshots call, the arrays are thawed one by one in reverse freeze order and
the hooked array's thaw (its post hook) comes last. A thaw of another array that fails
(ThawFailed: fsfreeze -u refused, ssm/scripts/thaw.sh) is tolerated: ThawNext goes on at once
and sends the thaw that runs the post hook, so the post hook runs while that filesystem is
still frozen (until its guard's deadline) - what the order exists to prevent, and what the
failure path waits for (finish._wait_for_thaws). The run then SUCCEEDS and neither its output
nor its notes say that a filesystem was left frozen: the operator reads a clean backup.
"""

from __future__ import annotations

import json
from typing import Any

from test_backup_together import two

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation

LOGS_HOOKS = {
    "logs": {
        "timeoutSeconds": 20,
        "preSnapshot": "/usr/local/sbin/db-hook --hold",
        "postSnapshot": "/usr/local/sbin/db-hook --release",
    }
}


def test_a_failed_thaw_of_another_array_is_said_in_the_runs_notes(
    emu: Emulation,
) -> None:
    # GIVEN db1 (/data) and logs (/logs, hooked), fsfreeze; fsfreeze -u of /data fails
    fx, _, _ = two(emu)
    assert emu.router is not None
    for fn in emu.router.functions.values():
        if "HOOKS_BY_ARRAY" in fn.environment:
            fn.environment["HOOKS_BY_ARRAY"] = json.dumps(LOGS_HOOKS)
    line = {"ok": False, "error": "ThawFailed", "message": "fsfreeze -u /data failed: I/O error"}
    emu.hosts.fail_next(
        "thaw", CommandOutcome(status="Failed", stdout=json.dumps(line), exit_code=1)
    )
    # WHEN db1 is backed up with logs
    run = emu.run("backup", {"array": "db1", "takeWith": ["logs"], "consistency": "fsfreeze"})
    thaws: list[Any] = [
        c for c in emu.double.calls if c.applied and c.params.get("DocumentName") == "raidsnap-thaw"
    ]
    assert [t.params["Parameters"]["MountPoint"] for t in thaws][:2] == [["/data"], ["/logs"]]
    assert emu.hosts.state(fx.instance_id).frozen == {"/data"}
    # THEN whatever the run's end, it says that /data's thaw failed and that /data stays
    # frozen until its guard's deadline
    said = " ".join([str(run.cause), *map(str, (run.output or {}).get("notes") or [])])
    assert "/data" in said and "thaw" in said, (run.status, said)
