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
