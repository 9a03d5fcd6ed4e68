"""The restore workflow's steps: each reads the keys of the run it needs (a model of
workflows/restore/contracts.py) and returns its own result.

Every step works on all members at once (one Lambda invocation, one Describe per look), so a
restore of 16 members makes as many state transitions as one of 2.
"""

from raidsnap.workflows.restore.commands import send_command
from raidsnap.workflows.restore.contracts import (
    AttachCall,
    CheckCall,
    CommandCall,
    CreateCall,
    DetachCall,
    FsrCall,
    PrepareCall,
    StateCall,
)
from raidsnap.workflows.restore.failure import cleanup
from raidsnap.workflows.restore.finish import finish
from raidsnap.workflows.restore.fsr import fsr_step
from raidsnap.workflows.restore.prepare import prepare, preview
from raidsnap.workflows.restore.report import ReportCall, report
from raidsnap.workflows.restore.volumes import (
    attach_volumes,
    check_volumes,
    create_volumes,
    detach_old,
)

__all__ = [
    "AttachCall",
    "CheckCall",
    "CommandCall",
    "CreateCall",
    "DetachCall",
    "FsrCall",
    "PrepareCall",
    "ReportCall",
    "StateCall",
    "attach_volumes",
    "check_volumes",
    "cleanup",
    "create_volumes",
    "detach_old",
    "finish",
    "fsr_step",
    "prepare",
    "preview",
    "report",
    "send_command",
]
