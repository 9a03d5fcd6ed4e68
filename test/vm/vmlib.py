"""Host side of the VM tests: disk images with EBS-like serials, one boot per scenario."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from raidsnap_emulation import script_outputs
from raidsnap_emulation.harness import synthesize
from raidsnap_emulation.ssm_agent import (
    AGENT_BASE_ENVIRONMENT,
    RenderedStep,
    documents_in_template,
    render,
)

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "scripts" / "vm" / "run.sh"
ENSURE = REPO / "scripts" / "vm" / "ensure.sh"
GUEST_LIB = Path(__file__).resolve().parent / "guest" / "lib.sh"
MIB = 1024 * 1024


def new_volume_id(rng: random.Random) -> str:
    """An EBS-shaped id: vol- plus 17 hex digits, so the serial (without dash) is 20 chars."""
    return "vol-0" + "".join(rng.choice("0123456789abcdef") for _ in range(16))


@dataclass
class Disk:
    path: Path
    volume_id: str

    @property
    def serial(self) -> str:
        return self.volume_id.replace("-", "")

    def sha256(self) -> str:
        h = hashlib.sha256()
        with self.path.open("rb") as f:
            for block in iter(lambda: f.read(4 * MIB), b""):
                h.update(block)
        return h.hexdigest()


def blank_disk(path: Path, size_mib: int, volume_id: str) -> Disk:
    with path.open("wb") as f:
        f.truncate(size_mib * MIB)
    return Disk(path, volume_id)


def copy_disk(src: Disk, dest: Path, volume_id: str) -> Disk:
    """The "snapshot": a byte copy of the image under a new volume id."""
    subprocess.run(["cp", "--sparse=always", str(src.path), str(dest)], check=True)
    return Disk(dest, volume_id)


VM_INSTANCE_ID = "i-0123456789abcdef0"


@cache
def deployed_documents() -> dict[str, dict[str, Any]]:
    """The Command documents as the stack deploys them (cdk.out, synthesized if stale)."""
    return documents_in_template(json.loads(synthesize().read_text()))


@cache
def deployed_scripts() -> dict[str, str]:
    """Each document's script as the document carries it (its libraries inlined), as one file:
    what the scenarios run by hand (``$S/<name>.sh`` in the guest), never ssm/scripts itself."""
    out = {}
    for name, content in deployed_documents().items():
        (step,) = content["mainSteps"]
        out[name] = "\n".join(step["inputs"]["runCommand"]) + "\n"
    return out


@dataclass
class Commands:
    """The SSM commands of one boot. Each is rendered on the host from the deployed document
    with the parameters the Lambda would send, exactly as the agent renders it; the guest's
    ``ssm NAME`` then runs it as the agent does (guest/lib.sh). ``agent_env`` is the agent's own
    environment, which it passes through (a systemd drop-in's Environment= on an instance); the
    tests use it only for the scripts' RAIDSNAP_* timing knobs."""

    steps: dict[str, tuple[str, RenderedStep, dict[str, str]]] = field(default_factory=dict)

    def ssm(
        self, name: str, document: str, agent_env: dict[str, str] | None = None, **params: str
    ) -> str:
        """Render now (InvalidParametersError here is SendCommand refusing the call); returns
        the guest line that runs it."""
        (step,) = render(
            deployed_documents()[document],
            {k: [v] for k, v in params.items()},
            command_id=str(uuid.uuid4()),
            instance_id=VM_INSTANCE_ID,
            document_name=f"raidsnap-{document}",
        )
        assert name not in self.steps, f"command name {name} used twice"
        self.steps[name] = (document, step, dict(agent_env or {}))
        return f"ssm {name}"

    def write(self, work: Path) -> None:
        for name, (_doc, step, agent_env) in self.steps.items():
            d = work / "cmd" / name
            d.mkdir(parents=True, exist_ok=True)
            (d / "_script.sh").write_text(step.script)
            env = step.full_environment({**AGENT_BASE_ENVIRONMENT, **agent_env})
            (d / "env").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
            (d / "path").write_text(step.script_path)
            (d / "cwd").write_text(step.working_directory)


@dataclass
class Boot:
    work: Path
    rc: int
    seconds: float
    outputs: dict[str, str] = field(default_factory=dict)
    commands: Commands = field(default_factory=Commands)

    def text(self, name: str) -> str:
        p = self.work / name
        return p.read_text() if p.exists() else ""

    def rc_of(self, name: str) -> int:
        return int(self.text(f"{name}.rc").strip())

    def json_of(self, name: str) -> dict:
        """The last stdout line of a script run, parsed as JSON (what SSM hands the caller),
        after it validated against its script's output schema."""
        lines = self.text(f"{name}.stdout").strip().splitlines()
        assert lines, f"{name}: no stdout; stderr: {self.text(name + '.stderr')[-2000:]}"
        if name in self.commands.steps:
            script_outputs.validate(self.commands.steps[name][0], lines[-1])
        return json.loads(lines[-1])

    def check_outputs(self) -> None:
        """Every command of the boot that ran printed a last line its schema accepts."""
        for name, (document, _step, _env) in self.commands.steps.items():
            if (self.work / f"{name}.rc").exists():
                line = script_outputs.last_line(self.text(f"{name}.stdout"))
                try:
                    script_outputs.validate(document, line)
                except ValueError as err:
                    raise AssertionError(f"{name} ({document}.sh) printed {line}: {err}") from None

    def explain(self, name: str) -> str:
        return (
            f"{name}: rc={self.text(name + '.rc').strip()}\n"
            f"stdout:\n{self.text(name + '.stdout')[-3000:]}\n"
            f"stderr:\n{self.text(name + '.stderr')[-3000:]}"
        )


def boot(
    work: Path,
    scenario: str,
    disks: list[Disk],
    *,
    udev: bool = False,
    timeout: int = 300,
    shuffle_seed: int | None = 7,
    extra_args: list[str] | None = None,
    files: dict[str, str] | None = None,
    commands: Commands | None = None,
) -> Boot:
    """Boot once, run `scenario` (bash, with guest/lib.sh sourced), return what it left. Every
    command in ``commands`` that ran must have printed a line its output schema accepts."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(GUEST_LIB, work / "lib.sh")
    (work / "scripts").mkdir(exist_ok=True)
    for name, text in deployed_scripts().items():
        (work / "scripts" / f"{name}.sh").write_text(text)
    commands = commands or Commands()
    commands.write(work)
    for name, content in (files or {}).items():
        (work / name).write_text(content)
    (work / "scenario.sh").write_text("set -u\n. /work/lib.sh\n" + scenario)
    order = list(disks)
    if shuffle_seed is not None:
        # Present the disks in an order unrelated to their slots, as EC2 attachments are.
        random.Random(shuffle_seed).shuffle(order)
    cmd = ["bash", str(RUN), "--work", str(work), "--timeout", str(timeout)]
    for d in order:
        cmd += ["--disk", f"{d.path}:{d.serial}"]
    if udev:
        cmd.append("--udev")
    cmd += extra_args or []
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout + 30)
    seconds = float((work / "vm-seconds").read_text()) if (work / "vm-seconds").exists() else -1.0
    if proc.returncode in (124, 125):
        raise AssertionError(f"VM did not finish the scenario: {proc.stderr[-3000:]}")
    b = Boot(work=work, rc=proc.returncode, seconds=seconds, commands=commands)
    b.check_outputs()
    return b


def ensure_vm() -> None:
    if os.environ.get("RAIDSNAP_VM_SKIP_ENSURE") == "1":
        return
    subprocess.run(["bash", str(ENSURE)], check=True, capture_output=True, text=True)
