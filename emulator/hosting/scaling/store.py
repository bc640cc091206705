"""The state dir's autoscaling.json: scalable targets, policies and recent activities across restarts.

Written atomically after every change (they are rare: control-plane calls and scaling activities).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from emulator.hosting.state_files import write_atomically
from emulator.model import scaling as sc

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


@dataclass
class Snapshot:
    targets: list[sc.ScalableTarget] = field(default_factory=list)
    policies: list[sc.ScalingPolicy] = field(default_factory=list)
    activities: list[sc.ScalingActivity] = field(default_factory=list)


def _key(k: sc.TargetKey) -> list[str]:
    return [k.namespace, k.resource_id, k.dimension]


def _unkey(v: Any) -> sc.TargetKey:
    return sc.TargetKey(str(v[0]), str(v[1]), str(v[2]))


def _time(v: str | None) -> datetime | None:
    return None if v is None else datetime.fromisoformat(v)


def _required_time(v: str) -> datetime:
    if not isinstance(v, str):
        raise TypeError(f"a timestamp is required, not {v!r}")
    return datetime.fromisoformat(v)


def _target(t: sc.ScalableTarget) -> dict[str, Any]:
    return {
        "key": _key(t.key),
        "arn": t.arn,
        "min": t.min_capacity,
        "max": t.max_capacity,
        "role_arn": t.role_arn,
        "created": t.creation_time.isoformat(),
        "suspended": [t.suspended.scale_in, t.suspended.scale_out, t.suspended.scheduled],
        "tags": [list(x) for x in t.tags],
    }


def _untarget(d: dict[str, Any]) -> sc.ScalableTarget:
    created = _required_time(d["created"])
    return sc.ScalableTarget(
        key=_unkey(d["key"]),
        arn=d["arn"],
        min_capacity=int(d["min"]),
        max_capacity=int(d["max"]),
        role_arn=d["role_arn"],
        creation_time=created,
        suspended=sc.Suspended(*(bool(x) for x in d["suspended"])),
        tags=tuple((str(k), str(v)) for k, v in d["tags"]),
    )


def _tracking(t: sc.TargetTracking) -> dict[str, Any]:
    c = t.customized_metric
    return {
        "target_value": t.target_value,
        "predefined_metric": t.predefined_metric,
        "resource_label": t.resource_label,
        "customized_metric": None
        if c is None
        else {
            "metric_name": c.metric_name,
            "namespace": c.namespace,
            "dimensions": [list(x) for x in c.dimensions],
            "statistic": c.statistic,
            "unit": c.unit,
        },
        "scale_out_cooldown": t.scale_out_cooldown,
        "scale_in_cooldown": t.scale_in_cooldown,
        "disable_scale_in": t.disable_scale_in,
    }


def _untracking(d: dict[str, Any]) -> sc.TargetTracking:
    c = d.get("customized_metric")
    custom = None
    if c is not None:
        custom = sc.CustomizedMetric(
            c["metric_name"],
            c["namespace"],
            tuple((str(k), str(v)) for k, v in c["dimensions"]),
            c["statistic"],
            c["unit"],
        )
    return sc.TargetTracking(
        target_value=float(d["target_value"]),
        predefined_metric=d.get("predefined_metric"),
        resource_label=d.get("resource_label"),
        customized_metric=custom,
        scale_out_cooldown=d.get("scale_out_cooldown"),
        scale_in_cooldown=d.get("scale_in_cooldown"),
        disable_scale_in=d.get("disable_scale_in"),
    )


def _step(s: sc.StepScaling) -> dict[str, Any]:
    return {
        "adjustment_type": s.adjustment_type,
        "steps": [[a.lower_bound, a.upper_bound, a.scaling_adjustment] for a in s.step_adjustments],
        "min_adjustment_magnitude": s.min_adjustment_magnitude,
        "cooldown": s.cooldown,
        "metric_aggregation_type": s.metric_aggregation_type,
    }


def _unstep(d: dict[str, Any]) -> sc.StepScaling:
    return sc.StepScaling(
        adjustment_type=d.get("adjustment_type"),
        step_adjustments=tuple(sc.StepAdjustment(lo, hi, int(adj)) for lo, hi, adj in d["steps"]),
        min_adjustment_magnitude=d.get("min_adjustment_magnitude"),
        cooldown=d.get("cooldown"),
        metric_aggregation_type=d.get("metric_aggregation_type"),
    )


def _policy(p: sc.ScalingPolicy) -> dict[str, Any]:
    return {
        "name": p.name,
        "arn": p.arn,
        "key": _key(p.key),
        "type": p.policy_type.value,
        "created": p.creation_time.isoformat(),
        "target_tracking": None if p.target_tracking is None else _tracking(p.target_tracking),
        "step_scaling": None if p.step_scaling is None else _step(p.step_scaling),
        "alarms": [[a.name, a.arn] for a in p.alarms],
    }


def _unpolicy(d: dict[str, Any]) -> sc.ScalingPolicy:
    created = _required_time(d["created"])
    return sc.ScalingPolicy(
        name=d["name"],
        arn=d["arn"],
        key=_unkey(d["key"]),
        policy_type=sc.PolicyType(d["type"]),
        creation_time=created,
        target_tracking=None if d["target_tracking"] is None else _untracking(d["target_tracking"]),
        step_scaling=None if d["step_scaling"] is None else _unstep(d["step_scaling"]),
        alarms=tuple(sc.Alarm(n, a) for n, a in d["alarms"]),
    )


def _activity(a: sc.ScalingActivity) -> dict[str, Any]:
    return {
        "id": a.activity_id,
        "key": _key(a.key),
        "description": a.description,
        "cause": a.cause,
        "start": a.start_time.isoformat(),
        "end": None if a.end_time is None else a.end_time.isoformat(),
        "status": a.status.value,
        "message": a.status_message,
        "details": a.details,
        "not_scaled": [
            [r.code, r.max_capacity, r.min_capacity, r.current_capacity] for r in a.not_scaled_reasons
        ],
    }


def _unactivity(d: dict[str, Any]) -> sc.ScalingActivity:
    start = _required_time(d["start"])
    status = sc.ActivityStatus(d["status"])
    message = d.get("message")
    end = _time(d.get("end"))
    if status in (sc.ActivityStatus.IN_PROGRESS, sc.ActivityStatus.PENDING):
        # the server stopped while it ran: the endpoint came back with its persisted configuration
        status, message, end = sc.ActivityStatus.FAILED, "smlocal stopped before the activity ended", start
    return sc.ScalingActivity(
        activity_id=d["id"],
        key=_unkey(d["key"]),
        description=d["description"],
        cause=d["cause"],
        start_time=start,
        status=status,
        status_message=message,
        end_time=end,
        details=d.get("details"),
        not_scaled_reasons=tuple(sc.NotScaledReason(*r) for r in d["not_scaled"]),
    )


def save(path: Path, snapshot: Snapshot) -> None:
    document = {
        "version": FORMAT_VERSION,
        "targets": [_target(t) for t in snapshot.targets],
        "policies": [_policy(p) for p in snapshot.policies],
        "activities": [_activity(a) for a in snapshot.activities],
    }
    write_atomically(path, json.dumps(document, indent=1))


def load(path: Path) -> Snapshot:
    """An empty snapshot when there is no file; an unreadable file is logged and ignored."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return Snapshot()
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return Snapshot()
    try:
        if not isinstance(document, dict):
            raise TypeError("not a JSON object")
        return Snapshot(
            [_untarget(d) for d in document.get("targets", [])],
            [_unpolicy(d) for d in document.get("policies", [])],
            [_unactivity(d) for d in document.get("activities", [])],
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        log.warning("ignoring malformed %s: %s", path, exc)
        return Snapshot()
