"""The instance a container really gets, end to end: real containers (the echo image), unchanged
boto3, the real server. A model that touches 4.5 GiB is killed on ml.c5.large (4 GiB) with the
FailureReason and the endpoint log's line, runs on ml.m5.large (8 GiB), and runs on ml.c5.large with
the limits off (`--no-instance-limits`, or the model's tag smlocal:instance-limits=off); a serving
container killed for memory leaves rotation and is replaced. Each big allocation lives only while its
test's endpoint does (the machine's memory is shared)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import docker
import httpx
import pytest
from botocore.exceptions import ClientError

from emulator.config import ContractLimits
from emulator.runtime import labels
from emulator.runtime.labels import owner_id
from tests.fixtures.smlocal_server import Smlocal, error_of, start_smlocal

pytestmark = pytest.mark.docker

GIB = 2**30
#: Touching 4.5 GiB takes this machine 10-20 s (2 shared cores): the startup and invocation limits
#: leave room for it.
LIMITS = ContractLimits(startup_timeout_s=90.0, invocation_timeout_s=90.0, stop_grace_s=2.0)
#: More than ml.c5.large's 4 GiB, less than ml.m5.large's 8 GiB.
BIG_MODEL = {"ALLOC_AT_START_MIB": "4608"}
KILLED_AT_START = (
    "CannotStartContainerError. Please ensure the model container for variant AllTraffic starts "
    "correctly when invoked with 'docker run <image> serve'. The container was killed: out of memory "
    "at 4 GiB (ml.c5.large has 4 GiB)"
)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, echo_image: str) -> Iterator[Smlocal]:
    env = start_smlocal(tmp_path_factory.mktemp("limits-on"), echo_image, limits=LIMITS)
    try:
        yield env
    finally:
        env.server.stop()


@pytest.fixture(scope="module")
def unlimited(tmp_path_factory: pytest.TempPathFactory, echo_image: str) -> Iterator[Smlocal]:
    env = start_smlocal(
        tmp_path_factory.mktemp("limits-off"), echo_image, limits=LIMITS, instance_limits=False
    )
    try:
        yield env
    finally:
        env.server.stop()


def deploy(
    env: Smlocal,
    name: str,
    instance_type: str,
    environment: dict[str, str],
    tags: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    env.sm.create_model(
        ModelName=name, PrimaryContainer={"Image": env.image, "Environment": environment}, Tags=tags or []
    )
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": instance_type,
            }
        ],
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name, timeout_s=120.0)


def endpoint_log(env: Smlocal, name: str) -> str:
    return httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/logs", timeout=10).text


def running(env: Smlocal, name: str) -> list[Any]:
    """This server's running containers of one endpoint (never another server's)."""
    wanted = [f"{labels.ENDPOINT}={name}", f"{labels.OWNER}={owner_id(env.state_dir)}"]
    return list(docker.from_env().containers.list(filters={"label": wanted}))


def test_a_model_bigger_than_the_instance_is_killed_and_the_endpoint_fails(limited: Smlocal) -> None:
    started = time.monotonic()
    try:
        described = deploy(limited, "oom-c5", "ml.c5.large", BIG_MODEL)
        elapsed = time.monotonic() - started
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == KILLED_AT_START
        log = endpoint_log(limited, "oom-c5")
        assert re.search(
            r"AllTraffic/[\w-]+: killed by the engine: out of memory at 4 GiB \(ml\.c5\.large has 4 GiB\)",
            log,
        ), log
        print(f"\nkilled for memory -> Failed in {elapsed:.1f} s")
    finally:
        limited.cleanup("oom-c5")


def test_the_same_model_runs_on_the_larger_type_with_its_limits(limited: Smlocal) -> None:
    try:
        assert deploy(limited, "fits-m5", "ml.m5.large", BIG_MODEL)["EndpointStatus"] == "InService"
        (container,) = running(limited, "fits-m5")
        host = container.attrs["HostConfig"]
        assert host["Memory"] == 8 * GIB and host["MemorySwap"] == 8 * GIB  # no swap beyond it
        assert host["NanoCpus"] == 2_000_000_000  # 2 vCPUs (the machine has 2 cores or more)
        assert host["DeviceRequests"] is None
        answer = limited.rt.invoke_endpoint(EndpointName="fits-m5", Body=b"x")
        assert answer["Body"].read() == b"x"
    finally:
        limited.cleanup("fits-m5")


def test_limits_off_for_the_server_runs_it_on_the_small_type(unlimited: Smlocal) -> None:
    try:
        assert deploy(unlimited, "off-c5", "ml.c5.large", BIG_MODEL)["EndpointStatus"] == "InService"
        (container,) = running(unlimited, "off-c5")
        assert container.attrs["HostConfig"]["Memory"] == 0 and container.attrs["HostConfig"]["NanoCpus"] == 0
    finally:
        unlimited.cleanup("off-c5")


def test_limits_off_for_one_model_by_its_tag(limited: Smlocal) -> None:
    tags = [{"Key": "smlocal:instance-limits", "Value": "off"}]
    try:
        assert deploy(limited, "tag-c5", "ml.c5.large", BIG_MODEL, tags)["EndpointStatus"] == "InService"
        (container,) = running(limited, "tag-c5")
        assert container.attrs["HostConfig"]["Memory"] == 0
    finally:
        limited.cleanup("tag-c5")


def test_a_serving_container_killed_for_memory_is_replaced(limited: Smlocal) -> None:
    try:
        assert deploy(limited, "serve-oom", "ml.c5.large", {})["EndpointStatus"] == "InService"
        (first,) = running(limited, "serve-oom")
        assert first.attrs["HostConfig"]["Memory"] == 4 * GIB
        with pytest.raises(ClientError) as exc:
            limited.rt.invoke_endpoint(EndpointName="serve-oom", Body=b"x", CustomAttributes="alloc=4608")
        code, status, message = error_of(exc)
        assert (code, status) == ("ModelError", 424)
        # the kernel's kill closes the connection mid-call: a ModelError that says so (the answer is
        # the dropped connection's; the reason is in the endpoint's log, below)
        assert re.fullmatch(
            r'Received server error \(0\) from primary with message "Container primary closed the connection '
            r"before sending an HTTP status line: its server may have died or nothing listens on port 8080 "
            r'\(\w+: [^)]*\)\."\. See https://us-east-1\.console\.aws\.amazon\.com/cloudwatch/home\?'
            r"region=us-east-1#logEventViewer:group=/aws/sagemaker/Endpoints/serve-oom in account "
            r"123456789012 for more information\.",
            message,
        ), message
        deadline = time.monotonic() + 120
        pattern = (
            r"AllTraffic/[\w-]+ refused or dropped a connection and was killed by the engine: out of memory "
            r"at 4 GiB \(ml\.c5\.large has 4 GiB\); replacing it"
        )
        while not re.search(pattern, log := endpoint_log(limited, "serve-oom")) or "replaced" not in log:
            assert time.monotonic() < deadline, log
            time.sleep(0.1)
        assert limited.sm.describe_endpoint(EndpointName="serve-oom")["EndpointStatus"] == "InService"
        assert limited.rt.invoke_endpoint(EndpointName="serve-oom", Body=b"again")["Body"].read() == b"again"
    finally:
        limited.cleanup("serve-oom")


def test_each_container_of_an_instance_gets_its_limit_and_one_killed_fails_it(
    limited: Smlocal, echo_bind_image: str
) -> None:
    """Direct: two model containers on one ml.c5.large instance, each with the instance's 4 GiB [U];
    the one that touches 4.5 GiB is killed and the endpoint fails naming it."""
    name = "mc-oom"
    limited.sm.create_model(
        ModelName=name,
        Containers=[
            {"Image": echo_bind_image, "ContainerHostname": "small"},
            {"Image": echo_bind_image, "ContainerHostname": "big", "Environment": BIG_MODEL},
        ],
        InferenceExecutionConfig={"Mode": "Direct"},
    )
    limited.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.c5.large",
            }
        ],
    )
    try:
        limited.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        deadline = time.monotonic() + 60
        while (
            len(models := [c for c in running(limited, name) if c.labels.get(labels.ROLE) == "endpoint"]) < 2
        ):
            assert time.monotonic() < deadline, "the model containers did not start"
            time.sleep(0.05)
        assert [c.attrs["HostConfig"]["Memory"] for c in models] == [4 * GIB, 4 * GIB]
        described = limited.wait(name, timeout_s=120.0)
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == KILLED_AT_START
        log = endpoint_log(limited, name)
        assert re.search(
            r"AllTraffic/[\w-]+: big: killed by the engine: out of memory at 4 GiB \(ml\.c5\.large has 4 GiB\)",
            log,
        ), log
    finally:
        limited.cleanup(name)


def test_a_type_bigger_than_the_machine_runs_with_the_machine_and_says_so_once(limited: Smlocal) -> None:
    host_bytes = int(docker.from_env().info()["MemTotal"])
    if host_bytes >= 768 * GIB:
        pytest.skip("this machine has an ml.r5.24xlarge's memory")
    try:
        assert deploy(limited, "big-r5", "ml.r5.24xlarge", {})["EndpointStatus"] == "InService"
        (container,) = running(limited, "big-r5")
        assert container.attrs["HostConfig"]["Memory"] == host_bytes  # capped at the machine's
        log = endpoint_log(limited, "big-r5")
        host_gib = f"{host_bytes / GIB:.3g}"
        warning = (
            f"AllTraffic: warning: ml.r5.24xlarge has 768 GiB of memory, this machine {host_gib} GiB: its "
            f"containers run with {host_gib} GiB"
        )
        assert log.count(warning) == 1, log
    finally:
        limited.cleanup("big-r5")


def test_a_gpu_type_without_the_nvidia_runtime_runs_on_cpu_and_says_so(limited: Smlocal) -> None:
    if "nvidia" in (docker.from_env().info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime (the device request is unit-tested)")
    try:
        assert deploy(limited, "gpu-g5", "ml.g5.xlarge", {})["EndpointStatus"] == "InService"
        (container,) = running(limited, "gpu-g5")
        assert container.attrs["HostConfig"]["DeviceRequests"] is None
        assert container.attrs["HostConfig"]["Memory"] == 16 * GIB
        log = endpoint_log(limited, "gpu-g5")
        warning = (
            "AllTraffic: warning: ml.g5.xlarge has 1 NVIDIA A10G, but the Docker engine has no NVIDIA "
            "runtime: its containers run without GPUs"
        )
        assert log.count(warning) == 1, log
    finally:
        limited.cleanup("gpu-g5")
