"""Typed views of the environment each function gets from the stack."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from raidsnap.errors import ConfigurationError


def _require(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ConfigurationError(f"environment variable {name} is not set")
    return value


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(
            f"environment variable {name} must be an integer, not {raw!r}"
        ) from None


@dataclass(frozen=True)
class Documents:
    """Names of the stack's SSM Command documents."""

    discover: str
    freeze: str
    thaw: str

    @classmethod
    def from_env(cls) -> Documents:
        return cls(
            discover=_require("DISCOVER_DOCUMENT"),
            freeze=_require("FREEZE_DOCUMENT"),
            thaw=_require("THAW_DOCUMENT"),
        )


@dataclass(frozen=True)
class BackupSettings:
    """Per-stack backup defaults; per-array values in the execution input win."""

    default_retention: int
    max_freeze_seconds: int
    discovery_timeout_seconds: int
    # The snapshot step's longest time with its retries (0: not given; Prepare needs it).
    snapshot_step_seconds: int = 0

    @classmethod
    def from_env(cls) -> BackupSettings:
        return cls(
            default_retention=_int("DEFAULT_RETENTION", 7),
            max_freeze_seconds=_int("MAX_FREEZE_SECONDS", 60),
            discovery_timeout_seconds=_int("DISCOVERY_TIMEOUT_SECONDS", 90),
            snapshot_step_seconds=_int("SNAPSHOT_STEP_SECONDS", 0),
        )


def copies_retention(array: str, asked: int) -> int:
    """How many complete copied sets of an array this stack keeps per origin: its own config's
    (RETENTION_BY_ARRAY, else DEFAULT_RETENTION, else 7). The source's request may ask for more,
    never for fewer: an account that sends copies must not decide what the account keeping
    them deletes."""
    return max(asked, retention_for(array, _int("DEFAULT_RETENTION", 7)))


def retention_for(array: str, default: int) -> int:
    """``RETENTION_<array>`` is not portable (names carry dots and dashes), so the stack passes a
    JSON map in RETENTION_BY_ARRAY."""
    raw = os.environ.get("RETENTION_BY_ARRAY", "").strip()
    if not raw:
        return default
    try:
        mapping = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigurationError("RETENTION_BY_ARRAY is not valid JSON") from None
    value = mapping.get(array, default)
    if not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"RETENTION_BY_ARRAY[{array!r}] must be a positive integer")
    return value


@dataclass(frozen=True)
class RestoreDocuments:
    """The SSM Command documents a restore runs on its target."""

    assemble: str
    release: str
    prewarm: str
    discover: str

    @classmethod
    def from_env(cls) -> RestoreDocuments:
        return cls(
            assemble=_require("ASSEMBLE_DOCUMENT"),
            release=_require("RELEASE_DOCUMENT"),
            prewarm=_require("PREWARM_DOCUMENT"),
            discover=_require("DISCOVER_DOCUMENT"),
        )


INITIALIZATIONS = ("auto", "fsr", "rate", "prewarm", "none")


@dataclass(frozen=True)
class RestoreSettings:
    """Per-stack restore defaults; the execution input wins, then the array's config."""

    lock_table: str
    lock_lease_seconds: int
    default_initialization: str
    default_initialization_rate: int

    @classmethod
    def from_env(cls) -> RestoreSettings:
        initialization = os.environ.get("DEFAULT_INITIALIZATION", "").strip() or "auto"
        if initialization not in INITIALIZATIONS:
            raise ConfigurationError(
                f"DEFAULT_INITIALIZATION must be one of {', '.join(INITIALIZATIONS)}"
            )
        return cls(
            lock_table=_require("LOCK_TABLE"),
            lock_lease_seconds=_int("LOCK_LEASE_SECONDS", 3 * 86400),
            default_initialization=initialization,
            default_initialization_rate=_int("DEFAULT_INITIALIZATION_RATE", 300),
        )


def initialization_for(array: str, default: str) -> str:
    """The array's configured initialization (INITIALIZATION_BY_ARRAY, a JSON map), else the
    stack default."""
    raw = os.environ.get("INITIALIZATION_BY_ARRAY", "").strip()
    if not raw:
        return default
    try:
        mapping = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigurationError("INITIALIZATION_BY_ARRAY is not valid JSON") from None
    value = mapping.get(array, default)
    if value not in INITIALIZATIONS:
        raise ConfigurationError(
            f"INITIALIZATION_BY_ARRAY[{array!r}] must be one of {INITIALIZATIONS}"
        )
    return str(value)


