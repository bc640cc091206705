"""Metrics as autoscaling's alarms read them (period_index, datapoint), the policy clock of
ServerConfig (time_scale) and which customized metrics smlocal can track."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from emulator.config import ServerConfig
from emulator.hosting.monitoring import store as m
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.registry import custom_metric_problem
from emulator.model.scaling import CustomizedMetric

T0 = 1_800_000_000.0  # a period boundary: 30_000_000 x 60
INDEX = 30_000_000


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------- Metrics.period_index


def test_period_index_follows_the_clock() -> None:
    clock = Clock()
    metrics = Metrics(period_s=60, clock=clock)
    assert metrics.period_index() == INDEX
    clock.now = T0 + 59.999
    assert metrics.period_index() == INDEX
    clock.now = T0 + 60
    assert metrics.period_index() == INDEX + 1
    clock.now = T0 - 0.001
    assert metrics.period_index() == INDEX - 1


def test_period_index_with_a_scaled_period() -> None:
    clock = Clock(1000.25)
    metrics = Metrics(period_s=0.5, clock=clock)  # 60 s of policy time at --time-scale 120
    assert metrics.period_index() == 2000
    clock.now = 1000.5
    assert metrics.period_index() == 2001


# ---------------------------------------------------------------------- Metrics.datapoint


def test_invocations_per_instance_is_invocations_over_instances() -> None:
    clock = Clock(T0 + 10)
    metrics = Metrics(clock=clock)
    metrics.set_instances("ep", "v", 4)
    for _ in range(6):
        metrics.record("ep", "v", m.OK, 0.001, 0.002)
    point = metrics.datapoint
    assert point("ep", "v", "Invocations", "Sum", INDEX) == 6.0
    assert point("ep", "v", "InvocationsPerInstance", "Sum", INDEX) == 1.5
    assert point("ep", "v", "InvocationsPerInstance", "SampleCount", INDEX) == 6.0
    assert point("ep", "v", "Invocations", "Average", INDEX) == 1.0
    assert point("ep", "v", "InvocationsPerInstance", "Average", INDEX) == 0.25
    assert isinstance(point("ep", "v", "Invocations", "Sum", INDEX), float)


def test_instance_count_changes_within_a_period() -> None:
    metrics = Metrics(clock=Clock(T0 + 1))
    metrics.set_instances("ep", "v", 2)
    metrics.record("ep", "v", m.OK, 0.001, 0.001)
    metrics.record("ep", "v", m.OK, 0.001, 0.001)
    metrics.set_instances("ep", "v", 4)
    for _ in range(4):
        metrics.record("ep", "v", m.OK, 0.001, 0.001)
    assert metrics.datapoint("ep", "v", "InvocationsPerInstance", "Sum", INDEX) == 2.0  # 2/2 + 4/4


def test_instance_count_resolver_and_default() -> None:
    resolved = Metrics(clock=Clock(), instance_count=lambda e, v: 3 if (e, v) == ("ep", "v") else 99)
    single = Metrics(clock=Clock())
    for metrics in (resolved, single):
        for _ in range(3):
            metrics.record("ep", "v", m.OK, 0.001, 0.001)
    assert resolved.datapoint("ep", "v", "InvocationsPerInstance", "Sum", INDEX) == pytest.approx(1.0)
    assert single.datapoint("ep", "v", "InvocationsPerInstance", "Sum", INDEX) == 3.0


COUNTS = ("Invocations", "InvocationsPerInstance", "Invocation4XXErrors", "Invocation5XXErrors")
COUNTS += ("InvocationModelErrors",)


def test_a_period_without_requests() -> None:
    clock = Clock(T0 + 1)
    metrics = Metrics(clock=clock)
    metrics.record("ep", "v", m.OK, 0.001, 0.002)
    metrics.record_utilization("ep", "v", 40.0, 10.0)
    clock.now = T0 + 61
    metrics.record_utilization("ep", "other-variant", 40.0, 10.0)  # a sample elsewhere
    for index in (INDEX + 1, INDEX + 2, INDEX - 1):
        for name in COUNTS:
            for statistic in ("Sum", "SampleCount", "Average"):
                assert metrics.datapoint("ep", "v", name, statistic, index) == 0.0, (name, statistic)
        for name in ("ModelLatency", "OverheadLatency", "CPUUtilization", "MemoryUtilization"):
            for statistic in ("Average", "Sum", "SampleCount", "Maximum"):
                assert metrics.datapoint("ep", "v", name, statistic, index) is None, (name, statistic)


def test_an_unknown_series_or_metric() -> None:
    metrics = Metrics(clock=Clock())
    assert metrics.datapoint("nobody", "v", "Invocations", "Sum", INDEX) == 0.0
    assert metrics.datapoint("nobody", "v", "InvocationsPerInstance", "Sum", INDEX) == 0.0
    assert metrics.datapoint("nobody", "v", "ModelLatency", "Average", INDEX) is None
    metrics.record("ep", "v", m.OK, 0.001, 0.002)
    assert metrics.datapoint("ep", "v", "NoSuchMetric", "Sum", INDEX) is None
    assert metrics.datapoint("ep", "v", "ModelLatency", "p99", INDEX) is None


def test_latencies_in_microseconds() -> None:
    metrics = Metrics(clock=Clock(T0 + 30))
    metrics.record("ep", "v", m.OK, 0.002, 0.003)
    metrics.record("ep", "v", m.OK, 0.004, 0.0045)
    latency = {s: metrics.datapoint("ep", "v", "ModelLatency", s, INDEX) for s in ("Average", "Sum")}
    assert latency == {"Average": pytest.approx(3000.0), "Sum": pytest.approx(6000.0)}
    assert metrics.datapoint("ep", "v", "ModelLatency", "Minimum", INDEX) == pytest.approx(2000.0)
    assert metrics.datapoint("ep", "v", "ModelLatency", "Maximum", INDEX) == pytest.approx(4000.0)
    assert metrics.datapoint("ep", "v", "ModelLatency", "SampleCount", INDEX) == 2.0
    assert metrics.datapoint("ep", "v", "OverheadLatency", "Average", INDEX) == pytest.approx(750.0)


def test_errors() -> None:
    metrics = Metrics(clock=Clock())
    for outcome in (m.OK, m.CLIENT_ERROR, m.SERVER_ERROR, m.OTHER_ERROR):
        metrics.record("ep", "v", outcome, 0.001, 0.001)
    point = metrics.datapoint
    assert point("ep", "v", "Invocation4XXErrors", "Sum", INDEX) == 1.0
    assert point("ep", "v", "Invocation5XXErrors", "Sum", INDEX) == 1.0
    assert point("ep", "v", "InvocationModelErrors", "Sum", INDEX) == 3.0
    assert point("ep", "v", "InvocationModelErrors", "Average", INDEX) == 0.75
    assert point("ep", "v", "Invocation4XXErrors", "SampleCount", INDEX) == 4.0


def test_utilization() -> None:
    metrics = Metrics(clock=Clock(T0 + 5))
    metrics.record_utilization("ep", "v", 50.0, 20.0)
    metrics.record_utilization("ep", "v", 70.0, None)
    assert metrics.datapoint("ep", "v", "CPUUtilization", "Average", INDEX) == 60.0
    assert metrics.datapoint("ep", "v", "CPUUtilization", "Maximum", INDEX) == 70.0
    assert metrics.datapoint("ep", "v", "CPUUtilization", "SampleCount", INDEX) == 2.0
    assert metrics.datapoint("ep", "v", "MemoryUtilization", "Average", INDEX) == 20.0
    assert metrics.datapoint("ep", "v", "Invocations", "Sum", INDEX) == 0.0  # no requests


def test_earlier_periods_stay_readable() -> None:
    clock = Clock(T0)
    metrics = Metrics(clock=clock, keep=15)
    for minute in range(15):
        clock.now = T0 + minute * 60 + 1
        for _ in range(minute + 1):
            metrics.record("ep", "v", m.OK, 0.001, 0.001)
    assert metrics.period_index() == INDEX + 14
    got = [metrics.datapoint("ep", "v", "Invocations", "Sum", INDEX + i) for i in range(15)]
    assert got == [float(i + 1) for i in range(15)]


# ---------------------------------------------------------------------- ServerConfig's policy clock


def test_time_scale_default(tmp_path: Path) -> None:
    config = ServerConfig(state_dir=tmp_path)
    assert config.time_scale == 1.0
    assert config.real_seconds(300) == 300.0
    assert config.metrics_period_real_s == 60.0


def test_time_scale_speeds_policy_time_up(tmp_path: Path) -> None:
    config = ServerConfig(state_dir=tmp_path, time_scale=60.0)
    assert config.real_seconds(300) == 5.0
    assert config.metrics_period_real_s == 1.0
    assert ServerConfig(state_dir=tmp_path, time_scale=0.5).metrics_period_real_s == 120.0
    assert ServerConfig(state_dir=tmp_path, metrics_period_s=30, time_scale=2).metrics_period_real_s == 15.0


@pytest.mark.parametrize("scale", [0.0, -1.0, math.nan])
def test_time_scale_must_be_positive(tmp_path: Path, scale: float) -> None:
    with pytest.raises(ValueError, match="time_scale must be positive"):
        ServerConfig(state_dir=tmp_path, time_scale=scale)


# ---------------------------------------------------------------------- customized metrics

DIMS = (("EndpointName", "ep"), ("VariantName", "v"))
SAGEMAKER = "AWS/SageMaker"
PUBLISHED = (
    "/aws/sagemaker/Endpoints/CPUUtilization, /aws/sagemaker/Endpoints/DiskUtilization, "
    "/aws/sagemaker/Endpoints/GPUMemoryUtilization, /aws/sagemaker/Endpoints/GPUUtilization, "
    "/aws/sagemaker/Endpoints/LoadedModelCount, /aws/sagemaker/Endpoints/MemoryUtilization, "
    "AWS/SageMaker/ContainerLatency, AWS/SageMaker/Invocation4XXErrors, AWS/SageMaker/Invocation5XXErrors, "
    "AWS/SageMaker/InvocationModelErrors, AWS/SageMaker/Invocations, "
    "AWS/SageMaker/InvocationsPerInstance, AWS/SageMaker/ModelCacheHit, AWS/SageMaker/ModelDownloadingTime, "
    "AWS/SageMaker/ModelLatency, AWS/SageMaker/ModelLoadingTime, AWS/SageMaker/ModelLoadingWaitTime, "
    "AWS/SageMaker/ModelSetupTime, AWS/SageMaker/ModelUnloadingTime, AWS/SageMaker/OverheadLatency, "
    "AWS/SageMaker/ServerlessConcurrentExecutionsUtilization, "
    "AWS/SageMaker/ServerlessProvisionedConcurrencyExecutions, "
    "AWS/SageMaker/ServerlessProvisionedConcurrencyInvocations, "
    "AWS/SageMaker/ServerlessProvisionedConcurrencySpilloverInvocations, "
    "AWS/SageMaker/ServerlessProvisionedConcurrencyUtilization"
)
ASYNC = (
    "ApproximateAgeOfOldestRequest ApproximateBacklogSize ApproximateBacklogSizePerInstance "
    "ExpiredRequests HasBacklogWithoutCapacity InvocationFailures InvocationsProcesssed "
    "NotificationFailures RequestDownloadFailures RequestDownloadLatency ResponseUploadFailures "
    "ResponseUploadLatency TimeInBacklog TotalProcessingTime"
).split()
#: every published metric, sorted as the message lists them
#: inference components' own metrics (dimension InferenceComponentName)
COMPONENT_ONLY = ("InvocationsPerCopy", "NoCapacityInvocationFailures", "ConcurrentRequestsPerCopy")
PUBLISHED = ", ".join(
    sorted([*PUBLISHED.split(", "), *(f"AWS/SageMaker/{n}" for n in (*ASYNC, *COMPONENT_ONLY))])
)


@pytest.mark.parametrize(
    "custom",
    [
        CustomizedMetric("InvocationsPerInstance", SAGEMAKER, DIMS, "Sum"),
        CustomizedMetric("InvocationsPerInstance", SAGEMAKER, DIMS[::-1], "Average", "None"),
        CustomizedMetric("Invocations", SAGEMAKER, DIMS, "SampleCount"),
        CustomizedMetric("ModelLatency", SAGEMAKER, DIMS, "Maximum", "Microseconds"),
        CustomizedMetric("OverheadLatency", SAGEMAKER, DIMS, "Minimum"),
        CustomizedMetric("CPUUtilization", "/aws/sagemaker/Endpoints", DIMS, "Average", "Percent"),
    ],
)
def test_trackable_metrics(custom: CustomizedMetric) -> None:
    assert custom_metric_problem(custom) is None


def test_unknown_metric() -> None:
    for name, namespace in (("Foo", SAGEMAKER), ("CPUUtilization", SAGEMAKER), ("Invocations", "AWS/EC2")):
        assert custom_metric_problem(CustomizedMetric(name, namespace, DIMS, "Sum")) == (
            f"smlocal publishes no metric {namespace}/{name}; it publishes {PUBLISHED}."
        )


@pytest.mark.parametrize(
    "dims",
    [
        (),
        (("EndpointName", "ep"),),  # only the asynchronous queue metrics have EndpointName alone
        (("VariantName", "v"),),
        (*DIMS, ("InstanceId", "i-1")),
        (("EndpointName", "ep"), ("Variant", "v")),
    ],
)
def test_wrong_dimensions(dims: tuple[tuple[str, str], ...]) -> None:
    custom = CustomizedMetric("InvocationsPerInstance", SAGEMAKER, dims, "Sum")
    assert custom_metric_problem(custom) == (
        "smlocal's metrics have exactly the dimensions EndpointName and VariantName (and "
        "ContainerName for a container's Invocations, Invocation4XXErrors, Invocation5XXErrors, "
        "ContainerLatency, OverheadLatency, CPUUtilization and MemoryUtilization; ContainerLatency "
        "has no other); an asynchronous endpoint's ApproximateBacklogSize, "
        "ApproximateBacklogSizePerInstance, ApproximateAgeOfOldestRequest and HasBacklogWithoutCapacity "
        "have EndpointName alone."
    )


def test_the_async_queue_metrics_have_endpoint_name_alone() -> None:
    alone = (("EndpointName", "ep"),)
    assert (
        custom_metric_problem(
            CustomizedMetric("ApproximateBacklogSizePerInstance", SAGEMAKER, alone, "Average")
        )
        is None
    )
    assert (
        custom_metric_problem(CustomizedMetric("ApproximateBacklogSize", SAGEMAKER, DIMS, "Average"))
        is not None
    )


@pytest.mark.parametrize("name", ["Invocations", "InvocationsPerInstance", "Invocation5XXErrors"])
@pytest.mark.parametrize("statistic", ["Minimum", "Maximum"])
def test_min_max_of_a_count(name: str, statistic: str) -> None:
    assert custom_metric_problem(CustomizedMetric(name, SAGEMAKER, DIMS, statistic)) == (
        f"smlocal supports the statistics Sum, SampleCount and Average for {name}."
    )


@pytest.mark.parametrize("statistic", ["Bogus", "p99"])
def test_unknown_statistic(statistic: str) -> None:
    assert custom_metric_problem(CustomizedMetric("ModelLatency", SAGEMAKER, DIMS, statistic)) is not None
