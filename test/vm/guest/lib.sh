# shellcheck shell=bash
# Sourced by every scenario inside the VM.
S=${RAIDSNAP_SCRIPTS:-/opt/raidsnap/scripts}

# run NAME SCRIPT [VAR=VALUE...]: run an on-instance script the way SSM does (parameters as
# SSM_* environment variables) and keep what an operator would see.
run() {
  local name=$1 script=$2
  shift 2
  env "$@" bash "$S/$script" >"/work/$name.stdout" 2>"/work/$name.stderr"
  echo $? >"/work/$name.rc"
}

by_id() { readlink -f "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_$1"; }

# Keep a copy of a guest file for the host (missing files are left out).
keep() { [ -f "$1" ] && cp "$1" "/work/$2"; return 0; }
