"""One inference component's live state: its copies in rotation and out, where each is placed, and
its converging task (component_copies.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import Instance, VariantFleet
from emulator.model.components import ComponentSpec
from emulator.model.placement import Need
from emulator.model.resources import ProductionVariant
from emulator.model.routing import InstancePicker
from emulator.runtime.base import ContainerHandle


@dataclass(eq=False)
class LiveComponent:
    """One component's copies: `fleet.instances` those in rotation, `copies` every one it owns (in
    rotation, or leaving it), `host_of` where each is placed, `reserved` the placements of copies
    being started (copy placeholder -> instance id)."""

    name: str
    endpoint_name: str
    variant_name: str
    fleet: VariantFleet
    spec: ComponentSpec
    plan: VariantPlan | None = None
    copies: list[Instance] = field(default_factory=list)
    host_of: dict[str, str] = field(default_factory=dict)
    reserved: dict[str, str] = field(default_factory=dict)
    pending: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    #: the running containers of this component found after a restart, adopted by its first step
    adopt: list[ContainerHandle] = field(default_factory=list)
    #: set once the first step after a restart is over: until then an invocation waits for its
    #: copies (as one waits for an endpoint being restored) instead of meeting no capacity
    restored: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def need(self) -> Need:
        return Need.of(self.spec.compute)


def component_fleet(name: str, variant: ProductionVariant) -> VariantFleet:
    """The routing side of a component: its copies in rotation, least outstanding requests first."""
    return VariantFleet(
        variant=variant,
        instances=[],
        deployed_image=None,
        weight=1.0,
        picker=InstancePicker(variant.routing_strategy.value),
        component=name,
    )
