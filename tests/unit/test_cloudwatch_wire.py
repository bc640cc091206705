"""emulator.wire.cloudwatch_api: requests built by botocore's own serializers and answers read by its
own parsers, in both protocols of the cloudwatch model: awsJson1_0 (what boto3's client resolves to)
and smithy-rpc-v2-cbor; then unchanged boto3 clients of each protocol over HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import aiohttp
import boto3
import botocore.model
import cbor2
import pytest
from aiohttp import web
from botocore import parsers, serialize
from botocore.awsrequest import HeadersDict
from botocore.exceptions import ClientError

from emulator.config import ServerConfig
from emulator.hosting.monitoring import store as m
from emulator.hosting.monitoring.alarms import AlarmService
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.autoscaler import AutoScaler
from emulator.model.alarm_messages import (
    ALARM_EXTENDED_STATISTIC,
    ALARM_METRIC_MATH,
    QUERY_EXTENDED_STATISTICS,
)
from emulator.wire import cloudwatch_api, cloudwatch_codec
from emulator.wire.service_models import CLOUDWATCH, operation_model

T0 = 1_800_000_000.0  # a period boundary
CBOR = "smithy-rpc-v2-cbor"
PROTOCOLS = ("json", CBOR)
DIMS = [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]
POLICY = "arn:aws:autoscaling:us-east-1:123456789012:scalingPolicy:1:resource/sagemaker/endpoint/ep/variant/x:policyName/p"
ALARM: dict[str, Any] = {
    "AlarmName": "high",
    "AlarmDescription": "too many requests",
    "ActionsEnabled": True,
    "OKActions": [],
    "AlarmActions": [POLICY],
    "InsufficientDataActions": [],
    "MetricName": "Invocations",
    "Namespace": "AWS/SageMaker",
    "Statistic": "Sum",
    "Dimensions": DIMS,
    "Period": 60,
    "Unit": "None",
    "EvaluationPeriods": 2,
    "DatapointsToAlarm": 2,
    "Threshold": 10.0,
    "ComparisonOperator": "GreaterThanThreshold",
    "TreatMissingData": "notBreaching",
}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeScaler:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float, float]] = []

    def alarm_fired(self, policy_arn: str, alarm_name: str, metric: float, threshold: float) -> bool:
        self.calls.append((policy_arn, alarm_name, metric, threshold))
        return True


@pytest.fixture
def clock() -> Clock:
    return Clock(T0 + 1)


@pytest.fixture
def svc(tmp_path: Path, clock: Clock) -> AlarmService:
    """Three periods of data: 3 requests, none, 5 requests (the current period)."""
    metrics = Metrics(clock=clock)
    for minute, requests in enumerate((3, 0, 5)):
        clock.now = T0 + minute * 60 + 1
        metrics.set_instances("ep", "AllTraffic", 1)
        for _ in range(requests):
            metrics.record("ep", "AllTraffic", m.OK, 0.001, 0.002)
    return AlarmService(
        ServerConfig(state_dir=tmp_path),
        metrics,
        cast(AutoScaler, FakeScaler()),
        lambda: datetime.fromtimestamp(clock.now, UTC),
    )


def call(svc: AlarmService, protocol: str, operation: str, validate: bool = True, **params: Any) -> Any:
    """Serialise as botocore does, dispatch, parse as botocore does; (raw response, parsed). A
    success's ResponseMetadata is checked and dropped."""
    op = operation_model(CLOUDWATCH, operation)
    request = serialize.create_serializer(protocol, include_validation=validate).serialize_to_request(
        params, op
    )
    if protocol == CBOR:
        assert request["url_path"] == f"/service/GraniteServiceVersion20100801/operation/{operation}"
        codec = cloudwatch_codec.CBOR
    else:
        assert request["headers"]["X-Amz-Target"] == f"GraniteServiceVersion20100801.{operation}"
        codec = cloudwatch_codec.JSON
    resp = cloudwatch_api.dispatch(svc, operation, request["body"], "req-1", codec)
    assert isinstance(resp.body, bytes)
    response = {"status_code": resp.status, "headers": HeadersDict(resp.headers), "body": resp.body}
    parsed = parsers.create_parser(protocol).parse(response, op.output_shape)
    assert resp.headers["x-amzn-RequestId"] == "req-1"
    if resp.status == 200:
        parsed.pop("ResponseMetadata")
    return resp, parsed


