"""Review: the operator's documents still say a backup publishes no RunCostUsd.

The change adds BackupCost: a rule on every end of the backup state machine (BackupEnded,
lib/constructs/backup-workflow.ts) prices the run and publishes RunCostUsd for its array, so the
dashboard's "run cost by array" widget now sums backups too. README ("What one run cost") and
the widget's comment (lib/constructs/monitoring.ts) still tell the operator the opposite, and
give as the reason the very GetExecutionHistory call per backup that BackupCost now makes.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_review_backup_cost_docs_do_not_deny_what_backup_cost_publishes() -> None:
    workflow = (REPO / "lib" / "constructs" / "backup-workflow.ts").read_text()
    assert "'BackupEnded'" in workflow and "backup_cost" in workflow  # the rule and its function
    readme = " ".join((REPO / "README.md").read_text().split())
    monitoring = " ".join((REPO / "lib" / "constructs" / "monitoring.ts").read_text().split())
    stale = [
        where
        for where, text, claim in [
            ("README.md", readme, "nor does it publish `RunCostUsd`"),
            (
                "lib/constructs/monitoring.ts",
                monitoring,
                "A backup's cost is not published by the run",
            ),
        ]
        if claim in text
    ]
    assert stale == [], f"still say a backup publishes no RunCostUsd: {stale}"
