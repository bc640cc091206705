"""An asynchronous endpoint's metrics and its scale to zero and back, with `--time-scale 60` (a
policy minute lasts 1 s): AWS's documented recipe, a step scaling policy on a
HasBacklogWithoutCapacity alarm, through unchanged boto3 clients."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import httpx
import pytest

from tests.fixtures.s3server import make_s3_client
from tests.fixtures.scaling import (
    TIME_SCALE,
    resource,
    scale_from_zero_recipe,
    variant_of,
    variant_target,
    wait_for,
)
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, start_smlocal
from tests.fixtures.streaming import stream_script
from tests.integration.test_async_inference import deploy_async, put_input, s3_object


@pytest.fixture(scope="module")
def scaled(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    env = start_smlocal(
        tmp_path_factory.mktemp("async-scaling"),
        echo_image,
        s3_endpoint_url=s3_server,
        sns_endpoint_url=s3_server,
        time_scale=TIME_SCALE,
    )
    try:
        yield env
    finally:
        env.server.stop()


@pytest.fixture(scope="module")
def bucket(s3_server: str) -> str:
    name = f"smlocal-async-scale-{uuid.uuid4().hex[:8]}"
    make_s3_client(s3_server).create_bucket(Bucket=name)
    return name


def _clients(env: Smlocal) -> tuple[Any, Any]:
    return (
        boto3.client("application-autoscaling", endpoint_url=env.server.url, **CREDENTIALS),
        boto3.client("cloudwatch", endpoint_url=env.server.url, **CREDENTIALS),
    )


def _statistics(cw: Any, name: str, dims: list[dict[str, str]], statistic: str = "Maximum") -> list[float]:
    now = datetime.now(UTC)
    got = cw.get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName=name,
        Dimensions=dims,
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=1),
        Period=60,
        Statistics=[statistic],
    )["Datapoints"]
    return [d[statistic] for d in got]


def test_scale_to_zero_and_back_on_the_documented_recipe(
    scaled: Smlocal, bucket: str, s3_client: Any
) -> None:
    name = "async-zero"
    aas, cw = _clients(scaled)
    assert deploy_async(scaled, name, bucket)["EndpointStatus"] == "InService"
    rid = resource(name)
    alarm = f"{name}-backlog-without-capacity"
    try:
        assert scale_from_zero_recipe(aas, cw, name) == alarm
        # to zero (what a scale-in would do): the requests then wait in the queue
        scaled.sm.update_endpoint_weights_and_capacities(
            EndpointName=name,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 0}],
        )
        wait_for(
            "zero instances",
            lambda: (
                variant_of(scaled, name)["CurrentInstanceCount"] == 0
                and variant_of(scaled, name)["EndpointStatus"] == "InService"
            ),
            60,
        )
        location = put_input(s3_client, bucket, "inputs/zero.json", b"from zero")
        queued_at = time.monotonic()
        answer = scaled.rt.invoke_endpoint_async(EndpointName=name, InputLocation=location)
        output = s3_object(s3_client, answer["OutputLocation"], timeout_s=60)
        took = time.monotonic() - queued_at
        assert output["Body"].read() == b"from zero"
        assert variant_of(scaled, name)["CurrentInstanceCount"] == 1  # the alarm's step brought one back
        # two 1 s periods of backlog without capacity, the alarm, the step, an instance's start
        assert took < 30, took
        history = aas.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=rid)
        assert any(a["StatusCode"] == "Successful" for a in history["ScalingActivities"])
        endpoint_dims = [{"Name": "EndpointName", "Value": name}]
        assert max(_statistics(cw, "HasBacklogWithoutCapacity", endpoint_dims)) == 1.0
        assert max(_statistics(cw, "ApproximateBacklogSize", endpoint_dims)) >= 1.0
        variant_dims = [*endpoint_dims, {"Name": "VariantName", "Value": "AllTraffic"}]
        assert sum(_statistics(cw, "InvocationsProcesssed", variant_dims, "Sum")) == 1.0
        assert max(_statistics(cw, "TimeInBacklog", variant_dims)) > 1000  # ms: it waited for capacity
        # what SageMaker does not publish for asynchronous endpoints is not listed
        listed = {
            m["MetricName"]
            for m in cw.list_metrics(Dimensions=[{"Name": "EndpointName", "Value": name}])["Metrics"]
        }
        assert {
            "ApproximateBacklogSize",
            "HasBacklogWithoutCapacity",
            "InvocationsProcesssed",
            "ModelLatency",
        } <= listed
        assert not listed & {"Invocations", "InvocationsPerInstance", "OverheadLatency"}
    finally:
        cw.delete_alarms(AlarmNames=[alarm])
        scaled.cleanup(name)


def test_a_real_time_variant_still_keeps_one_instance(scaled: Smlocal) -> None:
    scaled.deploy("rt-one")
    try:
        with pytest.raises(scaled.sm.exceptions.ClientError) as refused:
            scaled.sm.update_endpoint_weights_and_capacities(
                EndpointName="rt-one",
                DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 0}],
            )
        assert "must be at least 1 in smlocal" in str(refused.value)
    finally:
        scaled.cleanup("rt-one")


@pytest.mark.slow
def test_target_tracking_on_backlog_per_instance_scales_out_and_in_to_zero(
    scaled: Smlocal, bucket: str, s3_client: Any, streamer_image: str
) -> None:
    name = "async-tracked"
    aas, _ = _clients(scaled)
    assert (
        deploy_async(scaled, name, bucket, image=streamer_image, concurrency=1)["EndpointStatus"]
        == "InService"
    )
    rid = resource(name)
    try:
        aas.register_scalable_target(**variant_target(rid), MinCapacity=0, MaxCapacity=3)
        aas.put_scaling_policy(
            PolicyName="backlog-per-instance",
            **variant_target(rid),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": 2.0,
                "CustomizedMetricSpecification": {
                    "MetricName": "ApproximateBacklogSizePerInstance",
                    "Namespace": "AWS/SageMaker",
                    "Dimensions": [{"Name": "EndpointName", "Value": name}],
                    "Statistic": "Average",
                },
                "ScaleInCooldown": 60,
                "ScaleOutCooldown": 60,
            },
        )
        location = put_input(
            s3_client, bucket, "inputs/tracked.json", stream_script(parts=1, first_delay_s=0.5)
        )
        answers = [
            scaled.rt.invoke_endpoint_async(EndpointName=name, InputLocation=location) for _ in range(40)
        ]
        wait_for(
            "a scale-out on the backlog", lambda: variant_of(scaled, name)["CurrentInstanceCount"] > 1, 60
        )
        for answer in answers:
            s3_object(s3_client, answer["OutputLocation"], timeout_s=60)
        # MinCapacity 0: once the queue is empty the policy scales in down to zero instances
        wait_for(
            "the scale-in to zero once the queue is empty",
            lambda: variant_of(scaled, name)["CurrentInstanceCount"] == 0,
            90,
        )
    finally:
        scaled.cleanup(name)


def test_a_request_past_its_ttl_at_zero_instances_is_dropped_counted_and_logged(
    scaled: Smlocal, bucket: str, s3_client: Any
) -> None:
    """RequestTTLSeconds is policy time (`--time-scale 60`: 60 s last 1 s): at zero instances a request
    with the minimum TTL outlives it while one with an hour's waits; when an instance comes back, the
    first is dropped (no output, no failure object; ExpiredRequests 1 and a log line), the second runs."""
    name = "async-ttl"
    _, cw = _clients(scaled)
    assert deploy_async(scaled, name, bucket)["EndpointStatus"] == "InService"

    def instances(count: int) -> None:
        scaled.sm.update_endpoint_weights_and_capacities(
            EndpointName=name,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": count}],
        )
        wait_for(
            f"{count} instance(s)",
            lambda: (
                variant_of(scaled, name)["CurrentInstanceCount"] == count
                and variant_of(scaled, name)["EndpointStatus"] == "InService"
            ),
            60,
        )

    endpoint_dims = [{"Name": "EndpointName", "Value": name}]
    try:
        instances(0)
        location = put_input(s3_client, bucket, "inputs/ttl.json", b"kept")
        short = scaled.rt.invoke_endpoint_async(
            EndpointName=name, InputLocation=location, RequestTTLSeconds=60
        )
        long = scaled.rt.invoke_endpoint_async(
            EndpointName=name, InputLocation=location, RequestTTLSeconds=3600
        )
        # the queue's age, sampled in policy seconds, shows when the short TTL has passed
        wait_for(
            "the oldest request older than 90 policy seconds",
            lambda: max(_statistics(cw, "ApproximateAgeOfOldestRequest", endpoint_dims), default=0.0) > 90,
            30,
        )
        instances(1)
        assert s3_object(s3_client, long["OutputLocation"], timeout_s=30)["Body"].read() == b"kept"
        for url in (short["OutputLocation"], short["FailureLocation"]):
            key = url.removeprefix(f"s3://{bucket}/")
            with pytest.raises(s3_client.exceptions.ClientError) as missing:
                s3_client.head_object(Bucket=bucket, Key=key)
            assert missing.value.response["Error"]["Code"] == "404", url
        variant_dims = [*endpoint_dims, {"Name": "VariantName", "Value": "AllTraffic"}]
        wait_for(
            "ExpiredRequests 1",
            lambda: sum(_statistics(cw, "ExpiredRequests", variant_dims, "Sum")) == 1.0,
            10,
        )
        assert sum(_statistics(cw, "InvocationsProcesssed", variant_dims, "Sum")) == 1.0
        log = httpx.get(f"{scaled.server.url}/_smlocal/endpoints/{name}/logs", timeout=10).text
        assert (
            f"Inference {short['InferenceId']} expired after 60 seconds in the queue (RequestTTLSeconds)."
            in log
        )
        assert f"Inference {long['InferenceId']} expired" not in log
    finally:
        scaled.cleanup(name)