def at(minute: int) -> datetime:
    return datetime.fromtimestamp(T0 + minute * 60, UTC)


# ---------------------------------------------------------------------- round trips


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_put_and_describe_alarm(svc: AlarmService, protocol: str) -> None:
    _, put = call(svc, protocol, "PutMetricAlarm", **ALARM)
    assert put == {}
    _, described = call(svc, protocol, "DescribeAlarms", AlarmNames=["high"])
    alarm = described["MetricAlarms"][0]
    assert {k: alarm[k] for k in ALARM} == ALARM
    assert alarm["AlarmArn"] == "arn:aws:cloudwatch:us-east-1:123456789012:alarm:high"
    # created, then evaluated at once on the closed periods: 3 then 0, neither above 10
    assert alarm["StateValue"] == "OK"
    assert alarm["StateReason"].startswith("Threshold Crossed: 2 out of the last 2 datapoints [0.0 (")
    assert json.loads(alarm["StateReasonData"])["recentDatapoints"] == [3.0, 0.0]
    for key in ("AlarmConfigurationUpdatedTimestamp", "StateUpdatedTimestamp", "StateTransitionedTimestamp"):
        assert isinstance(alarm[key], datetime) and alarm[key].timestamp() == pytest.approx(T0 + 121)
    assert "CompositeAlarms" not in described
    _, both = call(svc, protocol, "DescribeAlarms", AlarmTypes=["CompositeAlarm", "MetricAlarm"])
    assert both["CompositeAlarms"] == [] and len(both["MetricAlarms"]) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_alarm_paging_state_history_and_delete(svc: AlarmService, protocol: str) -> None:
    for i in range(3):
        call(svc, protocol, "PutMetricAlarm", **{**ALARM, "AlarmName": f"a{i}"})
    _, first = call(svc, protocol, "DescribeAlarms", MaxRecords=2)
    assert [a["AlarmName"] for a in first["MetricAlarms"]] == ["a0", "a1"]
    _, rest = call(svc, protocol, "DescribeAlarms", MaxRecords=2, NextToken=first["NextToken"])
    assert [a["AlarmName"] for a in rest["MetricAlarms"]] == ["a2"] and "NextToken" not in rest
    _, done = call(svc, protocol, "SetAlarmState", AlarmName="a1", StateValue="ALARM", StateReason="drill")
    assert done == {}
    _, alarming = call(svc, protocol, "DescribeAlarms", StateValue="ALARM")
    assert [(a["AlarmName"], a["StateReason"]) for a in alarming["MetricAlarms"]] == [("a1", "drill")]
    _, history = call(svc, protocol, "DescribeAlarmHistory", AlarmName="a1", HistoryItemType="StateUpdate")
    items = history["AlarmHistoryItems"]
    assert [i["HistorySummary"] for i in items] == [
        "Alarm updated from OK to ALARM",
        "Alarm updated from INSUFFICIENT_DATA to OK",
    ]
    assert items[0]["AlarmType"] == "MetricAlarm" and isinstance(items[0]["Timestamp"], datetime)
    call(svc, protocol, "DeleteAlarms", AlarmNames=["a0", "a2"])
    _, left = call(svc, protocol, "DescribeAlarms")
    assert [a["AlarmName"] for a in left["MetricAlarms"]] == ["a1"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_get_metric_statistics(svc: AlarmService, protocol: str) -> None:
    _, got = call(
        svc,
        protocol,
        "GetMetricStatistics",
        Namespace="AWS/SageMaker",
        MetricName="Invocations",
        Dimensions=DIMS,
        StartTime=at(-5),
        EndTime=at(5),
        Period=60,
        Statistics=["Sum", "SampleCount", "Average", "Maximum"],
    )
    assert got["Label"] == "Invocations"
    points = [
        (p["Timestamp"].timestamp(), p["Sum"], p["SampleCount"], p["Average"]) for p in got["Datapoints"]
    ]
    assert points == [(T0, 3.0, 3.0, 1.0), (T0 + 60, 0.0, 0.0, 0.0), (T0 + 120, 5.0, 5.0, 1.0)]
    assert {p["Unit"] for p in got["Datapoints"]} == {"None"} and "Minimum" not in got["Datapoints"][0]
    _, two = call(
        svc,
        protocol,
        "GetMetricStatistics",
        Namespace="AWS/SageMaker",
        MetricName="Invocations",
        Dimensions=DIMS[::-1],  # dimensions match in any order
        StartTime=at(0) + timedelta(seconds=59),  # rounded down to the period
        EndTime=at(3),
        Period=120,
        Statistics=["Sum"],
    )
    assert [(p["Timestamp"].timestamp(), p["Sum"]) for p in two["Datapoints"]] == [(T0, 3.0), (T0 + 120, 5.0)]
    for other in ({"Unit": "Seconds"}, {"Dimensions": DIMS[:1]}, {"Namespace": "AWS/EC2"}):
        params: dict[str, Any] = dict(
            Namespace="AWS/SageMaker",
            MetricName="Invocations",
            Dimensions=DIMS,
            StartTime=at(-5),
            EndTime=at(5),
        )
        params.update(other)
        _, none = call(svc, protocol, "GetMetricStatistics", Period=60, Statistics=["Sum"], **params)
        assert none["Datapoints"] == [], other


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_get_metric_data_and_list_metrics(svc: AlarmService, protocol: str) -> None:
    stat = {
        "Metric": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations", "Dimensions": DIMS},
        "Period": 60,
    }
    _, data = call(
        svc,
        protocol,
        "GetMetricData",
        MetricDataQueries=[
            {"Id": "sum", "MetricStat": {**stat, "Stat": "Sum"}},
            {"Id": "n", "MetricStat": {**stat, "Stat": "SampleCount"}, "Label": "count", "ReturnData": True},
            {"Id": "hidden", "MetricStat": {**stat, "Stat": "Sum"}, "ReturnData": False},
        ],
        StartTime=at(0),
        EndTime=at(3),
    )
    results = data["MetricDataResults"]
    assert [(r["Id"], r["Label"], r["StatusCode"]) for r in results] == [
        ("sum", "Invocations", "Complete"),
        ("n", "count", "Complete"),
    ]
    assert [t.timestamp() for t in results[0]["Timestamps"]] == [T0 + 120, T0 + 60, T0]  # newest first
    assert results[0]["Values"] == [5.0, 0.0, 3.0]
    _, ascending = call(
        svc,
        protocol,
        "GetMetricData",
        MetricDataQueries=[{"Id": "sum", "MetricStat": {**stat, "Stat": "Sum"}}],
        StartTime=at(0),
        EndTime=at(3),
        ScanBy="TimestampAscending",
    )
    assert ascending["MetricDataResults"][0]["Values"] == [3.0, 0.0, 5.0]
    _, listed = call(svc, protocol, "ListMetrics", Namespace="AWS/SageMaker", MetricName="ModelLatency")
    assert listed["Metrics"] == [
        {"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency", "Dimensions": DIMS}
    ]
    _, by_dim = call(svc, protocol, "ListMetrics", Dimensions=[{"Name": "EndpointName", "Value": "ep"}])
    names = [x["MetricName"] for x in by_dim["Metrics"]]
    # no CPU/memory samples were taken: those are not listed
    assert sorted(names) == sorted(
        ["Invocations", "InvocationsPerInstance", "Invocation4XXErrors", "Invocation5XXErrors"]
        + ["InvocationModelErrors", "ModelLatency", "OverheadLatency"]
    )
    _, nothing = call(svc, protocol, "ListMetrics", Dimensions=[{"Name": "EndpointName", "Value": "other"}])
    assert nothing["Metrics"] == []


def test_cbor_answers_carry_timestamps_as_tag_1(svc: AlarmService) -> None:
    call(svc, CBOR, "PutMetricAlarm", **ALARM)
    resp, _ = call(svc, CBOR, "DescribeAlarms")
    assert resp.headers["Content-Type"] == "application/cbor"
    assert resp.headers["smithy-protocol"] == "rpc-v2-cbor"
    document = cbor2.loads(resp.body)
    stamps = ("AlarmConfigurationUpdatedTimestamp", "StateUpdatedTimestamp", "StateTransitionedTimestamp")
    for key in stamps:
        value = document["MetricAlarms"][0][key]
        assert isinstance(value, datetime) and value.timestamp() == pytest.approx(T0 + 121)
        # tag 1 (epoch seconds), the only tag botocore's CBOR parser accepts; not tag 0 (a string)
        assert cbor2.dumps(value, datetime_as_timestamp=True) in resp.body
        assert cbor2.dumps(value) not in resp.body
    empty, _ = call(svc, CBOR, "DeleteAlarms", AlarmNames=["high"])
    assert (empty.status, empty.body) == (200, b"")


# ---------------------------------------------------------------------- errors


def _alarm(**changes: Any) -> dict[str, Any]:
    return {**ALARM, **changes}


def _stats(drop: str = "", **changes: Any) -> dict[str, Any]:
    base = dict(
        Namespace="AWS/SageMaker",
        MetricName="Invocations",
        Dimensions=DIMS,
        StartTime=at(0),
        EndTime=at(3),
        Period=60,
        Statistics=["Sum"],
    )
    return {k: v for k, v in {**base, **changes}.items() if k != drop}


def _data(query: dict[str, Any]) -> dict[str, Any]:
    return dict(MetricDataQueries=[query], StartTime=at(0), EndTime=at(3))


VALIDATION = ("ValidationError", 400)
ERRORS: list[tuple[str, dict[str, Any], tuple[str, int], str]] = [
    ("DeleteAlarms", dict(AlarmNames=["nope"]), ("ResourceNotFound", 404), "Alarm nope not found"),
    (
        "SetAlarmState",
        dict(AlarmName="nope", StateValue="OK", StateReason="r"),
        ("ResourceNotFound", 404),
        "Alarm nope not found",
    ),
    (
        "SetAlarmState",
        dict(AlarmName="high", StateValue="OK", StateReason="r", StateReasonData="{x"),
        ("InvalidFormat", 400),
        "StateReasonData is not valid JSON.",
    ),
    (
        "PutMetricAlarm",
        _alarm(Period=45),
        VALIDATION,
        "Period (45) must be a multiple of 60: smlocal's metrics have 60-second resolution (high-resolution "
        "periods of 10, 20 and 30 seconds are not supported).",
    ),
    (
        "PutMetricAlarm",
        {
            k: v
            for k, v in _alarm(
                Metrics=[{"Id": "e", "Expression": "m1 * 2"}], EvaluationPeriods=1, DatapointsToAlarm=1
            ).items()
            if k not in ("MetricName", "Namespace", "Statistic", "Dimensions", "Period", "Unit")
        },
        VALIDATION,
        ALARM_METRIC_MATH,
    ),
    (
        "PutMetricAlarm",
        {k: v for k, v in _alarm(ExtendedStatistic="p99").items() if k != "Statistic"},
        VALIDATION,
        ALARM_EXTENDED_STATISTIC,
    ),
    (
        "PutMetricAlarm",
        _alarm(ComparisonOperator="GreaterThanUpperThreshold"),
        VALIDATION,
        "smlocal does not support anomaly detection: ComparisonOperator GreaterThanUpperThreshold is not "
        "supported; use GreaterThanOrEqualToThreshold, GreaterThanThreshold, LessThanThreshold, "
        "LessThanOrEqualToThreshold with a Threshold.",
    ),
    (
        "PutMetricAlarm",
        _alarm(TreatMissingData="sometimes"),
        VALIDATION,
        "TreatMissingData sometimes is not one of missing, notBreaching, breaching, ignore.",
    ),
    (
        "PutMetricAlarm",
        {k: v for k, v in ALARM.items() if k != "Threshold"},
        VALIDATION,
        "Threshold is required for an alarm on a single metric (smlocal supports no other kind).",
    ),
    (
        "PutMetricAlarm",
        _alarm(AlarmName="x" * 256),
        VALIDATION,
        f"1 validation error detected: Value '{'x' * 256}' at 'alarmName' failed to satisfy constraint: "
        "Member must have length less than or equal to 255",
    ),
    (
        "PutMetricAlarm",
        _alarm(Statistic="Median"),
        VALIDATION,
        "1 validation error detected: Value 'Median' at 'statistic' failed to satisfy constraint: Member must "
        "satisfy enum value set: [SampleCount, Average, Sum, Minimum, Maximum]",
    ),
    (
        "GetMetricStatistics",
        _stats(drop="Statistics"),
        ("InvalidParameterCombination", 400),
        "At least one of the parameters Statistics and ExtendedStatistics must be specified.",
    ),
    (
        "GetMetricStatistics",
        _stats(drop="Statistics", ExtendedStatistics=["p99"]),
        ("InvalidParameterValue", 400),
        QUERY_EXTENDED_STATISTICS,
    ),
    (
        "GetMetricStatistics",
        _stats(Period=30),
        ("InvalidParameterValue", 400),
        "The parameter Period must be a multiple of 60: smlocal's metrics have 60-second resolution.",
    ),
    (
        "GetMetricStatistics",
        _stats(StartTime=at(3), EndTime=at(3)),
        ("InvalidParameterValue", 400),
        "The parameter StartTime must be less than the parameter EndTime.",
    ),
    (
        "GetMetricStatistics",
        _stats(StartTime=at(-2000)),
        ("InvalidParameterCombination", 400),
        "You have requested up to 2,003 datapoints, which exceeds the limit of 1,440. You may reduce the "
        "datapoints requested by increasing Period, or decreasing the time range.",
    ),
    (
        "GetMetricData",
        _data({"Id": "e", "Expression": "SUM(METRICS())"}),
        VALIDATION,
        "smlocal does not evaluate metric math: MetricDataQuery e has an Expression; give it a MetricStat instead.",
    ),
    (
        "GetMetricData",
        _data(
            {
                "Id": "q",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SageMaker",
                        "MetricName": "ModelLatency",
                        "Dimensions": DIMS,
                    },
                    "Period": 60,
                    "Stat": "p99",
                },
            }
        ),
        VALIDATION,
        "smlocal does not keep percentiles or other extended statistics: Stat p99 of MetricDataQuery q is not "
        "supported; use SampleCount, Average, Sum, Minimum or Maximum.",
    ),
    (
        "DescribeAlarms",
        dict(NextToken="%%%"),
        ("InvalidNextToken", 400),
        "The service cannot process the NextToken.",
    ),
    (
        "PutDashboard",
        dict(DashboardName="d", DashboardBody="{}"),
        ("NotImplemented", 501),
        "Operation PutDashboard of CloudWatch is not implemented by smlocal. See docs/api-coverage.md for the "
        "operations it supports.",
    ),
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "operation, params, code_status, message", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)]
)
def test_errors(
    svc: AlarmService,
    protocol: str,
    operation: str,
    params: dict[str, Any],
    code_status: tuple[str, int],
    message: str,
) -> None:
    call(svc, protocol, "PutMetricAlarm", **ALARM)
    resp, parsed = call(svc, protocol, operation, validate=False, **params)
    error = parsed["Error"]
    assert (error["Code"], resp.status, error["Message"]) == (*code_status, message)
    assert error["Type"] == ("Sender" if resp.status < 500 else "Receiver")
    # botocore raises the modelled exception class for a modelled code
    exceptions = boto3.client("cloudwatch", region_name="us-east-1").exceptions
    if code_status[0] in ("ResourceNotFound", "InvalidParameterValue", "InvalidFormat", "InvalidNextToken"):
        assert exceptions.from_code(error["Code"]) is not ClientError


