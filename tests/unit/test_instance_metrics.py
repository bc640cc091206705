"""DiskUtilization, GPUUtilization and GPUMemoryUtilization: the catalogue, the aggregation, the
sampler's disk and GPU side with fake probes, the Docker adapter's parsing of the engine's answers,
the nvidia-smi parser and the GPU totals (this machine has no GPU: the present case is fakes only)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from emulator.config import (
    DEFAULT_INSTANCE_VOLUME_GB,
    INSTANCE_VOLUME_GB,
    ServerConfig,
    has_instance_storage,
    instance_volume_bytes,
)
from emulator.hosting.monitoring import catalogue
from emulator.hosting.monitoring.disk import ModelDataSizes, tree_bytes, utilization
from emulator.hosting.monitoring.queries import MetricQueries
from emulator.hosting.monitoring.sampler import InstanceProbes, InstanceRef, Sampler
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.registry import custom_metric_problem
from emulator.model import alarms as al
from emulator.model.scaling import CustomizedMetric
from emulator.runtime import gpus
from emulator.runtime.base import DiskUsage
from emulator.runtime.gpus import GpuDevice, parse_nvidia_smi, totals

NEW = ("DiskUtilization", "GPUUtilization", "GPUMemoryUtilization")
NS = "/aws/sagemaker/Endpoints"
DIMS = (("EndpointName", "ep"), ("VariantName", "v"))
GIB = 2**30


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------ catalogue and aggregation


def test_catalogue_names_namespace_unit_and_families() -> None:
    for name in NEW:
        info = catalogue.METRICS_BY_NAME[name]
        assert (info.namespace, info.unit, info.kind) == (NS, "Percent", "gauge")
        assert name in catalogue.UTILIZATION_METRICS
    assert catalogue.METRICS_BY_NAME["DiskUtilization"].prometheus == "sagemaker_disk_utilization_percent"
    assert catalogue.METRICS_BY_NAME["GPUUtilization"].prometheus == "sagemaker_gpu_utilization_percent"
    assert (
        catalogue.METRICS_BY_NAME["GPUMemoryUtilization"].prometheus
        == "sagemaker_gpu_memory_utilization_percent"
    )
    assert catalogue.locate(NS, "DiskUtilization", DIMS) == catalogue.SeriesKey("ep", "v")
    assert catalogue.locate("AWS/SageMaker", "DiskUtilization", DIMS) is None


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("statistic", ["Average", "Maximum", "Minimum", "Sum", "SampleCount"])
def test_trackable_in_customized_target_tracking(name: str, statistic: str) -> None:
    assert custom_metric_problem(CustomizedMetric(name, NS, DIMS, statistic, "Percent")) is None
    problem = custom_metric_problem(CustomizedMetric(name, "AWS/SageMaker", DIMS, statistic))
    assert problem is not None and problem.startswith(f"smlocal publishes no metric AWS/SageMaker/{name};")


def test_samples_aggregate_per_period_and_only_where_measured() -> None:
    clock = Clock()
    metrics = Metrics(period_s=60, clock=clock)
    metrics.record_utilization("ep", "v", 10.0, 20.0, disk=1.5)
    metrics.record_utilization("ep", "v", None, None, disk=2.5, gpu=150.0, gpu_memory=80.0)
    metrics.record_utilization("ep", "v", None, None, gpu=50.0)
    got = metrics.report("ep")["Periods"][0]["Metrics"]
    assert got["DiskUtilization"]["SampleCount"] == 2
    assert got["DiskUtilization"]["Average"] == pytest.approx(2.0)
    assert got["DiskUtilization"]["Maximum"] == pytest.approx(2.5)
    assert got["GPUUtilization"]["Average"] == pytest.approx(100.0)
    assert got["GPUMemoryUtilization"]["SampleCount"] == 1
    assert got["CPUUtilization"]["SampleCount"] == 1  # disk/GPU-only samples add no CPU datapoint
    for name in NEW:
        assert got[name]["Unit"] == "Percent" and got[name]["Namespace"] == NS
    index = metrics.period_index()
    assert metrics.datapoint("ep", "v", "DiskUtilization", "Maximum", index) == pytest.approx(2.5)
    published = {m for ns, m, _key in metrics.published() if ns == NS}
    assert published == {"CPUUtilization", "MemoryUtilization", *NEW}


def test_without_gpus_no_gpu_datapoint_listing_or_sample_line() -> None:
    metrics = Metrics(clock=Clock())
    metrics.record_utilization("ep", "v", 10.0, 20.0, disk=3.0)
    got = metrics.report("ep")["Periods"][0]["Metrics"]
    assert "DiskUtilization" in got and "GPUUtilization" not in got and "GPUMemoryUtilization" not in got
    assert metrics.statistic_sets("ep", "v", "GPUUtilization") == {}
    queries = MetricQueries(ServerConfig(state_dir=Path("unused")), metrics)
    listed = {m.name for m in queries.list_metrics(NS, None, [])}
    assert listed == {"CPUUtilization", "MemoryUtilization", "DiskUtilization"}
    text = metrics.prometheus()
    labels = 'endpoint_name="ep",variant_name="v"'
    assert f"sagemaker_disk_utilization_percent{{{labels}}} 3" in text
    assert "# TYPE sagemaker_gpu_utilization_percent gauge" in text
    assert not [line for line in text.splitlines() if line.startswith("sagemaker_gpu")]


def test_gpu_sample_lines_in_prometheus() -> None:
    metrics = Metrics(clock=Clock())
    metrics.record_utilization("ep", "v", None, None, gpu=37.0, gpu_memory=12.5)
    text = metrics.prometheus()
    labels = 'endpoint_name="ep",variant_name="v"'
    assert f"sagemaker_gpu_utilization_percent{{{labels}}} 37" in text
    assert f"sagemaker_gpu_memory_utilization_percent{{{labels}}} 12.5" in text


def test_metric_statistics_query_reads_disk() -> None:
    from datetime import UTC, datetime, timedelta

    clock = Clock()
    metrics = Metrics(period_s=60, clock=clock)
    metrics.record_utilization("ep", "v", None, None, disk=4.0)
    clock.now += 60
    metrics.record_utilization("ep", "v", None, None, disk=6.0)
    queries = MetricQueries(ServerConfig(state_dir=Path("unused")), metrics)
    now = datetime.fromtimestamp(clock.now, UTC)
    points = queries.statistics(
        al.Metric(NS, "DiskUtilization", DIMS),
        "Percent",
        now - timedelta(minutes=5),
        now + timedelta(minutes=1),
        120,
    )
    assert sum(s.sample_count for _t, s in points) == 2
    assert max(s.maximum for _t, s in points) == pytest.approx(6.0)
    assert (
        queries.statistics(al.Metric(NS, "DiskUtilization", DIMS), "Bytes", now, now + timedelta(1), 60) == []
    )


# ------------------------------------------------------------------ volumes


def test_instance_volume_table_default_and_override() -> None:
    config = ServerConfig(state_dir=Path("unused"))
    assert instance_volume_bytes(config, "ml.m5.large") == DEFAULT_INSTANCE_VOLUME_GB * GIB
    assert instance_volume_bytes(config, None) == DEFAULT_INSTANCE_VOLUME_GB * GIB
    assert instance_volume_bytes(config, "ml.g5.xlarge") == 250 * GIB  # NVMe instance store
    assert INSTANCE_VOLUME_GB["ml.g4dn.xlarge"] == 125 and INSTANCE_VOLUME_GB["ml.p4d.24xlarge"] == 8000
    overridden = ServerConfig(state_dir=Path("unused"), instance_volume_gb=(("ml.m5.large", 1.0),))
    assert instance_volume_bytes(overridden, "ml.m5.large") == GIB
    assert instance_volume_bytes(overridden, "ml.g5.xlarge") == 250 * GIB


def test_a_variants_volume_size_wins() -> None:
    overridden = ServerConfig(state_dir=Path("unused"), instance_volume_gb=(("ml.m5.large", 1.0),))
    assert instance_volume_bytes(overridden, "ml.m5.large", 200) == 200 * GIB
    assert instance_volume_bytes(overridden, "ml.c5.large", 1) == GIB


@pytest.mark.parametrize(
    ("instance_type", "storage"),
    [
        ("ml.m5.large", False),
        ("ml.c5.xlarge", False),
        ("ml.p3.2xlarge", False),
        ("ml.inf2.xlarge", False),
        (None, False),
        ("ml.g5.xlarge", True),
        ("ml.g4dn.xlarge", True),
        ("ml.m5d.large", True),
        ("ml.p4d.24xlarge", True),
        ("ml.g6.2xlarge", True),
        ("ml.trn1.2xlarge", True),
        ("ml.p5.48xlarge", True),
    ],
)
def test_instance_storage_types(instance_type: str | None, storage: bool) -> None:
    assert has_instance_storage(instance_type) is storage


def test_disk_in_use_counts_writable_layers_and_model_data_once(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "weights.bin").write_bytes(b"w" * 1000)
    (model / "sub" / "vocab.txt").write_bytes(b"v" * 24)
    (model / "link").symlink_to(model / "weights.bin")  # not counted twice
    assert tree_bytes(str(model)) == 1024
    sizes = ModelDataSizes()
    usages = [DiskUsage(500, (str(model),)), DiskUsage(76, ())]
    assert sizes.in_use(usages) == 1600
    (model / "late.bin").write_bytes(b"x" * 10_000)  # measured once: mounted model data is read-only
    assert sizes.in_use(usages) == 1600
    assert sizes.size(str(tmp_path / "absent")) == 0
    assert utilization(512, 1024.0) == 50.0 and utilization(1, 0.0) == 0.0


# ------------------------------------------------------------------ the sampler's disk and GPU side


def _sampler(metrics: Metrics, refs: list[InstanceRef], probes: InstanceProbes) -> Sampler:
    async def counts() -> dict[tuple[str, str], int]:
        return {}

    return Sampler(metrics, lambda: refs, lambda cid: None, counts, 60, probes=probes)


def test_sampler_disk_per_instance_summed_over_its_containers() -> None:
    metrics = Metrics(clock=Clock())
    refs = [
        InstanceRef("ep", "v", "i-1", "c1"),
        InstanceRef("ep", "v", "i-1", "c1b"),  # a second container of the same instance
        InstanceRef("ep", "v", "i-2", "c2"),
        InstanceRef("ep", "v", "i-3", "gone"),  # not in the engine's answer: no datapoint
    ]
    usage = {"c1": DiskUsage(GIB // 4), "c1b": DiskUsage(GIB // 4), "c2": DiskUsage(GIB // 10)}
    calls: list[int] = []

    def disk_usage() -> Mapping[str, DiskUsage]:
        calls.append(1)
        return usage

    probes = InstanceProbes(disk_usage=disk_usage, volume_bytes=lambda e, v: float(GIB), disk_every=2)
    sampler = _sampler(metrics, refs, probes)
    asyncio.run(sampler.sample())
    got = metrics.report("ep")["Periods"][0]["Metrics"]["DiskUtilization"]
    assert got["SampleCount"] == 2
    assert got["Maximum"] == pytest.approx(50.0) and got["Minimum"] == pytest.approx(10.0)
    assert sampler.last_disk_s is not None and sampler.last_disk_s >= 0
    asyncio.run(sampler.sample())  # disk_every=2: this period reads no disk
    asyncio.run(sampler.sample())
    assert len(calls) == 2
    assert "GPUUtilization" not in metrics.report("ep")["Periods"][0]["Metrics"]


def test_sampler_disk_failure_leaves_cpu_sampling_alone() -> None:
    metrics = Metrics(clock=Clock())

    def broken() -> Mapping[str, DiskUsage]:
        raise RuntimeError("engine hiccup")

    async def counts() -> dict[tuple[str, str], int]:
        return {}

    probes = InstanceProbes(disk_usage=broken, volume_bytes=lambda e, v: float(GIB))
    sampler = Sampler(
        metrics,
        lambda: [InstanceRef("ep", "v", "i-1", "c1")],
        lambda c: (5.0, 6.0),
        counts,
        60,
        probes=probes,
    )
    asyncio.run(sampler.sample())
    got = metrics.report("ep")["Periods"][0]["Metrics"]
    assert "CPUUtilization" in got and "DiskUtilization" not in got


def test_sampler_gpus_only_for_instances_given_them() -> None:
    metrics = Metrics(clock=Clock())
    refs = [InstanceRef("ep", "gpu", "i-1", "g1"), InstanceRef("ep", "cpu", "i-2", "c1")]
    devices = [GpuDevice(40.0, 1024.0, 4096.0), GpuDevice(60.0, 2048.0, 4096.0)]
    reads: list[int] = []

    def reader() -> list[GpuDevice]:
        reads.append(1)
        return devices

    probes = InstanceProbes(gpus=reader, gpu_access=lambda cid: cid.startswith("g"))
    asyncio.run(_sampler(metrics, refs, probes).sample())
    gpu = metrics.report("ep")["Periods"]
    by_variant = {p["VariantName"]: p["Metrics"] for p in gpu}
    assert by_variant["gpu"]["GPUUtilization"]["Average"] == pytest.approx(100.0)  # 40 + 60, 0-200 %
    assert by_variant["gpu"]["GPUMemoryUtilization"]["Average"] == pytest.approx(75.0)  # 25 % + 50 %
    assert "cpu" not in by_variant  # no sample of any kind for the CPU-only instance
    # no instance with GPUs: the devices are not even read
    asyncio.run(_sampler(Metrics(clock=Clock()), refs[1:], probes).sample())
    assert len(reads) == 1


def test_sampler_without_a_gpu_reader_records_no_gpu_metric() -> None:
    metrics = Metrics(clock=Clock())
    probes = InstanceProbes(gpus=None, gpu_access=lambda cid: True)
    asyncio.run(_sampler(metrics, [InstanceRef("ep", "v", "i-1", "c1")], probes).sample())
    assert metrics.series("ep") == []


# ------------------------------------------------------------------ GPU readers (fakes: no GPU here)


def test_parse_nvidia_smi() -> None:
    text = "37, 1024, 81559\n0, 0, 81559\n[N/A], 512, [N/A]\n\n"
    assert parse_nvidia_smi(text) == [
        GpuDevice(37.0, 1024.0, 81559.0),
        GpuDevice(0.0, 0.0, 81559.0),
        GpuDevice(None, 512.0, None),
    ]
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        parse_nvidia_smi("37, 1024")


def test_totals_sum_over_devices() -> None:
    assert totals([]) == (None, None)
    assert totals([GpuDevice(None, 1.0, None)]) == (None, None)
    util, mem = totals(
        [GpuDevice(50.0, 10.0, 40.0), GpuDevice(None, 20.0, 40.0), GpuDevice(30.0, None, 40.0)]
    )
    assert util == pytest.approx(80.0) and mem == pytest.approx(75.0)


class FakeNvml:
    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.initialised = False

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        self.initialised = True

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:  # noqa: N802
        if handle == 1:
            raise self.NVMLError("not supported")
        return type("Rates", (), {"gpu": 70, "memory": 5})()

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:  # noqa: N802
        return type("Memory", (), {"used": 2 * GIB, "total": 8 * GIB, "free": 6 * GIB})()


def test_nvml_reader() -> None:
    nvml = FakeNvml()
    devices = gpus.NvmlReader(nvml)()
    assert nvml.initialised
    assert devices == [GpuDevice(70.0, 2.0 * GIB, 8.0 * GIB), GpuDevice(None, 2.0 * GIB, 8.0 * GIB)]
    assert totals(devices) == (70.0, 50.0)


def test_no_gpu_reader_on_this_machine() -> None:
    """The absent case, for real: this machine has neither NVML's library nor nvidia-smi."""
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("this host has nvidia-smi")
    assert gpus.find_reader() is None


