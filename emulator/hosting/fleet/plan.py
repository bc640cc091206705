"""What an instance of a variant is started from: a plan resolved before any container starts.

The deployer starts instances from it, the fleet remembers it per variant (a replacement or an
added instance starts from the same plan), and its digest tells an adopted container after a
restart whether it was started from the same spec.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from emulator.model.resources import Model, ProductionVariant
from emulator.runtime.base import ResolvedImage


@dataclass(frozen=True)
class VariantPlan:
    """Everything needed to start the instances of one variant, resolved beforehand."""

    endpoint_name: str
    variant: ProductionVariant
    model: Model
    image: ResolvedImage
    model_dir: Path | None

    def spec_digest(self, container_port: int) -> str:
        c = self.model.primary_container
        material = {
            "image": self.image.image_id,
            "env": dict(sorted(c.environment.items())),
            "model_dir": str(self.model_dir) if self.model_dir else None,
            "port": container_port,
            "instance_type": self.variant.instance_type,
        }
        if self.model.enable_network_isolation:  # only then: other containers keep their digests
            material["network_isolation"] = True
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]
