"""The containers of one multi-container instance, as a SageMaker instance runs them (spec §4).

An instance is one network namespace shared by its containers: a small network container (the
plain Python base image running a pause program, ROLE `instance-net`) owns it and publishes the
port of every model container on 127.0.0.1 (one host port each); each model container joins it
(`network_mode=container:<id>`), listens on its own SAGEMAKER_BIND_TO_PORT (9081, 9082, ...) and
may use its own SAGEMAKER_SAFE_PORT_RANGE (9100-9199, 9200-9299, ...; model/platform_env.py). No
container is told 8080: the network container publishes 8080 as well, only so that a failed start
can say that a server of the instance answers there (an image that ignores SAGEMAKER_BIND_TO_PORT).
The containers share the network container's hostname (model.aws.local: Docker gives a container
that joins a namespace that container's hostname); inside the instance they reach each other on
localhost, and each ContainerHostname resolves to 127.0.0.1 (an /etc/hosts entry of the shared
namespace). Every container of the instance carries the instance's
labels and one spec digest, so a restart adopts an instance whole or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from emulator.hosting.fleet.instance_limits import InstanceLimits
from emulator.hosting.fleet.plan import VariantPlan
from emulator.model import platform_env
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle, ContainerSpec

#: The network container's program: sleep until SIGTERM, then exit at once (PID 1 would otherwise
#: ignore SIGTERM and wait for the SIGKILL).
PAUSE_PROGRAM = "import signal, sys; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); signal.pause()"


def _name(base: str, part: str) -> str:
    return f"{base}-{re.sub(r'[^a-zA-Z0-9_.-]', '-', part)}"[:240]


def network_spec(plan: VariantPlan, base_name: str, instance_labels: Mapping[str, str]) -> ContainerSpec:
    assert plan.network_image is not None
    ports = tuple(c.port for c in plan.containers)
    return ContainerSpec(
        image=plan.network_image,
        name=_name(base_name, "net"),
        labels={
            **instance_labels,
            labels.ROLE: labels.ROLE_INSTANCE_NET,
            labels.CONTAINER_PORT: str(ports[0]),
        },
        args=("python3", "-c", PAUSE_PROGRAM),
        container_port=ports[0],
        extra_ports=(*ports[1:], platform_env.DEFAULT_PORT),
        hostname=platform_env.HOSTNAME,
        # EnableNetworkIsolation: the instance is isolated as one (its containers join this network)
        network_isolation=plan.model.enable_network_isolation,
        extra_hosts={c.hostname: "127.0.0.1" for c in plan.containers},
    )


def container_specs(
    plan: VariantPlan,
    base_name: str,
    instance_labels: Mapping[str, str],
    network_id: str,
    limits: InstanceLimits,
) -> list[ContainerSpec]:
    """Every model container of the instance, each with the whole instance's limits (memory, CPU
    share, GPUs): instance_limits.py says why they are not one shared limit [U]."""
    return [
        ContainerSpec(
            image=c.image.image_id,
            name=_name(base_name, c.hostname),
            labels={
                **instance_labels,
                labels.CONTAINER_PORT: str(c.port),
                labels.CONTAINER_HOSTNAME: c.hostname,
            },
            environment=c.environment(),
            model_dir=c.model_dir,
            read_only_mounts=c.channel_dirs,
            container_port=c.port,
            join_network_of=network_id,
            **limits.spec_fields(),
        )
        for c in plan.containers
    ]


def matching_instances(
    plan: VariantPlan, candidates: Sequence[ContainerHandle], digest: str
) -> list[tuple[ContainerHandle, ...]]:
    """The instances among the candidates started from exactly this plan with every part running
    and reachable: (network container, model containers in the model's order)."""
    by_instance: dict[str, list[ContainerHandle]] = {}
    for h in candidates:
        by_instance.setdefault(h.labels.get(labels.INSTANCE, ""), []).append(h)
    found = []
    for parts in by_instance.values():
        nets = [h for h in parts if h.labels.get(labels.ROLE) == labels.ROLE_INSTANCE_NET]
        models = {
            h.labels.get(labels.CONTAINER_HOSTNAME): h
            for h in parts
            if h.labels.get(labels.ROLE) != labels.ROLE_INSTANCE_NET
        }
        complete = len(nets) == 1 and set(models) == {c.hostname for c in plan.containers}
        if not complete or len(parts) != len(plan.containers) + 1:
            continue
        if all(h.labels.get(labels.SPEC_DIGEST) == digest for h in parts) and all(
            h.host_port for h in models.values()
        ):
            found.append((nets[0], *(models[c.hostname] for c in plan.containers)))
    return found