@dataclass(frozen=True)
class FastRestorePolicy:
    """An array's fastRestore setting: keep FSR enabled on its newest ``sets`` complete sets in
    these Availability Zones."""

    zones: tuple[str, ...]
    sets: int


def fast_restore_by_array() -> dict[str, FastRestorePolicy]:
    """Each configured array's fastRestore policy (FAST_RESTORE_BY_ARRAY, a JSON map of array to
    {"zones": [...], "sets": n}; unset or {}: no array has one)."""
    mapping = json_env("FAST_RESTORE_BY_ARRAY", "{}")
    if not isinstance(mapping, dict):
        raise ConfigurationError("FAST_RESTORE_BY_ARRAY must map array names to settings")
    out = {}
    for array, raw in mapping.items():
        zones = raw.get("zones") if isinstance(raw, dict) else None
        sets = raw.get("sets") if isinstance(raw, dict) else None
        if (
            not isinstance(zones, list)
            or not zones
            or not all(isinstance(z, str) and z for z in zones)
            or not isinstance(sets, int)
            or sets < 1
        ):
            raise ConfigurationError(
                f'FAST_RESTORE_BY_ARRAY[{array!r}] must be {{"zones": [...], "sets": n >= 1}}'
            )
        out[str(array)] = FastRestorePolicy(tuple(str(z) for z in zones), sets)
    return out


def fast_restore_arrays() -> frozenset[str]:
    """The arrays with a fastRestore policy, by name (FAST_RESTORE_ARRAYS, a JSON list: what
    the backup's Prepare gets of the policies; unset or []: none)."""
    names = json_env("FAST_RESTORE_ARRAYS", "[]")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigurationError("FAST_RESTORE_ARRAYS must be a JSON list of array names")
    return frozenset(names)


def stack_name() -> str:
    """The stack's name (STACK_NAME; unset: empty, as it only labels a copy request)."""
    return os.environ.get("STACK_NAME", "").strip()


def region() -> str:
    """The Region the function runs in (Lambda sets AWS_REGION)."""
    return os.environ.get("AWS_REGION", "").strip() or _require("AWS_DEFAULT_REGION")


def restore_lock_table() -> str | None:
    """The restore lock table, for backup retention (absent: no restore workflow deployed)."""
    return os.environ.get("RESTORE_LOCK_TABLE", "").strip() or None


@dataclass(frozen=True)
class RecoverySettings:
    """What the recovery trigger needs: where to start recoveries, the restore lock to respect,
    and each configured array's recovery settings (RECOVERY_BY_ARRAY, a JSON map)."""

    state_machine_arn: str
    lock_table: str
    by_array: dict[str, dict[str, str]]
    # Each configured array's attached-EBS alarm (ALARM_BY_ARRAY): where one instance holds
    # several configured arrays, the alarm that fired says which array's recovery it starts.
    alarm_by_array: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> RecoverySettings:
        raw = os.environ.get("ALARM_BY_ARRAY", "").strip() or "{}"
        try:
            alarms = json.loads(raw)
        except json.JSONDecodeError:
            raise ConfigurationError("ALARM_BY_ARRAY is not valid JSON") from None
        return cls(
            state_machine_arn=_require("RECOVERY_STATE_MACHINE_ARN"),
            lock_table=_require("LOCK_TABLE"),
            by_array=recovery_by_array(),
            alarm_by_array={str(k): str(v) for k, v in dict(alarms).items()},
        )


def recovery_by_array() -> dict[str, dict[str, str]]:
    """Each configured array's recovery settings (RECOVERY_BY_ARRAY, a JSON map; none: {})."""
    raw = os.environ.get("RECOVERY_BY_ARRAY", "").strip() or "{}"
    try:
        mapping = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigurationError("RECOVERY_BY_ARRAY is not valid JSON") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, dict) for v in mapping.values()):
        raise ConfigurationError("RECOVERY_BY_ARRAY must map array names to settings")
    return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in mapping.items()}


@dataclass(frozen=True)
class RecoveryStepSettings:
    """What the recovery workflow's steps need: the restore workflow they start and follow, the
    document that asks the instance about the array, and the table holding recovery claims."""

    restore_state_machine_arn: str
    discover_document: str
    lock_table: str

    @classmethod
    def from_env(cls) -> RecoveryStepSettings:
        return cls(
            restore_state_machine_arn=_require("RESTORE_STATE_MACHINE_ARN"),
            discover_document=_require("DISCOVER_DOCUMENT"),
            lock_table=_require("LOCK_TABLE"),
        )


