"""The instance a container really gets: the instance type's memory limit, CPU share and GPUs
(emulator/model/instance_types.py's table), capped at what the engine's machine has.

Every container of an endpoint's instance runs with its type's memory as its limit (swap none beyond
it: runtime/docker_run.py), its vCPUs as its CPU share (capped at the machine's cores) and, for an
NVIDIA type, its GPU count as a device request. The containers of one multi-container instance each
get the whole instance's limit [U]: Docker 20.10 with cgroup v1 cannot give a group of containers one
memory limit through its API (a --cgroup-parent's own limit must be written into cgroupfs by hand),
so they share the instance's memory only as far as each stays under it. Off for the whole server
(`smlocal serve --no-instance-limits`: ServerConfig.instance_limits) or for the variants of one model
(its tag `smlocal:instance-limits` = `off`) [U]. A serverless variant keeps its MemorySizeInMB
(deployer.py). Where the machine has less memory than the type, or no NVIDIA runtime for its GPUs,
the deploy says so once (`deploy_warnings`) and the container runs with what there is.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.config import ServerConfig
from emulator.hosting.fleet import logs
from emulator.hosting.fleet.plan import VariantPlan
from emulator.model import instance_types, messages, serverless
from emulator.model.instance_types import InstanceType
from emulator.model.resources import Model, ProductionVariant
from emulator.runtime.base import HostResources

log = logging.getLogger(__name__)

#: The model tag that turns the limits off for the variants serving it [U].
LIMITS_TAG = "smlocal:instance-limits"
#: A multi-model instance's memory budget for a type the table does not know, GiB [U].
DEFAULT_INSTANCE_MEMORY_GB = 8.0


@dataclass(frozen=True)
class InstanceLimits:
    """What each container of one instance is started with (ContainerSpec's fields)."""

    instance_type: InstanceType | None = None
    memory_limit_bytes: int | None = None
    cpus: float | None = None
    gpus: bool = False
    gpu_count: int | None = None

    def spec_fields(self) -> dict[str, Any]:
        return {
            "memory_limit_bytes": self.memory_limit_bytes,
            "cpus": self.cpus,
            "gpus": self.gpus,
            "gpu_count": self.gpu_count,
        }

    def out_of_memory(self) -> str | None:
        """The log line for a container of this instance killed for memory (None: no limit)."""
        if self.memory_limit_bytes is None or self.instance_type is None:
            return None
        t = self.instance_type
        return messages.out_of_memory(self.memory_limit_bytes, t.name, t.memory_gib)


def tag_setting(tags: Mapping[str, str] | tuple[tuple[str, str], ...]) -> bool | None:
    """The model tag's word: False for `off`, True for `on`, None when absent or not understood."""
    value = dict(tags).get(LIMITS_TAG)
    if value is None:
        return None
    word = value.strip().lower()
    return {"off": False, "on": True}.get(word)


def enabled(config: ServerConfig, model: Model) -> bool:
    """Whether the variants serving `model` run with their instance type's limits."""
    if not config.instance_limits:
        return False
    return tag_setting(model.tags) is not False


def limits_for(instance_type: str | None, on: bool, host: HostResources | None) -> InstanceLimits:
    """The limits of one instance of `instance_type` (none when off, or for a type the table does
    not know), capped at the host's memory; GPUs asked for even without the NVIDIA runtime (the
    runtime then starts the container on CPU, with a warning)."""
    found = instance_types.lookup(instance_type) if instance_type else None
    if found is None or not on:
        return InstanceLimits(found)
    memory = found.memory_bytes
    if host is not None and host.memory_bytes is not None:
        memory = min(memory, host.memory_bytes)
    cpus = float(found.vcpus)
    if host is not None and host.cpus is not None:
        cpus = min(cpus, float(host.cpus))
    gpus = found.gpus
    return InstanceLimits(found, memory, cpus, gpus > 0, gpus or None)


def deploy_warnings(instance_type: str | None, on: bool, host: HostResources | None) -> list[str]:
    """What the host cannot give an instance of the type: said once per deploy."""
    if not on or not instance_type:
        return []
    found = instance_types.lookup(instance_type)
    if found is None:
        return [messages.unknown_instance_type(instance_type)]
    warnings = []
    if host is not None and host.memory_bytes is not None and host.memory_bytes < found.memory_bytes:
        warnings.append(messages.host_memory_short(found.name, found.memory_gib, host.memory_bytes))
    if found.gpus and host is not None and not host.nvidia_runtime:
        warnings.append(messages.host_gpus_missing(found.name, found.gpus, found.accelerator_model))
    return warnings


def tag_warning(model: Model) -> str | None:
    """A tag value that is neither `off` nor `on` (the limits stay on)."""
    value = dict(model.tags).get(LIMITS_TAG)
    if value is None or tag_setting(model.tags) is not None:
        return None
    return messages.instance_limits_tag(LIMITS_TAG, value)


def variant_limits(
    config: ServerConfig, variant: ProductionVariant, model: Model, host: HostResources | None
) -> InstanceLimits:
    """A provisioned variant's limits; a serverless one's memory limit is its MemorySizeInMB, with
    the CPU share it buys (never turned off: it is the variant's own setting)."""
    if variant.serverless is not None:
        mb = variant.serverless.memory_size_mb
        return InstanceLimits(None, mb * 2**20, serverless.vcpus(mb))
    return limits_for(variant.instance_type, enabled(config, model), host)


def component_limits(config: ServerConfig, plan: VariantPlan, host: HostResources | None) -> InstanceLimits:
    """An inference component's copy: its ComputeResourceRequirements within its instance type's
    limits. The memory limit is MaxMemoryRequiredInMb, else MinMemoryRequiredInMb [U]; the CPU share
    NumberOfCpuCoresRequired (the instance's, when not given); the GPUs its accelerator devices,
    rounded up (none on a type without GPUs). Off as the instance limits are (their tag on the
    component's model, or --no-instance-limits): then the copy runs unlimited."""
    whole = limits_for(plan.variant.instance_type, enabled(config, plan.model), host)
    compute = plan.compute
    if compute is None or whole.memory_limit_bytes is None:
        return whole
    memory = min(compute.memory_limit_mb * 2**20, whole.memory_limit_bytes)
    cpus = whole.cpus if compute.cpus is None else min(compute.cpus, whole.cpus or compute.cpus)
    devices = math.ceil(compute.accelerators or 0) if whole.gpus else 0
    return InstanceLimits(whole.instance_type, memory, cpus, devices > 0, devices or None)


def plan_warnings(config: ServerConfig, plan: VariantPlan, host: HostResources | None) -> list[str]:
    """A deploy's warnings for one variant: a limits tag not understood, what the host lacks."""
    if plan.variant.serverless is not None:
        return []
    tag = tag_warning(plan.model)
    on = enabled(config, plan.model)
    return ([tag] if tag else []) + deploy_warnings(plan.variant.instance_type, on, host)


def warn(config: ServerConfig, plan: VariantPlan, host: HostResources | None) -> None:
    """Once per deploy (a variant launched): plan_warnings in the server's log and the endpoint's."""
    for warning in plan_warnings(config, plan, host):
        log.warning("%s/%s: %s", plan.endpoint_name, plan.variant.variant_name, warning)
        logs.platform_log(config.logs_dir, plan.endpoint_name, f"{plan.variant.variant_name}: {warning}")


def spec_digest(config: ServerConfig, plan: VariantPlan) -> str:
    """The plan's spec digest, another one when its instance limits are off, so that a restart with
    --no-instance-limits (or without it) replaces the containers started the other way."""
    digest = plan.spec_digest(config.limits.container_port)
    if plan.variant.serverless is None and not enabled(config, plan.model):
        digest = hashlib.sha256(f"{digest}:no-instance-limits".encode()).hexdigest()[:24]
    return digest


def instance_memory_bytes(config: ServerConfig, instance_type: str | None) -> float:
    """The memory of one instance of `instance_type`, bytes (a multi-model instance's budget):
    ServerConfig.instance_memory_gb's figure, else the table's, else DEFAULT_INSTANCE_MEMORY_GB."""
    gb = dict(config.instance_memory_gb).get(instance_type or "")
    if gb is not None:
        return float(gb) * 2**30
    found = instance_types.lookup(instance_type) if instance_type else None
    return float(found.memory_bytes) if found is not None else DEFAULT_INSTANCE_MEMORY_GB * 2**30
