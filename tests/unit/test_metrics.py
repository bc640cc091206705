"""The aggregation of SageMaker's endpoint metrics, with a fake clock."""

from __future__ import annotations

import asyncio
import timeit

import pytest

from emulator.hosting.monitoring import store as m
from emulator.hosting.monitoring.sampler import InstanceRef, Sampler
from emulator.hosting.monitoring.store import Metrics


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_one_period_statistics_and_names() -> None:
    clock = Clock()
    metrics = Metrics(period_s=60, clock=clock, instance_count=lambda e, v: 2)
    metrics.record("ep", "AllTraffic", m.OK, 0.002, 0.0025)
    metrics.record("ep", "AllTraffic", m.OK, 0.004, 0.0041)
    metrics.record("ep", "AllTraffic", m.CLIENT_ERROR, 0.001, 0.0012)
    report = metrics.report("ep")
    assert report["PeriodSeconds"] == 60
    [period] = report["Periods"]
    assert period["VariantName"] == "AllTraffic" and period["Complete"] is False
    got = period["Metrics"]
    assert got["Invocations"]["Sum"] == 3
    assert got["InvocationsPerInstance"]["Sum"] == pytest.approx(1.5)  # 1/2 each
    assert got["Invocation4XXErrors"]["Sum"] == 1
    assert got["Invocation4XXErrors"]["Average"] == pytest.approx(1 / 3)
    assert got["Invocation5XXErrors"]["Sum"] == 0
    assert got["InvocationModelErrors"]["Sum"] == 1
    latency = got["ModelLatency"]
    assert latency["Unit"] == "Microseconds" and latency["Namespace"] == "AWS/SageMaker"
    assert latency["SampleCount"] == 3
    assert latency["Sum"] == pytest.approx(7000)
    assert latency["Minimum"] == pytest.approx(1000) and latency["Maximum"] == pytest.approx(4000)
    assert latency["Average"] == pytest.approx(7000 / 3)
    overhead = got["OverheadLatency"]
    assert overhead["Sum"] == pytest.approx(500 + 100 + 200)
    assert overhead["Minimum"] == pytest.approx(100) and overhead["Maximum"] == pytest.approx(500)
    assert latency["Dimensions"] == [
        {"Name": "EndpointName", "Value": "ep"},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]
    assert got["Invocations"]["Unit"] == "None"


def test_error_classification() -> None:
    metrics = Metrics(clock=Clock())
    for outcome in (m.OK, m.CLIENT_ERROR, m.SERVER_ERROR, m.SERVER_ERROR, m.OTHER_ERROR):
        metrics.record("ep", "v", outcome, 0.001, 0.001)
    got = metrics.report("ep")["Periods"][0]["Metrics"]
    assert got["Invocations"]["Sum"] == 5
    assert got["Invocation4XXErrors"]["Sum"] == 1
    assert got["Invocation5XXErrors"]["Sum"] == 2
    assert got["InvocationModelErrors"]["Sum"] == 4  # 4xx, 5xx and the timeout/socket error


def test_periods_roll_align_and_are_bounded() -> None:
    clock = Clock(600.0)  # a period boundary
    metrics = Metrics(period_s=60, keep=3, clock=clock)
    for minute in range(5):
        clock.now = 600.0 + minute * 60 + 30
        for _ in range(minute + 1):
            metrics.record("ep", "v", m.OK, 0.001, 0.002)
    periods = metrics.report("ep")["Periods"]
    assert [p["Metrics"]["Invocations"]["Sum"] for p in periods] == [3, 4, 5]  # the last 3 kept
    assert [p["Timestamp"] for p in periods] == [
        "1970-01-01T00:12:00Z",
        "1970-01-01T00:13:00Z",
        "1970-01-01T00:14:00Z",
    ]
    assert [p["Complete"] for p in periods] == [True, True, False]
    # Prometheus counters keep counting across periods
    text = metrics.prometheus()
    assert 'sagemaker_invocations_total{endpoint_name="ep",variant_name="v"} 15' in text


def test_per_instance_share_follows_instance_count() -> None:
    metrics = Metrics(clock=Clock(), instance_count=lambda e, v: 4)
    for _ in range(4):
        metrics.record("ep", "a", m.OK, 0.0, 0.0)
    metrics.set_instances("ep", "a", 2)
    metrics.record("ep", "a", m.OK, 0.0, 0.0)
    got = metrics.report("ep")["Periods"][0]["Metrics"]
    assert got["InvocationsPerInstance"]["Sum"] == pytest.approx(1.5)


def test_variants_are_separate_series() -> None:
    metrics = Metrics(clock=Clock())
    metrics.record("ep", "a", m.OK, 0.001, 0.001)
    metrics.record("ep", "b", m.SERVER_ERROR, 0.001, 0.001)
    metrics.record("other", "a", m.OK, 0.001, 0.001)
    by_variant = {p["VariantName"]: p["Metrics"] for p in metrics.report("ep")["Periods"]}
    assert by_variant["a"]["Invocation5XXErrors"]["Sum"] == 0
    assert by_variant["b"]["Invocation5XXErrors"]["Sum"] == 1
    assert metrics.report("missing")["Periods"] == []


