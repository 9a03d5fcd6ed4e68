"""The ready-made PostgreSQL hook with a real server (PostgreSQL from the Debian package, in the
guest image): a writer inserts rows all through a backup whose freeze runs
builtin:postgresql-backup (pg_backup_start and pg_backup_stop in one held session) around the
fsfreeze; the "snapshot" is a byte copy of each member taken while the filesystem is frozen, as
EBS takes one point in time for all. A second boot restores those copies (assemble), starts the
server on them, and its table must hold exactly the rows committed as of the snapshot: the same
count and checksum the live server showed at that instant.

Then a pre hook that hangs (a session that locks the table against writers and never returns):
the freeze fails HookFailed, the post hook runs and lets go, and the database takes writes again.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_assemble import NEW_UUID, assemble_params
from test_freeze import MINE
from vmlib import Commands, blank_disk, boot, new_volume_id

from conftest import ArraySet, record

pytestmark = pytest.mark.vm

RESTORED_UUID = "0ddba115:c0ffee00:31415926:27182818"

# Shell helpers of both boots: the server on /data/pg, run as postgres, its socket where psql
# looks for it on Debian; the table's count and checksum in one line.
PG = r"""
export TZ=UTC
mkdir -p /var /run/postgresql && chown postgres:postgres /run/postgresql
[ -e /var/run ] || ln -s /run /var/run
as_pg() { runuser -u postgres -- "$@"; }
bin=/usr/lib/postgresql/15/bin
pg_init() {
  mkdir -p /data/pg && chown postgres:postgres /data/pg && chmod 0700 /data/pg
  as_pg $bin/initdb -D /data/pg --locale=C -E UTF8 -A trust >/run/postgresql/initdb.log 2>&1
  local rc=$?
  cp /run/postgresql/initdb.log /work/initdb.log
  return "$rc"
}
pg_start() {
  as_pg $bin/pg_ctl -D /data/pg -l /run/postgresql/log -w -t 240 -o "-c listen_addresses= \
    -c dynamic_shared_memory_type=sysv -c unix_socket_directories=/run/postgresql" start
  local rc=$?
  cp /run/postgresql/log /work/pg.log
  return "$rc"
}
pg_stop() {
  as_pg $bin/pg_ctl -D /data/pg -m fast -w stop >/dev/null 2>&1
  cp /run/postgresql/log /work/pg.log
}
sql() { as_pg psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
create_table() { sql "CREATE TABLE t (id bigserial PRIMARY KEY, v text NOT NULL)"; }
insert_row() { sql "INSERT INTO t (v) VALUES (md5(random()::text))"; }
state() {
  sql "SELECT count(*) || ' ' ||
         md5(coalesce(string_agg(id || ':' || v, ',' ORDER BY id), '')) FROM t"
}
"""

# The hanging pre hook: `pghang.sh PHASE` (run_hook appends the phase). pre holds a session that
# locks t against every writer, then never returns; post ends that session.
PGHANG = r"""#!/bin/bash
echo "$1" >>/work/hanglog
case $1 in
  pre)
    (printf 'BEGIN; LOCK TABLE t IN EXCLUSIVE MODE; SELECT pg_sleep(3600);\n' |
      runuser -u postgres -- env PGAPPNAME=raidsnap-hang psql -X -q) </dev/null >/dev/null 2>&1 &
    exec sleep 1000 ;;
  post)
    runuser -u postgres -- psql -X -q -A -t -c "SELECT count(pg_terminate_backend(pid))
      FROM pg_stat_activity WHERE application_name = 'raidsnap-hang'" >>/work/hanglog ;;
esac
"""


def test_postgresql_backup_hook_gives_a_copy_that_starts_with_the_rows_of_the_snapshot_instant(
    raid0_set: ArraySet, tmp_path: Path, rng: random.Random
) -> None:
    disks = raid0_set.copies(tmp_path / "disks", rng)
    snaps = [
        blank_disk(tmp_path / "disks" / f"snap{i}.img", 128, new_volume_id(rng)) for i in range(3)
    ]
    cmds = Commands()
    assemble = assemble_params(disks, raid0_set.uuid, persist="false")
    base = {"MountPoint": "/data", "FreezeToken": MINE, "MaxFreezeSeconds": "300"}
    hooks = {
        "PreSnapshot": "builtin:postgresql-backup",
        "PostSnapshot": "builtin:postgresql-backup",
        "HookSeconds": "120",
    }
    hang = {"PreSnapshot": "/work/pghang.sh", "PostSnapshot": "/work/pghang.sh", "HookSeconds": "5"}
    copy = "\n".join(
        f"dd if=$(by_id {d.serial}) of=$(by_id {s.serial}) bs=1M iflag=direct oflag=direct "
        "status=none"
        for d, s in zip(disks, snaps, strict=True)
    )
    scenario = f"""
{PG}
chmod 0755 /work/pghang.sh
{cmds.ssm("assemble", "assemble", **assemble)}
pg_init
pg_start >/work/pg_start1.log 2>&1; echo "$?" >/work/pg_start1.rc
create_table
# The writer: one row per statement, each committed before the next, until told to stop.
(while [ ! -e /work/stop ]; do
  insert_row >/dev/null 2>>/work/writer.err
done) &
writer=$!
sleep 8
state >/work/before
{cmds.ssm("freeze", "freeze", **base, **hooks)}
# What the live server shows once the filesystem is frozen is what the snapshot holds: a commit
# becomes visible only after its WAL is on disk, and nothing reaches the disk now.
sleep 2
timeout 60 bash -c "$(declare -f as_pg sql state); state" >/work/at_snapshot 2>/work/at_snapshot.err
{copy}
echo "$?" >/work/copy.rc
{cmds.ssm("thaw", "thaw", **base, PostSnapshot=hooks["PostSnapshot"], HookSeconds="120")}
sleep 5
state >/work/after
cp /run/raidsnap/hooks/postgresql-*/out /work/held_session.out 2>/dev/null || true

