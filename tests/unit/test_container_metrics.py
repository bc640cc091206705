"""Per-container metrics of multi-container endpoints (dimension ContainerName): the store, the
CloudWatch view (locate, queries, ListMetrics), the sampler's sums over an instance's containers, the
Prometheus families, the JSON report and `smlocal metrics`' table, with a fake clock."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from emulator.config import ServerConfig
from emulator.hosting.monitoring import store as m
from emulator.hosting.monitoring.catalogue import SeriesKey, locate
from emulator.hosting.monitoring.queries import MetricQueries
from emulator.hosting.monitoring.sampler import InstanceRef, Sampler
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.registry import custom_metric_problem
from emulator.metrics_table import print_metrics
from emulator.model import alarms as al
from emulator.model.scaling import CustomizedMetric

T0 = 1_800_000_000.0  # a period boundary (divisible by 60)
INDEX = int(T0 // 60)
SM = "AWS/SageMaker"
INSTANCE = "/aws/sagemaker/Endpoints"
VARIANT = (("EndpointName", "ep"), ("VariantName", "v"))


def container(name: str) -> tuple[tuple[str, str], ...]:
    return (*VARIANT, ("ContainerName", name))


class Clock:
    def __init__(self, now: float = T0 + 1) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def pipeline_metrics() -> Metrics:
    """Two requests through a 2-container pipeline in one period; the second fails at container b
    (5xx), after a's 2xx."""
    metrics = Metrics(clock=Clock())
    metrics.record("ep", "v", m.OK, 0.003, 0.004)
    metrics.record_container("ep", "v", "a", m.OK, 0.001, 0.001)
    metrics.record_container("ep", "v", "b", m.OK, 0.002, 0.001)
    metrics.record("ep", "v", m.SERVER_ERROR, 0.005, 0.007)
    metrics.record_container("ep", "v", "a", m.OK, 0.001, 0.002)
    metrics.record_container("ep", "v", "b", m.SERVER_ERROR, 0.004, 0.002)
    return metrics


def test_locate_a_container_metric() -> None:
    assert locate(SM, "Invocations", container("a")) == SeriesKey("ep", "v", "a")
    assert locate(SM, "Invocations", reversed(container("a"))) == SeriesKey("ep", "v", "a")
    assert locate(SM, "ContainerLatency", container("a")) == SeriesKey("ep", "v", "a")
    assert locate(INSTANCE, "MemoryUtilization", container("a")) == SeriesKey("ep", "v", "a")
    # ContainerLatency exists per container only; the others listed in spec §4 only have ContainerName
    assert locate(SM, "ContainerLatency", VARIANT) is None
    for name in ("ModelLatency", "InvocationsPerInstance", "InvocationModelErrors"):
        assert locate(SM, name, container("a")) is None, name
    for name in ("DiskUtilization", "GPUUtilization"):
        assert locate(INSTANCE, name, container("a")) is None, name
    assert locate(SM, "Invocations", (("EndpointName", "ep"), ("ContainerName", "a"))) is None


def test_each_container_series_counts_its_own_calls() -> None:
    metrics = pipeline_metrics()
    a = metrics.statistic_sets("ep", "v", "Invocations", "a")[INDEX]
    b5 = metrics.statistic_sets("ep", "v", "Invocation5XXErrors", "b")[INDEX]
    a5 = metrics.statistic_sets("ep", "v", "Invocation5XXErrors", "a")[INDEX]
    assert (a.sum, b5.sum, b5.sample_count, a5.sum) == (2, 1, 2, 0)
    latency = metrics.statistic_sets("ep", "v", "ContainerLatency", "b")[INDEX]
    assert (latency.sample_count, latency.sum, latency.minimum, latency.maximum) == pytest.approx(
        (2, 6000.0, 2000.0, 4000.0)
    )
    overhead = metrics.statistic_sets("ep", "v", "OverheadLatency", "a")[INDEX]
    assert (overhead.sum, overhead.maximum) == pytest.approx((3000.0, 2000.0))
    # the variant's series is untouched by the container calls: two requests, one 5xx
    assert metrics.statistic_sets("ep", "v", "Invocations")[INDEX].sum == 2
    assert metrics.statistic_sets("ep", "v", "Invocation5XXErrors")[INDEX].sum == 1
    assert metrics.statistic_sets("ep", "v", "ContainerLatency") == {}
    assert metrics.statistic_sets("ep", "v", "ModelLatency", "a") == {}
    assert metrics.statistic_sets("ep", "v", "Invocations", "zz") == {}
    assert metrics.datapoint("ep", "v", "Invocation5XXErrors", "Sum", INDEX, "b") == 1
    assert metrics.datapoint("ep", "v", "ModelLatency", "Sum", INDEX, "b") is None


def test_queries_and_list_metrics_name_the_container(tmp_path: Path) -> None:
    metrics = pipeline_metrics()
    queries = MetricQueries(ServerConfig(state_dir=tmp_path), metrics)
    start = datetime.fromtimestamp(T0, UTC)
    got = queries.statistics(
        al.Metric(SM, "Invocations", container("b")), None, start, start + timedelta(minutes=1), 60
    )
    assert [(t, s.sum) for t, s in got] == [(start, 2.0)]
    assert (
        queries.statistics(
            al.Metric(SM, "Invocations", container("b")), "Seconds", start, start + timedelta(minutes=1), 60
        )
        == []
    )
    listed = queries.list_metrics(SM, None, [("ContainerName", "a")])
    assert {x.name for x in listed} == {
        "Invocations",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "ContainerLatency",
        "OverheadLatency",
    }
    assert all(dict(x.dimensions) == dict(container("a")) for x in listed)
    # a filter on the variant's dimensions lists the variant's and the containers' metrics
    everything = queries.list_metrics(SM, "Invocations", [("EndpointName", "ep")])
    assert sorted(dict(x.dimensions).get("ContainerName", "") for x in everything) == ["", "a", "b"]


