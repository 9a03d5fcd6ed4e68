"""Adding and removing raidsnap's tags on EC2 resources (instances, volumes)."""

from __future__ import annotations

from collections.abc import Sequence

from raidsnap import clients


def add(resource_ids: Sequence[str], key: str, value: str) -> None:
    clients.ec2().create_tags(Resources=list(resource_ids), Tags=[{"Key": key, "Value": value}])


def remove(resource_ids: Sequence[str], key: str, value: str) -> None:
    """Only the tag with this value: DeleteTags with a value removes it only when it matches."""
    clients.ec2().delete_tags(Resources=list(resource_ids), Tags=[{"Key": key, "Value": value}])
