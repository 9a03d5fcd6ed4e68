"""The copy workflow's steps (statemachines/copy.asl.json): it runs in the stack of the Region or
account a set is copied to, and makes the copied set a set of that stack."""

from raidsnap.workflows.copy.finish import explain_failure, finish
from raidsnap.workflows.copy.prepare import prepare
from raidsnap.workflows.copy.progress import copy_step

__all__ = ["copy_step", "explain_failure", "finish", "prepare"]