def test_forget_drops_the_containers_too() -> None:
    metrics = pipeline_metrics()
    metrics.forget("ep")
    assert metrics.container_series() == [] and metrics.published() == []


def test_customized_metric_on_a_container_is_trackable() -> None:
    ok = CustomizedMetric("Invocations", SM, container("a"), "Sum")
    assert custom_metric_problem(ok) is None
    assert custom_metric_problem(CustomizedMetric("ContainerLatency", SM, container("a"), "Average")) is None
    refused = CustomizedMetric("ContainerLatency", SM, VARIANT, "Average")
    assert "ContainerLatency has no other" in str(custom_metric_problem(refused))


def test_sampler_sums_an_instance_over_its_containers_and_keeps_each() -> None:
    metrics = Metrics(clock=Clock())
    refs = [
        InstanceRef("ep", "v", "i-1", "c1", "a"),
        InstanceRef("ep", "v", "i-1", "c2", "b"),
        InstanceRef("ep", "v", "i-2", "c3", "a"),
        InstanceRef("ep", "v", "i-2", "c4", "b"),
        InstanceRef("one", "v", "i-9", "c9"),  # a single-container endpoint: no container series
    ]
    samples: dict[str, tuple[float | None, float | None]] = {
        "c1": (10.0, 1.0),
        "c2": (30.0, 2.0),
        "c3": (None, 4.0),  # its first sample: memory only, so i-2 has no CPU this time
        "c4": (50.0, 8.0),
        "c9": (70.0, 16.0),
    }

    async def counts() -> dict[tuple[str, str], int]:
        return {("ep", "v"): 2}

    asyncio.run(Sampler(metrics, lambda: refs, samples.__getitem__, counts, 60).sample())
    cpu = metrics.statistic_sets("ep", "v", "CPUUtilization")[INDEX]
    memory = metrics.statistic_sets("ep", "v", "MemoryUtilization")[INDEX]
    assert (cpu.sample_count, cpu.sum) == (1, 40.0)  # i-1 only: 10 + 30
    assert (memory.sample_count, memory.sum, memory.maximum) == (2, 15.0, 12.0)  # i-1: 3, i-2: 12
    b_cpu = metrics.statistic_sets("ep", "v", "CPUUtilization", "b")[INDEX]
    a_memory = metrics.statistic_sets("ep", "v", "MemoryUtilization", "a")[INDEX]
    assert (b_cpu.sample_count, b_cpu.sum) == (2, 80.0)
    assert (a_memory.sample_count, a_memory.sum) == (2, 5.0)
    assert metrics.statistic_sets("one", "v", "CPUUtilization")[INDEX].sum == 70.0
    assert [s.container for s in metrics.container_series("one")] == []


def test_prometheus_container_families_apart_from_the_variants() -> None:
    text = pipeline_metrics().prometheus()
    lines = text.splitlines()
    b = 'endpoint_name="ep",variant_name="v",container_name="b"'
    assert f"sagemaker_container_invocations_total{{{b}}} 2" in lines
    assert f"sagemaker_container_invocation_5xx_errors_total{{{b}}} 1" in lines
    assert f"sagemaker_container_latency_microseconds_sum{{{b}}} 6000" in lines
    assert f"sagemaker_container_latency_microseconds_count{{{b}}} 2" in lines
    assert "# TYPE sagemaker_container_latency_microseconds summary" in lines
    # the variant's families carry no container label: summing them counts each request once
    assert 'sagemaker_invocations_total{endpoint_name="ep",variant_name="v"} 2' in lines
    assert not [x for x in lines if x.startswith("sagemaker_invocations_total") and "container_name" in x]
    # not sampled yet: no gauge line
    assert not [x for x in lines if x.startswith("sagemaker_container_cpu_utilization_percent{")]


def test_report_and_table_per_container() -> None:
    report = pipeline_metrics().report("ep")
    assert report["Containers"] == [
        {"VariantName": "v", "ContainerName": "a"},
        {"VariantName": "v", "ContainerName": "b"},
    ]
    [b] = [p for p in report["ContainerPeriods"] if p["ContainerName"] == "b"]
    latency = b["Metrics"]["ContainerLatency"]
    assert (latency["SampleCount"], latency["Average"], latency["Unit"]) == (2, 3000.0, "Microseconds")
    assert latency["Dimensions"][-1] == {"Name": "ContainerName", "Value": "b"}
    assert b["Metrics"]["Invocation5XXErrors"]["Sum"] == 1
    assert "ModelLatency" not in b["Metrics"]
    out = io.StringIO()
    print_metrics(report, "ep", Console(file=out, width=200, force_terminal=False))
    text = out.getvalue()
    assert "per container" in text and "3,000" in text
    single = Metrics(clock=Clock())
    single.record("x", "v", m.OK, 0.001, 0.002)
    assert "Containers" not in single.report("x")
