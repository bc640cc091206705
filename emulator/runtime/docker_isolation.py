"""EnableNetworkIsolation on Docker: the part of the Docker adapter (runtime/docker.py) that builds it.

An isolated model container is three engine objects sharing the ISOLATION_GROUP label (the model
container's name), all carrying the spec's ownership labels:

- an internal bridge network of its own (`internal=True`: no outbound route through the host; and
  `inhibit_ipv4`: the host has no address on it, so not even the host's own services are reachable);
- the model container, attached to that network only: no route out, and Docker's embedded DNS
  answers no outside name (there is nothing to forward to);
- a forwarder container (the Python base image running assets/forwarder.py, standard library only,
  no build): on the default bridge with container_port (and extra_ports) published on 127.0.0.1
  only, and on the internal network, relaying TCP to the model container's address there.

A multi-container instance is isolated as one: its network container (hosting/fleet/multi_container.py)
is the isolated container, with one port per model container, and the model containers join its
network namespace, so they share its internal network and its forwarder.

smlocal still talks to the model only through a port published on 127.0.0.1: the forwarder's. The
handle of an isolated container is the model container's (state, logs, stats, stop are the model's)
with the forwarder's host port. Removing any part removes the group.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import docker.errors
import requests.exceptions

from emulator.errors import EngineError
from emulator.runtime import labels
from emulator.runtime.base import ContainerSpec
from emulator.runtime.images import DEFAULT_BASE_IMAGE, LOCAL_BASE_IMAGE

log = logging.getLogger(__name__)

_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
#: Labels of the spec the forwarder and the network share (ownership, never endpoint identity: a
#: lookup of an endpoint's containers by label finds model containers only).
_SHARED = (labels.MANAGED, labels.OWNER)
FORWARDER_STOP_GRACE_S = 2


def network_name(group: str) -> str:
    return f"{group}-net"


def forwarder_name(group: str) -> str:
    return f"{group}-fwd"


def forwarder_source() -> str:
    return resources.files("emulator.runtime").joinpath("assets/forwarder.py").read_text()


class DockerIsolation:
    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._image: str | None = None

    @property
    def client(self) -> Any:
        return self._client()

    def forwarder_image(self) -> str:
        """The plain Python image the forwarder runs on: python:3.11-slim, else smlocal's own base."""
        with self._lock:
            if self._image is None:
                for name in (DEFAULT_BASE_IMAGE, LOCAL_BASE_IMAGE):
                    try:
                        self.client.images.get(name)
                    except docker.errors.ImageNotFound:
                        continue
                    self._image = name
                    break
                else:
                    raise EngineError(
                        "EnableNetworkIsolation needs a Python base image for its forwarder "
                        f"({DEFAULT_BASE_IMAGE} or {LOCAL_BASE_IMAGE}): run `smlocal setup`."
                    )
            return self._image

    def shared_labels(self, spec: ContainerSpec, role: str | None = None) -> dict[str, str]:
        out = {k: spec.labels[k] for k in _SHARED if k in spec.labels}
        out[labels.ISOLATION_GROUP] = spec.name
        if role is not None:
            out[labels.ROLE] = role
            out[labels.CONTAINER_PORT] = str(spec.container_port)
        return out

    def create_network(self, spec: ContainerSpec) -> str:
        name = network_name(spec.name)
        self.client.networks.create(
            name,
            driver="bridge",
            internal=True,
            options={"com.docker.network.bridge.inhibit_ipv4": "true"},
            labels=self.shared_labels(spec),
            check_duplicate=True,
        )
        return name

    def start_forwarder(self, spec: ContainerSpec, network: str, target_ip: str) -> Any:
        """Create the forwarder on the default bridge (container_port and extra_ports published on
        spec.host_ip, each relayed to the same port of the target), join it to the internal network,
        start it; returns the started, reloaded container."""
        ports = (spec.container_port, *spec.extra_ports)
        pairs = [str(p) for port in ports for p in (port, port)]
        container = self.client.containers.create(
            self.forwarder_image(),
            command=["python3", "-I", "-c", forwarder_source(), target_ip, *pairs],
            name=forwarder_name(spec.name),
            labels=self.shared_labels(spec, labels.ROLE_FORWARDER),
            ports={f"{port}/tcp": (spec.host_ip, None) for port in ports},
            stop_signal="SIGTERM",
        )
        self.client.networks.get(network).connect(container)
        container.start()
        container.reload()
        return container

    def published_by(self, owner: Any) -> Any:
        """The container whose published ports reach `owner`'s network namespace (for a container
        joining it): an isolated owner's forwarder, else the owner itself."""
        group = owner.labels.get(labels.ISOLATION_GROUP)
        if group is None:
            return owner
        try:
            return self.client.containers.get(forwarder_name(group))
        except docker.errors.NotFound:
            raise EngineError(f"the forwarder of {owner.name}'s isolated network is gone") from None

    @staticmethod
    def address_on(container: Any, network: str) -> str:
        networks = (container.attrs.get("NetworkSettings") or {}).get("Networks") or {}
        address = str((networks.get(network) or {}).get("IPAddress") or "")
        if not address:
            raise EngineError(f"Docker gave {container.name} no address on its network {network}")
        return address

    def members(self) -> list[Any]:
        """Every container of every isolation group (model containers and forwarders)."""
        try:
            found: list[Any] = self.client.containers.list(
                all=True, filters={"label": [labels.ISOLATION_GROUP]}
            )
        except _ENGINE_ERRORS as exc:
            raise EngineError(f"Docker engine error: {exc}") from exc
        return found

    def remove_group(self, group: str) -> None:
        """Force-remove the group's containers, then its network; no error for what is gone."""
        selector = {"label": [f"{labels.ISOLATION_GROUP}={group}"]}
        try:
            for container in self.client.containers.list(all=True, filters=selector):
                force_remove(container)
            for network in self.client.networks.list(filters=selector):
                try:
                    network.remove()
                except docker.errors.NotFound:
                    pass
        except _ENGINE_ERRORS as exc:
            raise EngineError(f"Docker could not remove the isolation parts of {group}: {exc}") from exc

    def remove_leftovers(self, selector: Mapping[str, str]) -> int:
        """Networks of isolation groups (with these labels) that no container uses any more."""
        filters = {"label": [labels.ISOLATION_GROUP, *(f"{k}={v}" for k, v in selector.items())]}
        removed = 0
        try:
            networks = self.client.networks.list(filters=filters)
            for network in networks:
                network.reload()
                if network.attrs.get("Containers"):
                    continue
                try:
                    network.remove()
                    removed += 1
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:  # a container joined meanwhile
                    log.info("network %s kept: %s", network.name, exc)
        except _ENGINE_ERRORS as exc:
            raise EngineError(f"Docker engine error while removing isolation networks: {exc}") from exc
        return removed


def force_remove(container: Any) -> None:
    """Force-remove a container with its anonymous volumes; no error when it is gone or its removal
    is already in progress (409). Other engine errors are raised as the docker SDK's."""
    try:
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:
            raise
