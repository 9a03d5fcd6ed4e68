"""scripts/vm/ensure.sh installs the VM suite's Debian packages on a machine that lacks them.

A machine that already has the packages skips the install path, so a green run there proves
nothing about it. These tests put fake ``dpkg-query``, ``apt-cache``, ``apt-get`` and ``id`` first
on PATH: the packages are reported missing, apt-get records its calls, and apt-cache writes its
answer the way the real one can, in more than one write, so that a reader which stops at the
first match would kill it with SIGPIPE.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ENSURE = REPO / "scripts" / "vm" / "ensure.sh"


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _fake_debian(tmp_path: Path, *, installed: bool, candidate: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt-get.log"
    if installed:
        _tool(bin_dir, "dpkg-query", "printf 'install ok installed'\n")
    else:
        _tool(
            bin_dir,
            "dpkg-query",
            'echo "dpkg-query: no packages found matching ${!#}" >&2\nexit 1\n',
        )
    # The candidate line comes first, then a long tail: a `| grep -q` reader exits after the
    # first line and the writer of the tail dies of SIGPIPE, as the real apt-cache did.
    _tool(
        bin_dir,
        "apt-cache",
        f"""printf '%s:\\n  Installed: (none)\\n  Candidate: {candidate}\\n' "$2"
for i in $(seq 1 4000); do printf '  %s 500 http://deb.debian.org/debian main\\n' "$i"; done
""",
    )
    _tool(bin_dir, "apt-get", f'printf "%s\\n" "$*" >>{log}\n')
    _tool(bin_dir, "id", 'if [[ ${1:-} == -u ]]; then echo 0; else command -p id "$@"; fi\n')
    return bin_dir


def _ensure_packages(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run(
        ["bash", "-c", f"source {ENSURE} && ensure_packages"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _apt_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt-get.log"
    return log.read_text().splitlines() if log.exists() else []


def test_missing_packages_are_installed_with_apt_get(tmp_path: Path) -> None:
    bin_dir = _fake_debian(tmp_path, installed=False, candidate="1:7.2+dfsg-7+deb12u7")

    done = _ensure_packages(bin_dir)

    assert done.returncode == 0, done.stderr
    calls = _apt_calls(tmp_path)
    assert calls[0] == "update -qq"
    install = calls[1].split()
    assert install[:4] == ["install", "-y", "-qq", "--no-install-recommends"]
    for package in ("qemu-system-x86", "mdadm", "fio", "busybox-static", "xfsprogs", "udev"):
        assert package in install[4:]
    assert "ensure: installing: qemu-system-x86" in done.stderr


def test_installed_packages_are_not_installed_again(tmp_path: Path) -> None:
    bin_dir = _fake_debian(tmp_path, installed=True, candidate="1:7.2+dfsg-7+deb12u7")

    done = _ensure_packages(bin_dir)

    assert done.returncode == 0, done.stderr
    assert _apt_calls(tmp_path) == []


def test_a_package_without_candidate_stops_before_installing(tmp_path: Path) -> None:
    bin_dir = _fake_debian(tmp_path, installed=False, candidate="(none)")

    done = _ensure_packages(bin_dir)

    assert done.returncode == 1
    assert "has no installation candidate" in done.stderr
    assert _apt_calls(tmp_path) == ["update -qq"]


def test_sourcing_the_script_runs_nothing(tmp_path: Path) -> None:
    bin_dir = _fake_debian(tmp_path, installed=False, candidate="1.0")

    done = subprocess.run(
        ["bash", "-c", f"source {ENSURE} && echo sourced"],
        env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert (done.returncode, done.stdout) == (0, "sourced\n")
    assert _apt_calls(tmp_path) == []


# A fresh machine, modelled: dpkg-query answers from a list of installed packages, and apt-get
# install adds what it was asked for to that list, so a second run sees the first one's work.
_STATEFUL_DPKG = """state={state}
if [[ $1 == -W && ${{2:-}} == -f* ]]; then
  if grep -qx -- "$3" "$state"; then printf 'install ok installed'; exit 0; fi
  echo "dpkg-query: no packages found matching $3" >&2; exit 1
fi
shift
rc=0
for p in "$@"; do
  if grep -qx -- "$p" "$state"; then printf '%s\\t1.0\\n' "$p"; else rc=1; fi
done
exit $rc
"""

_STATEFUL_APT_GET = """printf '%s\\n' "$*" >>{log}
if [[ $1 == install ]]; then
  for p in "$@"; do [[ $p == -* || $p == install ]] || printf '%s\\n' "$p" >>{state}; done
