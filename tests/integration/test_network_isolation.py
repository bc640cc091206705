"""EnableNetworkIsolation: the model's containers have no network beyond smlocal's calls to them,
and ContainerStartupHealthCheckTimeoutInSeconds is the variant's readiness deadline.

Real containers on the real engine: the netprobe image reports, from inside, what its network lets
it do (connect, resolve); smlocal reaches it through a port published on 127.0.0.1 only.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from emulator.config import ContractLimits
from emulator.model import messages
from emulator.runtime import labels
from emulator.runtime.images import build_image
from tests.fixtures.smlocal_server import TEST_LIMITS, Smlocal, start_smlocal

pytestmark = pytest.mark.docker

NETPROBE_DIR = Path(__file__).parents[1] / "fixtures" / "images" / "netprobe"
NETPROBE_TAG = "smlocal-test-e/netprobe:latest"
#: Addresses outside every container network: TEST-NET ranges (never a real service) and the
#: resolver's favourite; none may be reachable from an isolated container.
OUTSIDE = [["198.51.100.7", 80], ["1.1.1.1", 53]]
NAME = "deb.debian.org"
#: An isolated container's resolver gets no answer at all (Docker's embedded DNS forwards nothing
#: from an internal network): glibc gives up after 2 x 5 s. One 1 s try keeps the tests short.
FAST_RESOLVER = {"RES_OPTIONS": "timeout:1 attempts:1"}
#: Failures that show the packet got nowhere (no route, dropped), unlike "refused" (a host answered).
NO_ROUTE = ("EHOSTUNREACH", "ENETUNREACH", "TimeoutError")
#: The probes wait 0.5 s each (a reachable host refuses in well under a millisecond), all at once.
PROBE_LIMITS = ContractLimits(startup_timeout_s=20.0, invocation_timeout_s=10.0, stop_grace_s=2.0)


@pytest.fixture(scope="module")
def netprobe_image(docker_engine: docker.DockerClient, base_image: str) -> str:
    build_image(NETPROBE_DIR, NETPROBE_TAG, buildargs={"BASE_IMAGE": base_image}, client=docker_engine)
    return NETPROBE_TAG


@pytest.fixture
def env(tmp_path: Path, netprobe_image: str, aws_credentials: None) -> Iterator[Smlocal]:
    server = start_smlocal(tmp_path, netprobe_image, limits=PROBE_LIMITS)
    try:
        yield server
    finally:
        server.server.stop()
    assert _owned(docker.from_env(), tmp_path) == ([], [])


def _owned(client: docker.DockerClient, state_dir: Path) -> tuple[list[str], list[str]]:
    """Names of the containers and networks the server of state_dir owns."""
    selector = {"label": f"{labels.OWNER}={labels.owner_id(state_dir)}"}
    containers = sorted(c.name for c in client.containers.list(all=True, filters=selector))
    return containers, sorted(n.name for n in client.networks.list(filters=selector))


def _deploy(
    env: Smlocal, name: str, isolated: bool, env_vars: dict[str, str] | None = None
) -> dict[str, Any]:
    env.sm.create_model(
        ModelName=name,
        PrimaryContainer={"Image": env.image, "Environment": {**FAST_RESOLVER, **(env_vars or {})}},
        EnableNetworkIsolation=isolated,
    )
    return _serve_model(env, name)


def _serve_model(env: Smlocal, name: str) -> dict[str, Any]:
    """An endpoint (and its config, one instance) of the model `name`, once it is no longer Creating."""
    env.sm.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large",
            }
        ],
    )
    env.sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    return env.wait(name)


def _probe(env: Smlocal, endpoint: str, connect: list[list[Any]], resolve: list[str]) -> dict[str, Any]:
    body = json.dumps({"connect": connect, "resolve": resolve}).encode()
    answer = env.rt.invoke_endpoint(EndpointName=endpoint, Body=body, ContentType="application/json")
    result: dict[str, Any] = json.loads(answer["Body"].read())
    return result


def _gateway(client: docker.DockerClient) -> str:
    """The host's address on the default bridge (its gateway: the subnet's first address if unsaid)."""
    config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))


def _container(client: docker.DockerClient, endpoint: str) -> Any:
    (found,) = client.containers.list(filters={"label": f"{labels.ENDPOINT}={endpoint}"})
    return found


def test_an_isolated_model_has_no_route_out_and_no_dns(env: Smlocal) -> None:
    client = docker.from_env()
    gateway = [_gateway(client), 9]  # the host, on the default bridge: a closed port refuses at once
    assert _deploy(env, "Isolated", isolated=True)["EndpointStatus"] == "InService"  # /ping worked
    assert _deploy(env, "Open", isolated=False)["EndpointStatus"] == "InService"
    assert env.sm.describe_model(ModelName="Isolated")["EnableNetworkIsolation"] is True

    isolated = _probe(env, "Isolated", [gateway, *OUTSIDE], [NAME])  # /invocations through smlocal
    for target, outcome in isolated["connect"].items():
        assert outcome.startswith(NO_ROUTE), (target, outcome)
    assert isolated["resolve"][NAME].startswith("gaierror"), isolated
    open_ = _probe(env, "Open", [gateway], [])
    assert open_["connect"][f"{gateway[0]}:9"] in ("refused", "ok"), open_  # the host answered

    # the isolated container is on its own internal network only; smlocal reaches it through a
    # forwarder that publishes on 127.0.0.1 only, and every part carries this server's labels
    model = _container(client, "Isolated")
    (network_name,) = model.attrs["NetworkSettings"]["Networks"]
    network = client.networks.get(network_name)
    assert network.attrs["Internal"] is True
    assert model.attrs["NetworkSettings"]["Ports"] == {}
    group = model.labels[labels.ISOLATION_GROUP]
    (forwarder,) = client.containers.list(
        filters={"label": f"{labels.ISOLATION_GROUP}={group}", "name": "fwd"}
    )
    assert forwarder.labels[labels.ROLE] == labels.ROLE_FORWARDER
    bindings = forwarder.attrs["NetworkSettings"]["Ports"]["8080/tcp"]
    assert {b["HostIp"] for b in bindings} == {"127.0.0.1"}
    owner = labels.owner_id(env.state_dir)
    for part in (model.labels, forwarder.labels, network.attrs["Labels"]):
        assert part[labels.MANAGED] == "true" and part[labels.OWNER] == owner
    assert not set(forwarder.labels) & {labels.ENDPOINT, labels.VARIANT, labels.INSTANCE}

    env.cleanup("Isolated")  # DeleteEndpoint removes the model container, its forwarder and network
    containers, networks = _owned(client, env.state_dir)
    assert networks == [] and all("Open" in name for name in containers), containers
    env.cleanup("Open")


def test_an_isolated_image_that_downloads_at_start_fails_as_in_the_cloud(env: Smlocal) -> None:
    start = {"RESOLVE_AT_START": NAME}
    failed = _deploy(env, "Offline", isolated=True, env_vars=start)
    assert failed["EndpointStatus"] == "Failed"
    assert failed["FailureReason"].startswith(messages.cannot_start_container("AllTraffic")), failed
    assert (
        "Temporary failure in name resolution" in failed["FailureReason"]
        or "Name or service" in (failed["FailureReason"])
    )
    try:
        socket.getaddrinfo(NAME, 80)
    except OSError:
        pass  # this host resolves nothing: the non-isolated counterpart cannot show anything
    else:
        assert _deploy(env, "Online", isolated=False, env_vars=start)["EndpointStatus"] == "InService"
        env.cleanup("Online")
    env.cleanup("Offline")


def test_isolated_containers_are_adopted_after_a_restart_and_their_leftovers_removed(
    tmp_path: Path, netprobe_image: str, aws_credentials: None
) -> None:
    client = docker.from_env()
    crashed = start_smlocal(
        tmp_path, netprobe_image, limits=PROBE_LIMITS, stop_containers=False
    )  # containers stay
    try:
        assert _deploy(crashed, "Kept", isolated=True)["EndpointStatus"] == "InService"
        assert _deploy(crashed, "Broken", isolated=True)["EndpointStatus"] == "InService"
    finally:
        crashed.server.stop()
    kept = _container(client, "Kept").id
    broken = _container(client, "Broken")
    broken_group = broken.labels[labels.ISOLATION_GROUP]
    broken.remove(force=True)  # gone under the server: its forwarder and network are left behind
    left = {"label": f"{labels.ISOLATION_GROUP}={broken_group}"}
    assert len(client.containers.list(all=True, filters=left)) == 1
    assert len(client.networks.list(filters=left)) == 1

    restarted = start_smlocal(tmp_path, netprobe_image, limits=PROBE_LIMITS)
    try:
        assert restarted.wait("Kept")["EndpointStatus"] == "InService"
        assert restarted.wait("Broken")["EndpointStatus"] == "InService"  # re-launched
        assert _container(client, "Kept").id == kept  # adopted, through its forwarder's port
        probe = _probe(restarted, "Kept", OUTSIDE[:1], [NAME])
        assert probe["resolve"][NAME].startswith("gaierror")
        assert _probe(restarted, "Broken", [], [NAME])["resolve"][NAME].startswith("gaierror")
        assert client.containers.list(all=True, filters=left) == []  # the orphaned parts are gone
        assert client.networks.list(filters=left) == []
    finally:
        restarted.server.stop()  # a graceful stop removes every part
    assert _owned(client, tmp_path) == ([], [])


def test_smlocal_down_removes_every_part_of_an_isolated_container(
    tmp_path: Path, netprobe_image: str, aws_credentials: None
) -> None:
    left = start_smlocal(tmp_path, netprobe_image, limits=PROBE_LIMITS, stop_containers=False)
    try:
        assert _deploy(left, "Left", isolated=True)["EndpointStatus"] == "InService"
    finally:
        left.server.stop()  # like a killed server: the containers stay
    client = docker.from_env()
    containers, networks = _owned(client, tmp_path)
    assert len(containers) == 2 and len(networks) == 1  # model container, forwarder; their network
    with socket.socket() as s:  # no server answers there: `down` only cleans up the engine
        s.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{s.getsockname()[1]}"
    down = subprocess.run(
        [
            sys.executable,
            "-m",
            "emulator.cli",
            "down",
            "--state-dir",
            str(tmp_path),
            "--endpoint-url",
            nobody,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert down.returncode == 0, down.stderr
    assert _owned(client, tmp_path) == ([], [])


@pytest.mark.slow
def test_the_variants_startup_health_check_timeout_is_the_readiness_deadline(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    """The server's default deadline is 2 s here; a variant asking for 60 s (the API's minimum) gets
    60 s: still Creating long after 2 s, Failed with SageMaker's reason once 60 s have passed."""
    limits = ContractLimits(
        startup_timeout_s=2.0,
        invocation_timeout_s=TEST_LIMITS.invocation_timeout_s,
        stop_grace_s=TEST_LIMITS.stop_grace_s,
    )
    env = start_smlocal(tmp_path, echo_image, limits=limits)
    never_healthy = {"PING_STATUS": "503"}
    try:
        variant = {"VariantName": "AllTraffic", "ModelName": "Slow", "InitialInstanceCount": 1}
        env.sm.create_model(
            ModelName="Slow", PrimaryContainer={"Image": echo_image, "Environment": never_healthy}
        )
        env.sm.create_endpoint_config(
            EndpointConfigName="Slow",
            ProductionVariants=[
                {**variant, "InstanceType": "ml.m5.large", "ContainerStartupHealthCheckTimeoutInSeconds": 60}
            ],
        )
        env.sm.create_endpoint_config(
            EndpointConfigName="Default", ProductionVariants=[{**variant, "InstanceType": "ml.m5.large"}]
        )
        started = time.monotonic()
        env.sm.create_endpoint(EndpointName="Slow", EndpointConfigName="Slow")
        env.sm.create_endpoint(EndpointName="Default", EndpointConfigName="Default")
        reason = messages.ping_health_check_failed("AllTraffic")
        default = env.wait("Default", timeout_s=30)
        assert (default["EndpointStatus"], default.get("FailureReason")) == ("Failed", reason)
        assert time.monotonic() - started < 30
        assert env.sm.describe_endpoint(EndpointName="Slow")["EndpointStatus"] == "Creating"
        slow = env.wait("Slow", timeout_s=90)
        elapsed = time.monotonic() - started
        assert (slow["EndpointStatus"], slow.get("FailureReason")) == ("Failed", reason)
        assert 60 <= elapsed < 90, elapsed
        assert env.server.service is not None
        log = (env.server.service.config.logs_dir / "Slow" / "_smlocal.log").read_text()
        assert "no HTTP 200 from /ping within 60 s" in log and "/ping answered HTTP 503" in log, log
        for name in ("Slow", "Default"):
            env.cleanup(name)
    finally:
        env.server.stop()


