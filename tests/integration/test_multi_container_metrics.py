"""Per-container metrics of multi-container endpoints (dimension ContainerName, spec §4) against real
containers, read through boto3's unchanged cloudwatch client and `/metrics`: Invocations, the 4XX/5XX
error counts, ContainerLatency and OverheadLatency per container, the variant's ModelLatency as the sum
of a pipeline's ContainerLatency, containers after a failing hop not counted, CPU and memory sampled
per container. --time-scale 60: a metric period is one second."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.scaling import time_scaled_server
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of
from tests.integration.test_multi_container_instances import deploy_multi

pytestmark = pytest.mark.docker

CONFIG = Config(retries={"mode": "standard", "max_attempts": 1})
SM = "AWS/SageMaker"
INSTANCE = "/aws/sagemaker/Endpoints"


def dims(endpoint: str, container: str | None = None) -> list[dict[str, str]]:
    out = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}]
    if container is not None:
        out.append({"Name": "ContainerName", "Value": container})
    return out


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    yield from time_scaled_server(tmp_path_factory.mktemp("smlocal"), echo_image, s3_server)


@pytest.fixture(scope="module")
def cw(smlocal: Smlocal) -> Any:
    return boto3.client("cloudwatch", endpoint_url=smlocal.server.url, config=CONFIG, **CREDENTIALS)


class Totals:
    """A metric's statistics summed over every datapoint since the module's first call (one query
    period of 60 metric periods: the whole test, whatever period boundaries it crossed)."""

    def __init__(self, cw: Any, since: datetime) -> None:
        self.cw = cw
        self.since = since

    def points(self, namespace: str, name: str, dimensions: list[dict[str, str]]) -> list[dict[str, Any]]:
        found = self.cw.get_metric_statistics(
            Namespace=namespace,
            MetricName=name,
            Dimensions=dimensions,
            StartTime=self.since,
            EndTime=datetime.now(UTC) + timedelta(seconds=5),
            Period=3600,  # 60 metric periods (60 s here)
            Statistics=["Sum", "SampleCount", "Maximum"],
        )["Datapoints"]
        return list(found)

    def sum(self, namespace: str, name: str, dimensions: list[dict[str, str]]) -> float:
        return sum(p["Sum"] for p in self.points(namespace, name, dimensions))

    def count(self, namespace: str, name: str, dimensions: list[dict[str, str]]) -> float:
        return sum(p["SampleCount"] for p in self.points(namespace, name, dimensions))


def poll(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def stage(image: str, name: str, **env: str) -> dict[str, Any]:
    return {"Image": image, "Environment": {"STAGE": name, **env}}


@pytest.fixture(scope="module")
def direct(smlocal: Smlocal, echo_bind_image: str) -> Iterator[str]:
    containers = [
        {**stage(echo_bind_image, "alpha"), "ContainerHostname": "alpha"},
        # 406 to an Accept other than text/plain: a 4xx per request
        {**stage(echo_bind_image, "beta", ACCEPT_TYPES="text/plain"), "ContainerHostname": "beta"},
        {"Image": echo_bind_image, "Environment": {"INVOKE_STATUS": "503"}, "ContainerHostname": "gamma"},
    ]
    described = deploy_multi(smlocal, "mcm-direct", containers, mode="Direct")
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    yield "mcm-direct"
    smlocal.cleanup("mcm-direct")


@pytest.fixture(scope="module")
def serial(smlocal: Smlocal, echo_bind_image: str) -> Iterator[str]:
    containers = [
        stage(echo_bind_image, "one"),
        stage(echo_bind_image, "two", MAX_BODY_BYTES="1000"),  # 413 to a large request: it fails there
        stage(echo_bind_image, "three"),
    ]
    described = deploy_multi(smlocal, "mcm-serial", containers)
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    yield "mcm-serial"
    smlocal.cleanup("mcm-serial")


def test_direct_counts_each_call_for_the_container_it_named(smlocal: Smlocal, cw: Any, direct: str) -> None:
    totals = Totals(cw, datetime.now(UTC) - timedelta(seconds=2))
    rt = smlocal.rt
    for _ in range(3):
        rt.invoke_endpoint(EndpointName=direct, Body=b"a", TargetContainerHostname="alpha")
    rt.invoke_endpoint(EndpointName=direct, Body=b"b", TargetContainerHostname="beta", Accept="text/plain")
    for target, accept, status in (("beta", "application/json", 406), ("gamma", "text/plain", 503)):
        with pytest.raises(ClientError) as caught:
            rt.invoke_endpoint(EndpointName=direct, Body=b"x", TargetContainerHostname=target, Accept=accept)
        code, http, message = error_of(caught.value)
        assert (code, http) == ("ModelError", 424) and f"({status})" in message and target in message

    expected = {
        "alpha": {"Invocations": 3, "Invocation4XXErrors": 0, "Invocation5XXErrors": 0},
        "beta": {"Invocations": 2, "Invocation4XXErrors": 1, "Invocation5XXErrors": 0},
        "gamma": {"Invocations": 1, "Invocation4XXErrors": 0, "Invocation5XXErrors": 1},
    }
    for container, want in expected.items():
        for name, value in want.items():
            assert totals.sum(SM, name, dims(direct, container)) == value, (container, name)
        calls = want["Invocations"]
        assert totals.count(SM, "ContainerLatency", dims(direct, container)) == calls, container
        assert totals.count(SM, "OverheadLatency", dims(direct, container)) == calls, container
        assert totals.sum(SM, "ContainerLatency", dims(direct, container)) > 0
    # the variant's own series counts every request once
    assert totals.sum(SM, "Invocations", dims(direct)) == 6
    assert totals.sum(SM, "Invocation4XXErrors", dims(direct)) == 1
    assert totals.sum(SM, "Invocation5XXErrors", dims(direct)) == 1
    assert totals.sum(SM, "InvocationModelErrors", dims(direct)) == 2
    # ContainerLatency exists per container only; the variant-only metrics have no ContainerName
    assert totals.points(SM, "ContainerLatency", dims(direct)) == []
    assert totals.points(SM, "ModelLatency", dims(direct, "alpha")) == []
    assert totals.points(SM, "InvocationsPerInstance", dims(direct, "alpha")) == []
    assert totals.points(SM, "Invocations", dims(direct, "delta")) == []

    listed = cw.list_metrics(Namespace=SM, Dimensions=[{"Name": "ContainerName", "Value": "gamma"}])[
        "Metrics"
    ]
    assert {m["MetricName"] for m in listed} == {
        "Invocations",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
        "ContainerLatency",
        "OverheadLatency",
    }
    assert all(
        sorted(d["Name"] for d in m["Dimensions"]) == ["ContainerName", "EndpointName", "VariantName"]
        for m in listed
    )
    data = cw.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "beta4xx",
                "MetricStat": {
                    "Metric": {
                        "Namespace": SM,
                        "MetricName": "Invocation4XXErrors",
                        "Dimensions": dims(direct, "beta"),
                    },
                    "Period": 3600,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=totals.since,
        EndTime=datetime.now(UTC) + timedelta(seconds=5),
    )["MetricDataResults"][0]
    assert data["StatusCode"] == "Complete" and sum(data["Values"]) == 1

    text = httpx.get(f"{smlocal.server.url}/metrics", timeout=10).text
    labels = f'endpoint_name="{direct}",variant_name="AllTraffic",container_name="alpha"'
    assert f"sagemaker_container_invocations_total{{{labels}}} 3" in text.splitlines()
    assert f"sagemaker_container_latency_microseconds_count{{{labels}}} 3" in text.splitlines()
    gamma = f'endpoint_name="{direct}",variant_name="AllTraffic",container_name="gamma"'
    assert f"sagemaker_container_invocation_5xx_errors_total{{{gamma}}} 1" in text.splitlines()
    variant = f'sagemaker_invocations_total{{endpoint_name="{direct}",variant_name="AllTraffic"}} 6'
    assert variant in text.splitlines()


def test_serial_counts_every_hop_up_to_the_failing_one(smlocal: Smlocal, cw: Any, serial: str) -> None:
    totals = Totals(cw, datetime.now(UTC) - timedelta(seconds=2))
    rt = smlocal.rt
    for _ in range(2):
        got = rt.invoke_endpoint(EndpointName=serial, Body=b"small", ContentType="text/plain")
        assert got["Body"].read().startswith(b"small|one:")
    with pytest.raises(ClientError) as caught:
        rt.invoke_endpoint(EndpointName=serial, Body=b"x" * 2000, ContentType="text/plain")
    code, http, message = error_of(caught.value)
    assert (code, http) == ("ModelError", 424) and "container-2" in message and "(413)" in message

    expected = {"container-1": (3, 0), "container-2": (3, 1), "container-3": (2, 0)}
    for container, (calls, client_errors) in expected.items():
        assert totals.sum(SM, "Invocations", dims(serial, container)) == calls, container
        assert totals.sum(SM, "Invocation4XXErrors", dims(serial, container)) == client_errors, container
        assert totals.count(SM, "ContainerLatency", dims(serial, container)) == calls, container
    assert totals.sum(SM, "Invocations", dims(serial)) == 3
    assert totals.sum(SM, "Invocation4XXErrors", dims(serial)) == 1
    # a pipeline's ModelLatency is the sum of its containers' ContainerLatency, request by request
    model = totals.sum(SM, "ModelLatency", dims(serial))
    hops = sum(totals.sum(SM, "ContainerLatency", dims(serial, c)) for c in expected)
    assert model == pytest.approx(hops, rel=1e-6)
    # each container's OverheadLatency is its request's: the first container saw all three
    overhead = totals.sum(SM, "OverheadLatency", dims(serial))
    assert totals.sum(SM, "OverheadLatency", dims(serial, "container-1")) == pytest.approx(overhead, rel=1e-6)


def test_cpu_and_memory_are_sampled_per_container(cw: Any, serial: str) -> None:
    since = datetime.now(UTC) - timedelta(seconds=2)
    totals = Totals(cw, since)

    def sampled(name: str) -> bool:
        return all(totals.points(INSTANCE, name, dims(serial, c)) for c in ("container-1", "container-2"))

    poll("CPUUtilization and MemoryUtilization per container", lambda: sampled("CPUUtilization"))
    poll("MemoryUtilization per container", lambda: sampled("MemoryUtilization"))
    memory = totals.points(INSTANCE, "MemoryUtilization", dims(serial, "container-3"))
    assert memory and all(p["Unit"] == "Percent" and p["Maximum"] > 0 for p in memory)
    assert totals.points(INSTANCE, "MemoryUtilization", dims(serial))  # the instance's, summed
    # DiskUtilization is the instance's only
    assert totals.points(INSTANCE, "DiskUtilization", dims(serial, "container-1")) == []