@pytest.mark.parametrize("body", [b"\xff\x00garbage", cbor2.dumps([1, 2])])
def test_undecodable_cbor_is_a_validation_error(svc: AlarmService, body: bytes) -> None:
    resp = cloudwatch_api.dispatch(svc, "DescribeAlarms", body, "r", cloudwatch_codec.CBOR)
    assert resp.status == 400 and resp.headers["x-amzn-query-error"] == "ValidationError;Sender"
    assert isinstance(resp.body, bytes)
    assert cbor2.loads(resp.body)["__type"] == "com.amazon.coral.validate#ValidationException"


# ---------------------------------------------------------------------- unchanged boto3 clients over HTTP


@pytest.fixture
async def server(svc: AlarmService) -> AsyncIterator[str]:
    """The two routes as app.py mounts them, on 127.0.0.1."""
    app = web.Application()

    async def cbor_route(request: web.Request) -> web.StreamResponse:
        return await cloudwatch_api.handle_cbor(request, svc)

    async def json_route(request: web.Request) -> web.StreamResponse:
        prefix, _, operation = request.headers.get("X-Amz-Target", "").partition(".")
        assert prefix == cloudwatch_api.SERVICE_ID
        return await cloudwatch_api.handle_json(request, svc, operation)

    app.router.add_post(cloudwatch_api.PATH, cbor_route)
    app.router.add_post("/", json_route)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
