"""Asynchronous endpoints through their lifecycle: a graceful stop, a scale-in, an update from one
kind of endpoint to another, a restart. Every request smlocal accepted ends with exactly one of an
output or a failure object, and never fails because smlocal itself retired its instance. Real
containers (the echo image: `sleep=S` in the custom attributes makes a request last S seconds),
moto's S3 server, unchanged boto3, and a real `smlocal serve` process where the finding is the
process's (SIGTERM)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from emulator.config import ContractLimits
from emulator.runtime.labels import owner_id
from tests.fixtures.docker_env import track_owner
from tests.fixtures.s3server import make_s3_client
from tests.fixtures.smlocal_server import Smlocal, clients, error_of, start_smlocal
from tests.integration.test_async_inference import deploy_async, put_input, s3_object

pytestmark = pytest.mark.docker

#: The stop grace is short (2 s), the requests longer: only a drain for their own time limit keeps them.
LIMITS = ContractLimits(startup_timeout_s=20.0, invocation_timeout_s=5.0, stop_grace_s=2.0)


@pytest.fixture(scope="module")
def bucket(s3_server: str) -> str:
    name = f"smlocal-async-life-{uuid.uuid4().hex[:8]}"
    make_s3_client(s3_server).create_bucket(Bucket=name)
    return name


def _exists(s3: Any, url: str) -> bool:
    bucket, key = url.removeprefix("s3://").split("/", 1)
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def _settled(s3: Any, answers: list[dict[str, Any]], timeout_s: float = 60.0) -> None:
    """Every answer's output written (each within timeout_s), and no failure object anywhere."""
    for answer in answers:
        assert s3_object(s3, answer["OutputLocation"], timeout_s)["Body"].read() == answer["_body"]
    failed = [a["InferenceId"] for a in answers if _exists(s3, a["FailureLocation"])]
    assert failed == [], f"failure objects written for {failed}"


def _submit(
    rt: Any, name: str, location: str, body: bytes, count: int, sleep_s: float
) -> list[dict[str, Any]]:
    answers = []
    for _ in range(count):
        answer = rt.invoke_endpoint_async(
            EndpointName=name, InputLocation=location, CustomAttributes=f"sleep={sleep_s}"
        )
        answer["_body"] = body
        answers.append(answer)
    return answers


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve_process(tmp_path: Path, s3_server: str) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """`smlocal serve` as a user runs it, its S3 at moto's server (AWS_ENDPOINT_URL_S3)."""
    state = tmp_path / "state"
    track_owner(owner_id(state))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL_S3": s3_server,
        "AWS_ACCESS_KEY_ID": "smlocal",
        "AWS_SECRET_ACCESS_KEY": "smlocal",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "serve", "--port", str(port), "--state-dir", str(state)]
        + ["--stop-grace", "2"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/_smlocal/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        assert time.monotonic() < deadline, "smlocal serve did not answer"
        time.sleep(0.1)
    try:
        yield url, proc, state
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        log.close()


@pytest.mark.parametrize("stop", ["sigterm", "down", "fixture"])
def test_a_graceful_stop_fails_no_queued_request(
    stop: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    echo_image: str,
    s3_server: str,
    aws_credentials: None,
    bucket: str,
    s3_client: Any,
) -> None:
    """`smlocal serve` stopped by SIGTERM or by `smlocal down`, or the in-process server of the
    pytest fixtures stopped, with requests running and waiting: none is dispatched to a stopping
    instance, none is written to its failure location; the restarted server runs what was left,
    each once to an output."""
    name = f"async-stop-{stop}"
    location = put_input(s3_client, bucket, f"inputs/{name}.json", name.encode())
    if stop in ("sigterm", "down"):
        url, proc, state = request.getfixturevalue("serve_process")
        sm, rt = clients(url)
        first = Smlocal(None, sm, rt, echo_image, state)  # type: ignore[arg-type]
    else:
        state = tmp_path / "state"
        first = start_smlocal(state, echo_image, limits=LIMITS, s3_endpoint_url=s3_server)
    assert deploy_async(first, name, bucket, concurrency=2)["EndpointStatus"] == "InService"
    answers = _submit(first.rt, name, location, name.encode(), 12, sleep_s=0.5)
    s3_object(s3_client, answers[0]["OutputLocation"])  # some done, some running, most waiting
    if stop == "sigterm":
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    elif stop == "down":
        down = subprocess.run(
            [sys.executable, "-m", "emulator.cli", "down", "--grace", "2", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            env={**os.environ, "SMLOCAL_ENDPOINT_URL": url},
            timeout=120,
        )
        assert down.returncode == 0, down.stderr
        assert proc.wait(timeout=60) == 0
    else:
        first.server.stop()
    failed = [a["InferenceId"] for a in answers if _exists(s3_client, a["FailureLocation"])]
    assert failed == [], f"the stop failed {len(failed)} of {len(answers)} requests"

    second = start_smlocal(state, echo_image, limits=LIMITS, s3_endpoint_url=s3_server)
    try:
        assert second.wait(name)["EndpointStatus"] == "InService"
        _settled(s3_client, answers)
    finally:
        second.cleanup(name)
        second.server.stop()


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    smlocal = start_smlocal(
        tmp_path_factory.mktemp("async-life"), echo_image, limits=LIMITS, s3_endpoint_url=s3_server
    )
    try:
        yield smlocal
    finally:
        smlocal.server.stop()


def _config(env: Smlocal, name: str, model: str, bucket: str | None, count: int = 1) -> None:
    """An endpoint config of `count` instances of `model`, asynchronous when a bucket is given."""
    extra: dict[str, Any] = {}
    if bucket is not None:
        extra["AsyncInferenceConfig"] = {
            "OutputConfig": {"S3OutputPath": f"s3://{bucket}/{model}/out"},
            "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1},
        }
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": model,
                "InitialInstanceCount": count,
                "InstanceType": "ml.m5.large",
            }
        ],
        **extra,
    )


