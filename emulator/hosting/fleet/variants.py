"""The live side of an endpoint: variants, their instances (containers) and request routing."""

from __future__ import annotations

import asyncio
import functools
import random
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from yarl import URL

from emulator.hosting.fleet.cold_start import InstanceClock
from emulator.hosting.fleet.plan import VariantPlan
from emulator.model.resources import DeployedImage, ProductionVariant, VariantStatus, VariantSummary
from emulator.model.routing import InstancePicker, WeightedChoice
from emulator.runtime.base import ContainerHandle


def new_instance_id() -> str:
    """Instance ids look like EC2's: i-0179208609ff7e488."""
    return "i-" + secrets.token_hex(9)[:17]


class _Reached:
    """Where a container is reached: its handle's loopback URL, and the prebuilt /invocations URL."""

    handle: ContainerHandle

    @property
    def base_url(self) -> str:
        return self.handle.base_url

    @functools.cached_property
    def invocations_url(self) -> URL:
        return URL(f"{self.handle.base_url}/invocations")


@dataclass(eq=False)
class InstanceContainer(_Reached):
    """One container of a multi-container instance: its hostname and where it is reached."""

    hostname: str
    handle: ContainerHandle
    log_path: Path | None = None


@dataclass(eq=False)
class Instance(_Reached):
    instance_id: str
    variant_name: str
    #: the (first) model container
    handle: ContainerHandle
    #: set when any container of the instance exits
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    #: a single-container instance's exit code, as its exit watcher saw it (None: running, unknown)
    exit_code: int | None = None
    log_path: Path | None = None
    outstanding: int = 0
    #: a multi-container instance's containers, in the model's order (empty for one container)
    containers: tuple[InstanceContainer, ...] = ()
    #: the container whose network every container of a multi-container instance joins
    network: ContainerHandle | None = None
    #: a multi-model instance's host folder, mounted read-only at /opt/ml/models
    models_dir: Path | None = None
    #: awaited when the instance stops, before its container and folder go (a multi-model
    #: instance's loads are cancelled there)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: the start's clock (fleet/cold_start.py; None: adopted after a restart)
    clock: InstanceClock | None = None
    #: called once, when the instance's first invocation completes (then None): the invoke path's
    #: one attribute check for the cold-start profile
    first_call: Callable[[], None] | None = None

    @property
    def base_urls(self) -> tuple[str, ...]:
        """Where each model container answers /ping (healthy: every one 200)."""
        return tuple(c.base_url for c in self.containers) or (self.base_url,)

    @functools.cached_property
    def by_hostname(self) -> dict[str, InstanceContainer]:
        return {c.hostname: c for c in self.containers}


@dataclass(eq=False)
class VariantFleet:
    variant: ProductionVariant
    instances: list[Instance]
    #: None for a variant of inference components (no container of its own)
    deployed_image: DeployedImage | None
    weight: float
    picker: InstancePicker
    plan: VariantPlan | None = None
    #: the DeployedImages of a multi-container model's other containers, in order
    more_images: tuple[DeployedImage, ...] = ()
    #: Set by UpdateEndpointWeightsAndCapacities at the call; None: as current / as configured.
    desired_weight: float | None = None
    desired_count: int | None = None
    #: VariantStatus entries while the variant changes (scaling); empty when settled
    statuses: tuple[VariantStatus, ...] = ()
    #: A variant without ModelName: the ids of its instances, in launch order (capacity for
    #: inference components' copies, no container of their own: hosting/components/). None otherwise.
    hosts: list[str] | None = None
    #: The copies of one inference component (`instances` are its copies in rotation): its name.
    component: str | None = None

    def summary(self) -> VariantSummary:
        return VariantSummary(
            variant_name=self.variant.variant_name,
            current_weight=self.weight,
            desired_weight=self.weight if self.desired_weight is None else self.desired_weight,
            current_instance_count=len(self.instances if self.hosts is None else self.hosts),
            desired_instance_count=(
                self.variant.initial_instance_count if self.desired_count is None else self.desired_count
            ),
            deployed_images=(() if self.deployed_image is None else (self.deployed_image, *self.more_images)),
            statuses=self.statuses,
            instance_type=self.variant.instance_type,
            serverless=self.variant.serverless,
            managed_instance_scaling=self.variant.managed_instance_scaling,
        )

    def add(self, instances: Sequence[Instance]) -> None:
        """Put instances into rotation (a new list: a request already routed keeps its choice)."""
        self.instances = [*self.instances, *instances]

    def remove(self, instances: Sequence[Instance]) -> None:
        """Take instances out of rotation at once; their in-flight requests carry on."""
        gone = {id(i) for i in instances}
        self.instances = [i for i in self.instances if id(i) not in gone]


class EndpointFleet:
    """Routing over the variants of one serving endpoint. Read on every request; the weighted
    choice is rebuilt (not edited) when weights change."""

    def __init__(self, variants: Sequence[VariantFleet]) -> None:
        self.variants = {v.variant.variant_name: v for v in variants}
        self._choice = self._build_choice()

    def _build_choice(self) -> WeightedChoice:
        variants = list(self.variants.values())
        return WeightedChoice([v.variant.variant_name for v in variants], [v.weight for v in variants])

    def set_weights(self, weights: dict[str, float]) -> None:
        for name, weight in weights.items():
            self.variants[name].weight = weight
        self._choice = self._build_choice()

    def choose(self, target_variant: str | None) -> VariantFleet | None:
        """TargetVariant's variant, else one by weight. [U] A variant chosen by weight whose every
        instance is out of rotation (its only instance died and is being replaced) hands the
        request to a variant that has instances in rotation, by their weights: the endpoint's load
        balancer sends traffic to healthy hosts. A TargetVariant request stays with its variant,
        and serverless variants (no standing instances) are never skipped."""
        if target_variant is not None:
            return self.variants.get(target_variant)
        chosen = self.variants[self._choice.choose()]
        if chosen.instances or chosen.variant.serverless is not None or len(self.variants) == 1:
            return chosen
        serving = [v for v in self.variants.values() if v.instances and v.weight > 0]
        if not serving:
            return chosen
        names, weights = [v.variant.variant_name for v in serving], [v.weight for v in serving]
        return self.variants[WeightedChoice(names, weights).choose()]

    def all_instances(self) -> list[Instance]:
        return [i for v in self.variants.values() for i in v.instances]


class TrafficShift(EndpointFleet):
    """Routing while a blue/green deployment shifts traffic: `share` of the requests go to the green
    fleet, the rest to the blue one. DescribeEndpoint (and weights) show the blue fleet until the
    shift completes."""

    def __init__(
        self,
        blue: EndpointFleet,
        green: EndpointFleet,
        share: float,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.blue = blue
        self.green = green
        self.share = share
        self._rng = rng
        self.variants = blue.variants
        self._choice = blue._choice

    def set_weights(self, weights: dict[str, float]) -> None:
        self.blue.set_weights(weights)
        self._choice = self.blue._choice

    def choose(self, target_variant: str | None) -> VariantFleet | None:
        first, second = (self.green, self.blue) if self._rng() < self.share else (self.blue, self.green)
        return first.choose(target_variant) or second.choose(target_variant)

    def all_instances(self) -> list[Instance]:
        return self.blue.all_instances() + self.green.all_instances()