@dataclass(frozen=True)
class DrillSettings:
    """The restore workflow a drill runs, and the document that checks the restored copy."""

    restore_state_machine_arn: str

    @classmethod
    def from_env(cls) -> DrillSettings:
        return cls(restore_state_machine_arn=_require("RESTORE_STATE_MACHINE_ARN"))


def drill_documents() -> tuple[str, str]:
    """(discover, release): the documents a drill runs on its target."""
    return _require("DISCOVER_DOCUMENT"), _require("RELEASE_DOCUMENT")


def configured_arrays() -> list[str]:
    """The arrays the stack's configuration names (CONFIGURED_ARRAYS, comma-separated)."""
    return [a for a in os.environ.get("CONFIGURED_ARRAYS", "").split(",") if a]


def run_nonce_secret() -> str:
    """The secret in every restore run's nonce (RUN_NONCE_SECRET: its ARN)."""
    return _require("RUN_NONCE_SECRET")


def topic_arn() -> str:
    return _require("TOPIC_ARN")


def snapshot_sets_table() -> str:
    """The table of set manifests (what each set's snapshots are, recorded when it was taken)."""
    return _require("SNAPSHOT_SETS_TABLE")


@dataclass(frozen=True)
class SweeperSettings:
    """The lock table (which holds each run's FSR claim) and the ARN prefix of this stack's
    restore executions (whose volumes the sweeper may remove)."""

    lock_table: str
    restore_executions: str
    # The arrays with a fastRestore policy; None: the stack did not say (FAST_RESTORE_BY_ARRAY
    # unset), so no claim is taken for one whose policy was removed.
    kept_arrays: frozenset[str] | None = None
    # The stack's state machines (STATE_MACHINE_ARNS, a JSON list): the runs that may enable or
    # keep FSR, asked about when the stack is deleted.
    state_machines: tuple[str, ...] = ()

    @classmethod
    def from_env(cls) -> SweeperSettings:
        prefix = _require("RESTORE_EXECUTION_PREFIX")
        if not prefix.startswith("arn:") or not prefix.endswith(":"):
            raise ConfigurationError(
                f"RESTORE_EXECUTION_PREFIX must be an execution ARN prefix ending in ':', not "
                f"{prefix!r}"
            )
        kept = None
        if os.environ.get("FAST_RESTORE_BY_ARRAY", "").strip():
            kept = frozenset(fast_restore_by_array())
        machines = json_env("STATE_MACHINE_ARNS", "[]")
        if not isinstance(machines, list) or not all(
            isinstance(m, str) and m.startswith("arn:") for m in machines
        ):
            raise ConfigurationError("STATE_MACHINE_ARNS must be a JSON list of state machine ARNs")
        return cls(
            lock_table=_require("LOCK_TABLE"),
            restore_executions=prefix,
            kept_arrays=kept,
            state_machines=tuple(machines),
        )


def json_env(name: str, default: str) -> object:
    raw = os.environ.get(name, "").strip() or default
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigurationError(f"{name} is not valid JSON") from None


def array_instances() -> dict[str, dict[str, object]]:
    """What the config names for each configured array (ARRAY_INSTANCES, a JSON map of array to
    {"instances": [ids], "autoScalingGroup": name}; every configured array has an entry)."""
    mapping = json_env("ARRAY_INSTANCES", "{}")
    if not isinstance(mapping, dict) or not all(isinstance(v, dict) for v in mapping.values()):
        raise ConfigurationError("ARRAY_INSTANCES must map array names to settings")
    return {str(k): dict(v) for k, v in mapping.items()}


def allowed_mount_points() -> list[str] | None:
    """The directories restored arrays may be mounted under (ALLOWED_MOUNT_POINTS, a JSON list;
    unset: None, the default list)."""
    value = json_env("ALLOWED_MOUNT_POINTS", "null")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError("ALLOWED_MOUNT_POINTS must be a JSON list of paths")
    return [str(v) for v in value]


def run_price_table() -> dict[str, object] | None:
    """The price table the stack gave this function (RUN_PRICES: docs/costs/prices.json with the
    config's prices: applied), which a run's cost is computed with; None when unset."""
    raw = os.environ.get("RUN_PRICES", "").strip()
    if not raw:
        return None
    try:
        table = json.loads(raw)
    except ValueError:
        table = None
    if not isinstance(table, dict) or not isinstance(table.get("prices"), dict):
        raise ConfigurationError("RUN_PRICES must be the price table as JSON")
    return table
