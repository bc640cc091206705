"""How SageMaker starts a model container, as the docker SDK's `containers.create` arguments: the one
place that turns a ContainerSpec into `docker run IMAGE serve` (hosting contract §3.1-§3.3).

Used by DockerRuntime.start (the emulator's instances and the contract tester's containers) and by
contract_tests.containers.SageMakerContainer (the testcontainers module), so that every way smlocal
starts a model container runs it the same way: the spec's args (`serve`), its environment and labels,
model data bind-mounted read-only at /opt/ml/model (a multi-model container's folder at
/opt/ml/models), the container port published on the spec's host address (127.0.0.1) with a port the
engine chooses, SIGTERM as the stop signal, and the optional memory and CPU limits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from docker.types import DeviceRequest, DriverConfig, Mount

from emulator.runtime.base import MODEL_DIR_IN_CONTAINER, MODELS_DIR_IN_CONTAINER, ContainerSpec


def create_options(
    spec: ContainerSpec,
    *,
    labels: Mapping[str, str] | None = None,
    network: str | None = None,
    network_of: str | None = None,
    gpus: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create(spec.image, **options)`.

    `labels`: the container's labels (default: the spec's). `network`: an internal network to attach
    it to instead of publishing ports (network isolation publishes on its forwarder). `network_of`:
    the id of a running container whose network namespace it joins (it publishes nothing itself).
    `gpus`: request the spec's `gpu_count` GPUs of the engine, or every one when it names no count
    (the caller has checked the engine has the NVIDIA runtime).
    """
    options: dict[str, Any] = {
        "command": list(spec.args),
        "name": spec.name,
        "environment": dict(spec.environment),
        "labels": dict(spec.labels if labels is None else labels),
        "mounts": model_mounts(spec),
        "device_requests": [gpu_request(spec)] if gpus else None,
        "stop_signal": "SIGTERM",
        **resource_limits(spec),
    }
    if network_of is not None:
        options["network_mode"] = f"container:{network_of}"
    else:
        ports: dict[str, tuple[str, None]] = {}
        if network is None:  # isolated: its forwarder publishes the ports
            for port in (spec.container_port, *spec.extra_ports):
                ports[f"{port}/tcp"] = (spec.host_ip, None)
        options.update(ports=ports, network=network, hostname=spec.hostname)
        if spec.extra_hosts:
            options["extra_hosts"] = dict(spec.extra_hosts)
    if spec.read_only_root:
        options["read_only"] = True
    if spec.tmpfs:
        options["tmpfs"] = dict(spec.tmpfs)
    if spec.user is not None:
        options["user"] = spec.user
    return options


def gpu_request(spec: ContainerSpec) -> DeviceRequest:
    """`docker run --gpus N`: the instance type's GPU count (`--gpus all`, count -1, without one)."""
    count = spec.gpu_count if spec.gpu_count is not None and spec.gpu_count > 0 else -1
    return DeviceRequest(count=count, capabilities=[["gpu"]])


def model_mounts(spec: ContainerSpec) -> list[Mount]:
    """The model data (read-only unless the contract tester's write probe asks), a multi-model
    container's folder of models and the spec's other read-only folders (model data channels)."""
    mounts = [
        Mount(target=target, source=str(source), type="bind", read_only=read_only)
        for source, target, read_only in (
            (spec.model_dir, MODEL_DIR_IN_CONTAINER, not spec.model_dir_writable),
            (spec.models_dir, MODELS_DIR_IN_CONTAINER, True),
        )
        if source is not None
    ]
    if spec.model_dir is not None and spec.model_dir_overlay is not None:
        mounts[0] = overlay_mount(spec.model_dir, spec.model_dir_overlay, MODEL_DIR_IN_CONTAINER)
    mounts += [
        Mount(target=target, source=str(source), type="bind", read_only=True)
        for source, target in spec.read_only_mounts
    ]
    return mounts


def overlay_mount(lower: Path, folder: Path, target: str) -> Mount:
    """`lower` (never written) under a writable overlay whose upper layer is folder/upper: an anonymous
    volume of the local driver (removed with the container, `docker rm -v`)."""
    layers = f"lowerdir={lower},upperdir={folder / 'upper'},workdir={folder / 'work'}"
    options = {"type": "overlay", "device": "overlay", "o": layers}
    return Mount(target=target, source=None, type="volume", driver_config=DriverConfig("local", options))


def resource_limits(spec: ContainerSpec) -> dict[str, Any]:
    """Docker's memory limit (swap equal to it: no swap beyond the limit) and CPU share (nano CPUs,
    at most the host's cores: the engine refuses more)."""
    options: dict[str, Any] = {}
    if spec.memory_limit_bytes is not None:
        options["mem_limit"] = spec.memory_limit_bytes
        options["memswap_limit"] = spec.memory_limit_bytes
    if spec.cpus is not None:
        cpus = min(spec.cpus, float(os.cpu_count() or 1))
        options["nano_cpus"] = int(cpus * 1e9)
    return options
