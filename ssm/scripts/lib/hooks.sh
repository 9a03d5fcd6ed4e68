# shellcheck shell=bash
# lib/hooks.sh: application hooks that freeze runs before the snapshot instant (pre) and thaw, or
# the freeze guard, after it (post).
#
# A hook is "builtin:<name>" (a ready-made hook below) or the absolute path of an executable
# followed by its arguments, separated by single spaces. It is split into words here and run as
# that argument vector: never handed to a shell, so nothing in it is expanded, globbed, quoted or
# chained. Hooks run as root (the SSM agent's user); a hook that should run as another user says
# so itself (the ready-made ones run their clients as the database's own system user).

hook_dir=/run/raidsnap/hooks
# Whose hooks: hook_key, set by the caller to the key of the mount point frozen
# (lib/freeze_guard.sh, key_of), so that the held sessions of two arrays of one instance never
# share a directory.

# run_hook PHASE HOOK SECONDS [PIDFILE]: run one hook, killed after SECONDS (then 5 s later with
# SIGKILL). Its output goes to stderr. Returns its status (124: timed out, as timeout(1) reports).
# timeout(1) puts itself and the hook in a process group of their own, so the SSM agent's SIGKILL
# to the command's process group (a cancel or the step's timeoutSeconds: killProcess in
# aws/amazon-ssm-agent agent/executers/executers_unix.go) leaves both running, still bounded by
# SECONDS. With PIDFILE, the process that becomes timeout(1) first writes "<pid> <start time>
# <seconds> <epoch>" there (lib/freeze_guard.sh, wait_pre_hook, waits for it to end).
run_hook() {
  local phase=$1 hook=$2 seconds=$3 pidfile=${4:-}
  local -a argv
  if [[ $hook == builtin:* ]]; then
    # The ready-made hooks run in a bash of their own (under timeout): they go with it.
    export -f raidsnap_builtin_hook raidsnap_held_session raidsnap_cancel_session
    export hook_dir hook_key
    argv=(bash -c 'raidsnap_builtin_hook "$@"' raidsnap-hook "${hook#builtin:}" "$phase" "$seconds")
  else
    # read -a splits on spaces only: no pathname expansion, no quote removal.
    read -r -a argv <<<"$hook"
    argv+=("$phase")
  fi
  if [[ -z $pidfile ]]; then
    timeout --kill-after=5 "$seconds" "${argv[@]}" >&2
    return
  fi
  # Recorded before the exec, by the very process: no window in which the hook runs unrecorded.
  # shellcheck disable=SC2016 # the program is this bash's, expanded by its own bash
  bash -c 's=$(</proc/$$/stat) && read -r -a f <<<"${s##*) }" &&
    printf "%s %s %s %s\n" "$$" "${f[19]}" "$2" "$(date +%s)" >"$1.tmp" && mv -f "$1.tmp" "$1" &&
    shift && exec timeout --kill-after=5 "$@"' raidsnap-hook "$pidfile" "$seconds" "${argv[@]}" >&2
}

# The ready-made hooks. NAME PHASE SECONDS.
raidsnap_builtin_hook() {
  local name=$1 phase=$2 seconds=$3
  case $name in
    postgresql-checkpoint)
      # A crash-consistent snapshot of data and WAL together is what PostgreSQL recovers from;
      # a CHECKPOINT first makes that recovery short. Nothing is held, so post does nothing.
      [[ $phase == pre ]] || return 0
      runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -c 'CHECKPOINT'
      ;;
    postgresql-backup)
      # pg_backup_start and pg_backup_stop (PostgreSQL 15 and later) in one session, held open
      # between pre and post; the label pg_backup_stop returns is kept next to the session's.
      # A pg_backup_start still waiting (its checkpoint) when post comes is cancelled:
      # pg_cancel_backend, "Server Signaling Functions" in the PostgreSQL manual.
      raidsnap_held_session "$phase" postgresql "$seconds" \
        "SELECT 'raidsnap-session ' || pg_backend_pid();"$'\n'"SELECT pg_backup_start('raidsnap', true);" \
        "SELECT * FROM pg_backup_stop(false);" \
        "SELECT pg_cancel_backend({id});" \
        runuser -u postgres -- psql -X -q -A -t -v ON_ERROR_STOP=1
      ;;
    mysql-lock)
      # FLUSH TABLES WITH READ LOCK lasts as long as the session that took it: held open
      # between pre and post, then UNLOCK TABLES. While it waits (for running statements and
      # the tables they hold open) the server takes no writes, and lock_wait_timeout, a year by
      # default, bounds the wait: "This timeout applies to all statements that use metadata
      # locks ... as well as LOCK TABLES, FLUSH TABLES WITH READ LOCK, and HANDLER statements"
      # (MySQL Reference Manual, Server System Variables, lock_wait_timeout; MariaDB: Metadata
      # Locking, lock_wait_timeout). The session's is HookSeconds, and a FLUSH still waiting
      # when post comes is ended at once with KILL QUERY (MySQL Reference Manual, KILL
      # Statement: "terminate the statement the connection is currently executing"), not left
      # to queue UNLOCK TABLES behind it.
      raidsnap_held_session "$phase" mysql "$seconds" \
        "SET SESSION lock_wait_timeout = $seconds;"$'\n'"SELECT CONCAT('raidsnap-session ', CONNECTION_ID());"$'\n'"FLUSH TABLES WITH READ LOCK;" \
        "UNLOCK TABLES;" \
        "KILL QUERY {id};" \
        mysql --batch --skip-column-names
      ;;
    *)
      printf 'unknown ready-made hook %s\n' "$name" >&2
      return 2
      ;;
  esac
}

