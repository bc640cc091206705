"""Inference components end to end: real containers (the echo image on http.server and the FastAPI
image on uvicorn), unchanged boto3, the real server.

An endpoint whose variant names no model starts its instances empty; components placed on them
serve by name; copies are containers with the component's reservation as their limits, placed
SPREAD over the instances; a copy with no room is pending until an instance is added; copies scale
in and out (to zero, with SageMaker's error while none serves); a new specification rolls out under
load with no failed request, and one whose copies cannot start rolls back; the refusals answer
their texts; a restart adopts the running copies."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from botocore.exceptions import ClientError

from emulator.runtime import labels
from emulator.runtime.labels import owner_id
from tests.fixtures.s3server import make_s3_client
from tests.fixtures.smlocal_server import Smlocal, error_of, model_tar, start_smlocal

pytestmark = pytest.mark.docker

ROLE = "arn:aws:iam::123456789012:role/smlocal"
#: ml.m5.large: 2 vCPUs, 8 GiB (8192 MiB). Three copies of 2600 MiB fit one, a fourth does not.
INSTANCE_TYPE = "ml.m5.large"
SMALL = {"NumberOfCpuCoresRequired": 0.5, "MinMemoryRequiredInMb": 512}
BIG = {"NumberOfCpuCoresRequired": 0.5, "MinMemoryRequiredInMb": 2600}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, echo_image: str) -> Iterator[Smlocal]:
    server = start_smlocal(tmp_path_factory.mktemp("components"), echo_image)
    try:
        yield server
    finally:
        server.server.stop()


def create_endpoint(env: Smlocal, name: str, count: int = 2, **variant: Any) -> dict[str, Any]:
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ExecutionRoleArn=ROLE,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "InstanceType": INSTANCE_TYPE,
                "InitialInstanceCount": count,
                **variant,
            }
        ],
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name)


def create_component(
    env: Smlocal,
    name: str,
    endpoint: str,
    copies: int = 1,
    compute: dict[str, Any] | None = None,
    model: str | None = None,
    container: dict[str, Any] | None = None,
) -> None:
    spec: dict[str, Any] = {"ComputeResourceRequirements": compute or SMALL}
    if model is not None:
        spec["ModelName"] = model
    else:
        spec["Container"] = container or {"Image": env.image}
    env.sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        Specification=spec,
        RuntimeConfig={"CopyCount": copies},
    )


def wait_component(env: Smlocal, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll DescribeInferenceComponent until it leaves Creating/Updating."""
    deadline = time.monotonic() + timeout_s
    while True:
        described: dict[str, Any] = env.sm.describe_inference_component(InferenceComponentName=name)
        if described["InferenceComponentStatus"] not in ("Creating", "Updating"):
            return described
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} still {described['InferenceComponentStatus']}")
        time.sleep(0.05)


