"""Hostile parameter values. Every document, every parameter, every hostile string, with the
other parameters valid and a real RAID 0 array assembled and mounted.

First, as Systems Manager sees them: each value is sent to the deployed document through the
renderer (raidsnap_emulation.ssm_agent). SendCommand refuses every hostile string its
allowedPattern refuses as the agent checks it (all of them but mount points that are
well-formed paths; a valid value with a trailing newline fails Go's `$`). What is accepted runs
as the agent runs it (``ssm``, guest/lib.sh).

Then, as defence in depth, what SendCommand refused is still fed to the scripts: the RAW-SCRIPT
PATH below (the runner and the exec replays) runs a script with a hand-made environment on
purpose, as a hand-run or a copy of a document without the patterns would. It exists only for
this check. Either way each run is refused as InvalidInput (or, where the value is in fact valid,
behaves normally), no injected command ran, no member was written, no array was started or
stopped, nothing was mounted or unmounted, and fstab/mdadm.conf are as they were; every run's
last line fits its script's output schema.

Mount points that are system directories are refused too, by every script that mounts, freezes
or unmounts (thaw only unfreezes, and may): "/", /etc, /usr/lib, /var, a link /mnt/evil -> /etc,
and, for assemble, a directory below one that a user owns. Before the array is assembled at all,
assemble is also run with each of them on members it could otherwise assemble and mount, with
Persist=true: it must leave no array, mount, fstab or mdadm.conf line behind.

All cases run in one boot (plus the session's boot that makes the array); the guest checks the
machine's state after every single case, the host hashes the member images around the boot."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from vmlib import (
    REPO,
    Boot,
    Commands,
    Disk,
    blank_disk,
    boot,
    copy_disk,
    deployed_documents,
    new_volume_id,
)

from conftest import record
from raidsnap_emulation import script_outputs
from raidsnap_emulation.ssm_agent import InvalidParametersError, render

pytestmark = pytest.mark.vm

MOUNT_POINT = "/data"
MD_DEVICE = "/dev/md0"
ARRAY_NAME = "inj"

# What each script reads: its document's parameters (checked against ssm/documents below).
PARAMETERS: dict[str, list[str]] = {
    "discover": ["ArrayName"],
    "freeze": [
        "MountPoint",
        "MaxFreezeSeconds",
        "FreezeToken",
        "PreSnapshot",
        "PostSnapshot",
        "HookSeconds",
        "Freeze",
    ],
    "thaw": ["MountPoint", "MaxFreezeSeconds", "FreezeToken", "PostSnapshot", "HookSeconds"],
    "assemble": [
        "VolumeIds",
        "MdUuid",
        "NewMdUuid",
        "MdDevice",
        "MountPoint",
        "OwnMountPoint",
        "ReadOnly",
        "Persist",
    ],
    "release": ["MdDevice", "MdUuid", "MountPoint", "OwnMountPoint"],
    "prewarm": ["VolumeIds", "Method"],
}

# Values that are valid for the parameter although hostile-looking: (script, param, string id).
# thaw accepts MaxFreezeSeconds only to share the freeze parameter set and ignores it; an empty
# value counts as absent there, and a thaw of a filesystem that is not frozen changes nothing.
# An empty FreezeToken is freeze's default: the script makes a token and prints it.
VALID_ANYWAY = {("thaw", "MaxFreezeSeconds", "empty")}

# Strings that are a parameter's documented default, not an attack on it, so no case is made:
# an empty FreezeToken makes freeze choose its own token (a real freeze), an empty MdUuid is
# release's hand run that checks no UUID (a real release), an empty NewMdUuid is assemble's hand
# run that generates the new identity.
NOT_HOSTILE = {
    ("freeze", "FreezeToken", "empty"),
    ("release", "MdUuid", "empty"),
    ("assemble", "NewMdUuid", "empty"),
}
# An empty hook is the hooks' default (none). And a hook is a command line by design: an
# absolute path and its arguments, run as that argument vector (lib/hooks.sh), so
# "/dev/md0 --zero-superblock" is a well-formed hook naming a program and its argument, not an
# injection; whoever configures hooks chooses what runs. Every string that would need a shell
# (;, $(), backticks, newlines, globs, $HOME) is still a case for every hook parameter.
HOOKS = (("freeze", "PreSnapshot"), ("freeze", "PostSnapshot"), ("thaw", "PostSnapshot"))
NOT_HOSTILE |= {
    (script, param, sid) for script, param in HOOKS for sid in ("empty", "zero-superblock")
}

# The token a backup's freeze and thaw share (32 lowercase hex digits).
TOKEN = "0123456789abcdef0123456789abcdef"  # noqa: S105 - a freeze token, not a secret

# Strings whose cases run a second time by exec, as SSM runs the script (see GUEST).
REPLAYED = ("empty",)

# Mount points that are, lie under, or lead to a system directory (the guest makes /mnt/evil a
# link to /etc and /home/alice a directory of uid 1000 before anything runs).
SYSTEM_MOUNT_POINTS = {
    "sys-etc": "/etc",
    "sys-usr-lib": "/usr/lib",
    "sys-root": "/",
    "sys-var": "/var",
    "sys-link-to-etc": "/mnt/evil",
    "sys-link-below-etc": "/mnt/evil/cron.d",
    "sys-user-owned-parent": "/home/alice/data",
}
# The user-owned parent is assemble's own check (a user could swap it for a link before the
# mount); freeze and release run on what is mounted already.
SYSTEM_SCRIPTS = {
    "assemble": list(SYSTEM_MOUNT_POINTS),
    "release": [k for k in SYSTEM_MOUNT_POINTS if k != "sys-user-owned-parent"],
    "freeze": [k for k in SYSTEM_MOUNT_POINTS if k != "sys-user-owned-parent"],
    # A thaw must always be able to end a freeze, and fsfreeze -u hides or writes nothing: it
    # takes any path the pattern allows ("/" is not one) and must change nothing.
    "thaw": [k for k in SYSTEM_MOUNT_POINTS if k not in ("sys-user-owned-parent",)],
}
VALID_ANYWAY |= {("thaw", "MountPoint", k) for k in SYSTEM_MOUNT_POINTS if k != "sys-root"}

Case = tuple[str, str, str, str, str]  # script, parameter, string id, value, how
# how: agent (SendCommand accepted it: run as the agent runs it), fork or exec (SendCommand
# refused it: the raw-script path, defence in depth).

# Hostile strings the agent's parameter check may accept: a well-formed path is a well-formed path
# (the scripts' own rules refuse the system ones). A final newline fails Go's `$`, so the
# newline forms never reach a script through the agent; they still reach it raw, below.
SSM_MAY_ACCEPT = ("sys-",)


def accepted_by_ssm(script: str, params: dict[str, str]) -> bool:
    try:
        render(deployed_documents()[script], {k: [v] for k, v in params.items()})
    except InvalidParametersError:
        return False
    return True


def hostile(valid: str, n: int) -> dict[str, str]:
    """The hostile strings for case number n, by a short id. {valid} prefixes test that a good
    value with something appended is still refused (what a search-not-match check would let by)."""
    pw = f"/tmp/pwned-{n}"
    return {
        "rm-rf": "; rm -rf /",
        "dollar-paren": f"$(touch {pw})",
        "backticks": f"`touch {pw}`",
        "newline": f"a\ntouch {pw}",
        "valid-newline": f"{valid}\ntouch {pw}",
        "valid-trailing-newline": f"{valid}\n",
        "valid-dollar-paren": f"{valid}$(touch {pw})",
        "valid-semicolon": f"{valid};touch {pw}",
        "dotdot": "../../etc",
        "data-dotdot": "/data/../../etc",
        "dash-rf": "-rf",
        "dash-force": "--force",
        "5000-chars": (valid * 5000)[:5000],
        "glob": "*",
        "home": "$HOME",
        "empty": "",
        "escape": "\x1b[2J",
        "zero-superblock": "/dev/md0 --zero-superblock",
    }


STRING_IDS = list(hostile("x", 0))


def bash_quote(value: str) -> str:
    """$'...' with every byte that is not a letter or digit as \\xHH: inert in any bash context."""
    raw = value.encode()
    return (
        "$'" + "".join(chr(b) if chr(b).isalnum() and b < 128 else f"\\x{b:02x}" for b in raw) + "'"
    )


@dataclass
class SmallArray:
    disks: list[Disk]
    uuid: str


@pytest.fixture(scope="session")
def small_raid0(tmp_path_factory: pytest.TempPathFactory) -> SmallArray:
    """2 x 32 MiB RAID 0 with ext4 and one file, made in a short boot of its own (the other
    tests' sets hold ~80 MB of data, which nothing here needs; prewarm reads all of it)."""
    work = tmp_path_factory.mktemp("injection-raid0")
    rng = random.Random("injection")
    disks = [blank_disk(work / f"m{i}.img", 32, new_volume_id(rng)) for i in range(2)]
    members = " ".join(f"$(by_id {d.serial})" for d in disks)
    scenario = f"""
set -e
mdadm --create /dev/md0 --run --assume-clean --level=0 --chunk=64 --raid-devices=2 \\
  --metadata=1.2 --name={ARRAY_NAME} --homehost=srchost {members}
mkfs.ext4 -q -F /dev/md0
mkdir -p /data && mount /dev/md0 /data
mkdir /data/db && echo precious >/data/db/file
umount /data
mdadm --detail --export /dev/md0 >/work/detail
mdadm --stop /dev/md0
"""
    b = record("create raid0 x2 ext4 (small)", boot(work / "vm", scenario, disks))
    assert b.rc == 0, b.text("scenario.stderr")[-3000:]
    detail = dict(line.split("=", 1) for line in b.text("detail").splitlines() if "=" in line)
    return SmallArray(disks=disks, uuid=detail["MD_UUID"])


# Runs every case; after each, compares a fingerprint of the machine's state with the one before:
# /proc/mdstat, the mount table, fstab and both mdadm.conf paths, writes counted by every NVMe
# disk and md device, and the names in /, /tmp, /run, /run/raidsnap, /etc and the mount point.
# Reads are builtins only (no fork), so one case costs little more than the script itself.
GUEST = r"""
echo "start $EPOCHREALTIME" >>/work/times
shopt -s nullglob
. /work/cases.sh
mkdir -p /run/inj /var/lib/amazon/ssm
CLEAN=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root)
mkdir -p /mnt /home/alice && ln -s /etc /mnt/evil && chown 1000:1000 /home/alice
fingerprint() {
  local f d g t
  local -a lines st
  FP=""
  for f in /proc/mdstat /proc/self/mountinfo /etc/fstab /etc/mdadm/mdadm.conf /etc/mdadm.conf; do
    FP+="== $f"$'\n'
    if [[ -e $f ]]; then
      mapfile -t lines <"$f"
      printf -v t '%s\n' "${lines[@]}"
      FP+=$t
    fi
  done
  for d in /sys/block/nvme* /sys/block/md*; do
    read -r -a st <"$d/stat"
    FP+="$d writes=${st[4]} sectors=${st[6]}"$'\n'
  done
  for g in /* /tmp/* /run/* /run/raidsnap/* /etc/* /etc/mdadm/* /data/* /mnt/* /home/alice/* \
    /work/pwned*; do
    FP+="$g"$'\n'
  done
}
keep_state() {
  cat /proc/mdstat >"/work/$1.mdstat"
  findmnt -rn -o TARGET,SOURCE,FSTYPE,OPTIONS >"/work/$1.mounts"
  cat /etc/fstab >"/work/$1.fstab"
  cat /etc/mdadm/mdadm.conf >"/work/$1.mdadm.conf"
}

# Before the array exists: assemble with a system mount point, on members it could assemble and
# mount, persisting; each must be refused and leave the machine exactly as it was.
pre_state() {
  cat /proc/mdstat
  findmnt -rn -o TARGET,SOURCE,FSTYPE,OPTIONS
  cat /etc/fstab /etc/mdadm/mdadm.conf /etc/mdadm.conf 2>&1
  ls -A /
  ls -lAn --time-style=+%s /etc /usr/lib /var /mnt /home /home/alice 2>&1
}
pre_state >/work/pre.before
for i in "${!PRE_MP[@]}"; do
  if [[ ${PRE_HOW[i]} == agent ]]; then
    ssm "pre-$i"
    continue
  fi
  # Raw-script path (SendCommand refused this mount point): defence in depth only.
  "${CLEAN[@]}" SSM_VolumeIds="$VOLS" SSM_MdUuid="$MD_UUID" SSM_MdDevice=/dev/md0 \
    SSM_MountPoint="${PRE_MP[i]}" SSM_ReadOnly=false SSM_Persist=true \
    RAIDSNAP_DEVICE_WAIT_SECONDS=3 bash "$S/assemble.sh" \
    </dev/null >"/work/pre-$i.stdout" 2>"/work/pre-$i.stderr"
  echo $? >"/work/pre-$i.rc"
done
pre_state >/work/pre.after

# The array: assembled read-write by plain mdadm (not by the scripts under test), filesystem
# mounted read-only, so that nothing writes to the members unless a script does.
mdadm --assemble /dev/md0 --uuid="$MD_UUID" $(for s in $SERIALS; do by_id "$s"; done) \
  >/work/setup.log 2>&1
mkdir -p /data && mount -o ro /dev/md0 /data
printf '# fstab of the injection test\ntmpfs /scratch tmpfs defaults 0 0\n' >/etc/fstab
printf 'ARRAY /dev/md0 metadata=1.2 UUID=%s\n' "$MD_UUID" >>/etc/mdadm/mdadm.conf
: >/tmp/canary

# Controls: the base values pass every script's checks (so a refusal below is the injected
# parameter's doing). Release gets a device that is not the one at the mount point, so it
# validates, then refuses to touch anything.
control() {
  local name=$1 t0=$EPOCHREALTIME
  ssm "control-$name"
  echo "control $name $t0 $EPOCHREALTIME" >>/work/times
}
control discover
control assemble
control prewarm
control thaw
control freeze
control thaw-after-freeze
control release
sync
keep_state before

# Each case runs in a subshell forked from a runner: a bash started with an empty environment
# that defines nothing but its loop variables, and sources the script's own bytes. That is how
# `bash script.sh` runs them, without paying for an exec per case (0.2-0.4 s under emulation);
# the cases marked exec are run a second time exactly as SSM does, and must give the same result.
# The runner reads a copy of the scripts in memory rather than over the 9p share: same bytes.
mkdir -p /run/inj/scripts && cp "$S"/*.sh /run/inj/scripts/
cat >/run/inj/runner.sh <<'RUNNER'
while IFS= read -r -d '' __f && IFS= read -r -d '' __n; do
  __a=()
  while ((__n-- > 0)); do IFS= read -r -d '' __v; __a+=("$__v"); done
  (export "${__a[@]}"; unset -v __a __v __n; . "$__f") </dev/null >/run/inj/out 2>/run/inj/err
  printf '%s\n' "$?"
done
RUNNER
coproc RUNNER { exec "${CLEAN[@]}" bash --noprofile --norc /run/inj/runner.sh; }

exec 3>/run/inj/results.tsv
loop_start=$EPOCHREALTIME
fingerprint
before=$FP
for i in "${!V[@]}"; do
  script=${SCRIPT[i]} param=${PARAM[i]}
  declare -n base="B_$script"
  args=()
  for a in "${base[@]}"; do
    [[ $a == "SSM_$param="* ]] || args+=("$a")
  done
  unset -n base
  args+=("SSM_$param=${V[i]}")
  if [[ ${HOW[i]} == agent ]]; then
    ssm "case-$i" /run/inj/agent
    rc=$(</run/inj/agent.rc)
    mv /run/inj/agent.stdout /run/inj/out
    mv /run/inj/agent.stderr /run/inj/err
  elif [[ ${HOW[i]} == exec ]]; then
    "${CLEAN[@]}" "${args[@]}" bash "$S/$script.sh" </dev/null >/run/inj/out 2>/run/inj/err
    rc=$?
  else
    printf '%s\0' "/run/inj/scripts/$script.sh" "${#args[@]}" "${args[@]}" >&"${RUNNER[1]}"
    read -r rc <&"${RUNNER[0]}"
  fi
  mapfile -t out </run/inj/out
  last=""
  ((${#out[@]})) && last=${out[${#out[@]} - 1]}
  fingerprint
  changed=0
  if [[ $FP != "$before" ]]; then
    changed=1
    printf '%s' "$before" >"/work/fp-$i.before"
    printf '%s' "$FP" >"/work/fp-$i.after"
    before=$FP
  fi
  pwned=(/tmp/pwned-* /pwned* /work/pwned*)
  [[ $rc == 2 ]] || cp /run/inj/err "/work/stderr-$i"
  printf '%s\t%s\t%s\t%s\t%s\n' "$i" "$rc" "$changed" "${#pwned[@]}" "$last" >&3
done
exec 3>&- {RUNNER[1]}>&-
wait
cp /run/inj/results.tsv /work/results.tsv
echo "$loop_start $EPOCHREALTIME" >/work/loop-time
[[ -e /tmp/canary ]] && echo present >/work/canary
keep_state after
echo "end $EPOCHREALTIME" >>/work/times
"""


def guest_cases(
    disks_vols: str, uuid: str, cmds: Commands
) -> tuple[str, list[Case], dict[str, dict[str, str]]]:
    """cases.sh for the guest, the cases in order, and the base parameters per script: values
    that are valid here and make the script change nothing if it ever got past its checks
    (assemble of an array already assembled and mounted read-only, without persisting; prewarm
    only reads; release is the one exception, so no hostile value may pass it)."""
    base: dict[str, dict[str, str]] = {
        "discover": {"ArrayName": ARRAY_NAME},
        # Hooks that change nothing, so that a hostile value is the one thing wrong with a case.
        "freeze": {
            "MountPoint": MOUNT_POINT,
            "MaxFreezeSeconds": "30",
            "FreezeToken": TOKEN,
            "PreSnapshot": "/bin/true",
            "PostSnapshot": "/bin/true",
            "HookSeconds": "30",
            "Freeze": "true",
        },
        "thaw": {
            "MountPoint": MOUNT_POINT,
            "MaxFreezeSeconds": "30",
            "FreezeToken": TOKEN,
            "PostSnapshot": "/bin/true",
            "HookSeconds": "30",
        },
        "assemble": {
            "VolumeIds": disks_vols,
            "MdUuid": uuid,
            # The array's own identity kept: assemble finds it assembled and changes nothing.
            "NewMdUuid": uuid,
            "MdDevice": MD_DEVICE,
            "MountPoint": MOUNT_POINT,
            "OwnMountPoint": "false",
            "ReadOnly": "true",
            "Persist": "false",
        },
        "release": {
            "MdDevice": MD_DEVICE,
            "MdUuid": uuid,
            "MountPoint": MOUNT_POINT,
            "OwnMountPoint": "false",
        },
        "prewarm": {"VolumeIds": disks_vols, "Method": "dd"},
    }
    assert {s: sorted(p) for s, p in base.items()} == {s: sorted(p) for s, p in PARAMETERS.items()}
    lines = []
    for script, params in base.items():
        entries = " ".join(bash_quote(f"SSM_{k}={v}") for k, v in params.items())
        lines.append(f"B_{script}=({entries})")
    lines.append("B_assemble+=(RAIDSNAP_DEVICE_WAIT_SECONDS=3)")
    slow = {"RAIDSNAP_DEVICE_WAIT_SECONDS": "3"}  # the agent's own environment, passed through
    cases: list[Case] = []
    for script, params in PARAMETERS.items():
        for param in params:
            for sid in STRING_IDS:
                if (script, param, sid) in NOT_HOSTILE:
                    continue
                cases.append(
                    (script, param, sid, hostile(base[script][param], len(cases))[sid], "fork")
                )
    for script, sids in SYSTEM_SCRIPTS.items():
        cases += [(script, "MountPoint", k, SYSTEM_MOUNT_POINTS[k], "fork") for k in sids]
    # What SendCommand accepts runs as the agent runs it; what it refuses takes the raw path.
    for i, (script, param, sid, value, _how) in enumerate(cases):
        params = {**base[script], param: value}
        if accepted_by_ssm(script, params):
            cases[i] = (script, param, sid, value, "agent")
            cmds.ssm(f"case-{i}", script, slow if script == "assemble" else None, **params)
    cases += [(*c[:4], "exec") for c in cases if c[2] in REPLAYED]
    controls = {
        "discover": ("discover", base["discover"]),
        "assemble": ("assemble", base["assemble"]),
        "prewarm": ("prewarm", base["prewarm"]),
        "thaw": ("thaw", base["thaw"]),
        "freeze": (
            "freeze",
            {"MountPoint": "/data", "MaxFreezeSeconds": "30", "FreezeToken": TOKEN},
        ),
        "thaw-after-freeze": ("thaw", {"MountPoint": "/data", "FreezeToken": TOKEN}),
        # A device that is not the one at the mount point: it validates, then touches nothing.
        "release": ("release", {"MdDevice": "/dev/md9", "MountPoint": "/data"}),
    }
    for name, (script, params) in controls.items():
        cmds.ssm(f"control-{name}", script, slow if script == "assemble" else None, **params)
    pre_how = []
    for i, mp in enumerate(SYSTEM_MOUNT_POINTS.values()):
        params = {**base["assemble"], "MountPoint": mp, "ReadOnly": "false", "Persist": "true"}
        if accepted_by_ssm("assemble", params):
            cmds.ssm(f"pre-{i}", "assemble", slow, **params)
            pre_how.append("agent")
        else:
            pre_how.append("raw")
    lines.append(f"PRE_HOW=({' '.join(pre_how)})")
    for i, (script, param, _, value, how) in enumerate(cases):
        lines.append(
            f"SCRIPT[{i}]={script} PARAM[{i}]={param} HOW[{i}]={how} V[{i}]={bash_quote(value)}"
        )
    return "\n".join(lines) + "\n", cases, base


def check_case(b: Boot, i: int, case: Case, row: list[str]) -> list[str]:
    script, param, sid, value, how = case
    where = f"case {i} {script} {param}={value[:60]!r} ({sid}, {how})"
    problems = []
    _, rc, changed, pwned, last = row
    if pwned != "0":
        problems.append(f"{where}: an injected command ran (marker file exists)")
    if changed != "0":
        problems.append(
            f"{where}: the machine's state changed:\n"
            f"{diff(b.text(f'fp-{i}.before'), b.text(f'fp-{i}.after'))}"
        )
    try:
        out = json.loads(last)
        script_outputs.validate(script, last)
    except ValueError as err:
        return [*problems, f"{where}: last line does not fit {script}'s schema: {last!r}; {err}"]
    if (script, param, sid) in VALID_ANYWAY:
        if rc != "0" or out.get("ok") is not True:
            problems.append(f"{where}: a valid value must work: rc={rc} {out}")
    elif not (
        rc == "2"
        and out.get("ok") is False
        and out.get("error") == "InvalidInput"
        and param in out.get("message", "")
    ):
        problems.append(f"{where}: not refused as InvalidInput: rc={rc} {out}")
    return problems


def diff(before: str, after: str) -> str:
    a, b = before.splitlines(), after.splitlines()
    return "\n".join([f"  - {x}" for x in a if x not in b] + [f"  + {x}" for x in b if x not in a])


def test_every_document_and_parameter_is_covered() -> None:
    docs = REPO / "ssm" / "documents"
    assert sorted(p.stem for p in docs.glob("*.yaml")) == sorted(PARAMETERS)
    assert sorted(p.stem for p in (REPO / "ssm" / "scripts").glob("*.sh")) == sorted(PARAMETERS)
    for script, params in PARAMETERS.items():
        doc = yaml.safe_load((docs / f"{script}.yaml").read_text())
        assert sorted(doc["parameters"]) == sorted(params), script


def test_hostile_values_are_refused_and_inert(
    small_raid0: SmallArray, tmp_path: Path, rng: random.Random
) -> None:
    (tmp_path / "disks").mkdir()
    disks = [
        copy_disk(d, tmp_path / "disks" / f"copy{i}.img", new_volume_id(rng))
        for i, d in enumerate(small_raid0.disks)
    ]
    vols = ",".join(d.volume_id for d in disks)
    cmds = Commands()
    cases_sh, cases, base = guest_cases(vols, small_raid0.uuid, cmds)
    scripts = len(PARAMETERS)
    params = sum(len(p) for p in PARAMETERS.values())
    first = [c for c in cases if c[4] != "exec"]
    hostile_cases = [c for c in first if not c[2].startswith("sys-")]
    system = [c for c in first if c[2].startswith("sys-")]
    agent = [c for c in first if c[4] == "agent"]
    pre = list(SYSTEM_MOUNT_POINTS.values())
    label = (
        f"injection: {len(hostile_cases)} cases = {params} parameters of {scripts} scripts"
        f" x {len(STRING_IDS)} hostile strings; {len(system)} system mount points;"
        f" {len(agent)} accepted by SendCommand and run by the agent, the rest raw;"
        f" {len(cases) - len(first)} replayed by exec; {len(pre)} before assembly"
    )
    assert len(hostile_cases) == params * len(STRING_IDS) - len(NOT_HOSTILE)
    # SendCommand itself refuses every hostile string but the ones a pattern search admits.
    let_by = [c[:3] for c in agent if not c[2].startswith(SSM_MAY_ACCEPT)]
    assert let_by == [], f"SendCommand would accept {let_by}"
    assert all(c[4] != "agent" for c in first if c[2] == "sys-root")
    assert all(c[4] != "agent" for c in first if c[2] == "valid-trailing-newline")
    before = {d.path.name: d.sha256() for d in disks}
    scenario = (
        f"MD_UUID={small_raid0.uuid}\nSERIALS='{' '.join(d.serial for d in disks)}'\n"
        f"VOLS={vols}\nPRE_MP=({' '.join(bash_quote(v) for v in pre)})\n" + GUEST
    )
    b = record(
        label,
        boot(tmp_path / "vm", scenario, disks, files={"cases.sh": cases_sh}, commands=cmds),
    )

    assert b.rc == 0, b.text("scenario.stderr")[-3000:]
    # Before assembly: every system mount point refused, and no array, mount or line left.
    for i, mp in enumerate(pre):
        out = b.json_of(f"pre-{i}")
        script_outputs.validate("assemble", json.dumps(out))
        assert b.rc_of(f"pre-{i}") == 2, (mp, b.explain(f"pre-{i}"))
        assert out["error"] == "InvalidInput" and "MountPoint" in out["message"], (mp, out)
    assert b.text("pre.after") == b.text("pre.before"), diff(
        b.text("pre.before"), b.text("pre.after")
    )
    assert "md0 :" not in b.text("pre.after") and " evil -> /etc\n" in b.text("pre.after")
    start, end = (float(x) for x in b.text("loop-time").split())
    print(f"{label}: cases ran in {end - start:.1f}s of a {b.seconds:.1f}s boot")
    # The controls: every base value is accepted.
    for name in ("discover", "assemble", "prewarm", "thaw", "freeze", "thaw-after-freeze"):
        assert b.text(f"control-{name}.rc").strip() == "0", (
            f"control {name}: {b.text(f'control-{name}.stdout')[-1500:]}"
            f"{b.text(f'control-{name}.stderr')[-1500:]}"
        )
    assemble = json.loads(b.text("control-assemble.stdout").splitlines()[-1])
    assert assemble["alreadyAssembled"] is True and assemble["changed"] is False, assemble
    release = json.loads(b.text("control-release.stdout").splitlines()[-1])
    assert release["error"] == "MountPointMismatch", release

    rows = [line.split("\t", 4) for line in b.text("results.tsv").splitlines()]
    assert len(rows) == len(cases), f"{len(rows)} of {len(cases)} cases ran"
    problems = []
    for i, (case, row) in enumerate(zip(cases, rows, strict=True)):
        assert row[0] == str(i)
        problems += check_case(b, i, case, row)
    assert not problems, f"{len(problems)} of {len(cases)} cases failed:\n" + "\n".join(
        problems[:40]
    )
    # Run by exec, as SSM runs it, a script gives exactly what the forked run gave.
    first = {c[:4]: rows[i] for i, c in enumerate(cases) if c[4] == "fork"}
    for i, c in enumerate(cases):
        if c[4] == "exec":
            assert rows[i][1:] == first[c[:4]][1:], (c[:3], rows[i], first[c[:4]])

    # The state as a whole, after all cases, as the guest and the host see it.
    assert b.text("canary").strip() == "present"
    for part in ("mdstat", "mounts", "fstab", "mdadm.conf"):
        assert b.text(f"after.{part}") == b.text(f"before.{part}"), part
    assert "md0 : active raid0" in b.text("after.mdstat")
    assert any(
        line.startswith("/data /dev/md0 ext4 ro") for line in b.text("after.mounts").splitlines()
    )
    assert {d.path.name: d.sha256() for d in disks} == before, "a member image changed"
    assert base["assemble"]["VolumeIds"] == vols
