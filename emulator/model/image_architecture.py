"""The CPU architecture an image is built for against the instance type it is deployed on
(docs/cloud-parity.md#image-architecture).

SageMaker starts the container on the instance's CPU: an arm64 image on an x86 type (or an amd64 image
on a Graviton type: ml.c7g, ml.m6g, ml.r7gd...) cannot exec its entrypoint ("exec format error") and the
endpoint fails with CannotStartContainerError. smlocal fails it the same way before starting anything,
naming both architectures and the fix [U]. No rule applies when the type is not in the table
(`instance_types.lookup` answers None: a serverless variant, a newer botocore's type, `local`) or when
the image's config names no architecture. Pure: the image's architecture comes from the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.model import instance_types
from emulator.model.instance_types import Architecture, InstanceType

#: What image configs say for the two architectures besides the OCI names (`docker inspect`).
_ALIASES = {"x86_64": "amd64", "x86-64": "amd64", "aarch64": "arm64", "arm64/v8": "arm64"}


def normalise(architecture: str) -> str:
    """An image config's architecture in OCI's words (`x86_64` -> `amd64`, `aarch64` -> `arm64`)."""
    text = architecture.strip().lower()
    return _ALIASES.get(text, text)


@dataclass(frozen=True)
class Mismatch:
    image_architecture: str
    instance: InstanceType

    @property
    def instance_architecture(self) -> str:
        return self.instance.architecture.value


def mismatch(image_architecture: str | None, instance_type: str | None) -> Mismatch | None:
    """The mismatch between an image built for `image_architecture` and `instance_type`, or None (they
    match, or no rule applies: see the module's docstring)."""
    instance = instance_types.lookup(instance_type)
    if instance is None or not image_architecture:
        return None
    found = normalise(image_architecture)
    if found == instance.architecture.value:
        return None
    return Mismatch(found, instance)


__all__ = ["Architecture", "Mismatch", "mismatch", "normalise"]