def test_nvidia_smi_reader_runs_the_query(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = "--query-gpu=utilization.gpu,memory.used,memory.total" ] || exit 9\necho "12, 100, 400"\n'
    )
    fake.chmod(0o755)
    assert gpus.NvidiaSmiReader(str(fake))() == [GpuDevice(12.0, 100.0, 400.0)]


# ------------------------------------------------------------------ the Docker adapter's parsing


class FakeApi:
    def __init__(self, rows: list[dict[str, Any]], inspected: dict[str, Any]) -> None:
        self.rows = rows
        self.inspected = inspected
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def containers(self, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append(("containers", kwargs))
        return self.rows

    def inspect_container(self, container_id: str) -> dict[str, Any]:
        self.calls.append(("inspect", {"id": container_id}))
        return self.inspected[container_id]


class FakeDocker:
    def __init__(self, api: FakeApi) -> None:
        self.api = api


def test_docker_disk_usage_and_gpu_access() -> None:
    from emulator.runtime.docker import DockerRuntime

    rows = [
        {
            "Id": "c1",
            "SizeRw": 4096,
            "Mounts": [
                {"Type": "bind", "Source": "/state/model", "Destination": "/opt/ml/model", "RW": False},
                {"Type": "bind", "Source": "/scratch", "Destination": "/scratch", "RW": True},
                {"Type": "volume", "Name": "v", "Destination": "/data", "RW": False},
            ],
        },
        {"Id": "c2"},  # the engine leaves SizeRw out when nothing was written
    ]
    inspected = {
        "c1": {"HostConfig": {"DeviceRequests": [{"Count": -1, "Capabilities": [["gpu"]]}]}},
        "c2": {"HostConfig": {"DeviceRequests": None}},
    }
    api = FakeApi(rows, inspected)
    runtime = DockerRuntime(client=FakeDocker(api))
    usage = runtime.disk_usage({"smlocal.owner": "me", "smlocal.role": "endpoint"})
    assert usage == {"c1": DiskUsage(4096, ("/state/model",)), "c2": DiskUsage(0, ())}
    assert api.calls[0] == (
        "containers",
        {
            "filters": {"label": ["smlocal.owner=me", "smlocal.role=endpoint"], "status": "running"},
            "size": True,
        },
    )
    assert runtime.gpu_access("c1") is True and runtime.gpu_access("c2") is False
    assert runtime.gpu_access("c1") is True
    assert [c for c in api.calls if c[0] == "inspect"] == [
        ("inspect", {"id": "c1"}),
        ("inspect", {"id": "c2"}),
    ]


# ------------------------------------------------------------------ `smlocal metrics`


def _table_text(metrics: dict[str, Any], width: int) -> str:
    import io

    from rich.console import Console

    from emulator.metrics_table import print_metrics

    report = {
        "PeriodSeconds": 60.0,
        "Periods": [
            {
                "Timestamp": "2026-12-01T10:30:00Z",
                "VariantName": "AllTraffic",
                "Complete": True,
                "Metrics": metrics,
            }
        ],
    }
    out = io.StringIO()
    print_metrics(report, "ep", Console(file=out, width=width, force_terminal=False))
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 250])
def test_metrics_table_shows_disk_and_gpu_only_when_measured(width: int) -> None:
    base = {
        "Invocations": {"Sum": 3.0},
        "CPUUtilization": {"Average": 12.0},
        "DiskUtilization": {"Average": 4.25},
    }
    text = _table_text(base, width)
    assert "disk" in text and "4.25" in text
    assert "GPU" not in text
    gpu = {**base, "GPUUtilization": {"Average": 137.5}, "GPUMemoryUtilization": {"Average": 61.5}}
    text = _table_text(gpu, width)
    assert "GPU" in text and "137.5" in text and "61.5" in text


@pytest.mark.parametrize("width", [80, 250])
def test_metrics_table_shows_multi_model_columns_only_when_measured(width: int) -> None:
    base = {"Invocations": {"Sum": 4.0}}
    assert "cache" not in _table_text(base, width)
    mme = {
        **base,
        "ModelCacheHit": {"Average": 0.75},
        "ModelLoadingTime": {"Average": 1234.5},
        "LoadedModelCount": {"Sum": 3.0},
    }
    text = _table_text(mme, width)
    assert "cache" in text and "0.75" in text and "1,234" in text and "loaded" in text
