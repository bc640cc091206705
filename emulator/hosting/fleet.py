"""The live side of an endpoint: variants, their instances (containers) and request routing."""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from yarl import URL

from emulator.model.resources import DeployedImage, ProductionVariant, VariantSummary
from emulator.model.routing import InstancePicker, WeightedChoice
from emulator.runtime.base import ContainerHandle


def new_instance_id() -> str:
    """Instance ids look like EC2's: i-0179208609ff7e488."""
    return "i-" + secrets.token_hex(9)[:17]


@dataclass(eq=False)
class Instance:
    instance_id: str
    variant_name: str
    handle: ContainerHandle
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    log_path: Path | None = None
    outstanding: int = 0

    @property
    def base_url(self) -> str:
        return self.handle.base_url

    @functools.cached_property
    def invocations_url(self) -> URL:
        return URL(f"{self.handle.base_url}/invocations")


@dataclass(eq=False)
class VariantFleet:
    variant: ProductionVariant
    instances: list[Instance]
    deployed_image: DeployedImage
    weight: float
    picker: InstancePicker

    def summary(self) -> VariantSummary:
        return VariantSummary(
            variant_name=self.variant.variant_name,
            current_weight=self.weight,
            desired_weight=self.weight,
            current_instance_count=len(self.instances),
            desired_instance_count=self.variant.initial_instance_count,
            deployed_images=(self.deployed_image,),
        )


class EndpointFleet:
    """Routing over the variants of one serving endpoint. Built once; read on every request."""

    def __init__(self, variants: Sequence[VariantFleet]) -> None:
        self.variants = {v.variant.variant_name: v for v in variants}
        self._choice = WeightedChoice(
            [v.variant.variant_name for v in variants], [v.weight for v in variants]
        )

    def choose(self, target_variant: str | None) -> VariantFleet | None:
        if target_variant is not None:
            return self.variants.get(target_variant)
        return self.variants[self._choice.choose()]

    def all_instances(self) -> list[Instance]:
        return [i for v in self.variants.values() for i in v.instances]