def _running(env: Smlocal, name: str, count: int, timeout_s: float = 20.0) -> None:
    """Until `count` requests run on the endpoint's instances."""
    service = env.server.service
    assert service is not None
    deadline = time.monotonic() + timeout_s
    while sum(i.outstanding for i in service._fleets[name].all_instances()) < count:
        assert time.monotonic() < deadline, f"{count} request(s) never ran on {name}"
        time.sleep(0.02)


def _wait_in_service(env: Smlocal, name: str, timeout_s: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        described: dict[str, Any] = env.sm.describe_endpoint(EndpointName=name)
        if described["EndpointStatus"] not in ("Creating", "Updating", "SystemUpdating"):
            return described
        assert time.monotonic() < deadline, described
        time.sleep(0.05)


def test_a_scale_in_and_an_update_drain_the_requests_running_on_retired_instances(
    env: Smlocal, bucket: str, s3_client: Any
) -> None:
    """Requests that run longer than the stop grace (2 s) on an instance a scale-in 2 -> 1 or an
    update's old fleet retires end with their output: the instance is drained for the requests' own
    InvocationTimeoutSeconds before it is stopped."""
    name = "async-drain"
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image})
    _config(env, name, name, bucket, count=2)
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    location = put_input(s3_client, bucket, f"inputs/{name}.json", b"drained")
    try:
        assert env.wait(name)["EndpointStatus"] == "InService"
        answers = _submit(env.rt, name, location, b"drained", 2, sleep_s=6)
        _running(env, name, 2)  # one on each instance
        env.sm.update_endpoint_weights_and_capacities(
            EndpointName=name,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 1}],
        )
        described = _wait_in_service(env, name)
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 1
        _settled(s3_client, answers)

        _config(env, f"{name}-2", name, bucket)
        answers = _submit(env.rt, name, location, b"drained", 1, sleep_s=6)
        _running(env, name, 1)
        env.sm.update_endpoint(EndpointName=name, EndpointConfigName=f"{name}-2")
        described = _wait_in_service(env, name)
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert described["EndpointConfigName"] == f"{name}-2"
        _settled(s3_client, answers)
    finally:
        env.cleanup(name)
        env.sm.delete_endpoint_config(EndpointConfigName=f"{name}-2")


def test_an_update_to_a_real_time_config_makes_the_endpoint_real_time_and_runs_what_was_queued(
    env: Smlocal, bucket: str, s3_client: Any
) -> None:
    """DescribeEndpoint shows the deployed AsyncInferenceConfig; after UpdateEndpoint to a config
    without one, InvokeEndpoint is served and InvokeEndpointAsync refused, and the requests still
    queued at the switch run on the new fleet [U] (none lost, none failed)."""
    name = "async-to-rt"
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image})
    _config(env, name, name, bucket)
    _config(env, f"{name}-rt", name, None)
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    location = put_input(s3_client, bucket, f"inputs/{name}.json", b"queued")
    try:
        described = env.wait(name)
        assert described["EndpointStatus"] == "InService"
        assert described["AsyncInferenceConfig"] == {
            "OutputConfig": {"S3OutputPath": f"s3://{bucket}/{name}/out"},
            "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1},
        }
        answers = _submit(env.rt, name, location, b"queued", 4, sleep_s=1)
        env.sm.update_endpoint(EndpointName=name, EndpointConfigName=f"{name}-rt")
        described = _wait_in_service(env, name)
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert "AsyncInferenceConfig" not in described
        assert env.rt.invoke_endpoint(EndpointName=name, Body=b"now real-time")["Body"].read() == (
            b"now real-time"
        )
        with pytest.raises(ClientError) as refused:
            env.rt.invoke_endpoint_async(EndpointName=name, InputLocation=location)
        assert error_of(refused.value) == (
            "ValidationError",
            400,
            f"Endpoint {name} is not an asynchronous endpoint: InvokeEndpointAsync needs an endpoint "
            "config with AsyncInferenceConfig. Call InvokeEndpoint.",
        )
        _settled(s3_client, answers)
        queue = env.state_dir / "async" / name
        deadline = time.monotonic() + 10  # the drained queue's folder goes with its last request
        while queue.exists():
            assert time.monotonic() < deadline, list(queue.iterdir())
            time.sleep(0.02)
    finally:
        env.cleanup(name)
        env.sm.delete_endpoint_config(EndpointConfigName=f"{name}-rt")


