"""The authorization requests one API call makes, as AWS builds them: the IAM action, every
resource ARN the action authorizes, and the request context for each.

Which resource types an action authorizes and which condition keys AWS sets for each come from
the Service Authorization Reference (sar.py); a key the reference does not list for that action
and resource type is never set. This module only knows where in a call's parameters, and in the
current state of a resource, the values are. A call this module cannot model for an action with
resource-level permissions is refused loudly rather than waved through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from raidsnap_emulation.iam import sar
from raidsnap_emulation.iam.evaluate import Principal, Request, UnsupportedPolicyError

Params = Mapping[str, Any]
Resource = dict[str, Any]

# IAM's service prefix where it differs from botocore's service name.
_IAM_PREFIX = {
    "stepfunctions": "states",
    "monitoring": "cloudwatch",
    "service-quotas": "servicequotas",
}
# IAM's action name where it differs from the API operation.
_IAM_ACTION = {("lambda", "Invoke"): "InvokeFunction"}
# An Auto Scaling group's generated id is not part of any request: any id stands for it.
ASG_ID = "8c5b3a8e-2a4f-4b5a-9d6e-0f1e2d3c4b5a"


class ResourceState(Protocol):
    """Current state of the resources a request names, as the service sees it before the call."""

    region: str
    account: str

    def instance(self, instance_id: str) -> Resource | None: ...

    def volume(self, volume_id: str) -> Resource | None: ...

    def snapshot(self, snapshot_id: str) -> Resource | None: ...

    def key_arn(self, key_id: str) -> str: ...

    def resource_policy(self, arn: str) -> str | None:
        """``arn`` when a resource-based policy is attached to it, else None."""
        ...

    def encryption_key(self, arn: str) -> str | None:
        """The customer managed key that encrypts this topic or table."""
        ...


def iam_action(service: str, operation: str) -> sar.ActionModel:
    prefix = _IAM_PREFIX.get(service, service)
    return sar.action_model(prefix, _IAM_ACTION.get((service, operation), operation))


@dataclass(frozen=True)
class _Target:
    """One resource the action authorizes, with the values of the keys it could carry."""

    resource_type: str | None
    arn: str
    keys: Mapping[str, tuple[str, ...]]


def _tags(resource: Resource | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in (resource or {}).get("Tags", []) or []}


def _tag_keys(prefixes: Iterable[str], tags: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    return {f"{p}/{k}": (v,) for p in prefixes for k, v in tags.items()}


def _request_tags(tags: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    out = _tag_keys(["aws:RequestTag"], tags)
    out["aws:TagKeys"] = tuple(tags)
    return out


def _bool(value: Any) -> str:
    return "true" if value else "false"


def _iso(value: Any) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(value, datetime) else str(value)


_TAG_KEYS = ("aws:requesttag/", "aws:resourcetag/", "aws:tagkeys")


def _key_allowed(key: str, listed: frozenset[str]) -> bool:
    """Global keys are always set; tag keys and service keys only where the reference lists
    them for the action and resource type."""
    lowered = key.lower()
    if lowered.startswith("aws:") and not lowered.startswith(_TAG_KEYS):
        return True
    if lowered in listed:
        return True
    return any("${" in k and lowered.startswith(k.split("${", 1)[0]) for k in listed)


class Builder:
    """Turns (service, operation, params) into the requests AWS authorizes for that call."""

    def __init__(self, state: ResourceState) -> None:
        self.state = state
        self._ops: dict[tuple[str, str], Callable[[sar.ActionModel, Params], list[_Target]]] = {
            ("ec2", "CreateSnapshots"): self._create_snapshots,
            ("ec2", "CreateVolume"): self._create_volume,
            ("ec2", "AttachVolume"): self._attach_volume,
            ("ec2", "DetachVolume"): self._detach_volume,
            ("ec2", "DeleteVolume"): self._delete_volume,
            ("ec2", "DeleteSnapshot"): self._delete_snapshot,
            ("ec2", "LockSnapshot"): self._lock_snapshot,
            ("ec2", "UnlockSnapshot"): self._delete_snapshot,
            ("ec2", "EnableFastSnapshotRestores"): self._fsr,
            ("ec2", "DisableFastSnapshotRestores"): self._fsr,
            ("ec2", "CreateTags"): self._tags_change,
            ("ec2", "DeleteTags"): self._tags_change,
            ("ssm", "SendCommand"): self._send_command,
            ("stepfunctions", "StartExecution"): self._state_machine,
            ("stepfunctions", "DescribeExecution"): self._execution,
            ("stepfunctions", "StopExecution"): self._execution,
            ("stepfunctions", "GetExecutionHistory"): self._execution,
            ("lambda", "Invoke"): self._function,
            ("sns", "Publish"): self._topic,
            ("autoscaling", "CompleteLifecycleAction"): self._asg,
            ("autoscaling", "RecordLifecycleActionHeartbeat"): self._asg,
            ("service-quotas", "GetServiceQuota"): self._quota,
            ("cloudwatch", "DescribeAlarms"): self._alarms,
            ("cloudwatch", "PutMetricAlarm"): self._alarms,
            ("secretsmanager", "GetSecretValue"): self._secret,
        }
        for op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan"):
            self._ops[("dynamodb", op)] = self._table

    # ------------------------------------------------------------------ entry point

    def requests(
        self,
        service: str,
        operation: str,
        params: Params,
        principal: Principal,
        extra: Mapping[str, tuple[str, ...]] | None = None,
    ) -> list[Request]:
        model = iam_action(service, operation)
        build = self._ops.get((service, operation))
        if build is None:
            if not model.wildcard_only:
                raise UnsupportedPolicyError(
                    f"{model.action} authorizes {sorted(model.resource_types)}: the emulation "
                    "has no request model for it yet"
                )
            targets = [_Target(None, "*", {})]
        else:
            targets = build(model, params)
        self._check_required(model, targets)
        out = [self._request(model, t, principal, extra) for t in targets]
        out += self._tag_on_create(service, operation, params, principal, targets)
        out += self._delegated_kms(service, operation, params, principal, targets)
        return out

    def _check_required(self, model: sar.ActionModel, targets: list[_Target]) -> None:
        named = {t.resource_type for t in targets}
        # The reference marks alternatives as required too (DescribeExecution: a standard
        # execution or an express one): a request must name at least one of them.
        required = {rt.name for rt in model.resource_types.values() if rt.required}
        if required and targets and not required & named:
            raise UnsupportedPolicyError(
                f"{model.action}: the reference requires one of {sorted(required)}, the "
                f"request model names {sorted(str(n) for n in named)}"
            )
        unknown = {n for n in named if n is not None} - set(model.resource_types)
        if unknown:
            raise UnsupportedPolicyError(f"{model.action} does not authorize {sorted(unknown)}")

    def global_context(self, principal: Principal) -> dict[str, tuple[str, ...]]:
        ctx: dict[str, tuple[str, ...]] = {
            "aws:SecureTransport": ("true",),
            "aws:RequestedRegion": (self.state.region,),
            "aws:PrincipalAccount": (principal.account,),
        }
        if principal.is_service:
            ctx["aws:PrincipalServiceName"] = (principal.service or "",)
        else:
            ctx["aws:PrincipalArn"] = (principal.arn,)
            ctx["aws:PrincipalType"] = ("AssumedRole",)
            ctx["aws:ViaAWSService"] = ("false",)
        return ctx

    def _request(
        self,
        model: sar.ActionModel,
        target: _Target,
        principal: Principal,
        extra: Mapping[str, tuple[str, ...]] | None,
        *,
        via: str | None = None,
    ) -> Request:
        listed = model.keys_for(target.resource_type)
        ctx = self.global_context(principal)
        ctx.update(extra or {})
        for key, values in target.keys.items():
            if _key_allowed(key, listed):
                ctx[key] = values
        policy = self.state.resource_policy(target.arn) if target.arn != "*" else None
        return Request(
            model.action,
            target.arn,
            {k.lower(): v for k, v in ctx.items()},
            principal,
            policy,
            via,
            model.action,
        )

    # ------------------------------------------------------------------ EC2 resources

    def _arn(self, model: sar.ActionModel, kind: str, **ids: str) -> str:
        return sar.arn(model, kind, self.state.region, self.state.account, **ids)

    def _instance(self, model: sar.ActionModel, instance_id: str) -> _Target | None:
        found = self.state.instance(instance_id)
        if found is None:
            return None
        tags = _tags(found)
        keys = {
            "ec2:InstanceID": (instance_id,),
            "ec2:InstanceType": (str(found.get("InstanceType", "")),),
            "ec2:AvailabilityZone": (str(found.get("Placement", {}).get("AvailabilityZone")),),
            "ec2:RootDeviceType": (str(found.get("RootDeviceType", "ebs")),),
            "ec2:Tenancy": (str(found.get("Placement", {}).get("Tenancy", "default")),),
            "ec2:EbsOptimized": (_bool(found.get("EbsOptimized")),),
            "ec2:Region": (self.state.region,),
            **_tag_keys(["aws:ResourceTag", "ec2:ResourceTag"], tags),
        }
        return _Target("instance", self._arn(model, "instance", InstanceId=instance_id), keys)

    def _volume_keys(self, found: Resource) -> dict[str, tuple[str, ...]]:
        keys: dict[str, tuple[str, ...]] = {
            "ec2:VolumeID": (found["VolumeId"],),
            "ec2:VolumeType": (str(found.get("VolumeType", "")),),
            "ec2:VolumeSize": (str(found.get("Size", "")),),
            "ec2:Encrypted": (_bool(found.get("Encrypted")),),
            "ec2:AvailabilityZone": (str(found.get("AvailabilityZone", "")),),
            "ec2:Region": (self.state.region,),
            **_tag_keys(["aws:ResourceTag", "ec2:ResourceTag"], _tags(found)),
        }
        for key, field in (("ec2:VolumeIops", "Iops"), ("ec2:VolumeThroughput", "Throughput")):
            if found.get(field) is not None:
                keys[key] = (str(found[field]),)
        if found.get("KmsKeyId"):
            keys["ec2:KmsKeyId"] = (self.state.key_arn(str(found["KmsKeyId"])),)
        if found.get("SnapshotId"):
            keys["ec2:ParentSnapshot"] = (
                f"arn:aws:ec2:{self.state.region}::snapshot/{found['SnapshotId']}",
            )
        return keys

    def _volume(self, model: sar.ActionModel, volume_id: str) -> _Target | None:
        found = self.state.volume(volume_id)
        if found is None:
            return None
        arn = self._arn(model, "volume", VolumeId=volume_id)
        return _Target("volume", arn, self._volume_keys(found))

    def _snapshot(self, model: sar.ActionModel, snapshot_id: str) -> _Target | None:
        found = self.state.snapshot(snapshot_id)
        if found is None:
            return None
        keys: dict[str, tuple[str, ...]] = {
            "ec2:SnapshotID": (snapshot_id,),
            "ec2:Owner": (str(found.get("OwnerId", "")),),
            "ec2:VolumeSize": (str(found.get("VolumeSize", "")),),
            "ec2:Encrypted": (_bool(found.get("Encrypted")),),
            "ec2:SnapshotTime": (_iso(found.get("StartTime", "")),),
            "ec2:Region": (self.state.region,),
            **_tag_keys(["aws:ResourceTag", "ec2:ResourceTag"], _tags(found)),
        }
        if found.get("VolumeId"):
            keys["ec2:ParentVolume"] = (
                f"arn:aws:ec2:{self.state.region}:{self.state.account}:volume/{found['VolumeId']}",
            )
        return _Target("snapshot", self._arn(model, "snapshot", SnapshotId=snapshot_id), keys)

    @staticmethod
    def _spec_tags(params: Params, resource_type: str) -> dict[str, str]:
        return {
            t["Key"]: t["Value"]
            for spec in params.get("TagSpecifications", []) or []
            if spec.get("ResourceType") == resource_type
            for t in spec.get("Tags", [])
        }

    def _present(self, targets: Iterable[_Target | None]) -> list[_Target]:
        # A resource that does not exist is not authorized: the service answers NotFound.
        return [t for t in targets if t is not None]

    # ------------------------------------------------------------------ EC2 operations

    def _create_snapshots(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        spec = params["InstanceSpecification"]
        instance_id = spec["InstanceId"]
        instance = self.state.instance(instance_id) or {}
        root = instance.get("RootDeviceName")
        excluded = set(spec.get("ExcludeDataVolumeIds", []))
        targets = self._present([self._instance(model, instance_id)])
        tags = self._spec_tags(params, "snapshot")
        for mapping in instance.get("BlockDeviceMappings", []):
            volume_id = mapping["Ebs"]["VolumeId"]
            boot = mapping["DeviceName"] == root
            if volume_id in excluded or (boot and spec.get("ExcludeBootVolume")):
                continue
            volume = self._volume(model, volume_id)
            if volume is None:
                continue
            targets.append(volume)
            snapshot_keys: dict[str, tuple[str, ...]] = {
                **_request_tags(tags),
                "ec2:ParentVolume": (volume.arn,),
                "ec2:VolumeSize": volume.keys["ec2:VolumeSize"],
                "ec2:Encrypted": volume.keys["ec2:Encrypted"],
                "ec2:SourceAvailabilityZone": volume.keys["ec2:AvailabilityZone"],
                "ec2:Region": (self.state.region,),
            }
            targets.append(
                _Target("snapshot", self._arn(model, "snapshot", SnapshotId="*"), snapshot_keys)
            )
        return targets

    def _create_volume(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        snapshot = None
        if params.get("SnapshotId"):
            snapshot = self.state.snapshot(str(params["SnapshotId"]))
        encrypted = bool(params.get("Encrypted")) or bool((snapshot or {}).get("Encrypted"))
        keys: dict[str, tuple[str, ...]] = {
            **_request_tags(self._spec_tags(params, "volume")),
            "ec2:AvailabilityZone": (str(params.get("AvailabilityZone", "")),),
            "ec2:Encrypted": (_bool(encrypted),),
            "ec2:VolumeType": (str(params.get("VolumeType", "gp2")),),
            "ec2:VolumeSize": (str(params.get("Size") or (snapshot or {}).get("VolumeSize", "")),),
            "ec2:Region": (self.state.region,),
        }
        for key, param in (
            ("ec2:VolumeIops", "Iops"),
            ("ec2:VolumeThroughput", "Throughput"),
            ("ec2:VolumeInitializationRate", "VolumeInitializationRate"),
        ):
            if params.get(param) is not None:
                keys[key] = (str(params[param]),)
        key_id = params.get("KmsKeyId") or (snapshot or {}).get("KmsKeyId")
        if encrypted and key_id:
            keys["ec2:KmsKeyId"] = (self.state.key_arn(str(key_id)),)
        targets = []
        if params.get("SnapshotId"):
            keys["ec2:ParentSnapshot"] = (
                self._arn(model, "snapshot", SnapshotId=str(params["SnapshotId"])),
            )
            targets = self._present([self._snapshot(model, str(params["SnapshotId"]))])
        return [_Target("volume", self._arn(model, "volume", VolumeId="*"), keys), *targets]

    def _attach_volume(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        return self._present(
            [self._instance(model, params["InstanceId"]), self._volume(model, params["VolumeId"])]
        )

    def _detach_volume(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        volume = self.state.volume(params["VolumeId"])
        attached = [a["InstanceId"] for a in (volume or {}).get("Attachments", [])]
        instance_id = params.get("InstanceId") or (attached[0] if attached else None)
        instance = self._instance(model, instance_id) if instance_id else None
        return self._present([self._volume(model, params["VolumeId"]), instance])

    def _delete_volume(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        return self._present([self._volume(model, params["VolumeId"])])

    def _delete_snapshot(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        return self._present([self._snapshot(model, params["SnapshotId"])])

    def _lock_snapshot(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        """The snapshot, with the lock asked for: ec2:SnapshotLockDuration (days, when the
        request gives LockDuration) and ec2:SnapshotCoolOffPeriod (hours), both listed for
        LockSnapshot in the Service Authorization Reference ("Control access to Amazon EBS
        snapshot lock": the duration condition restricts the LockDuration a user may give)."""
        found = self._snapshot(model, str(params["SnapshotId"]))
        if found is None:
            return []
        keys = dict(found.keys)
        for key, param in (
            ("ec2:SnapshotLockDuration", "LockDuration"),
            ("ec2:SnapshotCoolOffPeriod", "CoolOffPeriod"),
        ):
            if params.get(param) is not None:
                keys[key] = (str(params[param]),)
        return [_Target("snapshot", found.arn, keys)]

    def _fsr(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        return self._present([self._snapshot(model, s) for s in params["SourceSnapshotIds"]])

    def _tags_change(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        requested = {t["Key"]: t.get("Value", "") for t in params.get("Tags", [])}
        lookups = {"i-": self._instance, "vol-": self._volume, "snap-": self._snapshot}
        targets = []
        for resource_id in params["Resources"]:
            prefix = next((p for p in lookups if str(resource_id).startswith(p)), None)
            if prefix is None:
                raise UnsupportedPolicyError(f"{model.action} on {resource_id} is not modelled")
            found = lookups[prefix](model, str(resource_id))
            if found is not None:
                keys = dict(found.keys)
                keys.update(_request_tags(requested))
                targets.append(_Target(found.resource_type, found.arn, keys))
        return targets

    def _tag_on_create(
        self,
        service: str,
        operation: str,
        params: Params,
        principal: Principal,
        targets: list[_Target],
    ) -> list[Request]:
        """EC2 authorizes the tags of TagSpecifications as ec2:CreateTags on each resource the
        call creates, with ec2:CreateAction set to the operation."""
        if service != "ec2" or not params.get("TagSpecifications"):
            return []
        create_tags = sar.action_model("ec2", "CreateTags")
        out = []
        for target in targets:
            if not target.arn.endswith("/*") or target.resource_type is None:
                continue
            tags = self._spec_tags(params, target.resource_type)
            if not tags:
                continue
            keys = {**_request_tags(tags), "ec2:CreateAction": (operation,)}
            tagged = _Target(target.resource_type, target.arn, keys)
            out.append(self._request(create_tags, tagged, principal, None))
        return out

    # ------------------------------------------------------------------ other services

    def _send_command(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        name = str(params["DocumentName"])
        if name.startswith("arn:"):
            document = name
        elif name.startswith("AWS-"):
            document = f"arn:aws:ssm:{self.state.region}::document/{name}"
        else:
            document = self._arn(model, "document", DocumentName=name)
        targets = [_Target("document", document, {})]
        if params.get("Targets"):
            raise UnsupportedPolicyError("SendCommand with Targets is not modelled")
        for instance_id in params.get("InstanceIds", []):
            found = self.state.instance(instance_id)
            tags = _tags(found)
            arn = self._arn(model, "instance", InstanceId=instance_id)
            keys = _tag_keys(["ssm:resourceTag", "aws:ResourceTag"], tags)
            targets.append(_Target("instance", arn, keys))
        return targets

    def _state_machine(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        return [_Target("statemachine", str(params["stateMachineArn"]), {})]

    def _execution(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        return [_Target("execution", str(params["executionArn"]), {})]

    def _function(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        name = str(params["FunctionName"])
        arn = name if name.startswith("arn:") else self._arn(model, "function", FunctionName=name)
        if params.get("Qualifier"):
            arn = f"{arn}:{params['Qualifier']}"
        return [_Target("function", arn, {})]

    def _topic(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        return [_Target("topic", str(params["TopicArn"]), {})]

    def _secret(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        """GetSecretValue authorizes the Secret it names, by the secret's full ARN, and sets
        secretsmanager:SecretId to the id the request gave (Service Authorization Reference,
        AWS Secrets Manager). The stack names its secret by that ARN (the template's Ref);
        version ids and stages are never asked for, so their keys are absent."""
        secret_id = str(params["SecretId"])
        if not secret_id.startswith("arn:"):
            raise UnsupportedPolicyError("GetSecretValue by name is not modelled")
        return [_Target("Secret", secret_id, {"secretsmanager:SecretId": (secret_id,)})]

    def _table(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        name = str(params["TableName"])
        arn = name if name.startswith("arn:") else self._arn(model, "table", TableName=name)
        return [_Target("table", arn, {})]

    def _quota(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        service, code = str(params["ServiceCode"]), str(params["QuotaCode"])
        arn = self._arn(model, "quota", ServiceCode=service, QuotaCode=code)
        return [_Target("quota", arn, {"servicequotas:service": (service,)})]

    def _alarms(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        """The alarms a call names. DescribeAlarms without AlarmNames lists every alarm: it is
        authorized against "*" then, which only an unscoped grant matches. PutMetricAlarm
        carries its actions (cloudwatch:AlarmActions) and the tags it would create."""
        names = [str(params["AlarmName"])] if "AlarmName" in params else params.get("AlarmNames")
        if not names:
            return [_Target("alarm", "*", {})]
        keys: dict[str, tuple[str, ...]] = {}
        actions = [
            str(a)
            for k in ("AlarmActions", "OKActions", "InsufficientDataActions")
            for a in params.get(k) or []
        ]
        if "AlarmName" in params and actions:
            keys["cloudwatch:AlarmActions"] = tuple(actions)
        if "AlarmName" in params and params.get("Tags"):
            keys.update(_request_tags({t["Key"]: t["Value"] for t in params["Tags"]}))
        return [_Target("alarm", self._arn(model, "alarm", AlarmName=str(n)), keys) for n in names]

    def _asg(self, model: sar.ActionModel, params: Params) -> list[_Target]:
        group = str(params["AutoScalingGroupName"])
        arn = self._arn(model, "autoScalingGroup", GroupId=ASG_ID, GroupFriendlyName=group)
        return [_Target("autoScalingGroup", arn, {})]

    # ------------------------------------------------------------------ KMS on the caller's behalf

    def kms_requests(
        self,
        actions: Iterable[str],
        key_arn: str,
        principal: Principal,
        via: str | None,
        extra: Mapping[str, tuple[str, ...]] | None = None,
    ) -> list[Request]:
        """What a service asks of KMS when it uses a key for a request: with the caller's
        identity (``via`` names the service: kms:ViaService), or as a service principal."""
        out = []
        for action in actions:
            model = sar.action_model("kms", action)
            keys: dict[str, tuple[str, ...]] = {
                "kms:CallerAccount": (principal.account,),
                **(extra or {}),
            }
            if via is not None:
                keys["kms:ViaService"] = (f"{via}.{self.state.region}.amazonaws.com",)
            target = _Target("key", key_arn, keys)
            request = self._request(model, target, principal, None, via=via)
            out.append(
                Request(
                    request.action,
                    request.resource,
                    request.context,
                    principal,
                    key_arn,
                    via,
                    request.operation,
                )
            )
        return out

    def _delegated_kms(
        self,
        service: str,
        operation: str,
        params: Params,
        principal: Principal,
        targets: list[_Target],
    ) -> list[Request]:
        if service == "dynamodb":
            key = self.state.encryption_key(targets[0].arn)
            # DynamoDB decrypts the table key with the caller's permissions.
            return self.kms_requests(["Decrypt"], key, principal, "dynamodb") if key else []
        if service == "secretsmanager" and operation == "GetSecretValue":
            # Secrets Manager decrypts a secret under a customer managed key with the caller's
            # permissions ("How AWS Secrets Manager uses AWS KMS": kms:Decrypt, ViaService).
            key = self.state.encryption_key(targets[0].arn)
            return self.kms_requests(["Decrypt"], key, principal, "secretsmanager") if key else []
        if service == "sns" and operation == "Publish":
            key = self.state.encryption_key(targets[0].arn)
            if key is None:
                return []
            return self.kms_requests(["GenerateDataKey", "Decrypt"], key, principal, "sns")
        if service == "ec2" and operation == "AttachVolume":
            # EC2 lets the instance decrypt the volume's data key: a grant for the instance,
            # made with the caller's permissions (EBS encryption permissions; KMS developer
            # guide, "How Amazon EBS uses AWS KMS").
            volume = next((t for t in targets if t.resource_type == "volume"), None)
            if volume is None or volume.keys.get("ec2:Encrypted") != ("true",):
                return []
            if "ec2:KmsKeyId" not in volume.keys:
                return []
            key = volume.keys["ec2:KmsKeyId"][0]
            grant = {"kms:GrantIsForAWSResource": ("true",)}
            return self.kms_requests(["Decrypt"], key, principal, "ec2") + self.kms_requests(
                ["CreateGrant"], key, principal, "ec2", grant
            )
        if service == "ec2" and operation == "CreateVolume":
            volume = targets[0]
            if volume.keys.get("ec2:Encrypted") != ("true",) or "ec2:KmsKeyId" not in volume.keys:
                return []
            key = volume.keys["ec2:KmsKeyId"][0]
            grant = {"kms:GrantIsForAWSResource": ("true",)}
            return self.kms_requests(
                ["GenerateDataKeyWithoutPlaintext"], key, principal, "ec2"
            ) + self.kms_requests(["CreateGrant"], key, principal, "ec2", grant)
        return []
