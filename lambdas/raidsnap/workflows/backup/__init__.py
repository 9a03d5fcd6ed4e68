"""The backup workflow's steps: each takes the keys its Task reads (contracts.py) and returns its
result for its own key."""

from raidsnap.workflows.backup.copies import copy_set
from raidsnap.workflows.backup.finish import (
    apply_retention,
    explain_failure,
    fail_if_degraded,
    finish,
)
from raidsnap.workflows.backup.keep_fsr import keep_fsr
from raidsnap.workflows.backup.prepare import collect_members, prepare
from raidsnap.workflows.backup.snapshot import check_snapshots, create_set, send_freeze, send_thaw

__all__ = [
    "apply_retention",
    "check_snapshots",
    "collect_members",
    "copy_set",
    "create_set",
    "explain_failure",
    "fail_if_degraded",
    "finish",
    "keep_fsr",
    "prepare",
    "send_freeze",
    "send_thaw",
]
