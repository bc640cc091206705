"""What an instance of a variant is started from: a plan resolved before any container starts.

The deployer starts instances from it, the fleet remembers it per variant (a replacement or an
added instance starts from the same plan), and its digest tells an adopted container after a
restart whether it was started from the same spec.

A multi-container model's plan also holds one `PlannedContainer` per container, in order: its
hostname, image, model data, and the ports it gets inside the instance's shared network. The ports,
the platform's variables and the hostname every container runs under are emulator/model/platform_env.py's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from emulator.model import platform_env
from emulator.model.components import ComputeRequirements
from emulator.model.resources import ContainerDefinition, Model, ProductionVariant
from emulator.runtime.base import ResolvedImage


@dataclass(frozen=True)
class PlannedContainer:
    """One container of a multi-container instance."""

    hostname: str
    definition: ContainerDefinition
    image: ResolvedImage
    model_dir: Path | None
    ports: platform_env.ContainerPorts
    #: its AdditionalModelDataSources channels: (host folder, mount path), mounted read-only
    channel_dirs: tuple[tuple[Path, str], ...] = ()

    @property
    def port(self) -> int:
        """SAGEMAKER_BIND_TO_PORT: where its server must listen (never 8080)."""
        return self.ports.bind_port

    def environment(self) -> dict[str, str]:
        """The container's Environment, with the ports the platform sets (they win)."""
        return {**self.definition.environment, **self.ports.environment()}


@dataclass(frozen=True)
class VariantPlan:
    """Everything needed to start the instances of one variant, resolved beforehand."""

    endpoint_name: str
    variant: ProductionVariant
    model: Model
    #: the (first) container's image and model directory
    image: ResolvedImage
    model_dir: Path | None
    #: a multi-container model's containers (empty for one container)
    containers: tuple[PlannedContainer, ...] = ()
    #: the image the instance's network container runs (multi-container models only)
    network_image: str | None = None
    #: the (single) container's AdditionalModelDataSources channels: (host folder, mount path)
    channel_dirs: tuple[tuple[Path, str], ...] = ()
    #: an inference component's copy: the component, what one copy reserves (its container's
    #: limits: instance_limits.component_limits) and the endpoint instance it is placed on (a label,
    #: not part of the digest: a copy is adopted after a restart wherever it was placed)
    component: str | None = None
    compute: ComputeRequirements | None = None
    host_id: str | None = None

    def spec_digest(self, container_port: int) -> str:
        if self.containers:
            return self._instance_digest()
        material: dict[str, object] = {
            "image": self.image.image_id,
            "env": dict(sorted(self.environment().items())),
            "hostname": platform_env.HOSTNAME,
            "model_dir": str(self.model_dir) if self.model_dir else None,
            "port": container_port,
            "instance_type": self.variant.instance_type,
        }
        if self.model.enable_network_isolation:  # only then: other containers keep their digests
            material["network_isolation"] = True
        if self.model.multi_model:
            material["multi_model"] = True
        if self.channel_dirs:  # only then: digests of containers without channels stay as they were
            material["channels"] = _channels(self.channel_dirs)
        if self.component is not None:
            material["component"] = self.component
            material["compute"] = None if self.compute is None else repr(self.compute)
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]

    def environment(self) -> dict[str, str]:
        """A single-container instance's environment: the model's, SAGEMAKER_SAFE_PORT_RANGE
        (platform_env), and SAGEMAKER_MULTI_MODEL=true for a multi-model container (spec §5); the
        platform's values win."""
        env = {**self.model.primary_container.environment, **platform_env.single_container_environment()}
        if self.model.multi_model:
            env["SAGEMAKER_MULTI_MODEL"] = "true"
        return env

    def _instance_digest(self) -> str:
        """One digest for every container of a multi-container instance (all of them match or none)."""
        material = {
            "containers": [
                {
                    "hostname": c.hostname,
                    "image": c.image.image_id,
                    "env": dict(sorted(c.environment().items())),
                    "model_dir": str(c.model_dir) if c.model_dir else None,
                    "port": c.port,
                    **({"channels": _channels(c.channel_dirs)} if c.channel_dirs else {}),
                }
                for c in self.containers
            ],
            "mode": self.model.inference_mode or "Serial",
            "instance_hostname": platform_env.HOSTNAME,
            "instance_type": self.variant.instance_type,
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


def _channels(channel_dirs: tuple[tuple[Path, str], ...]) -> list[list[str]]:
    return [[str(source), target] for source, target in channel_dirs]