# raidsnap_held_session PHASE NAME SECONDS START_SQL END_SQL CANCEL_SQL CLIENT...: pre starts
# CLIENT in a session of its own, sends START_SQL (which prints "raidsnap-session <id>" first)
# and a marker query, and returns once the marker came back (the statement before it
# succeeded); post sends END_SQL, ends the session and returns its status. A post that comes
# while START_SQL still runs (pre failed or timed out) ends that statement first: CANCEL_SQL with
# {id} the session's, from a second session; a client still there a few seconds later is killed.
# The session ends by itself after an hour whatever happens to post.
raidsnap_held_session() {
  local phase=$1 name=$2 seconds=$3 start_sql=$4 end_sql=$5 cancel_sql=$6
  shift 6
  local dir=$hook_dir/$name-${hook_key:-none}
  if [[ $phase == pre ]]; then
    rm -rf "$dir" && mkdir -p "$dir" && chmod 0700 "$dir" && mkfifo "$dir/in"
    # The holder keeps the fifo's write end open, feeds the client and waits for release. A
    # client that ended (it failed) leaves no reader: the holder ignores SIGPIPE, so that it
    # still records the client's status and pre reports the client's error at once.
    # shellcheck disable=SC2016 # the program is the holder's, expanded by its own bash
    setsid nohup bash -c '
      trap "" PIPE
      dir=$1 start_sql=$2 end_sql=$3; shift 3
      "$@" <"$dir/in" >"$dir/out" 2>&1 &
      client=$!
      echo "$client" >"$dir/client"
      exec 3>"$dir/in"
      printf "%s\nSELECT '\''raidsnap-held'\'';\n" "$start_sql" >&3 2>/dev/null
      for _ in $(seq 1 36000); do
        [[ -e $dir/release ]] && break
        kill -0 "$client" 2>/dev/null || break
        sleep 0.1
      done
      printf "%s\nSELECT '\''raidsnap-released'\'';\n" "$end_sql" >&3 2>/dev/null
      exec 3>&-
      wait "$client"; echo "$?" >"$dir/rc"
    ' raidsnap-held-session "$dir" "$start_sql" "$end_sql" "$@" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 1 $((seconds * 10))); do
      if grep -qx 'raidsnap-held' "$dir/out" 2>/dev/null; then return 0; fi
      if [[ -e $dir/rc ]]; then break; fi
      sleep 0.1
    done
    cat "$dir/out" >&2 2>/dev/null || true
    return 1
  fi
  [[ -d $dir ]] || return 0
  if ! grep -qx 'raidsnap-held' "$dir/out" 2>/dev/null; then
    raidsnap_cancel_session "$dir" "$cancel_sql" "$@"
    return
  fi
  touch "$dir/release"
  for _ in $(seq 1 $((seconds * 10))); do
    [[ -e $dir/rc ]] && break
    sleep 0.1
  done
  cat "$dir/out" >&2 2>/dev/null || true
  [[ $(cat "$dir/rc" 2>/dev/null) == 0 ]] && grep -qx 'raidsnap-released' "$dir/out"
}

# raidsnap_cancel_session DIR CANCEL_SQL CLIENT...: the session's start statement never
# succeeded; end it (CANCEL_SQL from a second session), then the session. True if the session
# ended by itself or by the cancel (the database holds nothing of it); false if its client had
# to be killed (what the server still does for it is then bounded by its own timeout only).
raidsnap_cancel_session() {
  local dir=$1 cancel_sql=$2 id client
  shift 2
  id=$(sed -n 's/^raidsnap-session \([0-9][0-9]*\)$/\1/p;T;q' "$dir/out" 2>/dev/null)
  if [[ -n $id && ! -e $dir/rc ]]; then
    timeout --kill-after=2 10 "$@" <<<"${cancel_sql//\{id\}/$id}" >&2 || true
  fi
  touch "$dir/release"
  for _ in $(seq 1 50); do
    [[ -e $dir/rc ]] && break
    sleep 0.1
  done
  cat "$dir/out" >&2 2>/dev/null || true
  [[ ! -e $dir/rc ]] || return 0
  client=$(cat "$dir/client" 2>/dev/null || true)
  [[ $client =~ ^[0-9]+$ ]] && kill -KILL "$client" 2>/dev/null
  printf 'the session of the pre-snapshot hook did not end: its client (pid %s) was killed\n' "${client:-unknown}" >&2
  return 1
}

# Ready-made hooks that hold the database between pre and post: only their own post phase lets
# it go, so a freeze that runs one as its pre hook always owes that same hook as its post hook.
holding_builtin() {
  [[ $1 == builtin:postgresql-backup || $1 == builtin:mysql-lock ]]
}
