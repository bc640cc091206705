"""CloudWatch on the same port, through boto3's unchanged cloudwatch and application-autoscaling clients,
against real echo containers: step scaling driven by metric alarms, the metric queries, and AWS-shaped
errors. boto3's cloudwatch client speaks awsJson1_0; a second client made to prefer smithy-rpc-v2-cbor
(the first protocol of the model's list) checks the other codec. --time-scale 60: a policy minute (a
metric period, an alarm Period of 60) is one second."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.model
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.scaling import (
    NS,
    Load,
    resource,
    time_scaled_server,
    variant_of,
    variant_target,
    wait_for,
)
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of

pytestmark = pytest.mark.docker

CONFIG = Config(retries={"mode": "standard", "max_attempts": 1})


def dims(endpoint: str) -> list[dict[str, str]]:
    return [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}]


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    yield from time_scaled_server(tmp_path_factory.mktemp("smlocal"), echo_image, s3_server)


@pytest.fixture(scope="module")
def cw(smlocal: Smlocal) -> Any:
    client = boto3.client("cloudwatch", endpoint_url=smlocal.server.url, config=CONFIG, **CREDENTIALS)
    assert client.meta.service_model.resolved_protocol == "json"  # what boto3 speaks to CloudWatch
    return client


@pytest.fixture(scope="module")
def cw_cbor(smlocal: Smlocal) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(botocore.model, "PRIORITY_ORDERED_SUPPORTED_PROTOCOLS", ("smithy-rpc-v2-cbor", "json"))
        client = boto3.client("cloudwatch", endpoint_url=smlocal.server.url, config=CONFIG, **CREDENTIALS)
    assert client.meta.service_model.resolved_protocol == "smithy-rpc-v2-cbor"
    return client


@pytest.fixture(scope="module")
def aas(smlocal: Smlocal) -> Any:
    return boto3.client(
        "application-autoscaling", endpoint_url=smlocal.server.url, config=CONFIG, **CREDENTIALS
    )


def step_policy(aas: Any, rid: str, name: str, step: dict[str, Any]) -> str:
    arn: str = aas.put_scaling_policy(
        PolicyName=name,
        **variant_target(rid),
        PolicyType="StepScaling",
        StepScalingPolicyConfiguration={
            "AdjustmentType": "ChangeInCapacity",
            "StepAdjustments": [step],
            "Cooldown": 60,
        },
    )["PolicyARN"]
    return arn


def invocations_alarm(
    cw: Any, name: str, endpoint: str, operator: str, threshold: float, action: str
) -> None:
    cw.put_metric_alarm(
        AlarmName=name,
        Namespace="AWS/SageMaker",
        MetricName="Invocations",
        Dimensions=dims(endpoint),
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=2,
        Threshold=threshold,
        ComparisonOperator=operator,
        AlarmActions=[action],
    )


def alarm(cw: Any, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cw.describe_alarms(AlarmNames=[name])["MetricAlarms"][0]
    return found


def test_alarms_drive_step_scaling_out_under_load_and_in_when_idle(
    smlocal: Smlocal, cw: Any, aas: Any
) -> None:
    smlocal.deploy("Stepped", count=1)
    rid = resource("Stepped")
    high, low = "Stepped-invocations-high", "Stepped-invocations-low"
    try:
        aas.register_scalable_target(**variant_target(rid), MinCapacity=1, MaxCapacity=3)
        out_arn = step_policy(aas, rid, "out", {"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1})
        in_arn = step_policy(aas, rid, "in", {"MetricIntervalUpperBound": 0.0, "ScalingAdjustment": -1})
        invocations_alarm(cw, high, "Stepped", "GreaterThanThreshold", 20.0, out_arn)
        invocations_alarm(cw, low, "Stepped", "LessThanThreshold", 5.0, in_arn)
        assert alarm(cw, high)["AlarmActions"] == [out_arn]
        # a step policy lists the alarms that invoke it
        described = aas.describe_scaling_policies(ServiceNamespace=NS, PolicyNames=["out"])["ScalingPolicies"]
        assert described[0]["Alarms"] == [{"AlarmName": high, "AlarmARN": alarm(cw, high)["AlarmArn"]}]

        timeline: list[tuple[float, str]] = []
        t0 = time.monotonic()

        def mark(event: str) -> None:
            timeline.append((time.monotonic() - t0, event))

        def count_is(n: int) -> bool:
            v = variant_of(smlocal, "Stepped")
            return bool(v["EndpointStatus"] == "InService" and v["CurrentInstanceCount"] == n)

        load = Load(smlocal, "Stepped", rate=60.0)  # ~60 per policy minute, 3x the high threshold
        load.start()
        mark("load started (~60 requests per policy minute)")
        try:
            wait_for("the high alarm in ALARM", lambda: alarm(cw, high)["StateValue"] == "ALARM", 15)
            mark("high alarm ALARM")
            wait_for("2 instances", lambda: count_is(2), 30)
            mark("2 instances InService")
            # the alarm stays in ALARM and invokes the policy again at each evaluation
            wait_for("3 instances", lambda: count_is(3), 30)
            mark("3 instances InService")
            wait_for("the low alarm in OK", lambda: alarm(cw, low)["StateValue"] == "OK", 10)
        finally:
            load.stop.set()
            load.join()
        mark(f"load stopped after {load.sent} requests")
        assert load.failures == []
        wait_for("the low alarm in ALARM", lambda: alarm(cw, low)["StateValue"] == "ALARM", 15)
        mark("low alarm ALARM")
        assert alarm(cw, high)["StateValue"] == "OK"
        wait_for("1 instance", lambda: count_is(1), 60)
        mark("1 instance InService")

        described = alarm(cw, low)
        assert described["StateReason"].startswith("Threshold Crossed: 2 out of the last 2 datapoints [")
        assert (
            "were less than the threshold (5.0) (minimum 2 datapoints for OK -> ALARM transition)."
            in (described["StateReason"])
        )
        activities = aas.describe_scaling_activities(ServiceNamespace=NS, ResourceId=rid)["ScalingActivities"]
        assert [a["Description"] for a in activities] == [
            "Setting desired instance count to 1.",
            "Setting desired instance count to 2.",
            "Setting desired instance count to 3.",
            "Setting desired instance count to 2.",
        ]
        for a in activities:
            assert a["StatusCode"] == "Successful", a
        assert {a["Cause"] for a in activities[2:]} == {
            f"monitor alarm {high} in state ALARM triggered policy out"
        }
        assert {a["Cause"] for a in activities[:2]} == {
            f"monitor alarm {low} in state ALARM triggered policy in"
        }
        history = cw.describe_alarm_history(AlarmName=high, HistoryItemType="Action")["AlarmHistoryItems"]
        assert history[-1]["HistorySummary"] == f"Successfully executed action {out_arn}"
        transitions = cw.describe_alarm_history(AlarmName=high, HistoryItemType="StateUpdate")[
            "AlarmHistoryItems"
        ]
        to_alarm = next(h for h in reversed(transitions) if h["HistorySummary"].endswith("to ALARM"))
        first_out = activities[-1]
        lag = (first_out["StartTime"] - to_alarm["Timestamp"]).total_seconds()
        assert 0 <= lag < 1.0, lag  # the action runs at the transition
        for t, event in timeline:
            print(f"alarm scaling timeline: +{t:5.1f} s {event}")
        print(f"alarm scaling: ALARM -> first scaling activity {lag * 1000:.0f} ms")
        for a in reversed(activities):
            took = (a["EndTime"] - a["StartTime"]).total_seconds()
            start = (a["StartTime"] - first_out["StartTime"]).total_seconds()
            print(
                f"alarm scaling activity: +{start:5.1f} s {a['Description']} took {took:.2f} s ({a['Cause']})"
            )
    finally:
        cw.delete_alarms(AlarmNames=[high, low])
        smlocal.cleanup("Stepped")


def test_metric_queries_count_the_requests_sent(smlocal: Smlocal, cw: Any, cw_cbor: Any) -> None:
    smlocal.deploy("Metered", count=1)
    try:
        start = datetime.now(UTC) - timedelta(seconds=5)
        sent = 25
        for _ in range(sent):
            smlocal.rt.invoke_endpoint(EndpointName="Metered", Body=b"x")
        for client in (cw, cw_cbor):
            end = datetime.now(UTC) + timedelta(seconds=5)
            stats = client.get_metric_statistics(
                Namespace="AWS/SageMaker",
                MetricName="Invocations",
                Dimensions=dims("Metered"),
                StartTime=start,
                EndTime=end,
                Period=60,
                Statistics=["Sum", "SampleCount"],
            )
            points = stats["Datapoints"]
            assert stats["Label"] == "Invocations"
            assert sum(p["Sum"] for p in points) == sent and sum(p["SampleCount"] for p in points) == sent
            assert all(p["Unit"] == "None" for p in points)
            assert all(p["Timestamp"].timestamp() % 1 == 0 for p in points)  # wall-clock period starts
            data = client.get_metric_data(
                MetricDataQueries=[
                    {
                        "Id": "latency",
                        "MetricStat": {
                            "Metric": {
                                "Namespace": "AWS/SageMaker",
                                "MetricName": "ModelLatency",
                                "Dimensions": dims("Metered"),
                            },
                            "Period": 60,
                            "Stat": "SampleCount",
                        },
                    }
                ],
                StartTime=start,
                EndTime=end,
            )["MetricDataResults"][0]
            assert data["StatusCode"] == "Complete" and sum(data["Values"]) == sent
            assert data["Timestamps"] == sorted(data["Timestamps"], reverse=True)
            listed = client.list_metrics(Dimensions=[{"Name": "EndpointName", "Value": "Metered"}])["Metrics"]
            names = {(x["Namespace"], x["MetricName"]) for x in listed}
            assert {("AWS/SageMaker", "Invocations"), ("AWS/SageMaker", "ModelLatency")} <= names
            assert all(x["Dimensions"] == dims("Metered") for x in listed)

        cw_cbor.put_metric_alarm(
            AlarmName="Metered-latency",
            AlarmDescription="slow model",
            Namespace="AWS/SageMaker",
            MetricName="ModelLatency",
            Dimensions=dims("Metered"),
            Statistic="Average",
            Period=60,
            EvaluationPeriods=1,
            Threshold=1e9,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
            TreatMissingData="notBreaching",
            AlarmActions=["arn:aws:sns:us-east-1:123456789012:ops"],
        )
        found = wait_for(
            "the latency alarm in OK", lambda: alarm(cw, "Metered-latency")["StateValue"] == "OK", 10
        )
        assert found
        described = alarm(cw, "Metered-latency")
        assert described["AlarmArn"] == "arn:aws:cloudwatch:us-east-1:123456789012:alarm:Metered-latency"
        assert (described["Statistic"], described["Threshold"], described["TreatMissingData"]) == (
            "Average",
            1e9,
            "notBreaching",
        )
        assert described["Dimensions"] == dims("Metered") and described["AlarmDescription"] == "slow model"
        assert described["StateReason"].startswith("Threshold Crossed: ")
        assert described["StateUpdatedTimestamp"] <= datetime.now(UTC)
        cw.set_alarm_state(AlarmName="Metered-latency", StateValue="ALARM", StateReason="drill")
        # The history, not the current state: on this time-scaled server the next evaluation can put
        # the alarm back in OK between two DescribeAlarms calls (seen once in CI).
        for client in (cw_cbor, cw):
            updates = client.describe_alarm_history(
                AlarmName="Metered-latency", HistoryItemType="StateUpdate"
            )
            drill = [
                h
                for h in updates["AlarmHistoryItems"]
                if h["HistorySummary"] == "Alarm updated from OK to ALARM"
            ]
            assert drill and json.loads(drill[0]["HistoryData"])["newState"]["stateReason"] == "drill"
        # the next evaluation puts the alarm back where its data says
        wait_for("the alarm back in OK", lambda: alarm(cw, "Metered-latency")["StateValue"] == "OK", 10)
        actions = cw.describe_alarm_history(AlarmName="Metered-latency", HistoryItemType="Action")
        assert actions["AlarmHistoryItems"][0]["HistorySummary"] == (
            "smlocal does not execute action arn:aws:sns:us-east-1:123456789012:ops: only Application Auto "
            "Scaling policy actions run"
        )
        cw.delete_alarms(AlarmNames=["Metered-latency"])
        assert cw.describe_alarms(AlarmNamePrefix="Metered")["MetricAlarms"] == []
    finally:
        smlocal.cleanup("Metered")


def test_errors_are_aws_shaped(cw: Any, cw_cbor: Any) -> None:
    alarm_params: dict[str, Any] = dict(
        AlarmName="bad",
        Namespace="AWS/SageMaker",
        MetricName="Invocations",
        Dimensions=dims("x"),
        Statistic="Sum",
        EvaluationPeriods=1,
        Threshold=1.0,
        ComparisonOperator="GreaterThanThreshold",
    )
    cases: list[tuple[str, dict[str, Any], tuple[str, int, str]]] = [
        ("delete_alarms", dict(AlarmNames=["nope"]), ("ResourceNotFound", 404, "Alarm nope not found")),
        (
            "set_alarm_state",
            dict(AlarmName="nope", StateValue="OK", StateReason="r"),
            ("ResourceNotFound", 404, "Alarm nope not found"),
        ),
        (
            "put_metric_alarm",
            dict(alarm_params, Period=90),
            (
                "ValidationError",
                400,
                "Period (90) must be a multiple of 60: smlocal's metrics have 60-second resolution "
                "(high-resolution periods of 10, 20 and 30 seconds are not supported).",
            ),
        ),
        (
            "get_metric_statistics",
            dict(
                Namespace="AWS/SageMaker",
                MetricName="Invocations",
                StartTime=datetime.now(UTC) - timedelta(minutes=5),
                EndTime=datetime.now(UTC),
                Period=30,
                Statistics=["Sum"],
            ),
            (
                "InvalidParameterValue",
                400,
                "The parameter Period must be a multiple of 60: smlocal's metrics have 60-second resolution.",
            ),
        ),
        (
            "get_metric_data",
            dict(
                MetricDataQueries=[{"Id": "e", "Expression": "SUM(METRICS())"}],
                StartTime=datetime.now(UTC) - timedelta(minutes=5),
                EndTime=datetime.now(UTC),
            ),
            (
                "ValidationError",
                400,
                "smlocal does not evaluate metric math: MetricDataQuery e has an Expression; give it a "
                "MetricStat instead.",
            ),
        ),
        (
            "put_dashboard",
            dict(DashboardName="d", DashboardBody="{}"),
            (
                "NotImplemented",
                501,
                "Operation PutDashboard of CloudWatch is not implemented by smlocal. See docs/api-coverage.md "
                "for the operations it supports.",
            ),
        ),
    ]
    for client in (cw, cw_cbor):
        for operation, params, expected in cases:
            with pytest.raises(ClientError) as exc:
                getattr(client, operation)(**params)
            assert error_of(exc) == expected, (client.meta.service_model.resolved_protocol, operation)
        with pytest.raises(client.exceptions.ResourceNotFound):
            client.delete_alarms(AlarmNames=["nope"])
