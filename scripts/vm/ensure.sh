#!/usr/bin/env bash
# Prepare everything the VM test suite needs, idempotently:
#   1. Debian packages on the host (QEMU, mdadm, fio, filesystem tools, udev),
#   2. a distribution kernel unpacked into .cache/vm/ (the host's /boot is never touched),
#   3. an uncompressed initramfs holding bash, util-linux, mdadm, fio, udev, the md/nvme/fs
#      modules and our init.
# The result lives in .cache/vm/<hash-of-inputs>/ and .cache/vm/current points at it, so a
# second run with unchanged inputs only checks and returns.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$repo/scripts/vm"
cache="$repo/.cache/vm"
mkdir -p "$cache"

log() { printf 'ensure: %s\n' "$*" >&2; }

host_packages=(qemu-system-x86 mdadm fio busybox-static e2fsprogs xfsprogs nvme-cli cpio kmod
               util-linux udev coreutils grep sed mawk findutils procps xz-utils zstd
               postgresql-15)
# The guest runs a real PostgreSQL server for the ready-made hooks' tests; its binaries come
# from the host's package like every other guest tool.
pg_version=15

# The PostgreSQL server package makes and starts a default cluster on the host when it is
# configured, which nothing here uses. Its postinst asks postgresql-common's createcluster.conf
# (pg_conftool ... show create_main_cluster), whose stock text ends with
# `include_dir '/etc/postgresql-common/createcluster.d'`: a setting there turns the cluster off,
# whether postgresql-common is installed already or comes with the server.
pg_common=/etc/postgresql-common
no_host_cluster() {
  local p drop_in="$pg_common/createcluster.d/raidsnap-vm.conf"
  for p in "$@"; do
    if [[ $p == postgresql-[0-9]* && ! -e $drop_in ]]; then
      mkdir -p "${drop_in%/*}"
      printf 'create_main_cluster = false\n' >"$drop_in"
      log "wrote $drop_in (no default cluster on this host)"
      return 0
    fi
  done
}

