"""The Docker adapter of the container-runtime port: DockerRuntime, containers' lifecycle on the engine.

Docker's exceptions are translated here, once, into emulator.errors. Its parts, each over the same
lazily made docker client: docker_images.py (resolve, inspect, list an image's paths), docker_stats.py
(CPU and memory), docker_isolation.py (EnableNetworkIsolation's network and forwarder).
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import docker
import docker.errors
import requests.exceptions

from emulator.errors import EngineError, EngineUnavailable, ImageNotFound
from emulator.runtime.base import (
    ContainerHandle,
    ContainerSpec,
    ContainerState,
    ContainerStats,
    DiskUsage,
    HostResources,
    ImageConfig,
    ProcessInfo,
    ResolvedImage,
)
from emulator.runtime.docker_images import DockerImages
from emulator.runtime.docker_isolation import DockerIsolation, force_remove
from emulator.runtime.docker_run import create_options
from emulator.runtime.docker_stats import DockerStats
from emulator.runtime.labels import CONTAINER_PORT, ISOLATION_GROUP, ROLE, ROLE_FORWARDER

log = logging.getLogger(__name__)


class DockerRuntime:
    """ContainerRuntime over the Docker Engine API (docker SDK)."""

    def __init__(self, client: Any | None = None) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._host: HostResources | None = None
        self._images = DockerImages(lambda: self.client)
        self._stats = DockerStats(lambda: self.client)
        self._isolation = DockerIsolation(lambda: self.client)
        #: container id -> isolation group, for removing a group whose model container is gone.
        self._groups: dict[str, str] = {}

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    self._client = docker.from_env(max_pool_size=128, timeout=120)
                except docker.errors.DockerException as exc:
                    raise EngineUnavailable(f"No Docker engine answers: {exc}. Run `smlocal setup`.") from exc
            return self._client

    def close(self) -> None:
        """Close the engine client's connections (a later call opens a new client)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def ping(self) -> None:
        try:
            self.client.ping()
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineUnavailable(f"No Docker engine answers: {exc}. Run `smlocal setup`.") from exc

    def resolve_image(self, image: str) -> ResolvedImage:
        return self._images.resolve_image(image)

    def _gpu_available(self) -> bool:
        return self.host_resources().nvidia_runtime

    def host_resources(self) -> HostResources:
        if self._host is None:
            try:
                info = self.client.info()
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                raise EngineError(f"Docker could not describe its machine: {_explain(exc)}") from exc
            self._host = HostResources(
                memory_bytes=int(info["MemTotal"]) if info.get("MemTotal") else None,
                cpus=int(info["NCPU"]) if info.get("NCPU") else None,
                nvidia_runtime="nvidia" in (info.get("Runtimes") or {}),
            )
        return self._host

    def start(self, spec: ContainerSpec) -> ContainerHandle:
        gpus = False
        if spec.gpus:
            gpus = self._gpu_available()
            if not gpus:
                log.warning(
                    "GPU requested for %s but the Docker engine has no NVIDIA runtime; starting on CPU",
                    spec.name,
                )
        container = None
        container_labels = dict(spec.labels)
        network: str | None = None
        try:
            if spec.network_isolation:
                self._isolation.forwarder_image()  # before anything is created
                container_labels[ISOLATION_GROUP] = spec.name
                network = self._isolation.create_network(spec)
            joined = self._get(spec.join_network_of) if spec.join_network_of else None
            if spec.join_network_of and joined is None:
                raise EngineError(f"Docker could not start {spec.image}: its network container is gone")
            options = create_options(
                spec,
                labels=container_labels,
                network=network,
                network_of=joined.id if joined is not None else None,
                gpus=gpus,
            )
            container = self.client.containers.create(spec.image, **options)
            container.start()
            container.reload()
            if joined is not None:
                joined.reload()
                return self._handle(container, spec.container_port, via=self._isolation.published_by(joined))
            if network is not None:
                address = self._isolation.address_on(container, network)
                forwarder = self._isolation.start_forwarder(spec, network, address)
                self._groups[container.id] = spec.name
                return self._handle(container, spec.container_port, via=forwarder)
        except docker.errors.ImageNotFound as exc:
            self._discard(container, spec.name if network else None)
            raise ImageNotFound(f"No local image matches {spec.image}") from exc
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            self._discard(container, spec.name if network else None)  # leave nothing behind
            raise EngineError(f"Docker could not start {spec.image}: {_explain(exc)}") from exc
        except EngineError:
            self._discard(container, spec.name if network else None)
            raise
        return self._handle(container, spec.container_port)

    def _discard(self, container: Any | None, group: str | None = None) -> None:
        if container is not None:
            try:
                container.remove(force=True, v=True)  # with its anonymous volumes (an overlay's)
            except docker.errors.DockerException:
                log.warning("could not remove container %s after a failed start", container.id)
        if group is not None:
            try:
                self._isolation.remove_group(group)
            except EngineError as exc:
                log.warning("after a failed start: %s", exc.message)

    @staticmethod
    def _handle(
        container: Any, container_port: int, via: Any | None = None, no_port: bool = False
    ) -> ContainerHandle:
        """The handle of a container; of an isolated one (via its forwarder), the forwarder's port;
        of one that joined another's network (via that container), that container's binding."""
        ports = {} if no_port else (via or container).attrs.get("NetworkSettings", {}).get("Ports") or {}
        bindings = ports.get(f"{container_port}/tcp") or []
        host_port = next((int(b["HostPort"]) for b in bindings if b.get("HostIp") in ("127.0.0.1", "")), 0)
        return ContainerHandle(
            id=container.id,
            name=container.name,
            host_port=host_port,
            labels=dict(container.labels),
            image_id=container.attrs.get("Image", ""),
            published_ports={
                int(port.split("/")[0]): int(b["HostPort"])
                for port, found in ports.items()
                for b in found or []
                if port.endswith("/tcp") and b.get("HostIp") in ("127.0.0.1", "")
            },
        )

    def _get(self, container_id: str) -> Any | None:
        try:
            return self.client.containers.get(container_id)
        except docker.errors.NotFound:
            return None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"Docker engine error: {exc}") from exc

    def state(self, container_id: str) -> ContainerState:
        container = self._get(container_id)
        if container is None:
            return ContainerState(running=False, exit_code=None, status="removed")
        st = container.attrs.get("State", {})
        running = bool(st.get("Running"))
        return ContainerState(
            running=running,
            exit_code=None if running else st.get("ExitCode"),
            oom_killed=bool(st.get("OOMKilled")),
            status=st.get("Status", ""),
        )

    def logs(self, container_id: str, tail: int | None = None) -> str:
        container = self._get(container_id)
        if container is None:
            return ""
        try:
            raw = container.logs(stdout=True, stderr=True, tail=tail if tail is not None else "all")
        except docker.errors.NotFound:  # removed meanwhile (docker rm -f by someone else)
            return ""
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # "dead or marked for removal": being removed right now
                return ""
            raise
        return bytes(raw).decode("utf-8", errors="replace")

    def follow_logs(self, container_id: str, since: int | None = None) -> Iterator[bytes]:
        container = self._get(container_id)
        if container is None:
            return iter(())
        try:
            stream: Iterator[bytes] = container.logs(
                stdout=True, stderr=True, stream=True, follow=True, since=since
            )
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"Docker engine error: {exc}") from exc
        return stream

    def stats(self, container_id: str) -> ContainerStats | None:
        return self._stats.stats(container_id)

    def disk_usage(self, labels: Mapping[str, str]) -> dict[str, DiskUsage]:
        return self._stats.disk_usage(labels)

    def gpu_access(self, container_id: str) -> bool:
        return self._stats.gpu_access(container_id)

    def stop(self, container_id: str, grace_s: float) -> ContainerState:
        """SIGTERM, then SIGKILL after grace_s, as SageMaker stops instances."""
        container = self._get(container_id)
        if container is None:
            return ContainerState(running=False, exit_code=None, status="removed")
        try:
            container.kill(signal="SIGTERM")
        except docker.errors.APIError:
            pass  # not running any more
        try:
            container.wait(timeout=grace_s)
        except docker.errors.NotFound:  # removed meanwhile (docker rm -f by someone else)
            return ContainerState(running=False, exit_code=None, status="removed")
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            log.info("container %s ignored SIGTERM for %.1f s: SIGKILL", container.name, grace_s)
            try:
                container.kill(signal="SIGKILL")
                container.wait(timeout=30)
            except docker.errors.APIError:
                pass
        return self.state(container_id)

    def remove(self, container_id: str) -> None:
        """Remove the container; for a part of an isolated container, every part (and its network)."""
        container = self._get(container_id)
        group = self._groups.pop(container_id, None)
        if container is not None:
            group = container.labels.get(ISOLATION_GROUP) or group
            try:
                force_remove(container)
            except docker.errors.APIError as exc:
                raise EngineError(f"Docker could not remove {container.name}: {exc}") from exc
        if group is not None:
            self._isolation.remove_group(group)

    def list(self, labels: Mapping[str, str]) -> list[ContainerHandle]:
        filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
        try:
            containers = self.client.containers.list(all=True, filters=filters)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise EngineError(f"Docker engine error: {exc}") from exc
        forwarders: dict[str, Any] = {}
        models: set[str] = set()
        if any(ISOLATION_GROUP in c.labels for c in containers):
            for member in self._isolation.members():
                group = member.labels[ISOLATION_GROUP]
                if member.labels.get(ROLE) == ROLE_FORWARDER:
                    forwarders[group] = member
                else:
                    models.add(group)
        by_id = {c.id: c for c in containers}
        handles = []
        for container in containers:
            container_port = int(container.labels.get(CONTAINER_PORT, "8080"))
            group = container.labels.get(ISOLATION_GROUP)
            mode = str((container.attrs.get("HostConfig") or {}).get("NetworkMode") or "")
            if mode.startswith("container:"):
                # joined another's network: reached on that container's ports, an isolated one's on
                # its forwarder's (port 0 once it is gone)
                owner_id = mode.removeprefix("container:")
                owner = by_id.get(owner_id) or self._get(owner_id)
                owner_group = owner.labels.get(ISOLATION_GROUP) if owner is not None else None
                via = forwarders.get(owner_group) if owner_group else owner
                if via is None:
                    handles.append(self._handle(container, container_port, no_port=True))
                else:
                    handles.append(self._handle(container, container_port, via=via))
            elif group is None:
                handles.append(self._handle(container, container_port))
            elif container.labels.get(ROLE) != ROLE_FORWARDER:
                # an isolated model container: reached through its forwarder (port 0 without one)
                handles.append(self._handle(container, container_port, via=forwarders.get(group, container)))
            elif group not in models:  # a forwarder whose model container is gone: listed, to be removed
                handles.append(self._handle(container, container_port))
        return handles

    def remove_leftovers(self, labels: Mapping[str, str]) -> int:
        return self._isolation.remove_leftovers(labels)

    def inspect_image(self, image: str) -> ImageConfig:
        return self._images.inspect_image(image)

    def image_paths(self, image: str) -> Iterator[str]:
        return self._images.image_paths(image)

    def main_process(self, container_id: str) -> str:
        container = self._get(container_id)
        if container is None:
            return ""
        pid = (container.attrs.get("State") or {}).get("Pid") or 0
        try:
            top = container.top(ps_args="-o pid,args")
        except docker.errors.APIError:
            return ""
        titles = top.get("Titles") or []
        for row in top.get("Processes") or []:
            fields = dict(zip(titles, row, strict=False))
            if str(fields.get("PID")) == str(pid):
                return str(fields.get("COMMAND") or fields.get("CMD") or "")
        return ""

    def processes(self, container_id: str) -> builtins.list[ProcessInfo]:
        container = self._get(container_id)
        if container is None:
            return []
        main = (container.attrs.get("State") or {}).get("Pid") or 0
        try:
            top = container.top(ps_args="-o pid,ppid,stat,args")
        except docker.errors.APIError:  # not running (any more)
            return []
        titles = top.get("Titles") or []
        found = []
        for row in top.get("Processes") or []:
            fields = dict(zip(titles, row, strict=False))
            try:
                pid, ppid = int(fields.get("PID", "")), int(fields.get("PPID", ""))
            except ValueError:
                continue
            args = str(fields.get("COMMAND") or fields.get("CMD") or "")
            found.append(ProcessInfo(pid, ppid, str(fields.get("STAT", "")), args, main=pid == main))
        return sorted(found, key=lambda p: (not p.main, p.pid))

    def signal(self, container_id: str, signal: str) -> None:
        container = self._get(container_id)
        if container is None:
            return
        try:
            container.kill(signal=signal)
        except docker.errors.APIError:
            pass  # not running

    def wait_exit(self, container_id: str, timeout_s: float) -> int | None:
        container = self._get(container_id)
        if container is None:
            return None
        if timeout_s <= 0:  # the engine refuses a zero timeout: answer from the current state
            state = container.attrs.get("State", {})
            return None if state.get("Running") else int(state.get("ExitCode", -1))
        try:
            result = container.wait(timeout=timeout_s)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return None
        return int(result.get("StatusCode", -1))


def _explain(exc: Exception) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc)
