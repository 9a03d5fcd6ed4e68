"""What EC2 says of an instance, and the array tag a recovery moves between instances."""

from __future__ import annotations

from botocore.exceptions import ClientError

from raidsnap import clients, tags
from raidsnap.aws import error_code


def instance_facts(instance_id: str) -> tuple[str, dict[str, str]]:
    """(state, tags) of an instance; ("unknown", {}) when EC2 does not know it."""
    try:
        found = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    except ClientError as err:
        if error_code(err).startswith("InvalidInstanceID"):
            return "unknown", {}
        raise
    raw = found[0]["Instances"][0] if found and found[0]["Instances"] else {}
    state = str(raw.get("State", {}).get("Name", "unknown"))
    return state, tags.as_dict(raw.get("Tags"))  # type: ignore[arg-type]


def untag_array(instance_id: str, array: str) -> None:
    """Remove only the array's tag, only with its value (a key-less DeleteTags removes every
    value of the key)."""
    clients.ec2().delete_tags(Resources=[instance_id], Tags=[{"Key": tags.ARRAY, "Value": array}])


def tag_array(instance_id: str, array: str) -> None:
    clients.ec2().create_tags(Resources=[instance_id], Tags=[{"Key": tags.ARRAY, "Value": array}])