def wait_copies(env: Smlocal, name: str, current: int, timeout_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        described = wait_component(env, name, timeout_s)
        if described["RuntimeConfig"]["CurrentCopyCount"] == current:
            return described
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: {described['RuntimeConfig']} after {timeout_s} s")
        time.sleep(0.05)


def invoke(env: Smlocal, endpoint: str, component: str, body: bytes = b"{}", attrs: str = "") -> bytes:
    extra = {"CustomAttributes": attrs} if attrs else {}
    reply = env.rt.invoke_endpoint(
        EndpointName=endpoint,
        InferenceComponentName=component,
        Body=body,
        ContentType="application/json",
        **extra,
    )
    data: bytes = reply["Body"].read()
    return data


def copies_of(engine: docker.DockerClient, env: Smlocal, component: str) -> list[Any]:
    return engine.containers.list(
        filters={"label": [f"{labels.OWNER}={owner_id(env.state_dir)}", f"{labels.COMPONENT}={component}"]}
    )


def logs_of(env: Smlocal, endpoint: str) -> str:
    """The endpoint's logs as `smlocal logs` reads them (its platform lines included)."""
    return httpx.get(f"{env.server.url}/_smlocal/endpoints/{endpoint}/logs", timeout=10).text


def delete_all(env: Smlocal, endpoint: str, components: list[str], models: tuple[str, ...] = ()) -> None:
    for name in components:
        try:
            env.sm.delete_inference_component(InferenceComponentName=name)
        except ClientError:
            pass
    deadline = time.monotonic() + 60
    while any(
        c["EndpointName"] == endpoint for c in env.sm.list_inference_components()["InferenceComponents"]
    ):
        assert time.monotonic() < deadline, "components still there"
        time.sleep(0.05)
    env.cleanup(endpoint)
    for model in models:
        try:
            env.sm.delete_model(ModelName=model)
        except ClientError:
            pass


def hammer(call: Callable[[], bytes], stop: threading.Event, outcomes: list[Any]) -> None:
    """Call until stopped, recording every reply or error (nothing is lost: every call is counted)."""
    while not stop.is_set():
        try:
            outcomes.append(call())
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test asserts
            outcomes.append(exc)


def test_two_components_with_their_own_images_on_one_endpoint(
    env: Smlocal, fastapi_image: str, docker_engine: docker.DockerClient
) -> None:
    endpoint = "ic-two"
    described = create_endpoint(env, endpoint)
    try:
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        variant = described["ProductionVariants"][0]
        assert variant["CurrentInstanceCount"] == 2
        assert "DeployedImages" not in variant  # the instances are empty
        env.sm.create_model(
            ModelName="ic-echo", PrimaryContainer={"Image": env.image, "Environment": {"WHO": "echo"}}
        )
        create_component(env, "ic-echo", endpoint, copies=2, model="ic-echo")
        create_component(env, "ic-fastapi", endpoint, copies=1, container={"Image": fastapi_image})
        for name, copies in (("ic-echo", 2), ("ic-fastapi", 1)):
            ready = wait_component(env, name)
            assert ready["InferenceComponentStatus"] == "InService", ready.get("FailureReason")
            assert ready["RuntimeConfig"] == {
                "DesiredCopyCount": copies,
                "CurrentCopyCount": copies,
                "PlacementStatus": [{"InstanceType": INSTANCE_TYPE, "CurrentCopyCount": copies}],
            }
        fastapi = env.sm.describe_inference_component(InferenceComponentName="ic-fastapi")
        assert fastapi["Specification"]["Container"]["DeployedImage"]["SpecifiedImage"] == fastapi_image

        # each by its name, concurrently
        replies: dict[str, list[bytes]] = {"ic-echo": [], "ic-fastapi": []}

        def run(name: str, attrs: str) -> None:
            for i in range(15):
                replies[name].append(invoke(env, endpoint, name, json.dumps({"i": i}).encode(), attrs))

        threads = [
            threading.Thread(target=run, args=("ic-echo", "env=WHO")),
            threading.Thread(target=run, args=("ic-fastapi", "")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert replies["ic-echo"] == [b"echo"] * 15
        assert [json.loads(r) for r in replies["ic-fastapi"]] == [
            {"predictions": {"i": i}} for i in range(15)
        ]

        # each copy's log is a stream under its component
        streams = {line.split(" ", 1)[0] for line in logs_of(env, endpoint).splitlines()}
        assert len({s for s in streams if s.startswith("ic-echo/i-")}) == 2, streams
        assert len({s for s in streams if s.startswith("ic-fastapi/i-")}) == 1, streams

        # copies are containers with the reservation as their limits, spread over both instances
        echo_copies = copies_of(docker_engine, env, "ic-echo")
        assert len(echo_copies) == 2
        assert len({c.labels[labels.HOST] for c in echo_copies}) == 2
        for c in echo_copies:
            host_config = c.attrs["HostConfig"]
            assert host_config["Memory"] == 512 * 2**20
            assert host_config["NanoCpus"] == 500_000_000

        # the header is required here; an endpoint cannot go while it hosts components
        with pytest.raises(ClientError) as missing:
            env.rt.invoke_endpoint(EndpointName=endpoint, Body=b"{}", ContentType="application/json")
        assert error_of(missing) == (
            "ValidationError",
            400,
            "Inference Component Name header is required for endpoints to which you plan to deploy "
            "inference components. Please include Inference Component Name header or consider using "
            "SageMaker models.",
        )
        with pytest.raises(ClientError) as busy:
            env.sm.delete_endpoint(EndpointName=endpoint)
        code, status, message = error_of(busy)
        assert (code, status) == ("ValidationException", 400)
        assert "it hosts inference components (ic-echo, ic-fastapi)" in message

        listed = env.sm.list_inference_components(
            EndpointNameEquals=endpoint, SortBy="Name", SortOrder="Ascending"
        )
        assert [c["InferenceComponentName"] for c in listed["InferenceComponents"]] == [
            "ic-echo",
            "ic-fastapi",
        ]
    finally:
        delete_all(env, endpoint, ["ic-echo", "ic-fastapi"], ("ic-echo",))
    assert copies_of(docker_engine, env, "ic-echo") == []
    assert list((env.state_dir / "adapters" / endpoint).iterdir()) == []  # their folders went too
    assert copies_of(docker_engine, env, "ic-fastapi") == []


def test_a_copy_with_no_room_is_pending_until_an_instance_is_added(
    env: Smlocal, docker_engine: docker.DockerClient
) -> None:
    endpoint = "ic-pending"
    create_endpoint(env, endpoint, count=1)
    try:
        create_component(env, "ic-big", endpoint, copies=4, compute=BIG)
        described = wait_component(env, "ic-big")
        assert described["InferenceComponentStatus"] == "InService"
        runtime = described["RuntimeConfig"]
        assert (runtime["DesiredCopyCount"], runtime["CurrentCopyCount"]) == (4, 3)
        assert len(copies_of(docker_engine, env, "ic-big")) == 3
        # a component none of whose copies finds room stays Creating (it waits for room)
        create_component(env, "ic-none", endpoint, copies=1, compute=BIG)
        deadline = time.monotonic() + 30
        while "ic-none: waiting for room for a copy" not in logs_of(env, endpoint):
            assert time.monotonic() < deadline, logs_of(env, endpoint)
            time.sleep(0.05)
        described = env.sm.describe_inference_component(InferenceComponentName="ic-none")
        assert described["InferenceComponentStatus"] == "Creating"

        env.sm.update_endpoint_weights_and_capacities(
            EndpointName=endpoint,
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
        )
        assert env.wait(endpoint)["ProductionVariants"][0]["CurrentInstanceCount"] == 2
        wait_copies(env, "ic-big", 4)
        assert wait_copies(env, "ic-none", 1)["InferenceComponentStatus"] == "InService"
        copies = copies_of(docker_engine, env, "ic-big")
        hosts = sorted(c.labels[labels.HOST] for c in copies)
        assert len(set(hosts)) == 2 and sorted(hosts.count(h) for h in set(hosts)) == [1, 3]
        assert invoke(env, endpoint, "ic-big", attrs="env=CONTAINER_ID")
    finally:
        delete_all(env, endpoint, ["ic-big", "ic-none"])


def test_managed_instance_scaling_adds_instances_for_pending_copies_and_removes_idle_ones(
    env: Smlocal,
) -> None:
    endpoint = "ic-managed"
    managed = {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    described = create_endpoint(env, endpoint, count=1, ManagedInstanceScaling=managed)
    try:
        assert described["ProductionVariants"][0]["ManagedInstanceScaling"] == managed
        create_component(env, "ic-grown", endpoint, copies=5, compute=BIG)
        described = wait_copies(env, "ic-grown", 5)  # 3 on the first instance, 2 on the one added
        variant = env.sm.describe_endpoint(EndpointName=endpoint)["ProductionVariants"][0]
        assert (variant["CurrentInstanceCount"], variant["DesiredInstanceCount"]) == (2, 2)

        env.sm.update_inference_component_runtime_config(
            InferenceComponentName="ic-grown", DesiredRuntimeConfig={"CopyCount": 7}
        )
        described = wait_component(env, "ic-grown")  # the maximum is 2 instances: 6 copies fit
        assert described["RuntimeConfig"]["CurrentCopyCount"] == 6

        env.sm.update_inference_component_runtime_config(
            InferenceComponentName="ic-grown", DesiredRuntimeConfig={"CopyCount": 0}
        )
        wait_copies(env, "ic-grown", 0)
        variant = env.sm.describe_endpoint(EndpointName=endpoint)["ProductionVariants"][0]
        assert variant["CurrentInstanceCount"] == 0  # MinInstanceCount 0: no instance is kept

        env.sm.update_inference_component_runtime_config(
            InferenceComponentName="ic-grown", DesiredRuntimeConfig={"CopyCount": 1}
        )
        wait_copies(env, "ic-grown", 1)
        variant = env.sm.describe_endpoint(EndpointName=endpoint)["ProductionVariants"][0]
        assert variant["CurrentInstanceCount"] == 1
        assert invoke(env, endpoint, "ic-grown", b"again") == b"again"
    finally:
        delete_all(env, endpoint, ["ic-grown"])


def test_copies_scale_in_to_zero_and_back_out(env: Smlocal, docker_engine: docker.DockerClient) -> None:
    endpoint = "ic-zero"
    create_endpoint(env, endpoint, count=1)
    try:
        create_component(env, "ic-scaled", endpoint, copies=2)
        wait_copies(env, "ic-scaled", 2)
        env.sm.update_inference_component_runtime_config(
            InferenceComponentName="ic-scaled", DesiredRuntimeConfig={"CopyCount": 0}
        )
        described = wait_copies(env, "ic-scaled", 0)
        assert described["InferenceComponentStatus"] == "InService"
        assert copies_of(docker_engine, env, "ic-scaled") == []
        with pytest.raises(ClientError) as none:
            invoke(env, endpoint, "ic-scaled")
        code, status, message = error_of(none)
        assert (code, status) == ("ValidationError", 400)
        assert message == "Inference Component ic-scaled has no capacity to process this request."

        env.sm.update_inference_component_runtime_config(
            InferenceComponentName="ic-scaled", DesiredRuntimeConfig={"CopyCount": 1}
        )
        wait_copies(env, "ic-scaled", 1)
        assert invoke(env, endpoint, "ic-scaled", b"back") == b"back"
    finally:
        delete_all(env, endpoint, ["ic-scaled"])


def test_a_rolling_update_under_load_loses_nothing_and_a_failed_one_rolls_back(env: Smlocal) -> None:
    endpoint = "ic-rolling"
    create_endpoint(env, endpoint, count=2)
    try:
        create_component(
            env, "ic-rolled", endpoint, copies=2, container={"Image": env.image, "Environment": {"V": "1"}}
        )
        wait_copies(env, "ic-rolled", 2)
        stop = threading.Event()
        outcomes: list[Any] = []
        clients = [
            threading.Thread(
                target=hammer,
                args=(lambda: invoke(env, endpoint, "ic-rolled", attrs="env=V"), stop, outcomes),
            )
            for _ in range(4)
        ]
        for t in clients:
            t.start()
        try:
            env.sm.update_inference_component(
                InferenceComponentName="ic-rolled",
                Specification={
                    "Container": {"Image": env.image, "Environment": {"V": "2"}},
                    "ComputeResourceRequirements": SMALL,
                },
                DeploymentConfig={
                    "RollingUpdatePolicy": {
                        "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1},
                        "WaitIntervalInSeconds": 0,
                    }
                },
            )
            described = wait_component(env, "ic-rolled")
        finally:
            stop.set()
            for t in clients:
                t.join()
        assert described["InferenceComponentStatus"] == "InService", described.get("FailureReason")
        failures = [o for o in outcomes if isinstance(o, Exception)]
        assert failures == [] and len(outcomes) > 20
        assert set(outcomes) <= {b"1", b"2"} and outcomes[-1] == b"2"
        assert {invoke(env, endpoint, "ic-rolled", attrs="env=V") for _ in range(6)} == {b"2"}

        # a specification whose copies cannot start: rolled back, the old copies serve on
        env.sm.update_inference_component(
            InferenceComponentName="ic-rolled",
            Specification={
                "Container": {"Image": env.image, "Environment": {"V": "3", "EXIT_AT_START": "3"}},
                "ComputeResourceRequirements": SMALL,
            },
        )
        described = wait_component(env, "ic-rolled")
        assert described["InferenceComponentStatus"] == "InService"
        assert "The container exited with code 3" in described["FailureReason"]
        assert described["Specification"]["Container"].get("Environment") == {"V": "2"}
        assert {invoke(env, endpoint, "ic-rolled", attrs="env=V") for _ in range(6)} == {b"2"}
    finally:
        delete_all(env, endpoint, ["ic-rolled"])


def test_the_refusals(env: Smlocal) -> None:
    def refused(call: Callable[[], Any]) -> tuple[str, int, str]:
        with pytest.raises(ClientError) as exc:
            call()
        return error_of(exc)

    env.sm.create_model(ModelName="ic-plain", PrimaryContainer={"Image": env.image})
    try:
        code, status, message = refused(
            lambda: env.sm.create_endpoint_config(
                EndpointConfigName="ic-managed-on-model",
                ProductionVariants=[
                    {
                        "VariantName": "AllTraffic",
                        "ModelName": "ic-plain",
                        "InstanceType": INSTANCE_TYPE,
                        "InitialInstanceCount": 1,
                        "ManagedInstanceScaling": {
                            "Status": "ENABLED",
                            "MinInstanceCount": 1,
                            "MaxInstanceCount": 2,
                        },
                    }
                ],
            )
        )
        assert message == "ManagedInstanceScaling is only supported for inference component endpoints."
        code, status, message = refused(
            lambda: env.sm.create_endpoint_config(
                EndpointConfigName="ic-no-role",
                ProductionVariants=[
                    {"VariantName": "AllTraffic", "InstanceType": INSTANCE_TYPE, "InitialInstanceCount": 1}
                ],
            )
        )
        assert (code, status) == ("ValidationException", 400) and "ExecutionRoleArn is required" in message
    finally:
        env.sm.delete_model(ModelName="ic-plain")

    env.deploy("ic-plain-endpoint")
    try:
        code, status, message = refused(lambda: create_component(env, "ic-on-plain", "ic-plain-endpoint"))
        assert message == (
            "Invalid request provided: Inference Components are not supported in this Endpoint. "
            "Please make sure this endpoint can deploy inference components."
        )
        code, status, message = refused(lambda: invoke(env, "ic-plain-endpoint", "anything"))
        assert (code, status, message) == (
            "ValidationError",
            400,
            "Inference Component Name header is not allowed for endpoints to which you dont plan to deploy "
            "inference components. Please remove the Inference Component Name header and try again.",
        )
    finally:
        env.cleanup("ic-plain-endpoint")

    endpoint = "ic-refusals"
    create_endpoint(env, endpoint, count=1)
    try:
        code, status, message = refused(lambda: create_component(env, "ic-zero-copies", endpoint, copies=0))
        assert message == "Inference components copy count an integer larger than 0"
        code, status, message = refused(
            lambda: create_component(
                env,
                "ic-huge",
                endpoint,
                compute={"NumberOfCpuCoresRequired": 4, "MinMemoryRequiredInMb": 16384},
            )
        )
        assert message == (
            "A copy of inference component ic-huge fits no instance: needs 4.0 CPU cores, ml.m5.large has 2; "
            "needs 16384 MB of memory, ml.m5.large has 8192."
        )
        code, status, message = refused(
            lambda: env.sm.describe_inference_component(InferenceComponentName="ic-missing")
        )
        assert message == (
            'Could not find inference component "arn:aws:sagemaker:us-east-1:123456789012:'
            'inference-component/ic-missing".'
        )
    finally:
        delete_all(env, endpoint, [])


def test_a_restart_adopts_the_running_copies(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, docker_engine: docker.DockerClient
) -> None:
    state_dir = tmp_path_factory.mktemp("components-restart")
    first = start_smlocal(state_dir, echo_image, stop_containers=False)
    endpoint = "ic-restart"
    try:
        create_endpoint(first, endpoint, count=2)
        create_component(first, "ic-kept", endpoint, copies=2)
        wait_copies(first, "ic-kept", 2)
        before = sorted(c.id for c in copies_of(docker_engine, first, "ic-kept"))
    finally:
        first.server.stop()  # a crash: the containers stay
    second = start_smlocal(state_dir, echo_image)
    try:
        second.wait(endpoint)
        described = wait_copies(second, "ic-kept", 2)
        assert described["InferenceComponentStatus"] == "InService"
        assert sorted(c.id for c in copies_of(docker_engine, second, "ic-kept")) == before
        assert invoke(second, endpoint, "ic-kept", b"after") == b"after"
    finally:
        delete_all(second, endpoint, ["ic-kept"])
        second.server.stop()
    assert copies_of(docker_engine, second, "ic-kept") == []


def test_an_adapter_is_served_by_its_base_copies(
    smlocal: Smlocal, s3_server: str, tmp_path: Any, docker_engine: docker.DockerClient
) -> None:
    """An adapter component (BaseInferenceComponentName, its artifact in Container.ArtifactUrl) is
    registered in every copy of its base through SageMaker's adapter API (POST /adapters), a copy
    added later included; invoked by its name it reaches a base copy with
    X-Amzn-SageMaker-Adapter-Identifier; its base cannot go first; deleted, it is unregistered."""
    env = smlocal
    s3 = make_s3_client(s3_server)
    bucket = f"ic-adapters-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    archive = model_tar(tmp_path / "adapter.tar.gz", {"adapter.txt": b"tuned"})
    s3.upload_file(str(archive), bucket, "lora/adapter.tar.gz")
    endpoint = "ic-adapters"
    create_endpoint(env, endpoint, count=1)
    names = ["ic-lora", "ic-lora-missing", "ic-base"]
    try:
        create_component(env, "ic-base", endpoint, copies=2)
        wait_copies(env, "ic-base", 2)
        for name, url in (
            ("ic-lora", f"s3://{bucket}/lora/adapter.tar.gz"),
            ("ic-lora-missing", f"s3://{bucket}/lora/missing.tar.gz"),
        ):
            env.sm.create_inference_component(
                InferenceComponentName=name,
                EndpointName=endpoint,
                Specification={"BaseInferenceComponentName": "ic-base", "Container": {"ArtifactUrl": url}},
            )
        assert wait_component(env, "ic-lora")["InferenceComponentStatus"] == "InService"
        missing = wait_component(env, "ic-lora-missing")
        assert (
            missing["InferenceComponentStatus"] == "Failed" and "missing.tar.gz" in missing["FailureReason"]
        )

        assert {invoke(env, endpoint, "ic-lora") for _ in range(6)} == {b"adapter=ic-lora:tuned"}
        assert invoke(env, endpoint, "ic-base", b"plain") == b"plain"
        with pytest.raises(ClientError) as first:
            env.sm.delete_inference_component(InferenceComponentName="ic-base")
        assert error_of(first)[2] == (
            "Inference component ic-base is the base of adapters (ic-lora): delete them first."
        )

        env.sm.update_inference_component_runtime_config(
            InferenceComponentName="ic-base", DesiredRuntimeConfig={"CopyCount": 3}
        )
        wait_copies(env, "ic-base", 3)
        copies = copies_of(docker_engine, env, "ic-base")
        assert len(copies) == 3
        for c in copies:  # the copy added later was told too, before it joined rotation
            assert b"echo: adapter ic-lora registered from /opt/ml/adapters/ic-lora" in c.logs()

        env.sm.delete_inference_component(InferenceComponentName="ic-lora")
        deadline = time.monotonic() + 30
        while any(
            c["InferenceComponentName"] == "ic-lora"
            for c in env.sm.list_inference_components()["InferenceComponents"]
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for c in copies:
            assert b"echo: adapter ic-lora unregistered" in c.logs()
        with pytest.raises(ClientError) as gone:
            invoke(env, endpoint, "ic-lora")
        assert error_of(gone)[2] == "Inference component ic-lora is not deployed on endpoint ic-adapters."
    finally:
        delete_all(env, endpoint, names)


def test_the_quick_start_example_runs_as_it_is(env: Smlocal, fastapi_image: str) -> None:
    """docs/inference-components.md's example (docs/examples/inference_components.py), unchanged."""
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "inference_components.py"
    done = subprocess.run(
        [sys.executable, str(example), env.server.url, env.image, fastapi_image],
        capture_output=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    lines = done.stdout.decode().splitlines()
    assert lines[:2] == [
        "first InService {'DesiredCopyCount': 1, 'CurrentCopyCount': 1, 'PlacementStatus': "
        "[{'InstanceType': 'ml.m5.large', 'CurrentCopyCount': 1}]}",
        "second InService {'DesiredCopyCount': 1, 'CurrentCopyCount': 1, 'PlacementStatus': "
        "[{'InstanceType': 'ml.m5.large', 'CurrentCopyCount': 1}]}",
    ]
    assert lines[2:] == [
        'first answered {"x": 1}',
        'second answered {"predictions":{"x":1}}',
        "at zero: Inference Component second has no capacity to process this request.",
        "deleted",
    ]