fi
"""


def _host_packages() -> list[str]:
    done = subprocess.run(
        ["bash", "-c", f"source {ENSURE} && printf '%s\\n' \"${{host_packages[@]}}\""],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


def _fresh_machine(tmp_path: Path, installed: list[str]) -> Path:
    bin_dir = _fake_debian(tmp_path, installed=False, candidate="15.18-0+deb12u1")
    state = tmp_path / "installed"
    state.write_text("".join(f"{p}\n" for p in installed))
    log = tmp_path / "apt-get.log"
    _tool(bin_dir, "dpkg-query", _STATEFUL_DPKG.format(state=state))
    _tool(bin_dir, "apt-get", _STATEFUL_APT_GET.format(log=log, state=state))
    return bin_dir


def _run(bin_dir: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run(
        ["bash", "-c", f"source {ENSURE} && {script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_fresh_machine_installs_exactly_the_missing_packages_once(tmp_path: Path) -> None:
    # GIVEN a machine with every package but mdadm and the PostgreSQL server the guest carries
    wanted = _host_packages()
    assert "postgresql-15" in wanted
    missing = ["mdadm", "postgresql-15"]
    bin_dir = _fresh_machine(tmp_path, [p for p in wanted if p not in missing])
    pg_common = tmp_path / "postgresql-common"
    script = f"pg_common={pg_common} && ensure_packages"

    # WHEN ensure.sh prepares it twice
    first = _run(bin_dir, script)
    second = _run(bin_dir, script)

    # THEN apt-get installed exactly the missing packages, once, and the second run did nothing
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert _apt_calls(tmp_path) == [
        "update -qq",
        "install -y -qq --no-install-recommends mdadm postgresql-15",
    ]
    assert "ensure: installing: mdadm postgresql-15" in first.stderr
    assert "installing" not in second.stderr
    # and the server's package was told not to make a cluster on the host
    drop_in = pg_common / "createcluster.d" / "raidsnap-vm.conf"
    assert drop_in.read_text() == "create_main_cluster = false\n"


def test_the_no_cluster_setting_is_written_even_where_postgresql_common_is_installed(
    tmp_path: Path,
) -> None:
    # GIVEN postgresql-common's own createcluster.conf (which includes createcluster.d) exists
    wanted = _host_packages()
    bin_dir = _fresh_machine(tmp_path, [p for p in wanted if p != "postgresql-15"])
    pg_common = tmp_path / "postgresql-common"
    pg_common.mkdir()
    (pg_common / "createcluster.conf").write_text(
        "include_dir '/etc/postgresql-common/createcluster.d'\n"
    )

    done = _run(bin_dir, f"pg_common={pg_common} && ensure_packages")

    assert done.returncode == 0, done.stderr
    drop_in = pg_common / "createcluster.d" / "raidsnap-vm.conf"
    assert drop_in.read_text() == "create_main_cluster = false\n"


def test_no_setting_is_written_when_no_postgresql_server_is_installed(tmp_path: Path) -> None:
    wanted = _host_packages()
    bin_dir = _fresh_machine(tmp_path, [p for p in wanted if p != "mdadm"])
    pg_common = tmp_path / "postgresql-common"

    done = _run(bin_dir, f"pg_common={pg_common} && ensure_packages")

    assert done.returncode == 0, done.stderr
    assert not pg_common.exists()


# main() with the kernel steps and the image build replaced by recorders: what is left is the
# decision to build, made from the image key.
_MAIN_WITH_RECORDERS = """cache={cache}
kernel_package() {{ echo linux-image-6.1.0-99-amd64; }}
ensure_kernel() {{ echo {cache}/kernel/root; }}
build_initramfs() {{
  printf 'build %s\\n' "$2" >>{builds}
  mkdir -p "$2" && : >"$2/initrd.cpio" && : >"$2/vmlinuz"
}}
"""


def _main(bin_dir: Path, tmp_path: Path, extra: str = "") -> subprocess.CompletedProcess[str]:
    prelude = _MAIN_WITH_RECORDERS.format(cache=tmp_path / "cache", builds=tmp_path / "builds")
    return _run(bin_dir, prelude + extra + "main")


def _builds(tmp_path: Path) -> list[str]:
    log = tmp_path / "builds"
    return log.read_text().splitlines() if log.exists() else []


def test_an_existing_image_is_not_rebuilt(tmp_path: Path) -> None:
    bin_dir = _fresh_machine(tmp_path, _host_packages())

    first = _main(bin_dir, tmp_path)
    second = _main(bin_dir, tmp_path)

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert len(_builds(tmp_path)) == 1
    assert first.stdout == second.stdout
    assert "up to date" in second.stderr
    assert (tmp_path / "cache" / "current").resolve() == Path(first.stdout.strip())


def test_the_image_key_changes_with_the_package_list_and_versions(tmp_path: Path) -> None:
    wanted = _host_packages()
    bin_dir = _fresh_machine(tmp_path, [*wanted, "mariadb-server"])
    first = _main(bin_dir, tmp_path)

    # another package in the list: another image
    more = _main(bin_dir, tmp_path, "host_packages+=(mariadb-server)\n")
    # another version of a package: another image
    dpkg = bin_dir / "dpkg-query"
    dpkg.write_text(dpkg.read_text().replace("\\t1.0", "\\t1.1"))
    newer = _main(bin_dir, tmp_path)

    assert [d.returncode for d in (first, more, newer)] == [0, 0, 0], newer.stderr
    images = {first.stdout, more.stdout, newer.stdout}
    assert len(images) == 3
    assert len(_builds(tmp_path)) == 3
