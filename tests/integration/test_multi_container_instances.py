"""Multi-container instances on a real engine: every container of the model runs on each instance,
started as SageMaker starts them (own ports, environment, read-only /opt/ml/model), sharing one
network; the bind-to-port label; health at create and while serving; restart adoption; down."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest

from emulator.down import down
from emulator.runtime import labels
from tests.fixtures.smlocal_server import Smlocal, model_tar, start_smlocal

pytestmark = pytest.mark.docker

LABEL = "com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true"


@pytest.fixture(scope="module")
def engine() -> Iterator[docker.DockerClient]:
    client = docker.from_env()
    yield client
    client.close()


def deploy_multi(
    env: Smlocal,
    name: str,
    containers: list[dict[str, Any]],
    mode: str | None = None,
    count: int = 1,
    wait: bool = True,
) -> dict[str, Any]:
    extra = {"InferenceExecutionConfig": {"Mode": mode}} if mode else {}
    env.sm.create_model(ModelName=name, Containers=containers, **extra)
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": count,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name) if wait else env.sm.describe_endpoint(EndpointName=name)


def containers_of(engine: docker.DockerClient, endpoint: str) -> list[Any]:
    return engine.containers.list(all=True, filters={"label": f"{labels.ENDPOINT}={endpoint}"})


def listed(engine: docker.DockerClient, endpoint: str) -> list[dict[str, Any]]:
    """One list call, no inspect per container (which races a removal under way)."""
    return list(engine.api.containers(all=True, filters={"label": f"{labels.ENDPOINT}={endpoint}"}))


def by_role(found: list[Any]) -> tuple[list[Any], list[Any]]:
    nets = [c for c in found if c.labels.get(labels.ROLE) == labels.ROLE_INSTANCE_NET]
    models = [c for c in found if c.labels.get(labels.ROLE) == "endpoint"]
    return nets, models


def test_each_container_runs_as_sagemaker_starts_it(
    smlocal: Smlocal, echo_bind_image: str, engine: docker.DockerClient, tmp_path: Path
) -> None:
    data_a = model_tar(tmp_path / "a.tar.gz", {"a.bin": b"a"})
    data_b = model_tar(tmp_path / "b.tar.gz", {"b.bin": b"bb"})
    described = deploy_multi(
        smlocal,
        "mc-start",
        [
            {"Image": echo_bind_image, "Environment": {"WHO": "first"}, "ModelDataUrl": str(data_a)},
            {"Image": echo_bind_image, "Environment": {"WHO": "second"}, "ModelDataUrl": str(data_b)},
        ],
    )
    try:
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        images = described["ProductionVariants"][0]["DeployedImages"]
        assert [i["SpecifiedImage"] for i in images] == [echo_bind_image, echo_bind_image]
        nets, models = by_role(containers_of(engine, "mc-start"))
        assert len(nets) == 1 and len(models) == 2
        net = nets[0]
        models.sort(key=lambda c: c.labels[labels.CONTAINER_HOSTNAME])
        assert [c.labels[labels.CONTAINER_HOSTNAME] for c in models] == ["container-1", "container-2"]
        seen = []
        # no container is told 8080 (it is the port to listen on *instead of* 8080)
        for c, who, port, safe in zip(
            models, ("first", "second"), (9081, 9082), ("9100-9199", "9200-9299"), strict=True
        ):
            env = dict(e.split("=", 1) for e in c.attrs["Config"]["Env"])
            assert (env["WHO"], env["SAGEMAKER_BIND_TO_PORT"], env["SAGEMAKER_SAFE_PORT_RANGE"]) == (
                who,
                str(port),
                safe,
            )
            assert c.attrs["Config"]["Cmd"] == ["serve"]
            assert c.attrs["HostConfig"]["NetworkMode"] == f"container:{net.id}"
            (mount,) = [m for m in c.attrs["Mounts"] if m["Destination"] == "/opt/ml/model"]
            assert mount["RW"] is False
            seen.append(mount["Source"])
            # the network container publishes this container's port on 127.0.0.1 only
            (binding,) = net.attrs["NetworkSettings"]["Ports"][f"{port}/tcp"]
            assert binding["HostIp"] == "127.0.0.1"
            assert httpx.get(f"http://127.0.0.1:{binding['HostPort']}/ping").status_code == 200
            # the instance's hostname, shared (Docker gives a joining container its namespace's)
            assert c.attrs["Config"]["Hostname"] == "model.aws.local"
            named = c.exec_run(
                ["python3", "-c", "import socket, os; print(socket.gethostname(), os.environ['HOSTNAME'])"]
            )
            assert named.output.split() == [b"model.aws.local", b"model.aws.local"], named.output
        assert seen[0] != seen[1]  # each its own model data
        # inside the instance, the containers reach each other on localhost, by ContainerHostname too
        probe = models[0].exec_run(
            [
                "python3",
                "-c",
                "import urllib.request as u; print(u.urlopen('http://container-2:9082/ping').status)",
            ]
        )
        assert probe.output.strip() == b"200", probe.output
    finally:
        smlocal.cleanup("mc-start")
    assert containers_of(engine, "mc-start") == []


def test_an_image_without_the_bind_to_port_label_fails_the_endpoint(
    smlocal: Smlocal, echo_bind_image: str, engine: docker.DockerClient
) -> None:
    described = deploy_multi(smlocal, "mc-nolabel", [{"Image": echo_bind_image}, {"Image": smlocal.image}])
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == (
            f"Your Ecr Image {smlocal.image} does not contain required {LABEL} Docker label(s)."
        )
        assert containers_of(engine, "mc-nolabel") == []
    finally:
        smlocal.cleanup("mc-nolabel")


def test_a_failure_at_create_lists_every_failing_container(
    smlocal: Smlocal, echo_bind_image: str, engine: docker.DockerClient
) -> None:
    described = deploy_multi(
        smlocal,
        "mc-ping",
        [
            {"Image": echo_bind_image, "ContainerHostname": "good"},
            {"Image": echo_bind_image, "ContainerHostname": "sick", "Environment": {"PING_STATUS": "500"}},
            {"Image": echo_bind_image, "ContainerHostname": "worse", "Environment": {"PING_STATUS": "503"}},
        ],
    )
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == (
            "The containers sick, worse for production variant AllTraffic did not pass the ping health "
            "check. Please check CloudWatch logs for this endpoint."
        )
        assert containers_of(engine, "mc-ping") == []
    finally:
        smlocal.cleanup("mc-ping")


def test_a_container_that_ignores_its_bind_port_fails_the_endpoint(
    smlocal: Smlocal, echo_bind_image: str, twin_image: Callable[[str], str], engine: docker.DockerClient
) -> None:
    """As container 1 too: an image labelled for multi-container use whose server listens on 8080
    whatever SAGEMAKER_BIND_TO_PORT says (start.bind-to-port's twin) never passes its pings, since
    no container is told 8080; the FailureReason names it, its port, and the server on 8080."""
    hard_wired = twin_image("start.bind-to-port")
    described = deploy_multi(smlocal, "mc-8080", [{"Image": hard_wired}, {"Image": echo_bind_image}])
    try:
        assert described["EndpointStatus"] == "Failed"
        assert described["FailureReason"] == (
            "The containers container-1 for production variant AllTraffic did not pass the ping health "
            "check. Please check CloudWatch logs for this endpoint. The container container-1 was told "
            "SAGEMAKER_BIND_TO_PORT=9081; nothing answered HTTP there. A server of the instance answers on "
            "port 8080, which no container was told: a container of a multi-container model must listen "
            "on the port in SAGEMAKER_BIND_TO_PORT instead of 8080."
        )
        assert containers_of(engine, "mc-8080") == []
    finally:
        smlocal.cleanup("mc-8080")


def test_a_container_that_exits_at_start_is_named(
    smlocal: Smlocal, echo_bind_image: str, engine: docker.DockerClient
) -> None:
    described = deploy_multi(
        smlocal,
        "mc-exit",
        [{"Image": echo_bind_image}, {"Image": echo_bind_image, "Environment": {"EXIT_AT_START": "4"}}],
    )
    try:
        assert described["EndpointStatus"] == "Failed"
        reason = described["FailureReason"]
        assert reason.startswith(
            "CannotStartContainerError. Please ensure the model container for variant AllTraffic starts "
            "correctly when invoked with 'docker run <image> serve'. The container container-2 exited with code 4"
        ), reason
        assert containers_of(engine, "mc-exit") == []
    finally:
        smlocal.cleanup("mc-exit")


def _instance_ids(engine: docker.DockerClient, endpoint: str) -> set[str]:
    return {c["Labels"][labels.INSTANCE] for c in listed(engine, endpoint) if c["State"] == "running"}


def test_a_killed_container_replaces_its_instance_while_the_endpoint_serves(
    smlocal: Smlocal, echo_bind_image: str, engine: docker.DockerClient
) -> None:
    described = deploy_multi(smlocal, "mc-kill", [{"Image": echo_bind_image}] * 2, count=2)
    try:
        assert described["EndpointStatus"] == "InService"
        before = _instance_ids(engine, "mc-kill")
        assert len(before) == 2
        victim = next(
            c
            for c in listed(engine, "mc-kill")
            if c["Labels"].get(labels.CONTAINER_HOSTNAME) == "container-2"
        )
        dead_instance = victim["Labels"][labels.INSTANCE]
        engine.api.kill(victim["Id"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            endpoint = smlocal.sm.describe_endpoint(EndpointName="mc-kill")
            assert endpoint["EndpointStatus"] == "InService"  # all along
            current = endpoint["ProductionVariants"][0]
            parts = listed(engine, "mc-kill")
            instances = {c["Labels"][labels.INSTANCE] for c in parts}
            if (
                dead_instance not in instances
                and len(_instance_ids(engine, "mc-kill")) == 2
                and len(parts) == 6
                and all(c["State"] == "running" for c in parts)
                and current["CurrentInstanceCount"] == 2
            ):
                break
            time.sleep(0.1)
        after = _instance_ids(engine, "mc-kill")
        assert len(after) == 2 and dead_instance not in after and (before - {dead_instance}) <= after
        # the whole instance went: its other container and its network container too
        parts = listed(engine, "mc-kill")
        assert all(c["Labels"][labels.INSTANCE] != dead_instance for c in parts)
        assert len(parts) == 6 and all(c["State"] == "running" for c in parts)
        variant = smlocal.sm.describe_endpoint(EndpointName="mc-kill")["ProductionVariants"][0]
        assert variant["CurrentInstanceCount"] == 2
    finally:
        smlocal.cleanup("mc-kill")


def test_restart_adopts_whole_instances_and_down_removes_every_part(
    tmp_path: Path, echo_bind_image: str, engine: docker.DockerClient, aws_credentials: None
) -> None:
    containers = [{"Image": echo_bind_image, "ContainerHostname": h} for h in ("pre", "model")]
    crashed = start_smlocal(tmp_path, echo_bind_image, stop_containers=False)
    try:
        assert deploy_multi(crashed, "mc-restart", containers, mode="Direct")["EndpointStatus"] == "InService"
    finally:
        crashed.server.stop()
    before = sorted(c["Id"] for c in listed(engine, "mc-restart"))
    assert len(before) == 3
    restarted = start_smlocal(tmp_path, echo_bind_image, stop_containers=False)
    try:
        assert restarted.wait("mc-restart")["EndpointStatus"] == "InService"
        assert sorted(c["Id"] for c in listed(engine, "mc-restart")) == before  # adopted, all three
    finally:
        restarted.server.stop()
    result = down(tmp_path, "http://127.0.0.1:9", grace_s=2)
    assert result.containers == 3
    assert listed(engine, "mc-restart") == []


def test_scaling_out_and_in_adds_and_removes_whole_instances(
    smlocal: Smlocal, echo_bind_image: str, engine: docker.DockerClient
) -> None:
    assert (
        deploy_multi(smlocal, "mc-scale", [{"Image": echo_bind_image}] * 3)["EndpointStatus"] == "InService"
    )
    try:
        for count in (2, 1):
            smlocal.sm.update_endpoint_weights_and_capacities(
                EndpointName="mc-scale",
                DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": count}],
            )
            described: dict[str, Any] | None = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                described = smlocal.sm.describe_endpoint(EndpointName="mc-scale")
                if described["EndpointStatus"] != "Updating":
                    break
                time.sleep(0.05)
            assert described is not None and described["EndpointStatus"] == "InService"
            assert described["ProductionVariants"][0]["CurrentInstanceCount"] == count
            parts = listed(engine, "mc-scale")
            assert len(parts) == 4 * count  # three model containers and a network container each
            assert len({c["Labels"][labels.INSTANCE] for c in parts}) == count
    finally:
        smlocal.cleanup("mc-scale")
    assert listed(engine, "mc-scale") == []


def test_an_instance_missing_a_container_after_a_restart_is_replaced_whole(
    tmp_path: Path, echo_bind_image: str, engine: docker.DockerClient, aws_credentials: None
) -> None:
    crashed = start_smlocal(tmp_path, echo_bind_image, stop_containers=False)
    try:
        assert (
            deploy_multi(crashed, "mc-part", [{"Image": echo_bind_image}] * 2)["EndpointStatus"]
            == "InService"
        )
    finally:
        crashed.server.stop()
    before = listed(engine, "mc-part")
    (victim,) = [c for c in before if c["Labels"].get(labels.CONTAINER_HOSTNAME) == "container-2"]
    engine.api.kill(victim["Id"])
    restarted = start_smlocal(tmp_path, echo_bind_image)
    try:
        assert restarted.wait("mc-part")["EndpointStatus"] == "InService"
        after = listed(engine, "mc-part")
        assert len(after) == 3 and all(c["State"] == "running" for c in after)
        assert not {c["Id"] for c in after} & {c["Id"] for c in before}  # no part of the old one kept
        restarted.cleanup("mc-part")
    finally:
        restarted.server.stop()
    assert listed(engine, "mc-part") == []


def test_logs_have_a_stream_per_container(smlocal: Smlocal, echo_bind_image: str) -> None:
    """`smlocal logs` (the admin route behind it), all at once and followed: one CloudWatch-style stream
    `{variant}/{instance-id}/{ContainerHostname}` per container, as SageMaker names them (spec §4)."""
    name = "McLogs"
    containers = [{"ContainerHostname": h, "Image": echo_bind_image} for h in ("left", "right")]
    try:
        deploy_multi(smlocal, name, containers, mode="Direct")
        route = f"{smlocal.server.url}/_smlocal/endpoints/{name}/logs"
        lines = httpx.get(route, timeout=10).text.splitlines()
        streams = {line.split(" ", 1)[0] for line in lines} - {"_smlocal"}  # the platform's own stream
        streams = {s for s in streams if not s.endswith("/_cold-start")}  # the instance's cold start
        instance = next(iter(streams)).split("/")[1]
        assert streams == {f"AllTraffic/{instance}/left", f"AllTraffic/{instance}/right"}
        assert f"AllTraffic/{instance}/left echo: listening on 9081" in lines
        assert f"AllTraffic/{instance}/right echo: listening on 9082" in lines
        followed: set[str] = set()
        with httpx.stream("GET", route, params={"follow": "1"}, timeout=10) as resp:
            for line in resp.iter_lines():  # the live containers only: no platform stream
                followed.add(line.split(" ", 1)[0])
                if followed == streams:
                    break
        assert followed == streams
    finally:
        smlocal.cleanup(name)
