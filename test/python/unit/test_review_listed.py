"""Review of 1a5d5cd (lists in messages as words): a degraded set whose md named no missing slot.

raidsnap.aws.instances._layout_of marks an array degraded when md says so even though every
slot still has a member (``degraded = bool(missing_slots) or bool(md's "degraded")``), and the
backup records it as such (workflows/backup/finish.py has its own wording for that case: "md
says it has no working member"). The restore's refusal and `raidsnap sets adopt` then render
counted("slot", ()) as "slots none": "no working member in slots none", which states that no
slot lacks a working member, the opposite of why the set is refused. (No AWS behaviour.)
"""

from __future__ import annotations

from raidsnap.sets import Manifest, SnapshotSet
from raidsnap.workflows.restore.set_choice import why_incomplete


def test_a_degraded_set_with_no_missing_slot_is_not_described_as_missing_slots_none() -> None:
    manifest = Manifest(
        array="db1",
        set_id="db1-20261127T000000Z-00000000",
        execution_arn="arn:aws:states:us-east-1:123456789012:execution:raidsnap-backup:x",
        status="taken",
        member_count=2,
        volumes={0: "vol-0", 1: "vol-1"},
        snapshots={0: "snap-0", 1: "snap-1"},
        degraded=True,
        missing_slots=(),
    )
    why = why_incomplete(SnapshotSet("db1-20261127T000000Z-00000000", "db1", 2, (), manifest))
    assert "degraded" in why
    assert "slots none" not in why, why
