"""DockerRuntime.start builds the engine call SageMaker's `docker run` implies (fake docker client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.runtime.base import ContainerSpec
from emulator.runtime.docker import DockerRuntime


class FakeContainer:
    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.id = "c0ffee"
        self.name = kwargs["name"]
        self.labels = kwargs["labels"]
        self.attrs = {
            "Image": "sha256:abc",
            "NetworkSettings": {"Ports": {"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": "49153"}]}},
        }

    def reload(self) -> None:
        pass

    def start(self) -> None:
        pass


class FakeContainers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def create(self, image: str, **kwargs: Any) -> FakeContainer:
        self.calls.append((image, kwargs))
        return FakeContainer(kwargs)


class FakeClient:
    def __init__(self, runtimes: dict[str, Any]) -> None:
        self.containers = FakeContainers()
        self._runtimes = runtimes

    def info(self) -> dict[str, Any]:
        return {"Runtimes": self._runtimes}


def spec(**changes: Any) -> ContainerSpec:
    base: dict[str, Any] = {
        "image": "sha256:abc",
        "name": "smlocal-e-v-i-1",
        "labels": {"smlocal.managed": "true"},
        "environment": {"A": "1"},
        "model_dir": Path("/models/x"),
    }
    base.update(changes)
    return ContainerSpec(**base)


def test_start_runs_serve_with_a_read_only_model_dir_on_loopback() -> None:
    client = FakeClient({"runc": {}})
    handle = DockerRuntime(client).start(spec())
    ((image, kwargs),) = client.containers.calls
    assert image == "sha256:abc"
    assert kwargs["command"] == ["serve"]
    assert "detach" not in kwargs  # created, then started: a failed start can be cleaned up
    assert kwargs["ports"] == {"8080/tcp": ("127.0.0.1", None)}
    (mount,) = kwargs["mounts"]
    assert mount["Target"] == "/opt/ml/model" and mount["ReadOnly"] is True and mount["Source"] == "/models/x"
    assert kwargs["environment"] == {"A": "1"}
    assert kwargs["labels"] == {"smlocal.managed": "true"}
    assert kwargs["device_requests"] is None
    assert handle.base_url == "http://127.0.0.1:49153"


def test_gpu_is_requested_when_the_engine_has_an_nvidia_runtime() -> None:
    client = FakeClient({"nvidia": {}, "runc": {}})
    DockerRuntime(client).start(spec(gpus=True))
    (request,) = client.containers.calls[0][1]["device_requests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]


def test_gpu_falls_back_to_cpu_without_an_nvidia_runtime(caplog: Any) -> None:
    client = FakeClient({"runc": {}})
    DockerRuntime(client).start(spec(gpus=True))
    assert client.containers.calls[0][1]["device_requests"] is None
    assert "no NVIDIA runtime" in caplog.text


def test_extra_ports_are_published_on_loopback_and_handed_back() -> None:
    client = FakeClient({"runc": {}})
    ports = {
        "9081/tcp": [{"HostIp": "127.0.0.1", "HostPort": "49160"}],
        "8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": "49161"}],
    }
    original = FakeContainers.create

    def create(self: FakeContainers, image: str, **kwargs: Any) -> FakeContainer:
        container = original(self, image, **kwargs)
        container.attrs["NetworkSettings"] = {"Ports": ports}
        return container

    client.containers.create = create.__get__(client.containers)  # type: ignore[method-assign]
    handle = DockerRuntime(client).start(spec(container_port=9081, extra_ports=(8080,)))
    ((_, kwargs),) = client.containers.calls
    assert kwargs["ports"] == {"9081/tcp": ("127.0.0.1", None), "8080/tcp": ("127.0.0.1", None)}
    assert handle.base_url == "http://127.0.0.1:49160"
    assert handle.published_ports == {9081: 49160, 8080: 49161}


def test_a_gpu_type_asks_for_its_count_of_gpus() -> None:
    client = FakeClient({"nvidia": {}, "runc": {}})
    DockerRuntime(client).start(spec(gpus=True, gpu_count=4))
    (request,) = client.containers.calls[0][1]["device_requests"]
    assert request["Count"] == 4 and request["Capabilities"] == [["gpu"]]


def test_a_gpu_count_falls_back_to_cpu_without_an_nvidia_runtime(caplog: Any) -> None:
    client = FakeClient({"runc": {}})
    DockerRuntime(client).start(spec(gpus=True, gpu_count=4))
    assert client.containers.calls[0][1]["device_requests"] is None
    assert "GPU requested for smlocal-e-v-i-1 but the Docker engine has no NVIDIA runtime" in caplog.text


def test_the_instance_limits_reach_the_engine_call() -> None:
    client = FakeClient({"runc": {}})
    DockerRuntime(client).start(spec(memory_limit_bytes=4 << 30, cpus=1.0))
    kwargs = client.containers.calls[0][1]
    assert kwargs["mem_limit"] == 4 << 30 and kwargs["memswap_limit"] == 4 << 30  # no swap beyond it
    assert kwargs["nano_cpus"] == 1_000_000_000


class InfoClient(FakeClient):
    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__({})
        self._info = info
        self.asked = 0

    def info(self) -> dict[str, Any]:
        self.asked += 1
        return self._info


def test_host_resources_come_from_docker_info_once() -> None:
    client = InfoClient({"MemTotal": 25_000_000_000, "NCPU": 2, "Runtimes": {"runc": {}}})
    runtime = DockerRuntime(client)
    first = runtime.host_resources()
    assert (first.memory_bytes, first.cpus, first.nvidia_runtime) == (25_000_000_000, 2, False)
    assert runtime.host_resources() is first and client.asked == 1


def test_host_resources_an_engine_does_not_state_are_none() -> None:
    found = DockerRuntime(InfoClient({"Runtimes": {"nvidia": {}}})).host_resources()
    assert (found.memory_bytes, found.cpus, found.nvidia_runtime) == (None, None, True)
