"""DiskUtilization against a real echo container that writes to its disk, read through boto3's
unchanged cloudwatch client, `/metrics` and `smlocal metrics --json`; on this GPU-less machine the GPU
metrics are absent (no datapoint, not listed); a target-tracking policy on DiskUtilization scales out.
--time-scale 60: a metric period is one second. The volume of ml.m5.large is set to 1 GB here, so
that a 64 MiB write moves the metric by 6.25 %."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.fixtures.scaling import TIME_SCALE, resource, variant_of, variant_target, wait_for
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, model_tar, start_smlocal

pytestmark = pytest.mark.docker

CONFIG = Config(retries={"mode": "standard", "max_attempts": 1})
NS = "/aws/sagemaker/Endpoints"
WRITE = 64 << 20  # bytes the container writes under /tmp
VOLUME = 1 << 30  # ml.m5.large's volume on this module's server
RISE = WRITE / VOLUME * 100  # 6.25 (percent)


def dims(endpoint: str) -> list[dict[str, str]]:
    return [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}]


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    env = start_smlocal(
        tmp_path_factory.mktemp("smlocal"),
        echo_image,
        s3_endpoint_url=s3_server,
        time_scale=TIME_SCALE,
        instance_volume_gb=(("ml.m5.large", 1.0),),
    )
    try:
        yield env
    finally:
        env.server.stop()


@pytest.fixture(scope="module")
def cw(smlocal: Smlocal) -> Any:
    return boto3.client("cloudwatch", endpoint_url=smlocal.server.url, config=CONFIG, **CREDENTIALS)


@pytest.fixture(scope="module")
def aas(smlocal: Smlocal) -> Any:
    return boto3.client(
        "application-autoscaling", endpoint_url=smlocal.server.url, config=CONFIG, **CREDENTIALS
    )


def disk_maximum(cw: Any, endpoint: str, since: datetime) -> float | None:
    """The largest DiskUtilization datapoint since `since`, through GetMetricStatistics."""
    points = cw.get_metric_statistics(
        Namespace=NS,
        MetricName="DiskUtilization",
        Dimensions=dims(endpoint),
        StartTime=since,
        EndTime=datetime.now(UTC) + timedelta(seconds=5),
        Period=60,  # one metric period: one second here
        Statistics=["Maximum", "SampleCount"],
    )["Datapoints"]
    assert all(p["Unit"] == "Percent" for p in points)
    return max((p["Maximum"] for p in points), default=None)


def poll(what: str, check: Callable[[], float | None], timeout_s: float = 30.0) -> float:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value is not None:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def test_disk_utilization_rises_when_the_container_writes(smlocal: Smlocal, cw: Any) -> None:
    smlocal.deploy("Disky", count=1)
    try:
        start = datetime.now(UTC) - timedelta(seconds=2)
        before = poll("a first DiskUtilization datapoint", lambda: disk_maximum(cw, "Disky", start))
        assert 0 <= before < 1.0  # the echo server has written next to nothing yet
        written = datetime.now(UTC)
        smlocal.rt.invoke_endpoint(EndpointName="Disky", Body=b"x", CustomAttributes=f"write={WRITE}")

        def risen() -> float | None:
            value = disk_maximum(cw, "Disky", written)
            return value if value is not None and value >= before + 0.95 * RISE else None

        after = poll("DiskUtilization to rise by the bytes written", risen)
        assert after < before + RISE + 1.0  # the write, not more

        data = cw.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": "disk",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": NS,
                            "MetricName": "DiskUtilization",
                            "Dimensions": dims("Disky"),
                        },
                        "Period": 60,
                        "Stat": "Maximum",
                    },
                }
            ],
            StartTime=written,
            EndTime=datetime.now(UTC) + timedelta(seconds=5),
        )["MetricDataResults"][0]
        assert data["StatusCode"] == "Complete" and max(data["Values"]) >= before + 0.95 * RISE

        listed = cw.list_metrics(Namespace=NS, Dimensions=[{"Name": "EndpointName", "Value": "Disky"}])
        names = {m["MetricName"] for m in listed["Metrics"]}
        assert "DiskUtilization" in names
        if shutil.which("nvidia-smi") is None:  # this machine: no GPU, so no GPU metric at all
            assert names.isdisjoint({"GPUUtilization", "GPUMemoryUtilization"}), names
            gpu = cw.get_metric_statistics(
                Namespace=NS,
                MetricName="GPUUtilization",
                Dimensions=dims("Disky"),
                StartTime=start,
                EndTime=datetime.now(UTC) + timedelta(seconds=5),
                Period=60,
                Statistics=["Maximum"],
            )
            assert gpu["Datapoints"] == []

        text = httpx.get(f"{smlocal.server.url}/metrics", timeout=10).text
        labels = 'endpoint_name="Disky",variant_name="AllTraffic"'
        gauge = [
            line
            for line in text.splitlines()
            if line.startswith(f"sagemaker_disk_utilization_percent{{{labels}}}")
        ]
        assert len(gauge) == 1 and float(gauge[0].rsplit(" ", 1)[1]) >= 0
        assert not [line for line in text.splitlines() if line.startswith("sagemaker_gpu") and labels in line]

        env = {**os.environ, "SMLOCAL_ENDPOINT_URL": smlocal.server.url}
        shown = subprocess.run(
            [sys.executable, "-m", "emulator.cli", "metrics", "Disky", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert '"DiskUtilization"' in shown.stdout and '"GPUUtilization"' not in shown.stdout
    finally:
        smlocal.cleanup("Disky")


def test_target_tracking_on_disk_utilization_scales_out(smlocal: Smlocal, aas: Any, cw: Any) -> None:
    smlocal.deploy("DiskScaled", count=1)
    rid = resource("DiskScaled")
    try:
        aas.register_scalable_target(**variant_target(rid), MinCapacity=1, MaxCapacity=2)
        custom = {
            "MetricName": "DiskUtilization",
            "Namespace": NS,
            "Dimensions": dims("DiskScaled"),
            "Statistic": "Maximum",
            "Unit": "Percent",
        }
        put = aas.put_scaling_policy(
            PolicyName="disk",
            **variant_target(rid),
            PolicyType="TargetTrackingScaling",
            TargetTrackingScalingPolicyConfiguration={
                "TargetValue": RISE / 2,
                "CustomizedMetricSpecification": custom,
                "ScaleInCooldown": 3600,
                "DisableScaleIn": True,
            },
        )
        [high] = [a["AlarmName"] for a in put["Alarms"] if "-AlarmHigh-" in a["AlarmName"]]
        alarms = cw.describe_alarms(AlarmNames=[a["AlarmName"] for a in put["Alarms"]])["MetricAlarms"]
        assert {(a["Namespace"], a["MetricName"]) for a in alarms} == {(NS, "DiskUtilization")}
        assert variant_of(smlocal, "DiskScaled")["CurrentInstanceCount"] == 1
        smlocal.rt.invoke_endpoint(EndpointName="DiskScaled", Body=b"x", CustomAttributes=f"write={WRITE}")
        wait_for(
            "a scale-out on DiskUtilization",
            lambda: variant_of(smlocal, "DiskScaled")["DesiredInstanceCount"] == 2,
            60,
        )
        activities = aas.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=rid)
        [activity] = activities["ScalingActivities"]
        assert activity["Description"] == "Setting desired instance count to 2."
        assert activity["Cause"] == (f"monitor alarm {high} in state ALARM triggered policy disk")
    finally:
        smlocal.cleanup("DiskScaled")


def test_disk_utilization_counts_the_model_data(smlocal: Smlocal, cw: Any, tmp_path: Path) -> None:
    """SageMaker keeps the model artifacts on the instance's volume: so does DiskUtilization here."""
    weights = 16 << 20
    data = model_tar(tmp_path / "model.tar.gz", {"weights.bin": os.urandom(weights)})
    smlocal.deploy("DiskModel", count=1, model_data=str(data))
    try:
        start = datetime.now(UTC) - timedelta(seconds=2)
        first = poll("a DiskUtilization datapoint", lambda: disk_maximum(cw, "DiskModel", start))
        expected = weights / VOLUME * 100  # 1.5625 %
        assert expected <= first < expected + 1.0
    finally:
        smlocal.cleanup("DiskModel")


