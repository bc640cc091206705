"""The CloudWatch operations, one function each: parse the request's members into
emulator.model.alarms values, make one call into the AlarmService, and build the answer's members
(PascalCase lives here; the codec of the request serialises them: emulator.wire.cloudwatch_codec).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from emulator.errors import (
    InvalidNextToken,
    InvalidParameterCombination,
    InvalidParameterValue,
    ValidationFailed,
)
from emulator.hosting.monitoring.alarms import AlarmService
from emulator.hosting.monitoring.statistics import StatisticSet
from emulator.model import alarm_messages
from emulator.model import alarms as al
from emulator.wire.timestamps import parse_timestamp

Params = Mapping[str, Any]
Handler = Callable[[AlarmService, Params], dict[str, Any] | None]
T = TypeVar("T")


# ---------------------------------------------------------------------- parsing


def _time(value: Any) -> datetime:
    """A timestamp member: a datetime (CBOR tag 1), epoch seconds or ISO 8601 (JSON)."""
    return parse_timestamp(value)


def _maybe_time(value: Any) -> datetime | None:
    return None if value is None else _time(value)


def _metric(p: Params) -> al.Metric:
    for member in ("Namespace", "MetricName"):  # optional in the model's Metric, needed to find one
        if not p.get(member):
            raise ValidationFailed(alarm_messages.metric_needs(member))
    dims = tuple((d["Name"], d["Value"]) for d in p.get("Dimensions") or ())
    return al.Metric(p["Namespace"], p["MetricName"], dims)


def _spec(p: Params) -> al.AlarmSpec:
    if p.get("Metrics") or p.get("ThresholdMetricId"):
        raise ValidationFailed(alarm_messages.ALARM_METRIC_MATH)
    if p.get("EvaluationCriteria") or p.get("EvaluationInterval"):
        raise ValidationFailed(alarm_messages.ALARM_PROMQL)
    if p.get("ExtendedStatistic"):
        raise ValidationFailed(alarm_messages.ALARM_EXTENDED_STATISTIC)
    operator = p.get("ComparisonOperator")
    if operator is not None and operator not in alarm_messages.THRESHOLD_OPERATORS:
        raise ValidationFailed(alarm_messages.anomaly_operator(operator))
    for member in ("MetricName", "Namespace", "Statistic", "Period", "EvaluationPeriods", "Threshold"):
        if p.get(member) is None:
            raise ValidationFailed(alarm_messages.alarm_needs(member))
    if operator is None:
        raise ValidationFailed(alarm_messages.alarm_needs("ComparisonOperator"))
    treat = p.get("TreatMissingData")
    if treat is not None and treat not in {t.value for t in al.TreatMissing}:
        raise ValidationFailed(alarm_messages.bad_treat_missing(treat))
    return al.AlarmSpec(
        name=p["AlarmName"],
        metric=_metric(p),
        statistic=p["Statistic"],
        period=int(p["Period"]),
        evaluation_periods=int(p["EvaluationPeriods"]),
        threshold=float(p["Threshold"]),
        comparison=al.Comparison(operator),
        datapoints_to_alarm=p.get("DatapointsToAlarm"),
        treat_missing_data=None if treat is None else al.TreatMissing(treat),
        unit=p.get("Unit"),
        description=p.get("AlarmDescription"),
        actions_enabled=bool(p.get("ActionsEnabled", True)),
        ok_actions=tuple(p.get("OKActions") or ()),
        alarm_actions=tuple(p.get("AlarmActions") or ()),
        insufficient_data_actions=tuple(p.get("InsufficientDataActions") or ()),
    )


def _page(items: Sequence[T], token: str | None, limit: int) -> tuple[Sequence[T], str | None]:
    """A page and an opaque NextToken (the offset)."""
    start = 0
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
            raise InvalidNextToken("The service cannot process the NextToken.") from exc
    end = start + limit
    return items[start:end], (
        base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    )


# ---------------------------------------------------------------------- serialising


def _dimensions(m: al.Metric) -> list[dict[str, str]]:
    return [{"Name": n, "Value": v} for n, v in m.dimensions]


def metric_alarm(a: al.MetricAlarm) -> dict[str, Any]:
    s = a.spec
    out: dict[str, Any] = {"AlarmName": s.name, "AlarmArn": a.arn}
    if s.description is not None:
        out["AlarmDescription"] = s.description
    out.update(
        {
            "AlarmConfigurationUpdatedTimestamp": a.configuration_updated,
            "ActionsEnabled": s.actions_enabled,
            "OKActions": list(s.ok_actions),
            "AlarmActions": list(s.alarm_actions),
            "InsufficientDataActions": list(s.insufficient_data_actions),
            "StateValue": a.state.value.value,
            "StateReason": a.state.reason,
        }
    )
    if a.state.reason_data is not None:
        out["StateReasonData"] = a.state.reason_data
    out.update(
        {
            "StateUpdatedTimestamp": a.state.updated,
            "MetricName": s.metric.name,
            "Namespace": s.metric.namespace,
            "Statistic": s.statistic,
            "Dimensions": _dimensions(s.metric),
            "Period": s.period,
        }
    )
    if s.unit is not None:
        out["Unit"] = s.unit
    out["EvaluationPeriods"] = s.evaluation_periods
    if s.datapoints_to_alarm is not None:
        out["DatapointsToAlarm"] = s.datapoints_to_alarm
    out["Threshold"] = s.threshold
    out["ComparisonOperator"] = s.comparison.value
    if s.treat_missing_data is not None:
        out["TreatMissingData"] = s.treat_missing_data.value
    out["StateTransitionedTimestamp"] = a.state.transitioned
    return out


def _datapoint(stamp: Any, s: StatisticSet, statistics: Sequence[str], unit: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"Timestamp": stamp}
    for name in statistics:
        out[name] = s.value(name)
    if unit is not None:
        out["Unit"] = unit
    return out


# ---------------------------------------------------------------------- operations


def put_metric_alarm(svc: AlarmService, p: Params) -> None:
    svc.put_metric_alarm(_spec(p))


def describe_alarms(svc: AlarmService, p: Params) -> dict[str, Any]:
    types = p.get("AlarmTypes") or ["MetricAlarm"]
    found: list[al.MetricAlarm] = []
    if "MetricAlarm" in types and not (p.get("ChildrenOfAlarmName") or p.get("ParentsOfAlarmName")):
        found = svc.describe_alarms(
            p.get("AlarmNames"), p.get("AlarmNamePrefix"), p.get("StateValue"), p.get("ActionPrefix")
        )
    items, token = _page(found, p.get("NextToken"), int(p.get("MaxRecords") or 50))
    out: dict[str, Any] = {"MetricAlarms": [metric_alarm(a) for a in items]}
    if "CompositeAlarm" in types:
        out["CompositeAlarms"] = []  # smlocal has no composite alarms
    if token:
        out["NextToken"] = token
    return out


def delete_alarms(svc: AlarmService, p: Params) -> None:
    svc.delete_alarms(p["AlarmNames"])


def set_alarm_state(svc: AlarmService, p: Params) -> None:
    svc.set_alarm_state(p["AlarmName"], p["StateValue"], p["StateReason"], p.get("StateReasonData"))


def enable_alarm_actions(svc: AlarmService, p: Params) -> None:
    svc.set_actions_enabled(p["AlarmNames"], True)


def disable_alarm_actions(svc: AlarmService, p: Params) -> None:
    svc.set_actions_enabled(p["AlarmNames"], False)


def describe_alarm_history(svc: AlarmService, p: Params) -> dict[str, Any]:
    types = p.get("AlarmTypes") or ["MetricAlarm", "CompositeAlarm"]
    found = []
    if "MetricAlarm" in types:
        found = svc.history(
            p.get("AlarmName"),
            p.get("HistoryItemType"),
            _maybe_time(p.get("StartDate")),
            _maybe_time(p.get("EndDate")),
            oldest_first=p.get("ScanBy") == "TimestampAscending",
        )
    items, token = _page(found, p.get("NextToken"), int(p.get("MaxRecords") or 100))
    out: dict[str, Any] = {
        "AlarmHistoryItems": [
            {
                "AlarmName": h.alarm_name,
                "AlarmType": "MetricAlarm",
                "Timestamp": h.timestamp,
                "HistoryItemType": h.item_type.value,
                "HistorySummary": h.summary,
                "HistoryData": h.data,
            }
            for h in items
        ]
    }
    if token:
        out["NextToken"] = token
    return out


def get_metric_statistics(svc: AlarmService, p: Params) -> dict[str, Any]:
    if p.get("ExtendedStatistics"):
        raise InvalidParameterValue(alarm_messages.QUERY_EXTENDED_STATISTICS)
    statistics = p.get("Statistics") or []
    if not statistics:
        raise InvalidParameterCombination(alarm_messages.NO_STATISTICS)
    metric = _metric(p)
    start, end = _time(p["StartTime"]), _time(p["EndTime"])
    points = svc.statistics(metric, p.get("Unit"), start, end, int(p["Period"]))
    unit = svc.unit_of(metric)
    return {"Label": metric.name, "Datapoints": [_datapoint(t, s, statistics, unit) for t, s in points]}


def get_metric_data(svc: AlarmService, p: Params) -> dict[str, Any]:
    results = []
    descending = p.get("ScanBy", "TimestampDescending") == "TimestampDescending"
    start, end = _time(p["StartTime"]), _time(p["EndTime"])
    for q in p["MetricDataQueries"]:
        query_id = q["Id"]
        if q.get("Expression"):
            raise ValidationFailed(alarm_messages.query_expression(query_id))
        stat = q.get("MetricStat")
        if stat is None:
            raise ValidationFailed(alarm_messages.query_needs(query_id))
        if stat["Stat"] not in al.STATISTICS:
            raise ValidationFailed(alarm_messages.query_stat(query_id, stat["Stat"]))
        metric = _metric(stat["Metric"])
        period = int(stat["Period"])
        points = svc.statistics(metric, stat.get("Unit"), start, end, period, None)
        if descending:
            points.reverse()
        if q.get("ReturnData", True):
            results.append(
                {
                    "Id": query_id,
                    "Label": q.get("Label") or metric.name,
                    "Timestamps": [t for t, _ in points],
                    "Values": [s.value(stat["Stat"]) for _, s in points],
                    "StatusCode": "Complete",
                }
            )
    return {"MetricDataResults": results, "Messages": []}


def list_metrics(svc: AlarmService, p: Params) -> dict[str, Any]:
    filters = [(d["Name"], d.get("Value")) for d in p.get("Dimensions") or ()]
    found = svc.list_metrics(p.get("Namespace"), p.get("MetricName"), filters)
    items, token = _page(found, p.get("NextToken"), 500)
    metrics = [{"Namespace": m.namespace, "MetricName": m.name, "Dimensions": _dimensions(m)} for m in items]
    out: dict[str, Any] = {"Metrics": metrics}
    if token:
        out["NextToken"] = token
    return out
