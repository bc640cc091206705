"""Serverless endpoints end to end: real containers (the echo image), real boto3, the real server.

Capacity on demand (hosting/serverless/): no container until the first request, a cold start then
warm calls, the idle stop, ProvisionedConcurrency's warm container, MaxConcurrency's throttle, the
memory limit (a container over MemorySizeInMB is killed by the engine) and the 4 MB limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import docker
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from emulator.config import ContractLimits
from emulator.runtime import labels
from emulator.runtime.labels import owner_id
from tests.fixtures.scaling import resource, variant_target
from tests.fixtures.smlocal_server import CREDENTIALS, Smlocal, error_of, start_smlocal

LIMITS = ContractLimits(
    startup_timeout_s=8.0, serverless_startup_timeout_s=8.0, invocation_timeout_s=10.0, stop_grace_s=2.0
)
IDLE_S = 3.0
MIB = 1 << 20


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, echo_image: str) -> Iterator[Smlocal]:
    smlocal = start_smlocal(
        tmp_path_factory.mktemp("serverless"), echo_image, limits=LIMITS, serverless_idle_s=IDLE_S
    )
    try:
        yield smlocal
    finally:
        smlocal.server.stop()


def containers(env: Smlocal, name: str) -> list[Any]:
    """Running containers of one endpoint of this test's server (never another server's)."""
    wanted = [f"{labels.ENDPOINT}={name}", f"{labels.OWNER}={owner_id(env.state_dir)}"]
    return list(docker.from_env().containers.list(filters={"label": wanted}))


def wait_for(condition: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def serverless_variant(
    name: str, memory: int = 1024, max_concurrency: int = 2, **more: Any
) -> dict[str, Any]:
    config: dict[str, Any] = {"MemorySizeInMB": memory, "MaxConcurrency": max_concurrency, **more}
    return {"VariantName": "AllTraffic", "ModelName": name, "ServerlessConfig": config}


def deploy(env: Smlocal, name: str, env_vars: dict[str, str] | None = None, **config: Any) -> dict[str, Any]:
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image, "Environment": env_vars or {}})
    env.sm.create_endpoint_config(
        EndpointConfigName=name, ProductionVariants=[serverless_variant(name, **config)]
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name)


def hostname(env: Smlocal, name: str, rt: Any | None = None) -> str:
    """The answering container's id prefix (the echo image's CONTAINER_ID, as docker ps shows it): which
    container served the call."""
    answer = (rt or env.rt).invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="env=CONTAINER_ID")
    return str(answer["Body"].read().decode())[:12]


def no_retry_runtime(env: Smlocal) -> Any:
    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, read_timeout=30)
    return boto3.client("sagemaker-runtime", endpoint_url=env.server.url, config=config, **CREDENTIALS)


def metric(env: Smlocal, name: str, metric_name: str) -> list[dict[str, Any]]:
    """The statistic sets of one metric of an endpoint, one per period that has it."""
    report = httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/metrics", timeout=10).json()
    return [p["Metrics"][metric_name] for p in report["Periods"] if metric_name in p["Metrics"]]


def platform_log(env: Smlocal, name: str) -> str:
    return httpx.get(f"{env.server.url}/_smlocal/endpoints/{name}/logs").text


# ------------------------------------------------------------------------------ the config


def test_a_serverless_config_is_described_and_its_endpoint_is_in_service_without_a_container(
    env: Smlocal,
) -> None:
    name = "sl-described"
    try:
        described = deploy(env, name, memory=2048, max_concurrency=5)
        assert described["EndpointStatus"] == "InService"
        variant = described["ProductionVariants"][0]
        assert variant["CurrentServerlessConfig"] == {"MemorySizeInMB": 2048, "MaxConcurrency": 5}
        assert variant["DesiredServerlessConfig"] == {"MemorySizeInMB": 2048, "MaxConcurrency": 5}
        assert "CurrentInstanceCount" not in variant
        with pytest.raises(ClientError) as refused:  # no instances to count
            env.sm.update_endpoint_weights_and_capacities(
                EndpointName=name,
                DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
            )
        assert error_of(refused.value) == (
            "ValidationException",
            400,
            "Variant AllTraffic is serverless: it has no instance count to update. Use a new endpoint config "
            "to change its ServerlessConfig.",
        )
        scaling = boto3.client("application-autoscaling", endpoint_url=env.server.url, **CREDENTIALS)
        with pytest.raises(ClientError) as not_scalable:
            scaling.register_scalable_target(**variant_target(resource(name)), MinCapacity=1, MaxCapacity=2)
        assert error_of(not_scalable.value) == (
            "ValidationException",
            400,
            f"Variant AllTraffic of endpoint {name} is serverless: it has no sagemaker:variant:DesiredInstanceCount "
            "to scale. Scale its sagemaker:variant:DesiredProvisionedConcurrency instead.",
        )
        config = env.sm.describe_endpoint_config(EndpointConfigName=name)["ProductionVariants"][0]
        assert config["ServerlessConfig"] == {"MemorySizeInMB": 2048, "MaxConcurrency": 5}
        assert "InitialInstanceCount" not in config and "InstanceType" not in config
        assert containers(env, name) == []  # capacity on demand: nothing runs before a request
    finally:
        env.cleanup(name)


def _model(env: Smlocal, name: str, **extra: Any) -> None:
    env.sm.create_model(ModelName=name, PrimaryContainer={"Image": env.image}, **extra)


REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    (
        "memory",
        {"ServerlessConfig": {"MemorySizeInMB": 1500, "MaxConcurrency": 1}},
        "MemorySizeInMB 1500 is not supported for a serverless endpoint: choose one of 1024, 2048, 3072, "
        "4096, 5120, 6144.",
    ),
    (
        "provisioned",
        {"ServerlessConfig": {"MemorySizeInMB": 1024, "MaxConcurrency": 2, "ProvisionedConcurrency": 3}},
        "ProvisionedConcurrency (3) of variant AllTraffic must be less than or equal to its MaxConcurrency (2).",
    ),
    (
        "type",
        {"ServerlessConfig": {"MemorySizeInMB": 1024, "MaxConcurrency": 1}, "InstanceType": "ml.m5.large"},
        "Variant AllTraffic has a ServerlessConfig: it cannot also have InstanceType or InitialInstanceCount.",
    ),
    (
        "count",
        {"ServerlessConfig": {"MemorySizeInMB": 1024, "MaxConcurrency": 1}, "InitialInstanceCount": 1},
        "Variant AllTraffic has a ServerlessConfig: it cannot also have InstanceType or InitialInstanceCount.",
    ),
    (
        "gpu",
        {"ServerlessConfig": {"MemorySizeInMB": 1024, "MaxConcurrency": 1}, "InstanceType": "ml.g5.xlarge"},
        "Serverless endpoints do not support GPUs: variant AllTraffic names instance type ml.g5.xlarge. "
        "Remove InstanceType.",
    ),
]


@pytest.mark.parametrize(("case", "fields", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_serverless_config_with_bad_values_is_refused(
    env: Smlocal, case: str, fields: dict[str, Any], message: str
) -> None:
    name = f"sl-refused-{case}"
    _model(env, name)
    try:
        with pytest.raises(ClientError) as refused:
            env.sm.create_endpoint_config(
                EndpointConfigName=name,
                ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": name, **fields}],
            )
        assert error_of(refused.value) == ("ValidationException", 400, message)
    finally:
        env.cleanup(name)


def test_what_a_serverless_variant_cannot_be_combined_with_is_refused(env: Smlocal) -> None:
    name = "sl-combined"
    _model(env, name)
    _model(env, f"{name}-isolated", EnableNetworkIsolation=True)
    env.sm.create_model(
        ModelName=f"{name}-pipeline",
        Containers=[
            {"Image": env.image, "ContainerHostname": "one"},
            {"Image": env.image, "ContainerHostname": "two"},
        ],
    )
    variant = serverless_variant(name)
    instances = {
        "VariantName": "Other",
        "ModelName": name,
        "InstanceType": "ml.m5.large",
        "InitialInstanceCount": 1,
    }
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"ProductionVariants": [variant, instances]},
            "An endpoint config with a serverless production variant can have only one production variant.",
        ),
        (
            {
                "ProductionVariants": [variant],
                "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": "s3://bucket/out"}},
            },
            "An endpoint config with a serverless production variant cannot have an AsyncInferenceConfig.",
        ),
        (
            {"ProductionVariants": [serverless_variant(f"{name}-isolated")]},
            f"Model {name}-isolated has EnableNetworkIsolation: serverless endpoints do not support network "
            "isolation.",
        ),
        (
            {"ProductionVariants": [serverless_variant(f"{name}-pipeline")]},
            f"Model {name}-pipeline is a multi-container model: serverless endpoints support neither "
            "multi-model endpoints nor inference pipelines (models of several containers).",
        ),
        (
            {
                "ProductionVariants": [variant],
                "DataCaptureConfig": {
                    "InitialSamplingPercentage": 100,
                    "DestinationS3Uri": "s3://bucket/capture",
                    "CaptureOptions": [{"CaptureMode": "Input"}],
                },
            },
            "DataCaptureConfig is not supported by smlocal yet. See docs/api-coverage.md.",
        ),
    ]
    try:
        for params, message in cases:
            with pytest.raises(ClientError) as refused:
                env.sm.create_endpoint_config(EndpointConfigName=name, **params)
            assert error_of(refused.value) == ("ValidationException", 400, message)
    finally:
        for model in (name, f"{name}-isolated", f"{name}-pipeline"):
            env.cleanup(model)


# ------------------------------------------------------------------------------ capacity on demand


def test_the_first_request_cold_starts_a_container_that_later_calls_reuse_and_idle_stops(
    env: Smlocal,
) -> None:
    name = "sl-cold"
    try:
        deploy(env, name, memory=1024)
        assert containers(env, name) == []
        first = hostname(env, name)  # waits for the cold start, then is served
        running = containers(env, name)
        assert len(running) == 1 and running[0].id.startswith(first)
        host_config = running[0].attrs["HostConfig"]
        assert host_config["Memory"] == 1024 * MIB  # MemorySizeInMB
        assert host_config["MemorySwap"] == 1024 * MIB  # no swap beyond it
        assert host_config["NanoCpus"] == 500_000_000  # half a core per GB [U]
        assert "cold start in" in platform_log(env, name)
        assert [hostname(env, name) for _ in range(3)] == [first] * 3  # warm: the same container
        # idle for IDLE_S: stopped; the next request is a cold start in a new container
        wait_for(lambda: containers(env, name) == [], timeout_s=IDLE_S + 15)
        assert f"idle for {IDLE_S:g} s; stopped" in platform_log(env, name)
        second = hostname(env, name)
        assert second != first
        assert platform_log(env, name).count("cold start in") == 2
        setups = metric(env, name, "ModelSetupTime")  # one sample per cold start, in microseconds
        assert sum(st["SampleCount"] for st in setups) == 2
        assert all(0 < st["Minimum"] < 60e6 for st in setups)
    finally:
        env.cleanup(name)


def test_provisioned_concurrency_keeps_a_warm_container(env: Smlocal) -> None:
    name = "sl-provisioned"
    try:
        deploy(env, name, max_concurrency=2, ProvisionedConcurrency=1)
        running = containers(env, name)
        assert len(running) == 1  # started with the endpoint
        assert hostname(env, name) == running[0].id[:12]
        assert "cold start in" not in platform_log(env, name)
        # a second request while one runs spills over ProvisionedConcurrency 1 (the metrics say so)
        service = env.server.service
        assert service is not None
        capacity = service.serverless.capacity(service._fleets[name].variants["AllTraffic"])
        slow = threading.Thread(
            target=lambda: env.rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="sleep=1")
        )
        slow.start()
        wait_for(lambda: capacity.in_flight == 1)
        env.rt.invoke_endpoint(EndpointName=name, Body=b"x")
        slow.join()

        def total(metric_name: str) -> float:
            return sum(st["Sum"] for st in metric(env, name, metric_name))

        assert total("ServerlessProvisionedConcurrencyInvocations") == 2  # the first call and the slow one
        assert total("ServerlessProvisionedConcurrencySpilloverInvocations") == 1
        assert (
            max(st["Maximum"] for st in metric(env, name, "ServerlessProvisionedConcurrencyUtilization")) == 1
        )
        time.sleep(IDLE_S * 2)  # an absence can only be shown by waiting past the idle time
        assert [c.id for c in containers(env, name)] == [running[0].id]
    finally:
        env.cleanup(name)


def test_a_container_that_cannot_start_fails_the_request_with_a_model_error(env: Smlocal) -> None:
    name = "sl-broken"
    try:
        assert deploy(env, name, env_vars={"EXIT_AT_START": "3"})["EndpointStatus"] == "InService"
        with pytest.raises(ClientError) as failed:
            env.rt.invoke_endpoint(EndpointName=name, Body=b"x")
        code, status, message = error_of(failed.value)
        assert (code, status) == ("ModelError", 424)
        assert message.startswith(
            'Received server error (0) from primary with message "The serverless endpoint could not start '
            "its model container: CannotStartContainerError. Please ensure the model container for variant "
            "AllTraffic starts correctly when invoked with 'docker run <image> serve'. The container exited "
            "with code 3"
        ), message
        wait_for(lambda: containers(env, name) == [])
    finally:
        env.cleanup(name)


# ------------------------------------------------------------------------------ limits


def test_requests_over_max_concurrency_are_throttled(env: Smlocal) -> None:
    name = "sl-throttle"
    rt = no_retry_runtime(env)
    try:
        deploy(env, name, max_concurrency=2)
        hostname(env, name)  # warm
        service = env.server.service
        assert service is not None
        fleet = service._fleets[name]
        capacity = service.serverless.capacity(fleet.variants["AllTraffic"])
        answers: list[int] = []

        def slow() -> None:
            got = rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="sleep=2")
            answers.append(got["ResponseMetadata"]["HTTPStatusCode"])

        callers = [threading.Thread(target=slow) for _ in range(2)]
        for caller in callers:
            caller.start()
        wait_for(lambda: capacity.in_flight == 2)
        with pytest.raises(ClientError) as throttled:
            rt.invoke_endpoint(EndpointName=name, Body=b"x")
        assert error_of(throttled.value) == (
            "ThrottlingException",
            400,
            f"Endpoint {name} is serving its MaxConcurrency of 2 concurrent invocations: the request was "
            "throttled. Retry it later or raise MaxConcurrency.",
        )
        for caller in callers:
            caller.join()
        assert answers == [200, 200]
        utilization = metric(env, name, "ServerlessConcurrentExecutionsUtilization")
        assert max(st["Maximum"] for st in utilization) == 1.0  # 2 of MaxConcurrency 2
        assert min(st["Minimum"] for st in utilization) == 0.5
        assert rt.invoke_endpoint(EndpointName=name, Body=b"ok")["Body"].read() == b"ok"
        # a weight-only update leaves the warm container alone (no instance count to scale to)
        warm = hostname(env, name, rt)
        env.sm.update_endpoint_weights_and_capacities(
            EndpointName=name,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredWeight": 2.0}],
        )
        wait_for(lambda: env.sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")
        assert hostname(env, name, rt) == warm
    finally:
        env.cleanup(name)


def test_payloads_over_4_mb_are_refused_either_way(env: Smlocal) -> None:
    name = "sl-payload"
    rt = no_retry_runtime(env)
    try:
        deploy(env, name)
        assert len(rt.invoke_endpoint(EndpointName=name, Body=b"x" * (4 * MIB))["Body"].read()) == 4 * MIB
        with pytest.raises(ClientError) as too_big:
            rt.invoke_endpoint(EndpointName=name, Body=b"x" * (4 * MIB + 1))
        request_id = too_big.value.response["ResponseMetadata"]["RequestId"]
        assert error_of(too_big.value) == ("ValidationError", 400, f"Request {request_id} has oversize body.")
        with pytest.raises(ClientError) as answer_too_big:
            rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes=f"size={4 * MIB + 1}")
        code, status, message = error_of(answer_too_big.value)
        assert (code, status) == ("ModelError", 424)
        assert message.startswith(
            'Received server error (0) from primary with message "The response from container primary '
            f'exceeded the maximum payload size of {4 * MIB} bytes."'
        ), message
    finally:
        env.cleanup(name)


def test_a_container_over_its_memory_size_is_killed_and_the_call_says_why(env: Smlocal) -> None:
    name = "sl-oom"
    rt = no_retry_runtime(env)
    try:
        deploy(env, name, memory=1024)
        first = hostname(env, name, rt)
        assert rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="alloc=256")  # fits
        with pytest.raises(ClientError) as killed:
            rt.invoke_endpoint(EndpointName=name, Body=b"x", CustomAttributes="alloc=1200")
        code, status, message = error_of(killed.value)
        assert (code, status) == ("ModelError", 424)
        assert message.startswith(
            'Received server error (0) from primary with message "The container used more than the '
            "endpoint's MemorySizeInMB (1024 MB) and was stopped (out of memory).\""
        ), message
        wait_for(lambda: containers(env, name) == [])
        assert hostname(env, name, rt) != first  # the next request: a new container
    finally:
        env.cleanup(name)


def test_a_restart_keeps_a_serverless_endpoint_and_its_provisioned_container(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str
) -> None:
    state = tmp_path_factory.mktemp("serverless-restart")
    first = start_smlocal(state, echo_image, limits=LIMITS, serverless_idle_s=IDLE_S, stop_containers=False)
    try:
        deploy(first, "sl-kept", ProvisionedConcurrency=1)
        deploy(first, "sl-cold-kept")
        deploy(first, "sl-updated-kept")
        first.sm.update_endpoint_weights_and_capacities(
            EndpointName="sl-updated-kept",
            DesiredWeightsAndCapacities=[
                {"VariantName": "AllTraffic", "ServerlessUpdateConfig": {"ProvisionedConcurrency": 1}}
            ],
        )
        wait_for(lambda: len(containers(first, "sl-updated-kept")) == 1)
        wait_for(
            lambda: (
                first.sm.describe_endpoint(EndpointName="sl-updated-kept")["EndpointStatus"] == "InService"
            )
        )
        updated_host = containers(first, "sl-updated-kept")[0].id[:12]
        warm = hostname(first, "sl-kept")
        cold = hostname(first, "sl-cold-kept")  # its container runs when the server stops
    finally:
        first.server.stop()
    second = start_smlocal(state, echo_image, limits=LIMITS, serverless_idle_s=IDLE_S)
    try:
        for name in ("sl-kept", "sl-cold-kept"):
            described = second.wait(name)
            assert described["EndpointStatus"] == "InService"
            assert described["ProductionVariants"][0]["CurrentServerlessConfig"]["MaxConcurrency"] == 2
        assert hostname(second, "sl-kept") == warm  # the provisioned container, adopted
        # a ServerlessUpdateConfig survives the restart (the deployed copy of the config has it)
        updated = second.wait("sl-updated-kept")["ProductionVariants"][0]["CurrentServerlessConfig"]
        assert updated.get("ProvisionedConcurrency") == 1
        assert hostname(second, "sl-updated-kept") == updated_host
        # the on-demand one is not kept over a restart: the next request is a cold start
        assert containers(second, "sl-cold-kept") == []
        assert hostname(second, "sl-cold-kept") != cold
    finally:
        for name in ("sl-kept", "sl-cold-kept", "sl-updated-kept"):
            second.cleanup(name)
        second.server.stop()


def test_a_uvicorn_fastapi_model_cold_starts_and_serves_warm_calls(env: Smlocal, fastapi_image: str) -> None:
    """A serving stack people ship (uvicorn + FastAPI, which keeps idle connections 5 s) behind the
    cold start and the pooled warm calls."""
    name = "sl-fastapi"
    try:
        env.sm.create_model(ModelName=name, PrimaryContainer={"Image": fastapi_image})
        env.sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[serverless_variant(name)])
        env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
        assert env.wait(name)["EndpointStatus"] == "InService"
        assert containers(env, name) == []
        for i in range(5):
            answer = env.rt.invoke_endpoint(
                EndpointName=name, Body=f'{{"x": {i}}}'.encode(), ContentType="application/json"
            )
            assert answer["Body"].read() == f'{{"predictions":{{"x":{i}}}}}'.encode()
        assert len(containers(env, name)) == 1
        assert platform_log(env, name).count("cold start in") == 1
    finally:
        env.cleanup(name)


def test_a_server_stopped_during_a_cold_start_leaves_no_container(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str
) -> None:
    server = start_smlocal(tmp_path_factory.mktemp("serverless-stop"), echo_image, limits=LIMITS)
    name = "sl-stopped"
    failures: list[BaseException] = []

    def call() -> None:
        try:
            no_retry_runtime(server).invoke_endpoint(EndpointName=name, Body=b"x")
        except Exception as exc:  # the server goes away under it
            failures.append(exc)

    caller = threading.Thread(target=call)
    try:
        deploy(server, name, env_vars={"LISTEN_DELAY_S": "2"})  # the cold start takes 2 s
        caller.start()
        wait_for(lambda: len(containers(server, name)) == 1)
    finally:
        server.server.stop()
    caller.join()
    # (the call may have been answered within the server's graceful stop, or failed: either way)
    assert all(isinstance(f, Exception) for f in failures)
    owned = [f"{labels.OWNER}={owner_id(server.state_dir)}"]
    assert docker.from_env().containers.list(all=True, filters={"label": owned}) == []


def test_an_image_over_the_serverless_limit_fails_create_endpoint(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str
) -> None:
    limit = 1 << 20  # lowered from 10 GB: the echo image is far larger
    server = start_smlocal(
        tmp_path_factory.mktemp("serverless-image"),
        echo_image,
        limits=LIMITS,
        serverless_image_limit_bytes=limit,
    )
    name = "sl-big-image"
    try:
        described = deploy(server, name)
        size = docker.from_env().images.get(echo_image).attrs["Size"]
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == (
            f"The image {echo_image} is {size / 1024**3:.2f} GB ({size} bytes): serverless endpoints support "
            f"images of up to 0.00 GB ({limit} bytes). Reduce the image size or deploy to instances."
        )
        assert containers(server, name) == []
    finally:
        server.cleanup(name)
        server.server.stop()


def test_serverless_update_config_changes_concurrency_and_starts_a_provisioned_container(
    env: Smlocal,
) -> None:
    name = "sl-updated"
    try:
        deploy(env, name, max_concurrency=2)
        assert containers(env, name) == []

        def update(**config: int) -> None:
            env.sm.update_endpoint_weights_and_capacities(
                EndpointName=name,
                DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "ServerlessUpdateConfig": config}],
            )

        with pytest.raises(ClientError) as refused:
            update(ProvisionedConcurrency=3)
        assert error_of(refused.value) == (
            "ValidationException",
            400,
            "ProvisionedConcurrency (3) of variant AllTraffic must be less than or equal to its MaxConcurrency (2).",
        )
        update(MaxConcurrency=4, ProvisionedConcurrency=1)
        wait_for(lambda: env.sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")
        variant = env.sm.describe_endpoint(EndpointName=name)["ProductionVariants"][0]
        assert variant["CurrentServerlessConfig"] == {
            "MemorySizeInMB": 1024,
            "MaxConcurrency": 4,
            "ProvisionedConcurrency": 1,
        }
        running = containers(env, name)
        assert len(running) == 1  # the provisioned container, started without a request
        assert hostname(env, name) == running[0].id[:12]
        # the endpoint config itself is unchanged
        config = env.sm.describe_endpoint_config(EndpointConfigName=name)["ProductionVariants"][0]
        assert config["ServerlessConfig"] == {"MemorySizeInMB": 1024, "MaxConcurrency": 2}
    finally:
        env.cleanup(name)


def test_serverless_update_config_on_an_instance_variant_is_refused(env: Smlocal) -> None:
    name = "sl-not-serverless"
    try:
        env.deploy(name)
        with pytest.raises(ClientError) as refused:
            env.sm.update_endpoint_weights_and_capacities(
                EndpointName=name,
                DesiredWeightsAndCapacities=[
                    {"VariantName": "AllTraffic", "ServerlessUpdateConfig": {"MaxConcurrency": 3}}
                ],
            )
        assert error_of(refused.value) == (
            "ValidationException",
            400,
            "Variant AllTraffic is not serverless: ServerlessUpdateConfig applies to serverless variants only.",
        )
    finally:
        env.cleanup(name)