def test_a_real_time_endpoint_cannot_become_serverless(env: Smlocal) -> None:
    name = "rt-to-serverless"
    env.deploy(name)
    env.sm.create_endpoint_config(
        EndpointConfigName=f"{name}-sl",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "ServerlessConfig": {"MemorySizeInMB": 1024, "MaxConcurrency": 1},
            }
        ],
    )
    try:
        with pytest.raises(ClientError) as refused:
            env.sm.update_endpoint(EndpointName=name, EndpointConfigName=f"{name}-sl")
        assert error_of(refused.value) == (
            "ValidationException",
            400,
            f"Endpoint {name} runs on instances: it cannot be updated to endpoint config {name}-sl, whose "
            "variant is serverless. An endpoint converts from serverless to instances, not from "
            "instances to serverless: create a new endpoint with that config.",
        )
        described = env.sm.describe_endpoint(EndpointName=name)
        assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", name)
    finally:
        env.cleanup(name)
        env.sm.delete_endpoint_config(EndpointConfigName=f"{name}-sl")


def test_an_async_endpoint_whose_config_was_deleted_stays_async_across_a_restart(
    tmp_path: Path, echo_image: str, s3_server: str, aws_credentials: None, bucket: str, s3_client: Any
) -> None:
    """Its kind comes from the config it deployed (kept with it), not from the config of that name:
    after DeleteEndpointConfig and DeleteModel and a crash, the restarted endpoint is still
    asynchronous and runs its persisted queue."""
    name = "async-orphan"
    crashed = start_smlocal(
        tmp_path, echo_image, limits=LIMITS, s3_endpoint_url=s3_server, stop_containers=False
    )
    location = put_input(s3_client, bucket, f"inputs/{name}.json", b"kept")
    try:
        crashed.sm.create_model(ModelName=name, PrimaryContainer={"Image": echo_image})
        _config(crashed, name, name, bucket)
        crashed.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        assert crashed.wait(name)["EndpointStatus"] == "InService"
        answers = _submit(crashed.rt, name, location, b"kept", 4, sleep_s=1)
        crashed.sm.delete_endpoint_config(EndpointConfigName=name)
        crashed.sm.delete_model(ModelName=name)
    finally:
        crashed.server.stop()
    restarted = start_smlocal(tmp_path, echo_image, limits=LIMITS, s3_endpoint_url=s3_server)
    try:
        described = restarted.wait(name)
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        answers += _submit(restarted.rt, name, location, b"kept", 1, sleep_s=0)
        _settled(s3_client, answers)
        with pytest.raises(ClientError) as refused:
            restarted.rt.invoke_endpoint(EndpointName=name, Body=b"x")
        assert error_of(refused.value)[:2] == ("ValidationError", 400)
        output_path = described["AsyncInferenceConfig"]["OutputConfig"]["S3OutputPath"]
        assert output_path == f"s3://{bucket}/{name}/out"
    finally:
        restarted.cleanup(name)
        restarted.server.stop()


def test_a_restart_while_a_real_time_endpoint_drains_its_old_queue_drains_on(
    tmp_path: Path, echo_image: str, s3_server: str, aws_credentials: None, bucket: str, s3_client: Any
) -> None:
    """Updated from async to real-time with requests still queued, then crashed: the restarted
    endpoint is real-time and still runs the old queue with the old settings (kept beside it)."""
    name = "async-drain-restart"
    crashed = start_smlocal(
        tmp_path, echo_image, limits=LIMITS, s3_endpoint_url=s3_server, stop_containers=False
    )
    location = put_input(s3_client, bucket, f"inputs/{name}.json", b"drained on")
    try:
        crashed.sm.create_model(ModelName=name, PrimaryContainer={"Image": echo_image})
        _config(crashed, name, name, bucket)
        _config(crashed, f"{name}-rt", name, None)
        crashed.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        assert crashed.wait(name)["EndpointStatus"] == "InService"
        answers = _submit(crashed.rt, name, location, b"drained on", 5, sleep_s=1.5)
        crashed.sm.update_endpoint(EndpointName=name, EndpointConfigName=f"{name}-rt")
        assert _wait_in_service(crashed, name)["EndpointStatus"] == "InService"
        assert (tmp_path / "async" / name / "settings.json").exists()  # some still queued
    finally:
        crashed.server.stop()
    restarted = start_smlocal(tmp_path, echo_image, limits=LIMITS, s3_endpoint_url=s3_server)
    try:
        described = restarted.wait(name)
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert "AsyncInferenceConfig" not in described
        assert restarted.rt.invoke_endpoint(EndpointName=name, Body=b"rt")["Body"].read() == b"rt"
        _settled(s3_client, answers)
        queue = tmp_path / "async" / name
        deadline = time.monotonic() + 10
        while queue.exists():
            assert time.monotonic() < deadline, list(queue.iterdir())
            time.sleep(0.02)
    finally:
        restarted.cleanup(name)
        restarted.sm.delete_endpoint_config(EndpointConfigName=f"{name}-rt")
        restarted.server.stop()
