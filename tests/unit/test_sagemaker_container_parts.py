"""The pure parts of SageMakerContainer: the docker run arguments of a ContainerSpec (the one function
DockerRuntime.start shares), the spec it builds, and PingWaitStrategy against fake containers and a
real loopback socket that accepts and closes (what docker-proxy does before the server listens)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import Reaper

from contract_tests.container_wait import (
    ContainerExited,
    HealthCheckTimeout,
    PingWaitStrategy,
    published_port,
)
from contract_tests.containers import ROLE, ReaperUnavailable, SageMakerContainer
from emulator.config import ContractLimits
from emulator.runtime import labels
from emulator.runtime.base import ContainerSpec
from emulator.runtime.docker_run import create_options

#: A docker client that never calls: a pinned API version (no version query) and a dead address.
NO_ENGINE: dict[str, Any] = {"version": "1.41", "environment": {"DOCKER_HOST": "tcp://127.0.0.1:9"}}


def spec(**changes: Any) -> ContainerSpec:
    base: dict[str, Any] = {"image": "sha256:abc", "name": "n", "labels": {"a": "b"}, "model_dir": Path("/m")}
    return ContainerSpec(**{**base, **changes})


def test_create_options_run_serve_read_only_on_loopback() -> None:
    options = create_options(spec(environment={"A": "1"}, memory_limit_bytes=1024, cpus=0.5))
    assert options["command"] == ["serve"]
    assert options["ports"] == {"8080/tcp": ("127.0.0.1", None)}
    (mount,) = options["mounts"]
    assert (mount["Target"], mount["Source"], mount["ReadOnly"]) == ("/opt/ml/model", "/m", True)
    assert (options["environment"], options["labels"], options["stop_signal"]) == (
        {"A": "1"},
        {"a": "b"},
        "SIGTERM",
    )
    assert (options["mem_limit"], options["memswap_limit"], options["nano_cpus"]) == (1024, 1024, 500_000_000)
    assert options["network"] is None and options["device_requests"] is None


def test_create_options_of_a_joined_or_isolated_container_publish_nothing_themselves() -> None:
    joined = create_options(spec(extra_ports=(9000,)), network_of="c0ffee")
    assert joined["network_mode"] == "container:c0ffee" and "ports" not in joined
    isolated = create_options(spec(extra_ports=(9000,)), network="internal", labels={"x": "y"}, gpus=True)
    assert (isolated["ports"], isolated["network"], isolated["labels"]) == ({}, "internal", {"x": "y"})
    (request,) = isolated["device_requests"]
    assert request["Count"] == -1


def test_the_spec_is_sagemakers(tmp_path: Path) -> None:
    container = SageMakerContainer(
        "img", environment={"A": "1"}, models_dir=tmp_path, labels={"team": "x"}, docker_client_kw=NO_ENGINE
    )
    container.with_env("B", "2").with_exposed_ports(9000)
    built = container.spec("sha256:abc")
    assert built.args == ("serve",) and built.image == "sha256:abc"
    assert built.environment == {
        "A": "1",
        "B": "2",
        "SAGEMAKER_SAFE_PORT_RANGE": "21000-21999",
        "SAGEMAKER_MULTI_MODEL": "true",
    }
    assert built.hostname == "model.aws.local"
    assert built.models_dir == tmp_path and built.model_dir is None  # no model data: nothing mounted
    assert (built.container_port, built.host_ip, built.extra_ports) == (8080, "127.0.0.1", (9000,))
    assert built.labels[labels.ROLE] == ROLE and built.labels[labels.MANAGED] == "true"
    assert built.labels["team"] == "x" and built.labels[labels.OWNER].startswith("check-")
    assert built.name.startswith("smlocal-tc-")
    assert container.with_command("train --fast").spec("i").args == ("train", "--fast")


def test_limits_come_from_the_contract_unless_lowered() -> None:
    assert SageMakerContainer("img", docker_client_kw=NO_ENGINE).limits == ContractLimits()
    lowered = SageMakerContainer(
        "img", startup_timeout_s=5, stop_grace_s=2, invocation_timeout_s=9, docker_client_kw=NO_ENGINE
    ).limits
    assert (lowered.startup_timeout_s, lowered.stop_grace_s, lowered.invocation_timeout_s) == (5, 2, 9)
    assert lowered.ping_timeout_s == 2.0
    strategy = PingWaitStrategy()
    assert (strategy.startup_timeout_s, strategy.ping_timeout_s, strategy.port) == (480.0, 2.0, 8080)


def test_published_port_is_the_loopback_binding() -> None:
    def attrs(*bindings: dict[str, str]) -> dict[str, Any]:
        return {"NetworkSettings": {"Ports": {"8080/tcp": list(bindings)}}}

    assert published_port(attrs({"HostIp": "127.0.0.1", "HostPort": "5"}), 8080) == 5
    assert published_port(attrs({"HostIp": "0.0.0.0", "HostPort": "5"}), 8080) is None
    assert published_port({"NetworkSettings": {"Ports": {}}}, 8080) is None


class FakeDockerContainer:
    """What PingWaitStrategy reads of the docker SDK's container: attrs after reload(), logs()."""

    name = "fake"

    def __init__(self, state: dict[str, Any], port: int | None, logs: bytes = b"line 1\nline 2\n") -> None:
        ports = {"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]} if port else {}
        self.attrs = {"State": state, "NetworkSettings": {"Ports": ports}}
        self._logs = logs

    def reload(self) -> None:
        pass

    def logs(self, **kwargs: Any) -> bytes:
        return self._logs


class Target:
    def __init__(self, container: FakeDockerContainer) -> None:
        self.container = container

    def get_wrapped_container(self) -> FakeDockerContainer:
        return self.container


def test_an_exited_container_fails_with_its_code_and_logs() -> None:
    target = Target(FakeDockerContainer({"Status": "exited", "ExitCode": 3, "OOMKilled": True}, None))
    with pytest.raises(ContainerExited) as raised:
        PingWaitStrategy(limits=ContractLimits(startup_timeout_s=30)).wait_until_ready(target)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "exited with code 3 (killed for memory: over its limit)" in message
    assert message.endswith("Its last log lines:\nline 1\nline 2")
    assert raised.value.exit_code == 3 and raised.value.last_observation == "no /ping attempt yet"


@pytest.fixture
def accept_and_close() -> Iterator[int]:
    """A loopback port that accepts every connection and closes it at once (docker-proxy's way)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_a_tcp_accept_is_not_an_answer(accept_and_close: int) -> None:
    target = Target(FakeDockerContainer({"Status": "running", "Running": True}, accept_and_close))
    with pytest.raises(HealthCheckTimeout) as raised:
        PingWaitStrategy(limits=ContractLimits(startup_timeout_s=0.5)).wait_until_ready(target)  # type: ignore[arg-type]
    # closed without an answer, or reset (the kernel's choice): either way no HTTP response
    assert raised.value.last_observation.startswith(
        ("/ping failed: RemoteProtocolError", "/ping failed: ReadError")
    )
    assert "no HTTP 200 from GET /ping within 0.5 s" in str(raised.value)
    assert isinstance(raised.value, TimeoutError)


def test_testcontainers_reaper_starts_first_unless_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """As DockerContainer.start: Ryuk before anything else (here it fails: nothing is created)."""

    def no_reaper() -> None:
        raise RuntimeError("ryuk asked for")

    monkeypatch.setattr(testcontainers_config, "ryuk_disabled", False)
    monkeypatch.setattr(testcontainers_config, "ryuk_image", "testcontainers/ryuk:0.8.1")
    monkeypatch.setattr(Reaper, "get_instance", staticmethod(no_reaper))
    with pytest.raises(ReaperUnavailable) as raised:
        SageMakerContainer("img", docker_client_kw=NO_ENGINE).start()
    assert raised.value.message == (
        "testcontainers' reaper (Ryuk, image testcontainers/ryuk:0.8.1) could not be started: "
        "RuntimeError: ryuk asked for. Where no registry can be reached its image cannot be pulled: "
        "set TESTCONTAINERS_RYUK_DISABLED=true (SageMakerContainer.stop() removes its own container, "
        "and `smlocal down` those of a killed test process), or load the image into the engine (docker load)."
    )
    assert isinstance(raised.value.cause, RuntimeError) and raised.value.__suppress_context__
    assert Reaper._instance is None and Reaper._container is None
