"""Application Auto Scaling over json-1.1: `POST /` with `X-Amz-Target: AnyScaleFrontendService.<Op>`.

Table-driven like control_api: validate against botocore's application-autoscaling model, parse into
emulator.model.scaling values, one call into the AutoScaler, serialise (PascalCase lives here and in
the serialize package only).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from aiohttp import web

from emulator.errors import ValidationFailed
from emulator.hosting.scaling.autoscaler import AutoScaler
from emulator.model import scaling as sc
from emulator.wire import json_rpc
from emulator.wire.errors import unknown_target
from emulator.wire.service_models import APPLICATION_AUTOSCALING, operation_names

TARGET_PREFIX = "AnyScaleFrontendService"
Params = Mapping[str, Any]
Handler = Callable[[AutoScaler, Params], Awaitable[dict[str, Any]]]
T = TypeVar("T")


# ---------------------------------------------------------------------- parsing


def _key(p: Params) -> sc.TargetKey:
    return sc.TargetKey(p["ServiceNamespace"], p["ResourceId"], p["ScalableDimension"])


def _suspended(p: Params | None) -> sc.Suspended | None:
    if p is None:
        return None
    return sc.Suspended(
        scale_in=bool(p.get("DynamicScalingInSuspended", False)),
        scale_out=bool(p.get("DynamicScalingOutSuspended", False)),
        scheduled=bool(p.get("ScheduledScalingSuspended", False)),
    )


def _tracking(p: Params | None) -> sc.TargetTracking | None:
    if p is None:
        return None
    predefined = p.get("PredefinedMetricSpecification")
    custom = p.get("CustomizedMetricSpecification")
    customized = None
    if custom is not None:
        if custom.get("Metrics"):
            raise ValidationFailed(
                "smlocal does not evaluate metric math: give CustomizedMetricSpecification a MetricName, "
                "Namespace, Dimensions and Statistic instead of Metrics."
            )
        missing = [m for m in ("MetricName", "Namespace", "Statistic") if not custom.get(m)]
        if missing:
            raise ValidationFailed(f"CustomizedMetricSpecification needs {', '.join(missing)}.")
        customized = sc.CustomizedMetric(
            metric_name=custom["MetricName"],
            namespace=custom["Namespace"],
            dimensions=tuple((d["Name"], d["Value"]) for d in custom.get("Dimensions", [])),
            statistic=custom["Statistic"],
            unit=custom.get("Unit"),
        )
    if predefined is not None and customized is not None:
        raise ValidationFailed(
            "Specify either a PredefinedMetricSpecification or a CustomizedMetricSpecification, not both."
        )
    return sc.TargetTracking(
        target_value=float(p["TargetValue"]),
        predefined_metric=None if predefined is None else predefined["PredefinedMetricType"],
        resource_label=None if predefined is None else predefined.get("ResourceLabel"),
        customized_metric=customized,
        scale_out_cooldown=p.get("ScaleOutCooldown"),
        scale_in_cooldown=p.get("ScaleInCooldown"),
        disable_scale_in=p.get("DisableScaleIn"),
    )


def _step(p: Params | None) -> sc.StepScaling | None:
    if p is None:
        return None
    return sc.StepScaling(
        adjustment_type=p.get("AdjustmentType"),
        step_adjustments=tuple(
            sc.StepAdjustment(
                a.get("MetricIntervalLowerBound"), a.get("MetricIntervalUpperBound"), a["ScalingAdjustment"]
            )
            for a in p.get("StepAdjustments", [])
        ),
        min_adjustment_magnitude=p.get("MinAdjustmentMagnitude"),
        cooldown=p.get("Cooldown"),
        metric_aggregation_type=p.get("MetricAggregationType"),
    )


def _page(items: Sequence[T], p: Params) -> tuple[Sequence[T], str | None]:
    """MaxResults (default 50) and an opaque NextToken."""
    limit = int(p.get("MaxResults") or 50)
    start = 0
    token = p.get("NextToken")
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
            raise ValidationFailed("Invalid NextToken") from exc
    end = start + limit
    return items[start:end], (
        base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    )


# ---------------------------------------------------------------------- serialising


def _epoch(t: datetime) -> float:
    return t.timestamp()


def _key_out(k: sc.TargetKey) -> dict[str, Any]:
    return {"ServiceNamespace": k.namespace, "ResourceId": k.resource_id, "ScalableDimension": k.dimension}


def scalable_target(t: sc.ScalableTarget) -> dict[str, Any]:
    out = _key_out(t.key)
    out.update(
        {
            "MinCapacity": t.min_capacity,
            "MaxCapacity": t.max_capacity,
            "RoleARN": t.role_arn,
            "CreationTime": _epoch(t.creation_time),
            "SuspendedState": {
                "DynamicScalingInSuspended": t.suspended.scale_in,
                "DynamicScalingOutSuspended": t.suspended.scale_out,
                "ScheduledScalingSuspended": t.suspended.scheduled,
            },
            "ScalableTargetARN": t.arn,
        }
    )
    return out


def _tracking_out(t: sc.TargetTracking) -> dict[str, Any]:
    out: dict[str, Any] = {"TargetValue": t.target_value}
    if t.predefined_metric is not None:
        spec: dict[str, Any] = {"PredefinedMetricType": t.predefined_metric}
        if t.resource_label is not None:
            spec["ResourceLabel"] = t.resource_label
        out["PredefinedMetricSpecification"] = spec
    c = t.customized_metric
    if c is not None:
        custom: dict[str, Any] = {
            "MetricName": c.metric_name,
            "Namespace": c.namespace,
            "Dimensions": [{"Name": n, "Value": v} for n, v in c.dimensions],
            "Statistic": c.statistic,
        }
        if c.unit is not None:
            custom["Unit"] = c.unit
        out["CustomizedMetricSpecification"] = custom
    for name, value in (
        ("ScaleOutCooldown", t.scale_out_cooldown),
        ("ScaleInCooldown", t.scale_in_cooldown),
        ("DisableScaleIn", t.disable_scale_in),
    ):
        if value is not None:
            out[name] = value
    return out


def _step_out(s: sc.StepScaling) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if s.adjustment_type is not None:
        out["AdjustmentType"] = s.adjustment_type
    steps = []
    for a in s.step_adjustments:
        step: dict[str, Any] = {"ScalingAdjustment": a.scaling_adjustment}
        if a.lower_bound is not None:
            step["MetricIntervalLowerBound"] = a.lower_bound
        if a.upper_bound is not None:
            step["MetricIntervalUpperBound"] = a.upper_bound
        steps.append(step)
    out["StepAdjustments"] = steps
    for name, value in (
        ("MinAdjustmentMagnitude", s.min_adjustment_magnitude),
        ("Cooldown", s.cooldown),
        ("MetricAggregationType", s.metric_aggregation_type),
    ):
        if value is not None:
            out[name] = value
    return out


def _alarms(p: sc.ScalingPolicy) -> list[dict[str, str]]:
    return [{"AlarmName": a.name, "AlarmARN": a.arn} for a in p.alarms]


def scaling_policy(p: sc.ScalingPolicy) -> dict[str, Any]:
    out: dict[str, Any] = {"PolicyARN": p.arn, "PolicyName": p.name}
    out.update(_key_out(p.key))
    out["PolicyType"] = p.policy_type.value
    if p.target_tracking is not None:
        out["TargetTrackingScalingPolicyConfiguration"] = _tracking_out(p.target_tracking)
    if p.step_scaling is not None:
        out["StepScalingPolicyConfiguration"] = _step_out(p.step_scaling)
    out["Alarms"] = _alarms(p)
    out["CreationTime"] = _epoch(p.creation_time)
    return out


def scaling_activity(a: sc.ScalingActivity) -> dict[str, Any]:
    out: dict[str, Any] = {"ActivityId": a.activity_id}
    out.update(_key_out(a.key))
    out.update(
        {
            "Description": a.description,
            "Cause": a.cause,
            "StartTime": _epoch(a.start_time),
            "StatusCode": a.status.value,
        }
    )
    if a.end_time is not None:
        out["EndTime"] = _epoch(a.end_time)
    if a.status_message is not None:
        out["StatusMessage"] = a.status_message
    if a.details is not None:
        out["Details"] = a.details
    if a.not_scaled_reasons:
        reasons = []
        for r in a.not_scaled_reasons:
            reason: dict[str, Any] = {"Code": r.code}
            for name, value in (
                ("MaxCapacity", r.max_capacity),
                ("MinCapacity", r.min_capacity),
                ("CurrentCapacity", r.current_capacity),
            ):
                if value is not None:
                    reason[name] = value
            reasons.append(reason)
        out["NotScaledReasons"] = reasons
    return out


# ---------------------------------------------------------------------- operations


async def register_scalable_target(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    target = scaler.register_scalable_target(
        _key(p),
        p.get("MinCapacity"),
        p.get("MaxCapacity"),
        p.get("RoleARN"),
        _suspended(p.get("SuspendedState")),
        tuple(sorted((p.get("Tags") or {}).items())),
    )
    return {"ScalableTargetARN": target.arn}


async def deregister_scalable_target(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    scaler.deregister_scalable_target(_key(p))
    return {}


async def describe_scalable_targets(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    found = scaler.registry.describe_scalable_targets(
        p["ServiceNamespace"], p.get("ResourceIds"), p.get("ScalableDimension")
    )
    items, token = _page(found, p)
    out: dict[str, Any] = {"ScalableTargets": [scalable_target(t) for t in items]}
    if token:
        out["NextToken"] = token
    return out


def _policy_type(value: str | None) -> sc.PolicyType:
    try:
        return sc.PolicyType(value or sc.PolicyType.STEP)
    except ValueError:  # in the model's enum (validated), but not one smlocal evaluates
        supported = ", ".join(t.value for t in sc.PolicyType)
        raise ValidationFailed(
            f"smlocal does not support PolicyType {value} (only {supported}). See docs/autoscaling.md."
        ) from None


async def put_scaling_policy(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    policy = scaler.registry.put_scaling_policy(
        p["PolicyName"],
        _key(p),
        _policy_type(p.get("PolicyType")),
        _tracking(p.get("TargetTrackingScalingPolicyConfiguration")),
        _step(p.get("StepScalingPolicyConfiguration")),
    )
    return {"PolicyARN": policy.arn, "Alarms": _alarms(policy)}


async def delete_scaling_policy(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    scaler.registry.delete_scaling_policy(p["PolicyName"], _key(p))
    return {}


async def describe_scaling_policies(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    found = scaler.registry.describe_scaling_policies(
        p["ServiceNamespace"], p.get("PolicyNames"), p.get("ResourceId"), p.get("ScalableDimension")
    )
    items, token = _page(found, p)
    out: dict[str, Any] = {"ScalingPolicies": [scaling_policy(x) for x in items]}
    if token:
        out["NextToken"] = token
    return out


async def describe_scaling_activities(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    found = scaler.describe_scaling_activities(
        p["ServiceNamespace"],
        p.get("ResourceId"),
        p.get("ScalableDimension"),
        bool(p.get("IncludeNotScaledActivities", False)),
    )
    items, token = _page(found, p)
    out: dict[str, Any] = {"ScalingActivities": [scaling_activity(a) for a in items]}
    if token:
        out["NextToken"] = token
    return out


async def tag_resource(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    scaler.registry.tag(p["ResourceARN"], dict(p["Tags"]))
    return {}


async def untag_resource(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    scaler.registry.untag(p["ResourceARN"], p["TagKeys"])
    return {}


async def list_tags_for_resource(scaler: AutoScaler, p: Params) -> dict[str, Any]:
    return {"Tags": scaler.registry.tags_of(p["ResourceARN"])}


OPERATIONS: dict[str, Handler] = {
    "RegisterScalableTarget": register_scalable_target,
    "DeregisterScalableTarget": deregister_scalable_target,
    "DescribeScalableTargets": describe_scalable_targets,
    "PutScalingPolicy": put_scaling_policy,
    "DeleteScalingPolicy": delete_scaling_policy,
    "DescribeScalingPolicies": describe_scaling_policies,
    "DescribeScalingActivities": describe_scaling_activities,
    "TagResource": tag_resource,
    "UntagResource": untag_resource,
    "ListTagsForResource": list_tags_for_resource,
}


async def handle(request: web.Request, scaler: AutoScaler, target: str) -> web.Response:
    """`target` is the part of X-Amz-Target after 'AnyScaleFrontendService.'."""
    request_id = str(uuid.uuid4())
    if target not in operation_names(APPLICATION_AUTOSCALING):
        return unknown_target(f"{TARGET_PREFIX}.{target}", request_id)
    return await json_rpc.dispatch(
        scaler,
        OPERATIONS,
        APPLICATION_AUTOSCALING,
        "Application Auto Scaling",
        target,
        await request.read(),
        request_id,
    )
