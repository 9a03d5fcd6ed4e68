"""Review of issue 24 (application hooks): the real freeze.sh and thaw.sh, run as the SSM agent
runs them (root, parameters as SSM_<Name> environment variables: interpolationType ENV_VAR,
https://docs.aws.amazon.com/systems-manager/latest/userguide/documents-schemas-features.html
"interpolationType ... ENV_VAR ... the parameter value is passed as an environment variable"),
in a private mount namespace where /usr/local/sbin (first on the scripts' own PATH, lib/base.sh)
holds stand-ins for fsfreeze, mountpoint, findmnt and the mysql client, and /run, /srv and
/var/lib/raidsnap (the record of a post hook owed, kept across a reboot) are tmpfs of their
own: nothing of the host is frozen or touched. The stand-ins log what they are asked; the
assertions are on that log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[3] / "ssm" / "scripts"
TOKEN_A = "0123456789abcdef0123456789abcdef"  # noqa: S105 (a freeze token, no secret)
TOKEN_B = "fedcba9876543210fedcba9876543210"  # noqa: S105

STUBS = {
    "fsfreeze": 'echo "fsfreeze $*" >>"$R24/log"\n',
    "mountpoint": "exit 0\n",
    "findmnt": 'case "$*" in *"--mountpoint /") echo 259:1;; *) echo 9:0;; esac\n',
    # A database client holding a session: answers the marker queries, logs its start and end.
    "mysql": textwrap.dedent(
        """\
        echo "client start $$" >>"$R24/log"
        while IFS= read -r line; do
          case $line in
            *raidsnap-held*) echo raidsnap-held ;;
            *raidsnap-released*) echo raidsnap-released ;;
          esac
        done
        echo "client end $$" >>"$R24/log"
        """
    ),
}

HOOK = textwrap.dedent(
    """\
    #!/bin/bash
    echo "hook $1 $2 start" >>"$R24/log"
    [ "$1" = slow ] && [ "$2" = pre ] && sleep 4
    echo "hook $1 $2 end" >>"$R24/log"
    """
)


def _run(tmp_path: Path, body: str) -> list[str]:
    # The suite runs as root (scripts/vm/ensure.sh installs the VM's packages as root), and
    # unshare(1) is util-linux's, which the setup installs: a machine without them fails here
    # by name rather than passing these tests by skipping them.
    assert os.geteuid() == 0, "these tests need root for a private mount namespace"
    assert shutil.which("unshare"), "these tests need unshare(1) (util-linux)"
    stubs = tmp_path / "sbin"
    stubs.mkdir()
    for name, text in STUBS.items():
        (stubs / name).write_text("#!/bin/bash\n" + text)
        (stubs / name).chmod(0o755)
    (tmp_path / "hook").write_text(HOOK)
    (tmp_path / "hook").chmod(0o755)
    (tmp_path / "log").write_text("")
    scenario = (
        textwrap.dedent(
            f"""\
        set -u
        export R24={tmp_path}
        mount --bind {stubs} /usr/local/sbin && mount -t tmpfs none /run && mount -t tmpfs none /srv
        mkdir -p /var/lib/raidsnap && mount -t tmpfs none /var/lib/raidsnap
        mkdir -p /srv/a /srv/b
        S={SCRIPTS}
        freeze() {{ env "$@" bash $S/freeze.sh >>"$R24/out" 2>&1; echo "freeze rc=$?" >>$R24/log; }}
        thaw() {{ env "$@" bash $S/thaw.sh >>"$R24/out" 2>&1; echo "thaw rc=$?" >>"$R24/log"; }}
        cleanup() {{
          for d in /run/raidsnap/hooks/*/; do touch "$d/release" 2>/dev/null; done; sleep 1
        }}
        """
        )
        + textwrap.dedent(body)
        + "\ncleanup\n"
    )
    subprocess.run(
        ["unshare", "-m", "--propagation", "private", "bash", "-c", scenario],
        check=True,
        timeout=120,
    )
    return (tmp_path / "log").read_text().splitlines()


def test_a_pre_hook_slower_than_the_freeze_bound_never_leaves_the_filesystem_frozen(
    tmp_path: Path,
) -> None:
    """The guard's clock starts before the pre hook (freeze.sh starts it, then runs the hook), so
    a pre hook that runs longer than MaxFreezeSeconds (allowed: hooks.timeoutSeconds up to 999,
    defaults.maxFreezeSeconds up to 900, and nothing compares them; a FLUSH TABLES WITH READ LOCK
    waiting for a long query is the usual case) lets the guard fire while nothing is frozen: it
    runs the post hook (the application let go before the snapshot), removes the state file and
    ends. freeze.sh then goes on to fsfreeze -f with no guard left, and thaw.sh finds no state file
    ("nothing of ours to thaw") and never runs fsfreeze -u: the filesystem stays frozen, every
    write to it blocks, until someone thaws it by hand."""
    log = _run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=2 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot="$R24/hook slow" SSM_PostSnapshot="$R24/hook slow" SSM_HookSeconds=10
        thaw SSM_MountPoint=/srv/a SSM_FreezeToken={TOKEN_A} \\
          SSM_PostSnapshot="$R24/hook slow" SSM_HookSeconds=10
        sleep 3
        """,
    )
    freezes = [line for line in log if line.startswith("fsfreeze")]
    # Every fsfreeze -f is followed by an fsfreeze -u.
    assert "fsfreeze -f /srv/a" not in freezes or freezes[-1] == "fsfreeze -u /srv/a", log
    # The post hook runs after the pre hook ended (never while the pre hook is still holding).
    assert log.index("hook slow post start") > log.index("hook slow pre end"), log


def test_a_held_ready_made_pre_hook_without_a_post_hook_is_let_go(tmp_path: Path) -> None:
    """builtin:mysql-lock holds FLUSH TABLES WITH READ LOCK in a session of its own that only
    the post phase of the same hook ends. A run's input may name a pre hook alone
    ({"hooks": {"preSnapshot": "builtin:mysql-lock"}}: hooks.HooksChoice, "a hook not given does
    not run"), and so may the configuration (lib/hooks-config.ts): then nobody ever releases the
    session and the database takes no writes for the hour the holder waits (36000 x 0.1 s), after
    the backup reports success."""
    log = _run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=5 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot=builtin:mysql-lock SSM_HookSeconds=10
        thaw SSM_MountPoint=/srv/a SSM_FreezeToken={TOKEN_A} SSM_HookSeconds=10
        sleep 7  # past MaxFreezeSeconds: both the thaw and the guard have had their turn
        echo "--- after thaw and guard" >>"$R24/log"
        """,
    )
    after = log[: log.index("--- after thaw and guard")]
    starts = [line for line in after if line.startswith("client start")]
    assert starts, log
    ends = [line for line in after if line.startswith("client end")]
    assert len(ends) == len(starts), f"the lock's session is still held after the backup: {log}"


def test_a_backup_of_one_array_does_not_release_the_other_arrays_hook_session(
    tmp_path: Path,
) -> None:
    """Two arrays of one instance (issue 24: /data on md0, /logs on md1), each with the
    ready-made hook, backed up at the same time (a schedule per array). The held session lives in
    /run/raidsnap/hooks/<engine>, one directory per engine, not per array or freeze: the second
    pre hook's rm -rf replaces the first one's directory, and the first array's thaw touches the
    release file the second array's session waits on. The second array's session is let go
    before its snapshot was taken (and its set still says application)."""
    log = _run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=30 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot=builtin:mysql-lock SSM_PostSnapshot=builtin:mysql-lock SSM_HookSeconds=10
        freeze SSM_MountPoint=/srv/b SSM_MaxFreezeSeconds=30 SSM_FreezeToken={TOKEN_B} \\
          SSM_PreSnapshot=builtin:mysql-lock SSM_PostSnapshot=builtin:mysql-lock SSM_HookSeconds=10
        echo "--- both held" >>"$R24/log"
        thaw SSM_MountPoint=/srv/a SSM_FreezeToken={TOKEN_A} \\
          SSM_PostSnapshot=builtin:mysql-lock SSM_HookSeconds=10
        sleep 1
        echo "--- a thawed" >>"$R24/log"
        thaw SSM_MountPoint=/srv/b SSM_FreezeToken={TOKEN_B} \\
          SSM_PostSnapshot=builtin:mysql-lock SSM_HookSeconds=10
        """,
    )
    starts = [line.split()[-1] for line in log if line.startswith("client start")]
    assert len(starts) == 2, log
    b_client = starts[1]
    between = log[log.index("--- both held") : log.index("--- a thawed")]
    assert f"client end {b_client}" not in between, f"array b's session ended in a's thaw: {log}"


def test_the_post_hook_still_runs_when_the_instance_rebooted_after_the_pre_hook(
    tmp_path: Path,
) -> None:
    """Issue 24: "the post command always runs once the pre command started". Everything that
    remembers that the pre hook started lives in /run (a tmpfs: the marker, the post-hook file,
    the guard program; the transient systemd timer too). An instance that reboots while frozen
    (the guard's process dies with it) comes back with none of it, and the workflow's thaw, which
    SSM delivers once the agent is back, finds "nothing of ours to thaw" and never runs the post
    hook it was given. A site command that the pre hook used to stop writers (a maintenance flag,
    paused replication, a stopped service) stays in force. Here the reboot is /run emptied and
    the guard's process gone."""
    log = _run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=30 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot="$R24/hook fast" SSM_PostSnapshot="$R24/hook fast" SSM_HookSeconds=10
        guard=""
        for f in /run/raidsnap/freeze-*; do [[ $f == *.* ]] || read -r guard _ <"$f"; done
        [ -n "$guard" ] && kill -KILL -- "-$guard" 2>/dev/null
        umount -l /run && mount -t tmpfs none /run
        echo "--- rebooted" >>"$R24/log"
        thaw SSM_MountPoint=/srv/a SSM_FreezeToken={TOKEN_A} \\
          SSM_PostSnapshot="$R24/hook fast" SSM_HookSeconds=10
        """,
    )
    assert "hook fast pre end" in log, log
    assert "hook fast post start" in log[log.index("--- rebooted") :], log


def test_a_thaw_that_arrives_during_the_pre_hook_leaves_nothing_frozen(tmp_path: Path) -> None:
    """The workflow's failure path (BackupFailed: explain_failure sends thaw whenever the run
    fails after the freeze was sent) can reach the instance while freeze.sh is still in its pre
    hook (a poll that fails, a run that times out). thaw.sh stops the guard, removes the state
    file and claims the post hook, which it runs while the pre hook is still running; freeze.sh
    then finishes its pre hook and runs fsfreeze -f with no guard and no later thaw: the same
    end as a pre hook slower than the bound. freeze.sh never looks, after its pre hook, whether
    its guard and its post hook are still there."""
    log = _run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=30 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot="$R24/hook slow" SSM_PostSnapshot="$R24/hook slow" SSM_HookSeconds=10 &
        sleep 1.5
        thaw SSM_MountPoint=/srv/a SSM_FreezeToken={TOKEN_A} \\
          SSM_PostSnapshot="$R24/hook slow" SSM_HookSeconds=10
        wait
        """,
    )
    freezes = [line for line in log if line.startswith("fsfreeze")]
    assert "fsfreeze -f /srv/a" not in freezes or freezes[-1] == "fsfreeze -u /srv/a", log
    assert log.index("hook slow post start") > log.index("hook slow pre end"), log


def test_a_post_hook_the_guard_ran_and_that_failed_is_not_reported_as_fine(
    tmp_path: Path,
) -> None:
    """When the thaw comes after MaxFreezeSeconds (the snapshots started in time, so the set is
    labelled application, but the step after them was slow), the guard has thawed and run the post
    hook, discarding its status (`run_hook ... 2>/dev/null || true`). thaw.sh then reports
    ok with postSnapshot "none", the backup succeeds and the set keeps application, whereas the
    same post hook failing in thaw fails the backup HookFailed and lowers the label
    (finish._relabel_after_post_hook: a held session that ended early fails its post hook)."""
    (tmp_path / "failing-post").write_text(
        '#!/bin/bash\necho "post-hook $1" >>"$R24/log"\n[ "$1" = post ] && exit 3\nexit 0\n'
    )
    (tmp_path / "failing-post").chmod(0o755)
    _run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=2 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot="$R24/failing-post" SSM_PostSnapshot="$R24/failing-post" \\
          SSM_HookSeconds=10
        sleep 4
        : >"$R24/out"
        thaw SSM_MountPoint=/srv/a SSM_FreezeToken={TOKEN_A} \\
          SSM_PostSnapshot="$R24/failing-post" SSM_HookSeconds=10
        """,
    )
    log = (tmp_path / "log").read_text().splitlines()
    assert "post-hook post" in log, log
    out = (tmp_path / "out").read_text().splitlines()
    last = json.loads([x for x in out if x.startswith("{")][-1])
    assert not (last["ok"] and last["postSnapshot"] == "none"), (last, log)


def test_a_hooks_only_backup_never_thaws_a_freeze_it_did_not_make(tmp_path: Path) -> None:
    """Freeze=false runs the hooks alone (a crash-consistent set with the application's help):
    freeze.sh records its token and guard but never runs fsfreeze -f. thaw.sh has no Freeze
    parameter and the state file does not say that nothing was frozen, so a recorded token is
    enough for it to run fsfreeze -u: a freeze another tool made in the meantime (thaw.yaml: "a
    freeze someone else holds (another tool, a concurrent backup) is left alone") is ended in
    the middle of that tool's snapshot."""
    log = _run(
        tmp_path,
        f"""
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=30 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot="$R24/hook fast" SSM_PostSnapshot="$R24/hook fast" SSM_HookSeconds=10 \\
          SSM_Freeze=false
        thaw SSM_MountPoint=/srv/a SSM_FreezeToken={TOKEN_A} \\
          SSM_PostSnapshot="$R24/hook fast" SSM_HookSeconds=10
        """,
    )
    assert "freeze rc=0" in log and "hook fast post start" in log, log
    assert [line for line in log if line.startswith("fsfreeze")] == [], log


def test_a_ready_made_hook_the_database_refuses_fails_at_once_and_says_so(tmp_path: Path) -> None:
    """A held ready-made hook whose client fails at once (the server is down, a standby refuses,
    FLUSH TABLES WITH READ LOCK is denied): the holder's write to the fifo nobody reads any more
    kills it with SIGPIPE before it writes rc, so the pre phase, which waits for the marker or
    rc, waits out the whole HookSeconds and the backup fails "did not finish in 20s" instead of
    the client's own error, 20 s later than it could."""
    (tmp_path / "sbin").mkdir()
    log = _run_with_mysql(
        tmp_path,
        'echo "ERROR 2002 (HY000): Can\'t connect to local server" >&2; exit 1\n',
        f"""
        start=$(date +%s)
        freeze SSM_MountPoint=/srv/a SSM_MaxFreezeSeconds=60 SSM_FreezeToken={TOKEN_A} \\
          SSM_PreSnapshot=builtin:mysql-lock SSM_PostSnapshot=builtin:mysql-lock SSM_HookSeconds=20
        echo "took $(( $(date +%s) - start ))" >>"$R24/log"
        """,
    )
    took = int(next(line for line in log if line.startswith("took")).split()[1])
    out = (tmp_path / "out").read_text()
    assert '"HookFailed"' in out, out
    assert "did not finish" not in out and took < 10, (took, out)


def _run_with_mysql(tmp_path: Path, mysql: str, body: str) -> list[str]:
    saved = STUBS["mysql"]
    STUBS["mysql"] = mysql
    try:
        shutil.rmtree(tmp_path / "sbin")
        return _run(tmp_path, body)
    finally:
        STUBS["mysql"] = saved
