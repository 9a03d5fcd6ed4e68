"""A run's history in the words of the person following it: which step it is at (with counts
where there are some: "detaching old members 2/3"), the moments that matter ("ARRAY MOUNTED at
/data — usable now"), and how far a prewarm is, instead of state names and event types.

The states of each workflow map to steps; a Choice, Pass or Wait state is no step of its own (a
Wait belongs to the step it waits for). A state this module does not know is shown by its name.
What each step produced is read from the state's output in the history (``stateExited``), so
the figures are the run's own: the plan's members and mount point, the volumes it created, the
old members it detaches, the prewarm's prediction and, at its end, what it read and how fast.
Counts that only EC2 knows while a step waits (how many new volumes are available, attached,
how many old members are detached) come from ``Counter``, which the follower may give."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .views import minutes as _minutes
from .views import prewarm_done, readable_cause

# state -> (step, words); {n} is the number of members where the plan says it.
RESTORE_STEPS: dict[str, tuple[str, str] | None] = {
    "Prepare": ("prepare", "checking the set, the target and its SSM agent"),
    "EnableFsr": ("fsr", "enabling fast snapshot restore for the set"),
    "CheckFsr": ("fsr", "enabling fast snapshot restore for the set"),
    "CreateVolumes": ("create", "creating {n} volumes"),
    "CheckVolumes": ("create", "creating {n} volumes"),
    "ReleaseOldArray": ("release", "releasing the old array (unmount, stop md)"),
    "PollRelease": ("release", "releasing the old array (unmount, stop md)"),
    "DetachOldMembers": ("detach", "detaching old members"),
    "FollowOldMembers": ("detach", "detaching old members"),
    "AttachVolumes": ("attach", "attaching new volumes"),
    "FollowAttachments": ("attach", "attaching new volumes"),
    "Assemble": ("assemble", "assembling the array and mounting it"),
    "PollAssemble": ("assemble", "assembling the array and mounting it"),
    "Prewarm": ("prewarm", "prewarming: reading every block once"),
    "PollPrewarm": ("prewarm", "prewarming: reading every block once"),
    "Finish": ("finish", "finishing"),
    "Cleanup": ("cleanup", "the run failed: cleaning up what it created"),
    "ReportFailure": ("cleanup", "the run failed: cleaning up what it created"),
    # Tells a waiting recovery that the array is mounted: the mount's own line says it.
    "ReportMounted": None,
}
BACKUP_STEPS: dict[str, tuple[str, str] | None] = {
    "Prepare": ("prepare", "checking the array and its instance"),
    "ResolveMembers": ("members", "finding the members on the instance"),
    "Freeze": ("freeze", "freezing the filesystem"),
    "PollFreeze": ("freeze", "freezing the filesystem"),
    "TakeSnapshotSet": ("snapshot", "taking the snapshot set"),
    "TakeFrozenSnapshotSet": ("snapshot", "taking the snapshot set"),
    "Thaw": ("thaw", "thawing the filesystem"),
    "ThawNext": ("thaw", "thawing the filesystem"),
    "PollThaw": ("thaw", "thawing the filesystem"),
    # EBS tells the run when its snapshots are done (one step however long they take); past
    # the hour, the run looks by itself (CheckSnapshots, with their progress).
    "AwaitSnapshots": ("wait", "waiting for the snapshots to complete"),
    "CheckSnapshots": ("wait", "waiting for the snapshots to complete"),
    "ApplyRetention": ("retention", "applying retention"),
    "ApplyRetentionLast": ("retention", "applying retention"),
    "KeepFsr": ("keepfsr", "keeping FSR on the newest sets"),
    "CheckKeptFsr": ("keepfsr", "keeping FSR on the newest sets"),
    "ExplainFailure": ("failure", "the backup failed: explaining why"),
}
RECOVERY_STEPS: dict[str, tuple[str, str] | None] = {
    "Assess": ("assess", "looking for evidence that a member is impaired"),
    "NoRecovery": ("none", "no member is impaired: nothing to recover"),
    "CheckTarget": ("target", "waiting for the target instance and its SSM agent"),
    "RunRestore": ("restore", "restoring the newest complete set"),
    "StartRestore": ("restore", "restoring the newest complete set"),
    # The restore ended without telling this run: what became of it is read from the restore.
    "Settle": ("restore", "restoring the newest complete set"),
    # The branch that keeps a launch's lifecycle action alive while the restore runs.
    "KeepLaunchAlive": None,
    "Finish": ("finish", "finishing"),
    "Failure": ("failure", "the recovery failed: reporting why"),
}
DRILL_STEPS: dict[str, tuple[str, str] | None] = {
    "Prepare": ("prepare", "checking the drill instance"),
    "Restore": ("restore", "restoring a read-only copy onto the drill instance"),
    "Discover": ("verify", "checking the restored copy"),
    "PollDiscover": ("verify", "checking the restored copy"),
    "Verify": ("verify", "checking the restored copy"),
    "Release": ("teardown", "removing the copy"),
    "PollRelease": ("teardown", "removing the copy"),
    "RemoveVolumes": ("teardown", "removing the copy"),
    "Report": ("report", "reporting the drill's result"),
}
STEPS: dict[str, dict[str, tuple[str, str] | None]] = {
    "restore": RESTORE_STEPS,
    "backup": BACKUP_STEPS,
    "recovery": RECOVERY_STEPS,
    "drill": DRILL_STEPS,
}
# States that are no step of their own: the flow between steps.
FLOW_TYPES = ("Choice", "Pass", "Wait", "Succeed", "Fail")
# Entering one of these means the array was assembled and mounted (restore.asl.json: only a
# successful assemble leads there).
MOUNTED_STATES = ("ReportMounted", "IsPrewarmNeeded")
PREWARM_STEPS = 4  # line-by-line: the prewarm's predicted progress in quarters
CAUSE_HEADLINE = 160


@dataclass(frozen=True)
class Line:
    at: datetime
    text: str
    style: str = ""


@dataclass
class Facts:
    """What the run's results said so far, for the words."""

    members: int | None = None
    mount_point: str = ""
    target: str = ""
    new_volumes: list[str] = field(default_factory=list)
    old_volumes: list[str] = field(default_factory=list)
    prewarm_gib: int = 0
    prewarm_predicted: int | None = None
    fsr_states: dict[str, str] = field(default_factory=dict)
    snapshot_progress: int | None = None
    snapshots: int = 0
    restore: str = ""


