"""What a person is told when an on-instance document fails after printing for a while.

GetCommandInvocation returns only the FIRST 8,000 characters a plugin wrote to stderr
(StandardErrorContent, SSM API reference; the agent cuts with pluginutil.StringPrefix and appends
"--output truncated--", agent/framework/runpluginutil). prewarm.sh writes a progress line to
stderr every 10 s, so a prewarm that fails after a few minutes has its reason (its last stderr
line, and the JSON last line on stdout) past that limit. The restore reports the tail of the
stderr it got back, which is progress, never the failure."""

from __future__ import annotations

import json

from raidsnap_emulation.double import CommandOutcome
from raidsnap_emulation.harness import Emulation
from raidsnap_emulation.world import (
    backed_up,
    launch_instance,
    make_array,
    name_in_config,
    terminate,
)


def test_a_prewarm_that_fails_after_long_progress_reports_why(emu: Emulation) -> None:
    fx = make_array(emu.hosts, "db1", 8)
    backed_up(emu.hosts, emu.run, fx)
    terminate(fx.instance_id)
    target = launch_instance("db1-new", fx.availability_zone, tag_array=False)
    name_in_config(emu, "db1", target)
    # prewarm.sh's own words: 40 minutes of progress every 10 s over 8 members, then its failure
    devices = [f"nvme{i + 1}n1" for i in range(8)]
    progress = [
        "raidsnap: progress:" + "".join(f" {d} {n * 100}/16384MiB" for d in devices)
        for n in range(240)
    ]
    reason = "PrewarmFailed: fio exited 1: fio: io_u error on file /dev/nvme3n1: Input/output error"
    stderr = "\n".join(
        ["raidsnap: prewarming 8 device(s), 131072 MiB, with fio", *progress, f"raidsnap: {reason}"]
    )
    stdout = json.dumps({"ok": False, "error": "PrewarmFailed", "message": reason[15:]}) + "\n"
    emu.hosts.fail_next(
        "prewarm", CommandOutcome(status="Failed", stdout=stdout, stderr=stderr, exit_code=1)
    )
    run = emu.run(
        "restore", {"array": "db1", "targetInstanceId": target, "initialization": "prewarm"}
    )
    assert run.status == "SUCCEEDED", f"{run.error}: {run.cause}"
    prewarm = run.output["prewarm"]
    assert prewarm["status"] == "failed"
    # THEN the operator is told why the prewarm failed, not how far it had got at minute six
    assert "Input/output error" in prewarm["stderrTail"], prewarm["stderrTail"]