def _deploy_pair(env: Smlocal, name: str) -> dict[str, Any]:
    """A Direct model of two netprobe containers, a and b, with EnableNetworkIsolation."""
    containers = [
        {"Image": env.image, "Environment": dict(FAST_RESOLVER), "ContainerHostname": host} for host in "ab"
    ]
    env.sm.create_model(
        ModelName=name,
        Containers=containers,
        InferenceExecutionConfig={"Mode": "Direct"},
        EnableNetworkIsolation=True,
    )
    return _serve_model(env, name)


def _probe_container(env: Smlocal, endpoint: str, host: str, connect: list[list[Any]]) -> dict[str, Any]:
    body = json.dumps({"connect": connect, "resolve": [NAME]}).encode()
    answer = env.rt.invoke_endpoint(
        EndpointName=endpoint, Body=body, ContentType="application/json", TargetContainerHostname=host
    )
    result: dict[str, Any] = json.loads(answer["Body"].read())
    return result


def test_an_isolated_multi_container_instance_is_isolated_as_one(
    tmp_path: Path, netprobe_image: str, aws_credentials: None
) -> None:
    """Every container of the instance is cut off from the outside, yet they reach each other (on
    localhost and by ContainerHostname); smlocal reaches each through the one forwarder, which
    publishes every container's port on 127.0.0.1 only; a restart adopts the instance whole."""
    client = docker.from_env()
    gateway = [_gateway(client), 9]
    first = start_smlocal(tmp_path, netprobe_image, limits=PROBE_LIMITS, stop_containers=False)
    try:
        described = _deploy_pair(first, "IsolatedPair")
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert first.sm.describe_model(ModelName="IsolatedPair")["EnableNetworkIsolation"] is True
        for host, peer in (("a", ["b", 9082]), ("b", ["127.0.0.1", 9081])):
            probe = _probe_container(first, "IsolatedPair", host, [gateway, *OUTSIDE, peer])
            for target, outcome in probe["connect"].items():
                if target == f"{peer[0]}:{peer[1]}":
                    assert outcome == "ok", (host, probe)  # the other container of the instance
                else:
                    assert outcome.startswith(NO_ROUTE), (host, target, outcome)
            assert probe["resolve"][NAME].startswith("gaierror"), probe
    finally:
        first.server.stop()  # containers stay: the next server adopts them

    parts = client.containers.list(filters={"label": f"{labels.ENDPOINT}=IsolatedPair"})
    (net,) = [c for c in parts if c.labels.get(labels.ROLE) == labels.ROLE_INSTANCE_NET]
    models = [c for c in parts if c is not net]
    assert len(models) == 2
    (network_name,) = net.attrs["NetworkSettings"]["Networks"]
    assert client.networks.get(network_name).attrs["Internal"] is True
    assert all(m.attrs["HostConfig"]["NetworkMode"] == f"container:{net.id}" for m in models)
    group = net.labels[labels.ISOLATION_GROUP]
    (forwarder,) = client.containers.list(
        filters={"label": f"{labels.ISOLATION_GROUP}={group}", "name": "fwd"}
    )
    published = forwarder.attrs["NetworkSettings"]["Ports"]
    # each container's SAGEMAKER_BIND_TO_PORT, and 8080 (no container's: a failed start asks it)
    assert set(published) == {"9081/tcp", "9082/tcp", "8080/tcp"}
    assert {b["HostIp"] for found in published.values() for b in found} == {"127.0.0.1"}
    ids = sorted(c.id for c in parts)

    restarted = start_smlocal(tmp_path, netprobe_image, limits=PROBE_LIMITS)
    try:
        assert restarted.wait("IsolatedPair")["EndpointStatus"] == "InService"
        after = client.containers.list(filters={"label": f"{labels.ENDPOINT}=IsolatedPair"})
        assert sorted(c.id for c in after) == ids  # adopted whole, through the forwarder's ports
        probe = _probe_container(restarted, "IsolatedPair", "b", OUTSIDE[:1])
        assert probe["connect"]["198.51.100.7:80"].startswith(NO_ROUTE), probe
        restarted.cleanup("IsolatedPair")
        assert _owned(client, tmp_path) == ([], [])  # the forwarder and the network too
    finally:
        restarted.server.stop()