def test_a_variants_volume_size_is_the_denominator(smlocal: Smlocal, cw: Any, tmp_path: Path) -> None:
    """VolumeSizeInGB of the variant wins over the instance type's volume (this server's 1 GB for
    ml.m5.large): 16 MiB of model data on a 2 GB volume is 0.78 %, not 1.56 %; DescribeEndpointConfig
    gives it back; an instance type with instance storage refuses it."""
    weights = 16 << 20
    data = model_tar(tmp_path / "model.tar.gz", {"weights.bin": os.urandom(weights)})
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": "DiskVolume",
        "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large",
        "VolumeSizeInGB": 2,
    }
    smlocal.deploy("DiskVolume", model_data=str(data), variants=[variant])
    try:
        described = smlocal.sm.describe_endpoint_config(EndpointConfigName="DiskVolume")
        assert described["ProductionVariants"][0]["VolumeSizeInGB"] == 2
        start = datetime.now(UTC) - timedelta(seconds=2)
        first = poll("a DiskUtilization datapoint", lambda: disk_maximum(cw, "DiskVolume", start))
        expected = weights / (2 << 30) * 100  # 0.78125 %
        assert expected <= first < expected + 0.5
        with pytest.raises(smlocal.sm.exceptions.ClientError) as refused:
            smlocal.sm.create_endpoint_config(
                EndpointConfigName="DiskVolumeGpu",
                ProductionVariants=[{**variant, "InstanceType": "ml.g5.xlarge"}],
            )
        error = refused.value.response["Error"]
        assert (error["Code"], refused.value.response["ResponseMetadata"]["HTTPStatusCode"]) == (
            "ValidationException",
            400,
        )
        assert error["Message"] == (
            "VolumeSizeInGB is not supported for instance type ml.g5.xlarge: its instances have instance "
            "storage (NVMe), which SageMaker uses instead of an EBS volume."
        )
    finally:
        smlocal.cleanup("DiskVolume")
