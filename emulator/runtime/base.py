"""Values and the Protocol of the container-runtime port.

Hosting and the contract tester describe a container with a ContainerSpec and drive it through a
ContainerRuntime; runtime/docker.py (with its parts, runtime/docker_*.py) is the one adapter; only
emulator/runtime imports `docker`.
All calls are blocking: async callers use asyncio.to_thread.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

MODEL_DIR_IN_CONTAINER = "/opt/ml/model"
MODELS_DIR_IN_CONTAINER = "/opt/ml/models"  # a multi-model container's models (spec §5)


@dataclass(frozen=True)
class ContainerSpec:
    """How to start one container, exactly as SageMaker would: `docker run IMAGE serve`."""

    image: str
    name: str
    labels: Mapping[str, str]
    args: tuple[str, ...] = ("serve",)
    environment: Mapping[str, str] = field(default_factory=dict)
    #: Host folder mounted read-only at /opt/ml/model (None: no model data).
    model_dir: Path | None = None
    #: Mount model_dir writable instead (only the contract tester's write probe, on its own copy).
    model_dir_writable: bool = False
    #: Mount model_dir as the read-only lower layer of an overlay whose writes land in this host
    #: folder's `upper` (`work`: the overlay's work dir), instead of the bind mount: the contract
    #: tester's write probe sees every write without copying the model (a volume of Docker's local
    #: driver, mounted by the engine, removed with the container).
    model_dir_overlay: Path | None = None
    #: A multi-model container's folder of loaded models, mounted read-only at /opt/ml/models
    #: (each model in /opt/ml/models/{model_name}/model, added while the container runs).
    models_dir: Path | None = None
    #: More host folders mounted read-only: (host folder, path in the container), e.g. each
    #: AdditionalModelDataSources channel at /opt/ml/additional-model-data-sources/{ChannelName}.
    read_only_mounts: tuple[tuple[Path, str], ...] = ()
    container_port: int = 8080
    #: Publish container_port on this host address only; the host port is chosen by the engine.
    host_ip: str = "127.0.0.1"
    gpus: bool = False
    #: With `gpus`: how many GPUs to ask the engine for (the instance type's count; Docker's
    #: DeviceRequest count). None: every GPU of the engine (count -1).
    gpu_count: int | None = None
    hostname: str | None = None
    #: EnableNetworkIsolation: no route out and no DNS; reached only through a forwarder whose port
    #: is published on host_ip (the handle's host_port is the forwarder's).
    network_isolation: bool = False
    #: More container ports to publish on host_ip (with network_isolation: on its forwarder): the
    #: contract tester watches 8080 while the server should listen on SAGEMAKER_BIND_TO_PORT
    #: (start.bind-to-port); an instance's network container publishes the port of each container of
    #: the instance.
    extra_ports: tuple[int, ...] = ()
    #: The id of a running container whose network (namespace: loopback, ports, /etc/hosts) this one
    #: joins, as the containers of one SageMaker instance share it. It publishes nothing itself: its
    #: handle's host_port is that container's binding of container_port (an isolated one's: its
    #: forwarder's).
    join_network_of: str | None = None
    #: Extra /etc/hosts entries (name -> address), e.g. each ContainerHostname of an instance.
    extra_hosts: Mapping[str, str] = field(default_factory=dict)
    #: The root file system mounted read-only (`docker run --read-only`): only mounts and `tmpfs` are
    #: writable. The contract tester's serverless sandbox (serverless.writes-outside-tmp).
    read_only_root: bool = False
    #: tmpfs mounts, path in the container -> mount options (`docker run --tmpfs /tmp:rw,mode=1777`).
    tmpfs: Mapping[str, str] = field(default_factory=dict)
    #: Run as this user ("uid:gid" or a name) instead of the image's USER (`docker run --user`).
    user: str | None = None
    #: The container's memory limit, bytes (swap included: none beyond it); over it the engine kills
    #: the container (its state says oom_killed). None: no limit. A serverless MemorySizeInMB.
    memory_limit_bytes: int | None = None
    #: The container's CPU share in cores (capped at the host's cores). None: no limit.
    cpus: float | None = None


@dataclass(frozen=True)
class ContainerHandle:
    """A started container and the loopback address its port is published on."""

    id: str
    name: str
    host_port: int
    labels: Mapping[str, str]
    image_id: str = ""
    #: Every container port published on 127.0.0.1 -> its host port (container_port's is host_port).
    published_ports: Mapping[int, int] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.host_port}"


@dataclass(frozen=True)
class ContainerState:
    """A container's state as the engine reports it (SageMakerContainer.final_state: how it ended)."""

    #: True while it runs (False in a final state).
    running: bool
    #: Its main process's exit status once it has exited (0, 137 after SIGKILL, 143 killed by an
    #: unhandled SIGTERM, ...); None while it runs, or when the container was already removed.
    exit_code: int | None
    #: True when the kernel killed it for exceeding its memory limit.
    oom_killed: bool = False
    #: The engine's word ("running", "exited", ...), or "removed" when it was gone before being read.
    status: str = ""


