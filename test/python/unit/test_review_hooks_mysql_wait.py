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
/usr/local/sbin). The mysql stand-in stands for the server and its batch client together: its
FLUSH waits 12 s (a query ahead of it) unless the session's lock_wait_timeout is shorter (then
the statement fails with ER_LOCK_WAIT_TIMEOUT) or a KILL QUERY from another session names it
(then it fails with ER_QUERY_INTERRUPTED); either way the batch client exits on the error
(mysql without --force stops at the first error). A stand-in that could only end after its 12 s
would make the test ask for what no hook can do: a server's statement ends by the server.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import test_review_hooks_scripts as scripts

WAITING_MYSQL = textwrap.dedent(
    """\
    echo "client start $$" >>"$R24/log"
    bound=12
    trap 'echo "ftwrl killed $$" >>"$R24/log"; echo "client end $$" >>"$R24/log"; exit 1' USR1
    while IFS= read -r line; do
      case $line in
        "SET SESSION lock_wait_timeout = "*)
          lwt=${line#*= }; lwt=${lwt%;}
          [ "${R24_IGNORE_LWT:-}" = 1 ] || [ "$lwt" -ge "$bound" ] || bound=$lwt ;;
        *raidsnap-session*) echo "raidsnap-session $$" ;;
        "KILL QUERY "*)
          id=${line#KILL QUERY }; id=${id%;}
          echo "kill query $id" >>"$R24/log"; kill -USR1 "$id" ;;
        "FLUSH TABLES WITH READ LOCK;")
          echo "ftwrl waiting $$" >>"$R24/log"
          sleep "$bound" & wait $!
          if [ "$bound" -lt 12 ]; then
            echo "ftwrl timed out $$" >>"$R24/log"; echo "client end $$" >>"$R24/log"; exit 1
          fi
          echo "ftwrl granted $$" >>"$R24/log" ;;
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


def test_a_flush_still_waiting_when_the_post_phase_comes_is_killed_by_its_session_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The post phase does not wait for lock_wait_timeout: a FLUSH still waiting then (here one
    the stand-in keeps waiting whatever the session's timeout) is ended with KILL QUERY naming
    its session, and the session ends before the freeze reports."""
    monkeypatch.setitem(scripts.STUBS, "mysql", WAITING_MYSQL)
    log = scripts._run(
        tmp_path,
        f"""
        export R24_IGNORE_LWT=1
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=30 SSM_FreezeToken={scripts.TOKEN_A} \\
          SSM_PreSnapshot=builtin:mysql-lock SSM_HookSeconds=2
        echo "--- freeze reported" >>"$R24/log"
        """,
    )
    assert "freeze rc=1" in log, log
    waiting = [line.split()[-1] for line in log if line.startswith("ftwrl waiting")]
    assert waiting, log
    reported = log.index("--- freeze reported")
    assert f"kill query {waiting[0]}" in log[:reported], log
    assert f"ftwrl killed {waiting[0]}" in log[:reported], log
    assert f"client end {waiting[0]}" in log[:reported], log