def cbor_first() -> Iterator[None]:
    """A botocore that prefers smithy-rpc-v2-cbor (as the model's `protocols` list does)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(botocore.model, "PRIORITY_ORDERED_SUPPORTED_PROTOCOLS", (CBOR, "json", "query"))
        yield


def _client(url: str) -> Any:
    return boto3.client(
        "cloudwatch",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_boto3_clients_over_http(server: str, protocol: str, request: pytest.FixtureRequest) -> None:
    if protocol == CBOR:
        request.getfixturevalue("cbor_first")
    cw = _client(server)
    assert cw.meta.service_model.resolved_protocol == protocol

    def calls() -> None:
        cw.put_metric_alarm(**ALARM)
        alarms = cw.describe_alarms()["MetricAlarms"]
        assert [a["AlarmName"] for a in alarms] == ["high"] and alarms[0]["StateValue"] == "OK"
        with pytest.raises(cw.exceptions.ResourceNotFound) as exc:
            cw.set_alarm_state(AlarmName="nope", StateValue="OK", StateReason="r")
        assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
        with pytest.raises(ClientError) as not_implemented:
            cw.put_dashboard(DashboardName="d", DashboardBody="{}")
        assert not_implemented.value.response["Error"]["Code"] == "NotImplemented"

    await asyncio.to_thread(calls)


async def test_unknown_operations(server: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{server}/service/GraniteServiceVersion20100801/operation/Nope", data=b"\xa0"
        ) as r:
            assert r.status == 400
            assert cbor2.loads(await r.read()) == {
                "__type": "com.amazon.coral.service#UnknownOperationException",
                "message": "Unknown operation GraniteServiceVersion20100801.Nope",
            }
        headers = {"X-Amz-Target": "GraniteServiceVersion20100801.Nope"}
        async with session.post(f"{server}/", data=b"{}", headers=headers) as r:
            assert r.status == 400
            assert (await r.json(content_type=None))["__type"].endswith("#UnknownOperationException")