@dataclass(frozen=True)
class HostResources:
    """What the engine's machine can give a container (`docker info`): the instance an endpoint's
    container gets is capped at it."""

    #: The machine's memory, bytes (None: the engine did not say).
    memory_bytes: int | None
    #: Its CPU cores (None: the engine did not say).
    cpus: int | None
    #: Whether the engine has the NVIDIA runtime (GPUs through device requests).
    nvidia_runtime: bool


@dataclass(frozen=True)
class ContainerStats:
    """One sample of a running container's use of the host (SageMaker's instance metrics, §10.2)."""

    #: Percent of one core, summed over cores (0-100 x cores); None until two samples exist.
    cpu_percent: float | None
    #: Memory in use (page cache excluded, as `docker stats`) over the container's limit, percent.
    memory_percent: float | None


@dataclass(frozen=True)
class DiskUsage:
    """What one running container keeps on disk (SageMaker's DiskUtilization, §10.2)."""

    #: Bytes the container wrote to its own writable layer (/tmp included): the engine's SizeRw.
    written_bytes: int
    #: Host folders bind-mounted read-only into it (its model data at /opt/ml/model).
    read_only_sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResolvedImage:
    """What an image name resolved to locally (DescribeEndpoint's DeployedImages)."""

    specified: str
    resolved: str
    image_id: str


@dataclass(frozen=True)
class ImageConfig:
    """What `docker image inspect` says about an image's launch configuration."""

    id: str
    entrypoint: tuple[str, ...] | None
    cmd: tuple[str, ...] | None
    user: str
    size_bytes: int
    labels: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str = ""
    #: The CPU architecture the image is built for, as its config says (`amd64`, `arm64`; "" unknown).
    architecture: str = ""


@dataclass(frozen=True)
class ProcessInfo:
    """One process of a running container, as the host's `ps` sees it (`docker top`)."""

    #: the host's pid (the engine reports those; the container's PID 1 is the one with `main` set)
    pid: int
    ppid: int
    #: ps's STAT column: "Z..." is a zombie (exited, not reaped yet)
    stat: str
    args: str
    #: True for the container's PID 1
    main: bool = False

    @property
    def exited(self) -> bool:
        return self.stat.startswith("Z")


class ContainerRuntime(Protocol):
    def ping(self) -> None:
        """Raise EngineUnavailable unless the engine answers."""

    def resolve_image(self, image: str) -> ResolvedImage:
        """Map a local tag or an ECR-style URI to a local image; raise ImageNotFound."""

    def host_resources(self) -> HostResources:
        """The engine machine's memory, cores and NVIDIA runtime (asked once, then remembered)."""

    def start(self, spec: ContainerSpec) -> ContainerHandle: ...

    def state(self, container_id: str) -> ContainerState: ...

    def logs(self, container_id: str, tail: int | None = None) -> str: ...

    def follow_logs(self, container_id: str, since: int | None = None) -> Iterator[bytes]:
        """Yield stdout/stderr chunks (from `since`, epoch seconds, or the start) until it exits."""

    def stats(self, container_id: str) -> ContainerStats | None:
        """One cheap sample (the engine's one-shot stats); None when the container is not running."""

    def disk_usage(self, labels: Mapping[str, str]) -> dict[str, DiskUsage]:
        """Running containers carrying all of these labels, by id: what each keeps on disk (one
        engine call; the engine walks each writable layer, so call it off the request path)."""

    def gpu_access(self, container_id: str) -> bool:
        """Whether the container was started with the engine's GPUs (a device request)."""

    def stop(self, container_id: str, grace_s: float) -> ContainerState:
        """SIGTERM, then SIGKILL after grace_s; returns the final state. Never raises if gone."""

    def remove(self, container_id: str) -> None: ...

    def list(self, labels: Mapping[str, str]) -> list[ContainerHandle]:
        """Containers (running or not) carrying all of these labels."""

    def inspect_image(self, image: str) -> ImageConfig:
        """The image's configuration; raise ImageNotFound."""

    def image_paths(self, image: str) -> Iterator[str]:
        """Every path in the image's file system (a created, never started container is exported)."""

    def main_process(self, container_id: str) -> str:
        """The command line of the container's PID 1 (empty when it is not running)."""

    def processes(self, container_id: str) -> builtins.list[ProcessInfo]:
        """The container's processes, PID 1 first ([] when it is not running)."""

    def signal(self, container_id: str, signal: str) -> None:
        """Send a signal (e.g. "SIGTERM") to PID 1; no error if the container is not running."""

    def wait_exit(self, container_id: str, timeout_s: float) -> int | None:
        """The exit code once the container exits, or None if it still runs after timeout_s."""

    def remove_leftovers(self, labels: Mapping[str, str]) -> int:
        """Remove what network isolation left behind with these labels and no container (networks);
        returns how many. Containers are found by list() and removed by remove() as usual."""
