"""CloudWatch in both protocols botocore's cloudwatch model lists and clients speak:

* smithy-rpc-v2-cbor: `POST /service/GraniteServiceVersion20100801/operation/<Operation>`, CBOR in and
  out (timestamps as tag 1, epoch seconds);
* awsJson1_0: `POST /` with `X-Amz-Target: GraniteServiceVersion20100801.<Operation>` (what boto3's
  client resolves to: botocore prefers `json` to `smithy-rpc-v2-cbor` in its protocol priority).

Errors are `{"__type", "message"}` with the awsQueryCompatible `x-amzn-query-error` header
(wire/errors.py). Table-driven like control_api: decode, validate against botocore's cloudwatch model,
parse into emulator.model.alarms values, one call into the AlarmService, serialise with the request's
codec (PascalCase lives here).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import cbor2
from aiohttp import web

from emulator.errors import (
    InvalidNextToken,
    InvalidParameterCombination,
    InvalidParameterValue,
    MalformedRequest,
    SmlocalError,
    UnknownOperation,
    ValidationFailed,
)
from emulator.hosting.monitoring.alarms import AlarmService
from emulator.hosting.monitoring.metrics import StatisticSet
from emulator.model import alarms as al
from emulator.wire.errors import cbor_error, query_error_response, query_json_error, unknown_target
from emulator.wire.json_rpc import parse_json, without_nulls
from emulator.wire.service_models import CLOUDWATCH, operation_model, operation_names
from emulator.wire.timestamps import parse_timestamp
from emulator.wire.validation import validate_input

SERVICE_ID = "GraniteServiceVersion20100801"  # the model's targetPrefix
PATH = f"/service/{SERVICE_ID}/operation/{{operation}}"
JSON_10 = "application/x-amz-json-1.0"
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
    dims = tuple((d["Name"], d["Value"]) for d in p.get("Dimensions") or ())
    return al.Metric(p["Namespace"], p["MetricName"], dims)


def _spec(p: Params) -> al.AlarmSpec:
    if p.get("Metrics") or p.get("ThresholdMetricId"):
        raise ValidationFailed(al.ALARM_METRIC_MATH)
    if p.get("EvaluationCriteria") or p.get("EvaluationInterval"):
        raise ValidationFailed(al.ALARM_PROMQL)
    if p.get("ExtendedStatistic"):
        raise ValidationFailed(al.ALARM_EXTENDED_STATISTIC)
    operator = p.get("ComparisonOperator")
    if operator is not None and operator not in al.THRESHOLD_OPERATORS:
        raise ValidationFailed(al.anomaly_operator(operator))
    for member in ("MetricName", "Namespace", "Statistic", "Period", "EvaluationPeriods", "Threshold"):
        if p.get(member) is None:
            raise ValidationFailed(al.alarm_needs(member))
    if operator is None:
        raise ValidationFailed(al.alarm_needs("ComparisonOperator"))
    treat = p.get("TreatMissingData")
    if treat is not None and treat not in {t.value for t in al.TreatMissing}:
        raise ValidationFailed(al.bad_treat_missing(treat))
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
        raise InvalidParameterValue(al.QUERY_EXTENDED_STATISTICS)
    statistics = p.get("Statistics") or []
    if not statistics:
        raise InvalidParameterCombination(al.NO_STATISTICS)
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
            raise ValidationFailed(al.query_expression(query_id))
        stat = q.get("MetricStat")
        if stat is None:
            raise ValidationFailed(al.query_needs(query_id))
        if stat["Stat"] not in al.STATISTICS:
            raise ValidationFailed(al.query_stat(query_id, stat["Stat"]))
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


OPERATIONS: dict[str, Handler] = {
    "PutMetricAlarm": put_metric_alarm,
    "DescribeAlarms": describe_alarms,
    "DeleteAlarms": delete_alarms,
    "SetAlarmState": set_alarm_state,
    "EnableAlarmActions": enable_alarm_actions,
    "DisableAlarmActions": disable_alarm_actions,
    "DescribeAlarmHistory": describe_alarm_history,
    "GetMetricStatistics": get_metric_statistics,
    "GetMetricData": get_metric_data,
    "ListMetrics": list_metrics,
}


# ---------------------------------------------------------------------- the two codecs


@dataclass(frozen=True)
class Codec:
    decode: Callable[[bytes], Any]
    encode: Callable[[dict[str, Any] | None, str], web.Response]
    error: Callable[[Exception, str], web.Response]


def _cbor_decode(body: bytes) -> Any:
    try:
        return cbor2.loads(body) if body else {}
    except (cbor2.CBORDecodeError, ValueError, TypeError, RecursionError) as exc:
        raise MalformedRequest(f"The request body is not valid CBOR: {exc}") from exc


def _cbor_encode(result: dict[str, Any] | None, request_id: str) -> web.Response:
    headers = {"smithy-protocol": "rpc-v2-cbor", "x-amzn-RequestId": request_id}
    if result is None:  # an operation without output: an empty body
        return web.Response(body=b"", headers=headers)
    headers["Content-Type"] = "application/cbor"
    return web.Response(body=cbor2.dumps(result, datetime_as_timestamp=True, timezone=UTC), headers=headers)


def _json_decode(body: bytes) -> Any:
    return parse_json(body)


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _json_encode(result: dict[str, Any] | None, request_id: str) -> web.Response:
    body = json.dumps(result or {}, default=_epoch).encode()
    return web.Response(body=body, headers={"Content-Type": JSON_10, "x-amzn-RequestId": request_id})


CBOR = Codec(_cbor_decode, _cbor_encode, cbor_error)
JSON = Codec(_json_decode, _json_encode, query_json_error)


def dispatch(svc: AlarmService, operation: str, body: bytes, request_id: str, codec: Codec) -> web.Response:
    try:
        handler = OPERATIONS.get(operation)
        if handler is None:
            raise UnknownOperation("CloudWatch", operation)
        params = codec.decode(body)
        if not isinstance(params, dict):
            raise ValidationFailed("The request body must be a map of the operation's members.")
        validate_input(operation_model(CLOUDWATCH, operation).input_shape, params)
        result = handler(svc, without_nulls(params))
    except (SmlocalError, KeyError, TypeError, ValueError) as exc:
        return codec.error(exc, request_id)
    return codec.encode(result, request_id)


async def handle_cbor(request: web.Request, svc: AlarmService) -> web.Response:
    """`POST /service/GraniteServiceVersion20100801/operation/{operation}` (smithy-rpc-v2-cbor)."""
    request_id = str(uuid.uuid4())
    operation = request.match_info["operation"]
    if operation not in operation_names(CLOUDWATCH):
        return query_error_response(
            400,
            "com.amazon.coral.service#UnknownOperationException",
            None,
            f"Unknown operation {SERVICE_ID}.{operation}",
            request_id,
            cbor=True,
        )
    if request.headers.get("smithy-protocol") != "rpc-v2-cbor":
        # Smithy requires the header; requiring it also makes every request to this route one a
        # browser preflights (a web page cannot post CBOR here as a "simple" request).
        return query_error_response(
            400,
            "com.amazon.coral.validate#ValidationException",
            "ValidationError",
            "Requests to the rpc-v2-cbor protocol need the header smithy-protocol: rpc-v2-cbor.",
            request_id,
            cbor=True,
        )
    return dispatch(svc, operation, await request.read(), request_id, CBOR)


async def handle_json(request: web.Request, svc: AlarmService, operation: str) -> web.Response:
    """`POST /` with `X-Amz-Target: GraniteServiceVersion20100801.{operation}` (awsJson1_0)."""
    request_id = str(uuid.uuid4())
    if operation not in operation_names(CLOUDWATCH):
        return unknown_target(f"{SERVICE_ID}.{operation}", request_id)
    return dispatch(svc, operation, await request.read(), request_id, JSON)
