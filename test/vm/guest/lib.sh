# shellcheck shell=bash
# Sourced by every scenario inside the VM.
# The deployed scripts as files, each as its document carries it with its libraries inlined
# (vmlib.boot writes them), for what runs a script by hand (the injection test's raw-script path,
# an operator's thaw); shellcheck: used by the scenarios that source this file.
# shellcheck disable=SC2034
S=/work/scripts

# ssm NAME [OUT]: run the command the host rendered from the deployed document (vmlib.Commands) the
# way the SSM agent runs aws:runShellScript: its _script.sh written at the agent's path with mode
# 0700, started as `sh -c <path>` from the agent's working directory with exactly the agent's
# environment (its own plus SSM_COMMAND_ID, the ENV_VAR parameters and AWS_SSM_*), in a process
# group of its own (setsid: a session too; nothing here has a terminal). Keeps what an operator
# would see: stdout, stderr and the exit status, in OUT.stdout/.stderr/.rc (default /work/NAME).
ssm() {
  local out=${2:-/work/$1} d=/work/cmd/$1 path cwd
  local -a vars=()
  path=$(cat "$d/path")
  cwd=$(cat "$d/cwd")
  mkdir -p "${path%/*}" "$cwd"
  cp "$d/_script.sh" "$path"
  chmod 0700 "$path"
  mapfile -d '' -t vars <"$d/env"
  (cd "$cwd" && exec setsid -w env -i "${vars[@]}" sh -c "$path") \
    </dev/null >"$out.stdout" 2>"$out.stderr"
  echo $? >"$out.rc"
}

# ssm_start NAME: start the rendered command in the background, as the agent starts it (a process
# group of its own); its group id, which `wait` takes, goes to /work/NAME.pgid.
ssm_start() {
  local out=/work/$1 d=/work/cmd/$1 path cwd
  local -a vars=()
  path=$(cat "$d/path")
  cwd=$(cat "$d/cwd")
  mkdir -p "${path%/*}" "$cwd"
  cp "$d/_script.sh" "$path"
  chmod 0700 "$path"
  mapfile -d '' -t vars <"$d/env"
  (cd "$cwd" && exec setsid env -i "${vars[@]}" sh -c "$path") \
    </dev/null >"$out.stdout" 2>"$out.stderr" &
  echo $! >"$out.pgid"
}

by_id() { readlink -f "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_$1"; }

# Keep a copy of a guest file for the host (missing files are left out).
keep() { [ -f "$1" ] && cp "$1" "/work/$2"; return 0; }

# md_links: what mdadm's udev rule 63-md-raid-arrays.rules does for every running array on a real
# boot (SYMLINK+="disk/by-id/md-uuid-$env{MD_UUID}", MD_UUID from mdadm --detail --export), for
# the scenarios that assemble without udevd; fstab names restored arrays by these links.
md_links() {
  local md u
  mkdir -p /dev/disk/by-id
  for md in /sys/block/md*; do
    [ -d "$md/md" ] || continue
    u=$(mdadm --detail --export "/dev/${md##*/}" 2>/dev/null | sed -n 's/^MD_UUID=//p')
    [ -n "$u" ] && ln -sfn "../../${md##*/}" "/dev/disk/by-id/md-uuid-$u"
  done
  return 0
}

# ebs_relink: the EBS by-id links again, after disks were detached or attached (a PCI remove or
# rescan gives them new kernel names), as udev's rule would.
ebs_relink() {
  local ns dev serial
  rm -f /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_*
  for ns in /sys/block/nvme*n*; do
    [ -e "$ns" ] || continue
    dev=${ns##*/}
    serial=$(ebs-serial "$dev")
    [ -n "$serial" ] && ln -sfn "../../$dev" "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_$serial"
  done
  return 0
}

# detach SERIAL...: take the disks away as a detach does (the NVMe controller leaves the bus).
detach() {
  local s d
  for s in "$@"; do
    d=$(by_id "$s")
    echo 1 >"/sys/block/${d#/dev/}/device/device/remove"
  done
  ebs_relink
}

# reattach: bring every detached disk back (a PCI rescan), as attaching the volumes again does.
reattach() {
  echo 1 >/sys/bus/pci/rescan
  sleep 1
  ebs_relink
}
