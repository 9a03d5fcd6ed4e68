"""A test double that makes moto answer like EC2, FSR and SSM do where moto does not.

The double wraps ``botocore.client.BaseClient._make_api_call``, so it sees every boto3 call made
in this process: the Lambda handlers' calls and the Step Functions executor's aws-sdk
integrations, from any thread. Per (service, operation) it passes the call through to moto,
rewrites moto's answer, or answers itself. Time is the shared ``VirtualClock``: snapshot
progress, volume creation, FSR optimisation and command durations are all derived from it, and
nothing here sleeps.

Where moto keeps the state (volumes, snapshots, instances, tags, documents) the double leaves it
there and keeps only what moto lacks: start times, failure marks, client tokens, FSR pairs,
commands.

A call made on behalf of a known principal (a function inside ``acting_as``, a state machine's
integration through a client tagged with ``ACTOR_ATTRIBUTE``) is first passed to ``authorize``,
when set: the one place where the emulation's IAM (raidsnap_emulation.iam) sees every call.

One module per service, each naming the AWS documentation of the rules it emulates: ec2.py
(snapshots, images, CreateVolume), volumes.py (volume states, attachments), fsr.py (fast
snapshot restore, its quota), ssm.py (Run Command, agents), health.py (volume status checks,
Auto Scaling lifecycle actions), states.py (Step Functions' task tokens), faults.py (injected
errors, throttling, eventual consistency), base.py (what they share); dispatch.py puts them
together as ``AwsDouble``.
"""

from raidsnap_emulation.double.base import (
    ACTOR_ATTRIBUTE,
    Answer,
    Authorize,
    AwsError,
    Call,
    Params,
    acting_as,
)
from raidsnap_emulation.double.dispatch import AwsDouble
from raidsnap_emulation.double.ec2 import SNAPSHOT_PER_VOLUME_INTERVAL_SECONDS
from raidsnap_emulation.double.fsr import (
    FSR_FAILED_REASON,
    FSR_MAX_SNAPSHOT_IDS,
    FSR_QUOTA_CODE,
    FSR_QUOTA_ERROR,
    FSR_QUOTA_SERVICE_CODE,
)
from raidsnap_emulation.double.ssm import (
    PLUGIN_OUTPUT_LIMIT,
    STDERR_LIMIT,
    STDOUT_LIMIT,
    TRUNCATED_SUFFIX,
    CommandContext,
    CommandOutcome,
    CommandStatus,
    Responder,
)

__all__ = [
    "ACTOR_ATTRIBUTE",
    "FSR_FAILED_REASON",
    "FSR_MAX_SNAPSHOT_IDS",
    "FSR_QUOTA_CODE",
    "FSR_QUOTA_ERROR",
    "FSR_QUOTA_SERVICE_CODE",
    "PLUGIN_OUTPUT_LIMIT",
    "SNAPSHOT_PER_VOLUME_INTERVAL_SECONDS",
    "STDERR_LIMIT",
    "STDOUT_LIMIT",
    "TRUNCATED_SUFFIX",
    "Answer",
    "Authorize",
    "AwsDouble",
    "AwsError",
    "Call",
    "CommandContext",
    "CommandOutcome",
    "CommandStatus",
    "Params",
    "Responder",
    "acting_as",
]