Counter = Callable[[str, "Facts"], tuple[int, int] | None]
"""(step, facts) -> (done, of), asked while a step waits on EC2; None: nothing to count."""


def _loads(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _details(event: dict[str, Any]) -> dict[str, Any]:
    return next(
        (v for k, v in event.items() if k.endswith("EventDetails") and isinstance(v, dict)), {}
    )


@dataclass
class Narrator:
    workflow: str
    started: datetime | None = None
    status: str = "RUNNING"
    step: str = ""
    words: str = ""
    step_since: datetime | None = None
    count: str = ""
    mounted: bool = False
    facts: Facts = field(default_factory=Facts)
    lines: list[Line] = field(default_factory=list)
    last_id: int = 0
    states: list[tuple[datetime, str]] = field(default_factory=list)
    _prewarm_shown: int = 0
    _said: set[str] = field(default_factory=set)

    # -- events

    def take(self, event: dict[str, Any]) -> None:
        """Fold one history event in (oldest first)."""
        self.last_id = max(self.last_id, int(event["id"]))
        kind = str(event["type"])
        at: datetime = event["timestamp"]
        details = _details(event)
        if self.started is None or kind == "ExecutionStarted":
            self.started = at
        if kind.endswith("StateEntered"):
            self._entered(at, kind.removesuffix("StateEntered"), str(details.get("name", "")))
        elif kind.endswith("StateExited"):
            self._exited(at, str(details.get("name", "")), _loads(details.get("output")))
        elif kind in ("ExecutionFailed", "ExecutionTimedOut", "ExecutionAborted"):
            self._ended(at, kind, details)
        elif kind == "ExecutionSucceeded":
            self._say(at, "done", "green")

    def _entered(self, at: datetime, state_type: str, name: str) -> None:
        self.states.append((at, name))
        if self.workflow == "restore" and name in MOUNTED_STATES and not self.mounted:
            self.mounted = True
            where = f" at {self.facts.mount_point}" if self.facts.mount_point else ""
            self._say(at, f"ARRAY MOUNTED{where} — usable now", "bold green")
        known = STEPS.get(self.workflow, {})
        mapped = known.get(name, (name, name))
        if mapped is None or (name not in known and (state_type in FLOW_TYPES or name == "Start")):
            return
        step, words = mapped
        if step == self.step:
            return
        again = step in self._said
        self.step, self.step_since, self.count = step, at, ""
        self.words = words.replace("{n}", str(self.facts.members or "the"))
        self._said.add(step)
        if not again:  # back to a step said before (replace mode interleaves): its count only
            self._say(at, self.words)

    def _exited(self, at: datetime, name: str, output: dict[str, Any]) -> None:
        f = self.facts
        plan = output.get("plan")
        if name == "Prepare" and isinstance(plan, dict):
            f.members = len(plan.get("members") or []) or f.members
            f.mount_point = str(plan.get("mountPoint") or "")
            f.target = str(plan.get("targetInstanceId") or "")
            if self.workflow == "drill":
                f.restore = str(plan.get("restoreName") or "")
        self._volumes(at, name, output)
        fsr = output.get("fsr")
        if isinstance(fsr, dict) and isinstance(fsr.get("states"), dict):
            f.fsr_states = {str(k): str(v) for k, v in fsr["states"].items()}
            ready = sum(1 for s in f.fsr_states.values() if s == "enabled")
            self.count = f"{ready}/{len(f.fsr_states)} enabled"
        snaps = output.get("snapshots")
        if self.workflow == "backup" and isinstance(snaps, dict):
            # (with takeWith, the other arrays' snapshots of the same call too)
            parts = [p for p in snaps.get("together") or [] if isinstance(p, dict)]
            f.snapshots = len(snaps.get("ids") or []) + sum(len(p.get("ids") or []) for p in parts)
            f.snapshot_progress = snaps.get("progress")
            if snaps.get("status") == "pending" and f.snapshot_progress is not None:
                self.counted(at, f"{f.snapshots} snapshots at {f.snapshot_progress}%")
        if name in ("Prewarm", "PollPrewarm"):
            self._prewarm(at, output.get("prewarm"), plan if isinstance(plan, dict) else None)
        if name == "StartRestore" and isinstance(output.get("restore"), dict):
            where = output["restore"].get("mountPoint")
            self._say(
                at, f"ARRAY MOUNTED{' at ' + where if where else ''} — usable now", "bold green"
            )

    def _volumes(self, at: datetime, name: str, output: dict[str, Any]) -> None:
        """New volumes and old members as the results give them; a step's result that says it
        is done is its last count (N/N)."""
        f = self.facts
        volumes, old, attach = output.get("volumes"), output.get("old"), output.get("attach")
        if isinstance(volumes, dict):
            f.new_volumes = [str(v) for v in volumes.get("ids") or []]
        if isinstance(old, dict):
            f.old_volumes = [str(v) for v in old.get("volumeIds") or []]
        done = {
            "CheckVolumes": (volumes, "available", f.new_volumes),
            "DetachOldMembers": (old, "detached", f.old_volumes),
            "FollowOldMembers": (old, "detached", f.old_volumes),
            "AttachVolumes": (attach, "attached", f.new_volumes),
            "FollowAttachments": (attach, "attached", f.new_volumes),
        }.get(name)
        if done is not None and isinstance(done[0], dict) and done[0].get("status") == done[1]:
            n = len(done[2])
            if n:
                self.counted(at, f"{n}/{n}")

    def _prewarm(self, at: datetime, prewarm: Any, plan: dict[str, Any] | None) -> None:
        if not isinstance(prewarm, dict):
            return
        f = self.facts
        if prewarm.get("predictedSeconds") is not None:
            f.prewarm_predicted = int(prewarm["predictedSeconds"])
        if plan is not None and not f.prewarm_gib:
            f.prewarm_gib = sum(int(m.get("sizeGib") or 0) for m in plan.get("members") or [])
        status = prewarm.get("status")
        result = prewarm.get("result") if isinstance(prewarm.get("result"), dict) else None
        if status == "success" and result is not None:
            self._say(at, prewarm_done(result), "green")
        elif status == "failed":
            self._say(
                at,
                "prewarm failed: the array stays mounted and usable; blocks not "
                "read yet load on first access",
                "yellow",
            )

    def _ended(self, at: datetime, kind: str, details: dict[str, Any]) -> None:
        what = {"ExecutionFailed": "failed", "ExecutionTimedOut": "timed out"}.get(kind, "stopped")
        # The cause in full comes with the outcome; here its first line, as a headline.
        cause = readable_cause(details.get("cause")).strip().split("\n", 1)[0]
        cause = cause if len(cause) <= CAUSE_HEADLINE else cause[: CAUSE_HEADLINE - 1] + "…"
        error = details.get("error") or ""
        text = what + (f": {error}" if error else "") + (f" ({cause})" if cause else "")
        self._say(at, text, "red")

    # -- what a poll learns besides events

    def counted(self, at: datetime, count: str) -> None:
        """A count for the current step ("2/3"): said when it changes."""
        if count and count != self.count:
            self.count = count
            self._say(at, f"{self.words}: {count}")

    def prewarm_progress(self, now: datetime) -> str:
        """The prewarm's progress by its prediction ("~40%, about 9 min left"); said each
        quarter when following line by line."""
        f = self.facts
        if self.step != "prewarm" or not f.prewarm_predicted or self.step_since is None:
            return ""
        elapsed = (now - self.step_since).total_seconds()
        share = min(0.99, max(0.0, elapsed / f.prewarm_predicted))
        left = max(0.0, f.prewarm_predicted - elapsed)
        rate = (
            f" at about {f.prewarm_gib * 1024 / f.prewarm_predicted:.0f} MiB/s"
            if f.prewarm_gib
            else ""
        )
        eta = (now + timedelta(seconds=left)).strftime("%H:%M UTC")
        text = f"~{share:.0%} by the prediction{rate}, about {_minutes(left)} left (ETA {eta})"
        quarter = int(share * PREWARM_STEPS)
        if quarter > self._prewarm_shown:
            self._prewarm_shown = quarter
            self._say(now, f"prewarming {f.prewarm_gib} GiB: {text}")
        return text

    def _say(self, at: datetime, text: str, style: str = "") -> None:
        if self.lines and self.lines[-1].text == text:
            return
        self.lines.append(Line(at, text, style))

    @property
    def now_words(self) -> str:
        """The current step of a running run, as the live view shows it."""
        if not self.words:
            return "starting"
        return f"{self.words}: {self.count}" if self.count else self.words


def ec2_counter(ec2: Any) -> Counter:
    """Counts EC2 knows while a restore waits: new volumes available, old members detached
    from the target, new volumes attached (DescribeVolumes: State, Attachments)."""

    def count(step: str, facts: Facts) -> tuple[int, int] | None:
        ids = facts.old_volumes if step == "detach" else facts.new_volumes
        if step not in ("create", "detach", "attach") or not ids:
            return None
        try:
            found = ec2.describe_volumes(VolumeIds=ids)["Volumes"]
        except (ClientError, BotoCoreError):  # a count is a nicety: no answer, no count
            return None

        def attached(volume: dict[str, Any]) -> bool:
            return any(
                a.get("State") == "attached"
                and (not facts.target or a.get("InstanceId") == facts.target)
                for a in volume.get("Attachments") or []
            )

        if step == "create":
            done = sum(1 for v in found if v.get("State") in ("available", "in-use"))
        elif step == "detach":
            done = len(ids) - sum(1 for v in found if v.get("Attachments"))
        else:
            done = sum(1 for v in found if attached(v))
        return done, len(ids)

    return count
