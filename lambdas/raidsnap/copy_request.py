"""A copy request: what a source stack sends the copy workflow of the Region (or account) a set
is copied to. The backup's copy step writes it (raidsnap.workflows.backup.copies), the copy
workflow validates it before anything is copied (raidsnap.workflows.copy.prepare)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from raidsnap.models import ArrayName

Region = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")]
Account = Annotated[str, StringConstraints(pattern=r"^\d{12}$")]
SnapshotId = Annotated[str, StringConstraints(pattern=r"^snap-[0-9a-f]{8,17}$")]
SetId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
KeyArn = Annotated[
    str, StringConstraints(pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[a-z0-9-]{1,64}$")
]
# EC2 tag keys and values: at most 128 and 256 characters ("Tag your Amazon EC2 resources").
TagKey = Annotated[str, StringConstraints(min_length=1, max_length=128)]
TagValue = Annotated[str, StringConstraints(max_length=256)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SourceRef(_Strict):
    """Where the set was taken: the source Region and account, and the backup run and stack
    that took it (for the record and the operator)."""

    region: Region
    account: Account
    execution: str = Field(default="", max_length=2048)
    stack: str = Field(default="", max_length=128)


class SourceMember(_Strict):
    index: int = Field(ge=0, le=255)
    snapshotId: SnapshotId
    volumeId: str = Field(default="", max_length=64)
    # The source snapshot's tags (another account cannot read them: they come with the set).
    tags: dict[TagKey, TagValue] = Field(default_factory=dict, max_length=50)


class SourceSet(_Strict):
    """The set as its manifest recorded it in the source stack."""

    memberCount: int = Field(ge=1, le=256)
    started: str = Field(max_length=64)
    consistency: Literal["crash", "fsfreeze"] = "crash"
    md: dict[str, str] = Field(default_factory=dict, max_length=8)
    members: list[SourceMember] = Field(min_length=1, max_length=256)


class CopyInput(_Strict):
    """A copy request: make a copy of this set here, keep ``retention`` complete copied sets of
    the array here, encrypt the copies with ``kmsKeyId`` (a key of this Region and account)."""

    array: ArrayName
    setId: SetId
    source: SourceRef
    set: SourceSet
    retention: int = Field(default=7, ge=1, le=1000)
    kmsKeyId: KeyArn | None = None
