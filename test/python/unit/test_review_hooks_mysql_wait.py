"""Review (second) of issue 24: builtin:mysql-lock whose FLUSH TABLES WITH READ LOCK waits.

FLUSH TABLES WITH READ LOCK waits for every running statement on the tables it must close, and
while it waits the server takes no writes: "Long-running queries with FLUSH TABLES WITH READ LOCK
enabled can leave the server in a read-only mode until the queries finish" (Percona XtraBackup,
"FLUSH TABLES WITH READ LOCK option", which therefore waits for a moment without long queries,
bounds its wait, and kills the queries in the way). The ready-made hook sends the statement
with no bound of its own (MySQL's lock_wait_timeout defaults to a year) into a session that a
detached holder keeps open (lib/hooks.sh, raidsnap_held_session). When HookSeconds runs out the
freeze reports HookFailed and runs the post phase, which only queues UNLOCK TABLES behind the
waiting statement: the statement goes on waiting after the backup has failed, and the database
stays read-only for as long as the long query runs (issue 24, done when: "a hook that hangs
fails the backup, runs the post command, and the database is writable again").

The real scripts run as in test_review_hooks_scripts (a private mount namespace, stand-ins on
/usr/local/sbin); the mysql stand-in's FLUSH waits 12 s, standing for a query ahead of it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import test_review_hooks_scripts as scripts

WAITING_MYSQL = textwrap.dedent(
    """\
    echo "client start $$" >>"$R24/log"
    while IFS= read -r line; do
      case $line in
        "FLUSH TABLES WITH READ LOCK;")
          echo "ftwrl waiting $$" >>"$R24/log"; sleep 12; echo "ftwrl granted $$" >>"$R24/log" ;;
        *raidsnap-held*) echo raidsnap-held ;;
        *raidsnap-released*) echo raidsnap-released ;;
      esac
    done
    echo "client end $$" >>"$R24/log"
    """
)


def test_a_flush_that_outlives_its_hook_is_not_left_waiting_after_the_backup_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(scripts.STUBS, "mysql", WAITING_MYSQL)
    log = scripts._run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=30 SSM_FreezeToken={scripts.TOKEN_A} \\
          SSM_PreSnapshot=builtin:mysql-lock SSM_HookSeconds=2
        echo "--- freeze reported" >>"$R24/log"
        sleep 2
        echo "--- two seconds later" >>"$R24/log"
        """,
    )
    assert "freeze rc=1" in log, log
    waiting = [line.split()[-1] for line in log if line.startswith("ftwrl waiting")]
    assert waiting, log
    later = log.index("--- two seconds later")
    # The session whose FLUSH was still waiting is gone once the backup failed (the database
    # writable again), not left to take the lock when the long query ends.
    assert f"client end {waiting[0]}" in log[:later], log