ensure_packages() {
  local missing=() p status policy
  for p in "${host_packages[@]}"; do
    # Captured first, then tested: under pipefail, `producer | grep -q` fails whenever grep
    # exits at its first match and the producer dies of SIGPIPE.
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [[ $status != *'install ok installed'* ]]; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  log "installing: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    log "not root: cannot install ${missing[*]}"; exit 1
  fi
  no_host_cluster "${missing[@]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  for p in "${missing[@]}"; do
    policy=$(apt-cache policy "$p" 2>/dev/null || true)
    if ! [[ $policy =~ Candidate:\ [0-9] ]]; then
      log "package $p has no installation candidate"; exit 1
    fi
  done
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The metapackage only depends on the versioned image package; that one carries the files.
kernel_package() {
  local pkg deps
  # awk reads to the end (no early exit) so apt-cache is never cut off by SIGPIPE.
  deps=$(apt-cache depends linux-image-amd64 2>/dev/null || true)
  pkg=$(awk '/Depends: linux-image-[0-9]/ && !found {print $2; found=1}' <<<"$deps")
  if [[ -z $pkg ]]; then
    apt-get update -qq
    deps=$(apt-cache depends linux-image-amd64)
    pkg=$(awk '/Depends: linux-image-[0-9]/ && !found {print $2; found=1}' <<<"$deps")
  fi
  [[ -n $pkg ]] || { log "cannot resolve linux-image-amd64"; exit 1; }
  printf '%s\n' "$pkg"
}

ensure_kernel() {
  local pkg=$1 ver dir deb
  ver=$(apt-cache policy "$pkg" | awk '/Candidate:/{print $2}')
  dir="$cache/kernel/${pkg}_${ver}"
  if [[ ! -f $dir/.unpacked ]]; then
    log "downloading $pkg $ver"
    rm -rf "$dir"; mkdir -p "$dir/root"
    (cd "$dir" && apt-get download -qq "$pkg=$ver")
    deb=$(ls "$dir"/*.deb)
    dpkg-deb -x "$deb" "$dir/root"
    rm -f "$deb"
    touch "$dir/.unpacked"
  fi
  printf '%s\n' "$dir/root"
}

# Binaries the on-instance scripts and the test scenarios call; copied from the host together
# with their shared libraries so the guest runs the same tools a Debian instance has.
guest_binaries=(
  bash mdadm fio mkfs.ext4 mke2fs mkfs.xfs xfs_admin e2fsck fsfreeze blockdev blkid findmnt lsblk
  mount umount mountpoint setsid flock wipefs sfdisk nvme udevadm
  cat cp mv rm ln ls mkdir rmdir touch chmod stat sort uniq head tail tr cut wc date sleep timeout
  dd sync sha256sum od readlink realpath basename dirname env id printf echo test seq nohup kill
  true false tee stdbuf mktemp comm paste expr sum md5sum du df
  grep sed mawk awk find xargs ps pgrep pkill setpriv runuser
)

copy_with_libs() {
  local root=$1 bin=$2 real lib
  real=$(readlink -f "$bin")
  install -D -m 0755 "$real" "$root$bin"
  while read -r lib; do
    [[ -n $lib && -e $lib ]] || continue
    if [[ ! -e $root$lib ]]; then
      install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
    fi
  done < <(ldd "$real" 2>/dev/null | awk '/=> \//{print $3} /^\t\/lib/{print $1}')
}

# PostgreSQL in the guest: the server, initdb, pg_ctl and psql (psql on PATH as itself, not
# Debian's wrapper), the modules initdb loads (plpgsql, snowball dictionaries), its share files, a
# zone file, the postgres user, and the PAM policy runuser needs (root may run as anyone).
add_postgresql() {
  local root=$1 pg=/usr/lib/postgresql/$pg_version b sec=/usr/lib/x86_64-linux-gnu/security
  for b in postgres initdb pg_ctl psql pg_controldata; do copy_with_libs "$root" "$pg/bin/$b"; done
  for b in plpgsql dict_snowball; do copy_with_libs "$root" "$pg/lib/$b.so"; done
  ln -sf "../lib/postgresql/$pg_version/bin/psql" "$root/usr/bin/psql"
  mkdir -p "$root/usr/share/postgresql" "$root/usr/share/zoneinfo" "$root/etc/pam.d" "$root$sec"
  cp -a "/usr/share/postgresql/$pg_version" "$root/usr/share/postgresql/"
  cp -L /usr/share/zoneinfo/UTC "$root/usr/share/zoneinfo/UTC"
  cp -L "$sec/pam_rootok.so" "$sec/pam_permit.so" "$root$sec/"
  printf 'auth sufficient pam_rootok.so\naccount required pam_permit.so\nsession required pam_permit.so\n' \
    >"$root/etc/pam.d/runuser"
  printf 'postgres:x:101:105::/var/lib/postgresql:/bin/bash\n' >>"$root/etc/passwd"
  printf 'postgres:x:105:\n' >>"$root/etc/group"
}

build_initramfs() {
  local kroot=$1 out=$2 kver root b path m
  kver=$(ls "$kroot/lib/modules")
  root=$(mktemp -d "$cache/build.XXXXXX")
  # mktemp makes it 0700; it becomes the guest's /, which users other than root (postgres) cross.
  chmod 0755 "$root"
  mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,run,tmp,mnt,work,opt/raidsnap/scripts,var/tmp,root}
  # A merged-/usr layout, with relative links so paths resolve inside the image.
  chmod 1777 "$root/tmp" "$root/var/tmp"
  ln -s usr/bin "$root/bin"; ln -s usr/sbin "$root/sbin"; ln -s usr/lib "$root/lib"; ln -s usr/lib64 "$root/lib64"

  for b in "${guest_binaries[@]}"; do
    path=$(type -P "$b" 2>/dev/null || true)
    if [[ -z $path ]]; then
      log "warning: $b not found on host, the guest will use busybox's or lack it"; continue
    fi
    copy_with_libs "$root" "$path"
  done
  # systemd-udevd is udevadm under another name.
  ln -sf /usr/bin/udevadm "$root/usr/lib/systemd-udevd" 2>/dev/null || true
  mkdir -p "$root/usr/lib/systemd" && ln -sf /usr/bin/udevadm "$root/usr/lib/systemd/systemd-udevd"
  # Name-service modules so udev can resolve the groups its rules mention.
  b=/lib/x86_64-linux-gnu/libnss_files.so.2
  if [[ -e $b ]]; then install -D "$(readlink -f "$b")" "$root$b"; fi

  install -m 0755 "$(command -v busybox)" "$root/usr/bin/busybox"
  while read -r b; do
    [[ -e $root/usr/bin/$b || -e $root/usr/sbin/$b ]] || ln -s busybox "$root/usr/bin/$b"
  done < <("$root/usr/bin/busybox" --list)

  # udev: the distribution's rules (including mdadm's incremental assembly) plus our own.
  mkdir -p "$root/usr/lib/udev/rules.d" "$root/etc/udev/rules.d"
  cp -a /usr/lib/udev/rules.d/. "$root/usr/lib/udev/rules.d/"
  [[ -f /etc/udev/udev.conf ]] && cp /etc/udev/udev.conf "$root/etc/udev/udev.conf"
  install -m 0644 "$here/guest/70-ebs-by-id.rules" "$root/etc/udev/rules.d/70-ebs-by-id.rules"
  install -m 0755 "$here/guest/ebs-serial" "$root/usr/sbin/ebs-serial"
  install -m 0755 "$here/guest/init" "$root/init"
  printf 'root:x:0:0:root:/root:/bin/bash\n' >"$root/etc/passwd"
  printf 'root:x:0:\ndisk:x:6:\ntty:x:5:\nkmem:x:15:\ninput:x:101:\nkvm:x:102:\nsgx:x:103:\nrender:x:104:\naudio:x:29:\nvideo:x:44:\ncdrom:x:24:\ndialout:x:20:\ntape:x:26:\n' >"$root/etc/group"
  printf 'passwd: files\ngroup: files\n' >"$root/etc/nsswitch.conf"
  add_postgresql "$root"
  mkdir -p "$root/etc/mdadm"
  printf 'HOMEHOST <system>\n' >"$root/etc/mdadm/mdadm.conf"
  : >"$root/etc/fstab"

  # Modules in dependency order, decompressed so busybox insmod can load them.
  depmod -b "$kroot" "$kver"
  mkdir -p "$root/lib/modules"
  : >"$root/etc/modules.order"
  local wanted=(crc32c_generic crc32_generic libcrc32c crc16 virtio_pci 9pnet_virtio 9p nvme
                md_mod raid0 raid1 raid10 raid456 ext4 xfs)
  for m in "${wanted[@]}"; do
    while read -r kind path _; do
      [[ $kind == insmod ]] || continue
      local name; name=$(basename "$path")
      name=${name%.xz}; name=${name%.zst}
      grep -qx "$name" "$root/etc/modules.order" && continue
      case $path in
        *.xz) xz -dc "$path" >"$root/lib/modules/$name" ;;
        *.zst) zstd -qdc "$path" >"$root/lib/modules/$name" ;;
        *) cp "$path" "$root/lib/modules/$name" ;;
      esac
      printf '%s\n' "$name" >>"$root/etc/modules.order"
    done < <(modprobe -d "$kroot" -S "$kver" --show-depends "$m" 2>/dev/null || true)
  done
  grep -q '^md-mod.ko$\|^md_mod.ko$' "$root/etc/modules.order" || { log "md module missing"; exit 1; }

  mkdir -p "$out.tmp"
  (cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$out.tmp/initrd.cpio"
  cp "$kroot/boot/vmlinuz-$kver" "$out.tmp/vmlinuz"
  printf '%s\n' "$kver" >"$out.tmp/kver"
  rm -rf "$out" "$root"; mv "$out.tmp" "$out"
}

main() {
  ensure_packages
  local kpkg kroot key out
  kpkg=$(kernel_package)
  kroot=$(ensure_kernel "$kpkg")
  key=$( {
      cat "$here/ensure.sh" "$here/guest/init" "$here/guest/70-ebs-by-id.rules" "$here/guest/ebs-serial"
      printf '%s\n' "$kroot" "${guest_binaries[@]}"
      dpkg-query -W "${host_packages[@]}" 2>/dev/null
    } | sha256sum | cut -c1-16)
  out="$cache/$key"
  if [[ -f $out/initrd.cpio && -f $out/vmlinuz ]]; then
    log "up to date ($out)"
  else
    log "building initramfs into $out"
    build_initramfs "$kroot" "$out"
    log "initramfs $(du -h "$out/initrd.cpio" | cut -f1)"
  fi
  ln -sfn "$key" "$cache/current"
  printf '%s\n' "$out"
}

# Sourced (for example by a test of one function), it defines the functions and runs nothing.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