def test_utilization_statistics_over_instances() -> None:
    metrics = Metrics(clock=Clock())
    metrics.record_utilization("ep", "v", 150.0, 10.0)
    metrics.record_utilization("ep", "v", 50.0, 30.0)
    metrics.record_utilization("ep", "v", None, None)
    got = metrics.report("ep")["Periods"][0]["Metrics"]
    assert got["CPUUtilization"]["Average"] == pytest.approx(100.0)
    assert got["CPUUtilization"]["Maximum"] == pytest.approx(150.0)
    assert got["CPUUtilization"]["Namespace"] == "/aws/sagemaker/Endpoints"
    assert got["MemoryUtilization"]["Unit"] == "Percent"
    assert got["MemoryUtilization"]["SampleCount"] == 2


def test_prometheus_text() -> None:
    metrics = Metrics(clock=Clock())
    metrics.record('e"p', "v", m.OK, 0.002, 0.003)
    metrics.record('e"p', "v", m.CLIENT_ERROR, 0.001, 0.001)
    metrics.record_utilization('e"p', "v", 12.5, 40.0)
    text = metrics.prometheus()
    labels = 'endpoint_name="e\\"p",variant_name="v"'
    assert "# TYPE sagemaker_invocations_total counter" in text
    assert f"sagemaker_invocations_total{{{labels}}} 2" in text
    assert f"sagemaker_invocation_4xx_errors_total{{{labels}}} 1" in text
    assert f"sagemaker_invocation_model_errors_total{{{labels}}} 1" in text
    assert "# TYPE sagemaker_model_latency_microseconds summary" in text
    assert f"sagemaker_model_latency_microseconds_count{{{labels}}} 2" in text
    assert f"sagemaker_model_latency_microseconds_sum{{{labels}}} 3000" in text
    assert f"sagemaker_overhead_latency_microseconds_sum{{{labels}}} 1000" in text
    assert f"sagemaker_cpu_utilization_percent{{{labels}}} 12.5" in text
    assert f"sagemaker_memory_utilization_percent{{{labels}}} 40" in text
    for line in text.splitlines():
        assert line.startswith("#") or len(line.rsplit(" ", 1)) == 2


def test_sampler_samples_instances_and_counts() -> None:
    metrics = Metrics(clock=Clock())
    refs = [InstanceRef("ep", "v", "i-1", "c1"), InstanceRef("ep", "v", "i-2", "c2")]
    samples = {"c1": (20.0, 5.0), "c2": None}

    async def counts() -> dict[tuple[str, str], int]:
        return {("ep", "v"): 2}

    def stats(cid: str) -> tuple[float | None, float | None] | None:
        if cid == "c3":
            raise RuntimeError("gone")
        return samples[cid]

    sampler = Sampler(metrics, lambda: [*refs, InstanceRef("ep", "v", "i-3", "c3")], stats, counts, 60)
    asyncio.run(sampler.sample())
    report = metrics.report("ep")
    assert report["Variants"] == [{"VariantName": "v", "InstanceCount": 2}]
    assert report["Periods"][0]["Metrics"]["CPUUtilization"]["SampleCount"] == 1


def test_recording_is_cheap() -> None:
    """The hot path: a few microseconds at most (measured ~0.5 us on CPython 3.12; generous bound)."""
    metrics = Metrics(clock=Clock())
    metrics.record("ep", "v", m.OK, 0.001, 0.002)
    n = 20_000
    per_call = timeit.timeit(lambda: metrics.record("ep", "v", m.OK, 0.001, 0.002), number=n) / n
    assert per_call < 20e-6


class FakeApi:
    def __init__(self, samples: list[dict[str, object]]) -> None:
        self.samples = samples
        self.calls: list[dict[str, object]] = []

    def stats(self, container_id: str, **kwargs: object) -> dict[str, object]:
        self.calls.append(kwargs)
        return self.samples.pop(0)


class FakeDocker:
    def __init__(self, api: FakeApi) -> None:
        self.api = api


def _raw(usage: int, system: int, mem: int = 0, limit: int = 0, inactive: int = 0) -> dict[str, object]:
    return {
        "cpu_stats": {"cpu_usage": {"total_usage": usage}, "system_cpu_usage": system, "online_cpus": 4},
        "precpu_stats": {"cpu_usage": {}},  # one-shot: no previous sample from the engine
        "memory_stats": {"usage": mem, "limit": limit, "stats": {"inactive_file": inactive}} if limit else {},
    }


def test_docker_stats_from_one_shot_samples() -> None:
    from emulator.runtime.docker import DockerRuntime

    api = FakeApi(
        [
            _raw(1_000, 10_000, mem=300, limit=1_000, inactive=100),
            _raw(1_500, 12_000, mem=500, limit=1_000, inactive=0),
            {"cpu_stats": {}, "precpu_stats": {}, "memory_stats": {}},  # stopped
        ]
    )
    runtime = DockerRuntime(client=FakeDocker(api))
    first = runtime.stats("c1")
    assert first is not None and first.cpu_percent is None  # no previous sample yet
    assert first.memory_percent == pytest.approx(20.0)  # (300 - 100) / 1000, page cache excluded
    second = runtime.stats("c1")
    assert second is not None
    assert second.cpu_percent == pytest.approx(500 / 2_000 * 4 * 100)  # summed over 4 cores: 100 %
    assert second.memory_percent == pytest.approx(50.0)
    assert runtime.stats("c1") is None
    assert api.calls[0] == {"stream": False, "one_shot": True}
