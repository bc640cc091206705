"""Asynchronous inference's S3 and SNS traffic: its own bounded pool (slow inputs starve nothing
else), streamed from S3 through the container to S3 (the server's memory stays bounded), and a
request whose result cannot be written is still accounted for. Real containers (the echo image),
moto's S3 and SNS server, unchanged boto3."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.config import ContractLimits
from tests.fixtures.slow_s3 import slow_s3_proxy
from tests.fixtures.smlocal_server import Smlocal, model_tar, start_smlocal

pytestmark = pytest.mark.docker

LIMITS = ContractLimits(startup_timeout_s=20.0, invocation_timeout_s=30.0, stop_grace_s=2.0)


@pytest.fixture
def bucket(s3_client: Any) -> str:
    name = f"smlocal-async-io-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


def deploy_async(
    env: Smlocal, name: str, bucket: str, concurrency: int = 1, notification: dict[str, Any] | None = None
) -> dict[str, Any]:
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image})
    output: dict[str, Any] = {"S3OutputPath": f"s3://{bucket}/{name}/out"}
    if notification is not None:
        output["NotificationConfig"] = notification
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": name, "InitialInstanceCount": 1}],
        AsyncInferenceConfig={
            "OutputConfig": output,
            "ClientConfig": {"MaxConcurrentInvocationsPerInstance": concurrency},
        },
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name)


def exists(s3: Any, url: str) -> bool:
    bucket, key = url.removeprefix("s3://").split("/", 1)
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except s3.exceptions.ClientError:
        return False


@pytest.fixture
def slow_env(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    """A server whose S3 is moto behind the throttling proxy: keys with `slow/` are read at
    16 KiB per 50 ms (about 320 KiB/s)."""
    with slow_s3_proxy(s3_server) as proxy:
        env = start_smlocal(
            tmp_path_factory.mktemp("async-io"), echo_image, limits=LIMITS, s3_endpoint_url=proxy
        )
        try:
            yield env
        finally:
            env.server.stop()


SLOW_REQUESTS = 8
SLOW_INPUT_BYTES = 2 * 1024 * 1024  # about 6.5 s through the proxy


def test_a_new_endpoint_goes_in_service_while_async_inputs_are_slow(
    slow_env: Smlocal, bucket: str, s3_client: Any, tmp_path: Path
) -> None:
    """8 async requests read slow inputs at once; a new endpoint with model data in S3 is InService
    within a few seconds, long before the inputs are read (before its own pool, async I/O held all 4
    model-data threads and the new endpoint waited two rounds of slow reads: 9.7 s measured)."""
    env = slow_env
    assert (
        deploy_async(env, "slow-inputs", bucket, concurrency=SLOW_REQUESTS)["EndpointStatus"] == "InService"
    )
    s3_client.upload_file(
        str(model_tar(tmp_path / "m.tar.gz", {"weights.bin": b"w" * 1024})), bucket, "m.tar.gz"
    )
    env.sm.create_model(
        ModelName="fresh",
        PrimaryContainer={"Image": env.image, "ModelDataUrl": f"s3://{bucket}/m.tar.gz"},
    )
    env.sm.create_endpoint_config(
        EndpointConfigName="fresh",
        ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": "fresh", "InitialInstanceCount": 1}],
    )
    outputs = []
    for i in range(SLOW_REQUESTS):
        s3_client.put_object(Bucket=bucket, Key=f"slow/in-{i}", Body=bytes([i]) * SLOW_INPUT_BYTES)
        answer = env.rt.invoke_endpoint_async(
            EndpointName="slow-inputs", InputLocation=f"s3://{bucket}/slow/in-{i}"
        )
        outputs.append(answer["OutputLocation"])
    started = time.monotonic()
    env.sm.create_endpoint(EndpointName="fresh", EndpointConfigName="fresh")
    described = env.wait("fresh", timeout_s=60)
    in_service_s = time.monotonic() - started
    print(
        f"a new endpoint went InService in {in_service_s:.2f} s while {SLOW_REQUESTS} async inputs were read"
    )
    assert described["EndpointStatus"] == "InService", described.get("FailureReason")
    assert in_service_s < 4.0
    # the slow reads were still under way (else the measurement proves nothing)
    assert not any(exists(s3_client, url) for url in outputs)
    deadline = time.monotonic() + 60
    while not all(exists(s3_client, url) for url in outputs):
        assert time.monotonic() < deadline, "the slow requests did not finish"
        time.sleep(0.1)
    env.cleanup("fresh")
    env.cleanup("slow-inputs")


BIG_REQUESTS = 4
BIG_BYTES = 64 * 1024 * 1024
#: The server's peak RSS may rise by this much while 4 x 64 MiB go in and 4 x 64 MiB come out: the
#: bound in docs/reliability.md is 4 x (a 5 MiB part, held about twice, + a 1 MiB chunk) = 44 MiB
#: (48 measured); read and written whole, the same run rose 705 MiB.
PEAK_RISE_LIMIT_MIB = 100


@pytest.mark.slow
def test_large_payloads_are_streamed_and_the_servers_memory_stays_bounded(
    echo_image: str, s3_server: str
) -> None:
    from tests.fixtures.async_memory import measure

    run = measure(echo_image, s3_server, BIG_REQUESTS, BIG_BYTES)
    print(
        f"{run.requests} x {run.size // 2**20} MiB in and out: the server's peak RSS rose "
        f"{run.peak_rise_mib:.0f} MiB ({run.seconds:.1f} s)"
    )
    assert run.peak_rise_mib < PEAK_RISE_LIMIT_MIB


def test_an_input_that_stalls_in_s3_is_a_download_failure_not_the_models_timeout(
    slow_env: Smlocal, bucket: str, s3_client: Any
) -> None:
    """The input's S3 read stops after its first piece: when InvocationTimeoutSeconds runs out the
    request fails as an unreadable input (RequestDownloadFailures), not as a model that timed out."""
    env = slow_env
    assert deploy_async(env, "stalled-input", bucket)["EndpointStatus"] == "InService"
    size = 256 * 1024
    s3_client.put_object(Bucket=bucket, Key="stall/in", Body=b"s" * size)
    answer = env.rt.invoke_endpoint_async(
        EndpointName="stalled-input", InputLocation=f"s3://{bucket}/stall/in", InvocationTimeoutSeconds=2
    )
    failure = wait_for(s3_client, answer["FailureLocation"])
    assert (
        failure
        == (
            f"Failed to download the input s3://{bucket}/stall/in: GetObject s3://{bucket}/stall/in: 0 of "
            f"{size} bytes read when the invocation timeout (2 s) ran out, the next read still waiting for S3"
        ).encode()
    )
    assert not exists(s3_client, answer["OutputLocation"])
    assert env.server.service is not None
    counters = env.server.service.async_inference.endpoint("stalled-input").counters  # type: ignore[union-attr]
    assert (counters.download_failures, counters.failures, counters.processed) == (1, 1, 0)
    env.cleanup("stalled-input")


def wait_for(s3: Any, url: str, timeout_s: float = 30.0) -> bytes:
    """The object at an s3:// URL once it exists (the worker writes it later)."""
    bucket, key = url.removeprefix("s3://").split("/", 1)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            return data
        except s3.exceptions.NoSuchKey:
            assert time.monotonic() < deadline, f"nothing at {url}"
            time.sleep(0.05)