# A pre hook that hangs: HookFailed, the post hook ends the session holding the table, and the
# writer goes on.
{cmds.ssm("freeze_hang", "freeze", **base, **hang)}
sleep 3
state >/work/after_hang1
sleep 5
state >/work/after_hang2
touch /work/stop; wait "$writer"
pg_stop
"""
    b = record(
        "postgresql backup",
        boot(
            tmp_path / "vm1",
            scenario,
            disks + snaps,
            commands=cmds,
            files={"pghang.sh": PGHANG},
            timeout=900,
        ),
    )
    assert b.rc_of("assemble") == 0, b.explain("assemble")
    assert b.text("pg_start1.rc").strip() == "0", b.text("initdb.log") + b.text("pg.log")
    assert b.rc_of("freeze") == 0, b.explain("freeze")
    assert b.json_of("freeze")["preSnapshot"] == "ok"
    assert b.text("copy.rc").strip() == "0"
    assert b.rc_of("thaw") == 0, b.explain("thaw")
    assert b.json_of("thaw")["postSnapshot"] == "ok"
    before = int(b.text("before").split()[0])
    count_s, sum_s = b.text("at_snapshot").split()
    after = int(b.text("after").split()[0])
    print(f"rows: {before} before the freeze, {count_s} at the snapshot, {after} after the thaw")
    assert 0 < before <= int(count_s) < after, "the server wrote before, during and after"
    # The held session: pg_backup_start returned before the freeze, pg_backup_stop after it
    # (the backup label it returned is in the session's output).
    held = b.text("held_session.out")
    assert "LABEL: raidsnap" in held and held.rstrip().endswith("raidsnap-released"), held
    start = held.split("START WAL LOCATION: ")[1].split()[0]

    assert b.rc_of("freeze_hang") == 1
    hung = b.json_of("freeze_hang")
    assert hung["error"] == "HookFailed" and "did not finish in 5s" in hung["message"], hung
    assert "post-snapshot hook: ok" in hung["message"], hung
    assert b.text("hanglog").split("\n")[:3] == ["pre", "post", "1"]
    hang1, hang2 = (int(b.text(f).split()[0]) for f in ("after_hang1", "after_hang2"))
    assert after < hang1 < hang2, "the database takes writes again after the failed hook"

    # The restore: only the snapshot copies, assembled as a restore does, and the server started
    # on them recovers to the snapshot instant.
    cmds2 = Commands()
    # The copies carry the live array's identity (the first boot's assemble gave it NEW_UUID);
    # the restored array gets one of its own.
    restore = {
        **assemble,
        "VolumeIds": ",".join(s.volume_id for s in snaps),
        "MdUuid": NEW_UUID,
        "NewMdUuid": RESTORED_UUID,
    }
    scenario2 = f"""
{PG}
{cmds2.ssm("assemble", "assemble", **restore)}
# The copy holds the live server's lock file; its pid may be any process of this new boot.
rm -f /data/pg/postmaster.pid
pg_start >/work/pg_start2.log 2>&1; echo "$?" >/work/pg_start2.rc
state >/work/restored
"""
    r = record(
        "postgresql restore",
        boot(tmp_path / "vm2", scenario2, snaps, commands=cmds2, timeout=600),
    )
    assert r.rc_of("assemble") == 0, r.explain("assemble")
    assert r.text("pg_start2.rc").strip() == "0", r.text("pg.log")
    assert r.text("restored").split() == [count_s, sum_s], r.text("pg.log")[-2000:]
    # Recovery replays from pg_backup_start's checkpoint: the copy holds what it made durable.
    assert f"redo starts at {start}" in r.text("pg.log"), r.text("pg.log")[-2000:]
